"""Proxy configuration (proxy_spec §1.1): YAML file + environment, normalised at load.

Keys (environment overrides YAML when set and non-blank):

=============================  ===================================  =========================
YAML key                       environment                          default
=============================  ===================================  =========================
``toolschema_strip``           ``CAVEMAN_TOOLSCHEMA_STRIP``         ``off``
``label``                      ``CAVEMAN_LABEL``                    ``local``
``providers.<p>.base_url``     –                                    the provider's public API
``listen``                     ``CAVEMAN_PROXY_LISTEN``             ``127.0.0.1:8787``
``upstream_timeout``           ``CAVEMAN_PROXY_UPSTREAM_TIMEOUT``   600 (seconds between bytes)
``allowed_hosts``              ``CAVEMAN_PROXY_ALLOWED_HOSTS``      none (loopback names only)
``allowed_origins``            ``CAVEMAN_PROXY_ALLOWED_ORIGINS``    none (web pages refused)
``header_timeout``             ``CAVEMAN_PROXY_HEADER_TIMEOUT``     10 (seconds)
``body_timeout``               ``CAVEMAN_PROXY_BODY_TIMEOUT``       60 (seconds)
``max_connections``            ``CAVEMAN_PROXY_MAX_CONNECTIONS``    256
``store_timeout``              ``CAVEMAN_PROXY_STORE_TIMEOUT``      2 (seconds)
=============================  ===================================  =========================

The two allowlists are YAML lists, or comma-separated in the environment.

The level is one of :data:`LEVELS`, spelled exactly; anything else (``max``, ``Annotations``,
`` annotations``) is an error that names its source (``--level``, the file and key, the
variable) and the closest level, worded as every choice of the command line: a typo must not
start a proxy that quietly saves nothing. So is a YAML key the proxy does not read. The listen address must be a
loopback host: the proxy has no inbound authentication.

File: ``--config FILE``, else ``$CAVEMAN_CONFIG``, else ``<CAVEMAN_HOME>/caveman.yaml``
(``CAVEMAN_HOME`` defaults to ``~/.caveman``); ``-`` is stdin. A missing default file means defaults; a missing
file named by ``--config`` or ``$CAVEMAN_CONFIG``, a file that is not valid YAML (or not a
mapping) or a bad value is a :class:`ConfigError` (exit 1); a bad ``--level``/``--listen`` is a
:class:`CommandLineError` (exit 2).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LEVELS = ("off", "annotations", "toolschema", "toolschema-safe", "toolschema-max")
DEFAULT_LISTEN = "127.0.0.1:8787"
DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "gemini": "https://generativelanguage.googleapis.com",
}
DEFAULT_TIMEOUT = 600.0
BODY_CAP = 32 * 1024 * 1024
# inbound limits (docs/proxy.md "Security and limits")
DEFAULT_HEADER_TIMEOUT = 10.0  # from a request's first byte to the end of its headers
DEFAULT_BODY_TIMEOUT = 60.0  # from the end of the headers to the end of the body
DEFAULT_MAX_CONNECTIONS = 256  # open client connections; more are answered 503 and closed
DEFAULT_STORE_TIMEOUT = 2.0  # longest wait for the recovery store before forwarding as sent


class ConfigError(ValueError):
    """One line, for the CLI (exit 1)."""

    exit_code = 1


class CommandLineError(ConfigError):
    """A bad command-line value (exit 2, as for any other usage error)."""

    exit_code = 2


# Every top-level YAML key load() reads: any other key is refused (a misspelt key would
# otherwise be a setting silently not applied).
KEYS = ("toolschema_strip", "label", "providers", "listen", "upstream_timeout",
        "allowed_hosts", "allowed_origins", "header_timeout", "body_timeout", "store_timeout",
        "max_connections")
PROVIDER_KEYS = ("base_url",)
# providers of the reference gateway this proxy does not route: accepted, not read
OTHER_PROVIDERS = ("bedrock", "vertex", "azure", "compat")
# names people reach for that are spelt differently here
_ALIASES = {"level": "toolschema_strip", "strip": "toolschema_strip", "baseurl": "base_url",
            "url": "base_url"}


def _suggest(value: object, choices) -> str | None:
    """The choice ``value`` most likely meant: a name people reach for that is spelt
    differently here (:data:`_ALIASES`), else the command line's :func:`cmdutil.closest`."""
    from ..cmdutil import closest

    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("_", "-")
    alias = _ALIASES.get(v.replace("-", "_")) or _ALIASES.get(v.replace("-", ""))
    if alias in choices:
        return alias
    return closest(value, choices)


def _hint(value: object, choices) -> str:
    s = _suggest(value, choices)
    if s is not None:
        return f"did you mean {s!r}?"
    return "expected one of " + ", ".join(choices)


def check_level(value: object, error=ConfigError, where: str = "--level") -> str:
    """``value`` if it is one of :data:`LEVELS`, spelled exactly; else ``error`` in the
    command line's one wording for a choice (:func:`cmdutil.bad_value`), ``where`` naming the
    source: ``--level max: not one of off, … (did you mean toolschema-max?)``, ``config F:
    toolschema_strip max: …``, ``CAVEMAN_TOOLSCHEMA_STRIP max: …``."""
    if isinstance(value, str) and value in LEVELS:
        return value
    import json

    from ..cmdutil import bad_value

    shown = value if isinstance(value, str) else json.dumps(value)  # YAML's spelling: true
    raise error(bad_value(where, shown, LEVELS))


def _check_keys(file: str, where: str, mapping: dict, known) -> None:
    for key in mapping:
        if key not in known:
            raise ConfigError(f"config {file}: unknown key {where + str(key)!r} "
                              f"({_hint(key, known)})")


def _blank(v: str | None) -> bool:
    return v is None or not v.strip()


@dataclass
class Config:
    level: str = "off"
    label: str = "local"
    host: str = "127.0.0.1"
    port: int = 8787
    upstreams: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_UPSTREAMS))
    upstream_timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = 30.0
    body_cap: int = BODY_CAP
    # Host names besides the loopback ones a request's Host may carry; browser Origins allowed
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    store_timeout: float = DEFAULT_STORE_TIMEOUT
    path: str | None = None  # the file read, if any

    def upstream_url(self, provider: str, path: str, query: str) -> str:
        base = self.upstreams[provider].rstrip("/")
        return base + path + (("?" + query) if query else "")


def parse_listen(value: str) -> tuple[str, int]:
    """``host:port`` with a loopback host (``127.0.0.0/8``, ``::1`` as ``[::1]``, ``localhost``).
    Bare ``:port``, ``0.0.0.0``, ``[::]`` and LAN addresses are refused."""
    v = value.strip()
    host, sep, port_s = v.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"listen address {value!r}: expected HOST:PORT with a loopback host")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not (port_s.isascii() and port_s.isdigit()):  # int() would take "８", " 1" and "8_0"
        raise ConfigError(f"listen address {value!r}: bad port")
    port = int(port_s)
    if not 0 <= port <= 65535:
        raise ConfigError(f"listen address {value!r}: bad port")
    if host != "localhost":
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            raise ConfigError(f"listen address {value!r}: host must be a loopback address") from None
        if not ip.is_loopback:
            raise ConfigError(
                f"listen address {value!r}: only loopback hosts are allowed (no inbound auth)"
            )
    return host, port


def _check_base_url(provider: str, url: object) -> str:
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"providers.{provider}.base_url must be a non-empty string")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        from .server import redact  # a password in the URL is not repeated

        raise ConfigError(f"providers.{provider}.base_url {redact(repr(url))}: "
                          "expected http(s)://host[:port]")
    return url.strip().rstrip("/")


def load(
    path: str | None = None,
    *,
    level: str | None = None,
    listen: str | None = None,
    env: dict[str, str] | None = None,
) -> Config:
    """The effective configuration. ``level``/``listen`` are command-line overrides (checked
    first: a bad one is a :class:`CommandLineError`)."""
    env = os.environ if env is None else env
    if level is not None:
        check_level(level, CommandLineError)
    if listen is not None:
        try:
            parse_listen(listen)
        except ConfigError as exc:
            raise CommandLineError(str(exc)) from None
    if path is not None and not path.strip():
        raise CommandLineError("--config needs a file name (an empty one names no file)")
    file = path if path else None
    if file is None:
        e = env.get("CAVEMAN_CONFIG")
        file = e if not _blank(e) else None
    named = file is not None  # a file the user named must exist
    if file is None:
        home = env.get("CAVEMAN_HOME") or os.path.join(os.path.expanduser("~"), ".caveman")
        file = os.path.join(home, "caveman.yaml")
    doc: dict = {}
    read = None
    try:
        if file == "-":  # stdin, as every command reads `-`; ./- names a file called -
            import sys

            from ..limits import InputTooLarge, read_bounded

            file = "stdin"
            try:
                raw = read_bounded(sys.stdin.buffer)
            except InputTooLarge:
                from ..cmdutil import too_large

                raise ConfigError(f"config stdin: {too_large()}") from None
        else:
            with open(file, "rb") as fh:
                raw = fh.read()
        read = file
    except FileNotFoundError:
        if named:
            raise ConfigError(f"config {file}: no such file") from None
        raw = None
    except OSError as exc:
        raise ConfigError(f"config {file}: {exc.strerror or exc}") from None
    if raw is not None:
        import yaml

        try:
            loaded = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
            raise ConfigError(f"config {file}: invalid YAML: {first}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config {file}: expected a mapping at the top level")
        doc = loaded
    _check_keys(file, "", doc, KEYS)

    cfg = Config(path=read)
    v = doc.get("toolschema_strip")
    if v is False:
        v = "off"  # YAML reads a bare `off` as false
    if v is not None:
        cfg.level = check_level(v, where=f"config {file}: toolschema_strip")
    e = env.get("CAVEMAN_TOOLSCHEMA_STRIP")
    if not _blank(e):
        cfg.level = check_level(e, where="CAVEMAN_TOOLSCHEMA_STRIP")
    if level is not None:
        cfg.level = level

    lab = doc.get("label")
    if lab is not None and not (isinstance(lab, str) and lab.strip()):
        raise ConfigError(f"config {file}: label must be a non-empty string")
    if lab is not None:
        cfg.label = lab
    e = env.get("CAVEMAN_LABEL")
    if not _blank(e):
        cfg.label = e

    providers = doc.get("providers") or {}
    if not isinstance(providers, dict):
        raise ConfigError(f"config {file}: providers must be a mapping")
    for name, entry in providers.items():
        if name in OTHER_PROVIDERS:
            continue  # the reference gateway's, not routed by this proxy
        if name not in DEFAULT_UPSTREAMS:
            raise ConfigError(f"config {file}: unknown provider {'providers.' + str(name)!r} "
                              f"({_hint(name, tuple(DEFAULT_UPSTREAMS))})")
        if entry is None:
            continue
        if not isinstance(entry, dict):
            raise ConfigError(f"config {file}: providers.{name} must be a mapping")
        _check_keys(file, f"providers.{name}.", entry, PROVIDER_KEYS)
        if "base_url" in entry:
            try:
                cfg.upstreams[name] = _check_base_url(name, entry["base_url"])
            except ConfigError as exc:
                raise ConfigError(f"config {file}: {exc}") from None

    listen_value = doc.get("listen")
    source = f"config {file}: " if listen_value is not None else ""
    e = env.get("CAVEMAN_PROXY_LISTEN")
    if not _blank(e):
        listen_value, source = e, "CAVEMAN_PROXY_LISTEN: "
    if listen is not None:
        listen_value, source = listen, ""
    if listen_value is None:
        listen_value = DEFAULT_LISTEN
    if not isinstance(listen_value, str):
        raise ConfigError(f"config {file}: listen must be a string HOST:PORT")
    try:
        cfg.host, cfg.port = parse_listen(listen_value)
    except ConfigError as exc:
        raise ConfigError(f"{source}{exc}") from None

    t = doc.get("upstream_timeout")
    source = f"config {file}: upstream_timeout"
    e = env.get("CAVEMAN_PROXY_UPSTREAM_TIMEOUT")
    if not _blank(e):
        t, source = e, "CAVEMAN_PROXY_UPSTREAM_TIMEOUT"
    if t is not None:
        try:
            cfg.upstream_timeout = float(t)
        except (TypeError, ValueError):
            raise ConfigError(f"{source} {t!r}: expected seconds") from None
        if not cfg.upstream_timeout > 0:
            raise ConfigError(f"{source} {t!r}: must be positive")
    _load_security(cfg, doc, env, file)
    return cfg


def _names(key: str, value: object) -> tuple[str, ...]:
    """A YAML list of strings, or one comma-separated string (the environment's form)."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key}: expected a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _load_security(cfg: Config, doc: dict, env, file: str) -> None:
    """The inbound allowlists and limits (environment over YAML, as for the other keys)."""
    for key, var in (("allowed_hosts", "CAVEMAN_PROXY_ALLOWED_HOSTS"),
                     ("allowed_origins", "CAVEMAN_PROXY_ALLOWED_ORIGINS")):
        v, source = doc.get(key), f"config {file}: {key}"
        e = env.get(var)
        if not _blank(e):
            v, source = e, var
        if v is not None:
            names = _names(source, v)
            if key == "allowed_hosts":
                names = tuple(n.lower() for n in names)
            setattr(cfg, key, names)
    for key, var, kind in (("header_timeout", "CAVEMAN_PROXY_HEADER_TIMEOUT", float),
                           ("body_timeout", "CAVEMAN_PROXY_BODY_TIMEOUT", float),
                           ("store_timeout", "CAVEMAN_PROXY_STORE_TIMEOUT", float),
                           ("max_connections", "CAVEMAN_PROXY_MAX_CONNECTIONS", int)):
        v, source = doc.get(key), f"config {file}: {key}"
        e = env.get(var)
        if not _blank(e):
            v, source = e, var
        if v is None:
            continue
        try:
            if isinstance(v, bool) or (kind is int and isinstance(v, float)):
                raise ValueError
            n = kind(v)
        except (TypeError, ValueError):
            raise ConfigError(f"{source} {v!r}: expected a positive "
                              f"{'integer' if kind is int else 'number of seconds'}") from None
        if not 0 < n < float("inf"):
            raise ConfigError(f"{source} {v!r}: must be positive and finite")
        setattr(cfg, key, n)
