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
=============================  ===================================  =========================

The level is one of :data:`LEVELS`, spelled exactly; anything else (``""``, ``Annotations``,
``aggressive``, `` annotations``) is ``off``: a typo never turns a rewrite on. The listen
address must be a loopback host: the proxy has no inbound authentication.

File: ``--config FILE``, else ``$CAVEMAN_CONFIG``, else ``<CAVEMAN_HOME>/caveman.yaml``
(``CAVEMAN_HOME`` defaults to ``~/.caveman``). A missing file means defaults; a file that is not
valid YAML (or not a mapping) is a :class:`ConfigError`.
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


def normalise_level(value: object) -> str:
    """Exactly one of :data:`LEVELS`, else ``off``."""
    return value if isinstance(value, str) and value in LEVELS else "off"


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
    try:
        port = int(port_s)
    except ValueError:
        raise ConfigError(f"listen address {value!r}: bad port") from None
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
        raise ConfigError(f"providers.{provider}.base_url {url!r}: expected http(s)://host[:port]")
    return url.strip().rstrip("/")


def load(
    path: str | None = None,
    *,
    level: str | None = None,
    listen: str | None = None,
    env: dict[str, str] | None = None,
) -> Config:
    """The effective configuration. ``level``/``listen`` are command-line overrides."""
    env = os.environ if env is None else env
    file = path if path else None
    if file is None:
        e = env.get("CAVEMAN_CONFIG")
        file = e if not _blank(e) else None
    if file is None:
        home = env.get("CAVEMAN_HOME") or os.path.join(os.path.expanduser("~"), ".caveman")
        file = os.path.join(home, "caveman.yaml")
    doc: dict = {}
    read = None
    try:
        with open(file, "rb") as fh:
            raw = fh.read()
        read = file
    except FileNotFoundError:
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

    cfg = Config(path=read)
    cfg.level = normalise_level(doc.get("toolschema_strip"))
    e = env.get("CAVEMAN_TOOLSCHEMA_STRIP")
    if not _blank(e):
        cfg.level = normalise_level(e)
    if level is not None:
        cfg.level = normalise_level(level)

    lab = doc.get("label")
    if isinstance(lab, str) and lab.strip():
        cfg.label = lab
    e = env.get("CAVEMAN_LABEL")
    if not _blank(e):
        cfg.label = e

    providers = doc.get("providers") or {}
    if not isinstance(providers, dict):
        raise ConfigError(f"config {file}: providers must be a mapping")
    for name, entry in providers.items():
        if name not in DEFAULT_UPSTREAMS:
            continue  # other providers are not routed by this proxy
        if entry is None:
            continue
        if not isinstance(entry, dict):
            raise ConfigError(f"config {file}: providers.{name} must be a mapping")
        if "base_url" in entry:
            cfg.upstreams[name] = _check_base_url(name, entry["base_url"])

    listen_value = doc.get("listen")
    e = env.get("CAVEMAN_PROXY_LISTEN")
    if not _blank(e):
        listen_value = e
    if listen is not None:
        listen_value = listen
    if listen_value is None:
        listen_value = DEFAULT_LISTEN
    if not isinstance(listen_value, str):
        raise ConfigError(f"config {file}: listen must be a string HOST:PORT")
    cfg.host, cfg.port = parse_listen(listen_value)

    t = doc.get("upstream_timeout")
    e = env.get("CAVEMAN_PROXY_UPSTREAM_TIMEOUT")
    if not _blank(e):
        t = e
    if t is not None:
        try:
            cfg.upstream_timeout = float(t)
        except (TypeError, ValueError):
            raise ConfigError(f"upstream_timeout {t!r}: expected seconds") from None
        if not cfg.upstream_timeout > 0:
            raise ConfigError(f"upstream_timeout {t!r}: must be positive")
    _load_security(cfg, doc, env)
    return cfg


def _names(key: str, value: object) -> tuple[str, ...]:
    """A YAML list of strings, or one comma-separated string (the environment's form)."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key}: expected a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _load_security(cfg: Config, doc: dict, env) -> None:
    """The inbound allowlists and limits (environment over YAML, as for the other keys)."""
    for key, var in (("allowed_hosts", "CAVEMAN_PROXY_ALLOWED_HOSTS"),
                     ("allowed_origins", "CAVEMAN_PROXY_ALLOWED_ORIGINS")):
        v = doc.get(key)
        e = env.get(var)
        if not _blank(e):
            v = e
        if v is not None:
            names = _names(key, v)
            if key == "allowed_hosts":
                names = tuple(n.lower() for n in names)
            setattr(cfg, key, names)
    for key, var, kind in (("header_timeout", "CAVEMAN_PROXY_HEADER_TIMEOUT", float),
                           ("body_timeout", "CAVEMAN_PROXY_BODY_TIMEOUT", float),
                           ("store_timeout", "CAVEMAN_PROXY_STORE_TIMEOUT", float),
                           ("max_connections", "CAVEMAN_PROXY_MAX_CONNECTIONS", int)):
        v = doc.get(key)
        e = env.get(var)
        if not _blank(e):
            v = e
        if v is None:
            continue
        try:
            if isinstance(v, bool) or (kind is int and isinstance(v, float)):
                raise ValueError
            n = kind(v)
        except (TypeError, ValueError):
            raise ConfigError(f"{key} {v!r}: expected a positive "
                              f"{'integer' if kind is int else 'number of seconds'}") from None
        if not 0 < n < float("inf"):
            raise ConfigError(f"{key} {v!r}: must be positive and finite")
        setattr(cfg, key, n)
