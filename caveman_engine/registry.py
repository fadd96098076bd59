"""The compressor registry, read from ``registry.toml`` (one table per content type).

It fails closed: a type whose module is missing, does not import, or disagrees with the table
on its content type or safety class has no compressor (the engine passes input through), and
the capability manifest lists only compressors that exist. A safety class outside S0–S4
refuses the whole manifest.
"""

from __future__ import annotations

import sys
from functools import lru_cache

from . import resources
from .records import Frozen

# Loaded by what needs them, not by every `compress`: tomllib (only for a registry.toml the
# reader below does not take), hashlib and jsonio (the manifest), importlib.util (`implemented`).


class SafetyClass(Frozen):
    __slots__ = _fields = ("name", "byte_safe", "requires_ccr", "reversible")
    name: str
    byte_safe: bool
    requires_ccr: bool
    reversible: bool

    def __init__(self, name: str, byte_safe: bool, requires_ccr: bool, reversible: bool) -> None:
        self._init(name, byte_safe, requires_ccr, reversible)


SAFETY_CLASSES = {
    "S0": SafetyClass("S0", True, False, True),
    "S1": SafetyClass("S1", True, False, True),
    "S2": SafetyClass("S2", False, False, True),
    "S3": SafetyClass("S3", False, False, False),
    "S4": SafetyClass("S4", False, True, False),
}


class RegistryError(Exception):
    pass


class Entry(Frozen):
    __slots__ = _fields = ("type", "capability", "safety_class", "segment_kinds", "detected",
                           "manifest", "description")
    type: str
    capability: str
    safety_class: str
    segment_kinds: tuple[str, ...]
    detected: bool
    manifest: bool
    description: str

    def __init__(self, type: str, capability: str, safety_class: str,  # noqa: A002
                 segment_kinds: tuple[str, ...], detected: bool, manifest: bool,
                 description: str) -> None:
        self._init(type, capability, safety_class, segment_kinds, detected, manifest,
                   description)

    @property
    def module_name(self) -> str:
        return "caveman_engine.compressors." + self.type.replace("-", "_")

    @property
    def conformance_digest(self) -> str:
        # "caveman.engine.<type>.v1" -> sha256("caveman.engine.<type>:v1")
        import hashlib

        base, _, version = self.capability.rpartition(".")
        return hashlib.sha256(f"{base}:{version}".encode()).hexdigest()

    @property
    def implemented(self) -> bool:
        import importlib.util

        try:
            return importlib.util.find_spec(self.module_name) is not None
        except (ImportError, ValueError):
            return False


@lru_cache(maxsize=1)
def entries() -> tuple[Entry, ...]:
    with open(resources.registry_location(), "rb") as f:
        raw = f.read()
    table = _read_plain_toml(raw)
    if table is None:
        import tomllib

        table = tomllib.loads(raw.decode("utf-8"))
    out = []
    for key, row in table.items():
        out.append(
            Entry(
                type=key,
                capability=row["capability"],
                safety_class=row["safety_class"],
                segment_kinds=tuple(row["segment_kinds"]),
                detected=bool(row["detected"]),
                manifest=bool(row["manifest"]),
                description=row.get("description", ""),
            )
        )
    return tuple(out)


# The TOML that registry.toml is written in: `[type]` tables of `key = value` lines, values
# being true, false, "a string" or ["a", "list", "of strings"]; comments and blank lines.
# Read by hand, which is much cheaper than importing tomllib (and its regular expressions)
# on every `compress`; anything else in the file -- another kind of value or key, an escape,
# a comment after a value, CR line ends, a repeated key -- is left to tomllib, so the result
# (or the error) is always tomllib's.
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _read_plain_toml(raw: bytes) -> dict | None:
    """``tomllib.loads(raw)`` for a file in the plain subset above, else None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in text or "\x7f" in text:
        return None
    out: dict = {}
    table = None
    for line in text.split("\n"):
        s = line.strip(" \t")
        if not s:
            continue
        if s[0] == "#":
            if not _plain_chars(s):
                return None
            continue
        if s[0] == "[":
            name = s[1:-1]
            if s[-1] != "]" or not name or not _BARE.issuperset(name) or name in out:
                return None
            table = out[name] = {}
            continue
        key, eq, value = s.partition("=")
        key = key.rstrip(" \t")
        if (table is None or not eq or not key or not _BARE.issuperset(key)
                or key in table):
            return None
        value = _plain_value(value.lstrip(" \t"))
        if value is None:
            return None
        table[key] = value
    return out


def _plain_chars(s: str) -> bool:
    """No control character but TAB (TOML allows no other in comments and strings)."""
    return s.isprintable() or all(c == "\t" or (c >= " " and c != "\x7f") for c in s)


def _plain_string(s: str) -> str | None:
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        inner = s[1:-1]
        if '"' not in inner and "\\" not in inner and _plain_chars(inner):
            return inner
    return None


def _plain_value(s: str):
    if s == "true":
        return True
    if s == "false":
        return False
    if s[:1] == '"':
        return _plain_string(s)
    if s[:1] == "[" and s[-1:] == "]":
        inner = s[1:-1].strip(" \t")
        if not inner:
            return []
        items = [_plain_string(part.strip(" \t")) for part in inner.split(",")]
        return None if None in items else items
    return None


def entry(content_type: str) -> Entry | None:
    for e in entries():
        if e.type == content_type:
            return e
    return None


def compressor(content_type: str):
    """The compressor module and its safety class for ``content_type``, or None."""
    e = entry(content_type)
    if e is None:
        return None
    try:
        __import__(e.module_name)  # importlib.import_module, without importing importlib
        module = sys.modules[e.module_name]
    except Exception:
        return None
    if (
        getattr(module, "CONTENT_TYPE", None) != e.type
        or getattr(module, "SAFETY_CLASS", None) != e.safety_class
        or not callable(getattr(module, "compress", None))
    ):
        return None
    cls = SAFETY_CLASSES.get(e.safety_class)
    if cls is None:
        return None
    return module, cls


def _capability(e: Entry) -> dict:
    return {
        "transform_id": e.capability,
        "implementation_version": "1",
        "safety_classes": [e.safety_class],
        "deterministic": True,
        "recovery": "exact_ccr",
        "eligible_segment_kinds": list(e.segment_kinds),
        "requires_eval": True,
        "not_smaller_fallback": "original",
        "provenance": {"kind": "native", "source_manifest_sha256": None},
        "conformance_digest": e.conformance_digest,
    }


def manifest(*, include_all: bool = False) -> bytes:
    """The capability manifest line (spec §4.2), compact JSON without the newline."""
    rows = [e for e in entries() if (include_all or e.manifest) and e.implemented]
    for e in rows:
        if e.safety_class not in SAFETY_CLASSES:
            raise RegistryError("compressors: unknown safety class")
    import hashlib

    from . import jsonio

    caps = sorted((_capability(e) for e in rows), key=lambda c: c["transform_id"].encode())
    caps_json = jsonio.dumps(caps, sort_keys=False)
    digest = hashlib.sha256(caps_json).hexdigest()
    head = b'{"schema_version":1,"registry_sha256":"' + digest.encode() + b'","capabilities":'
    return head + caps_json + b"}"


def table(*, manifest_only: bool = False) -> str:
    """Every registered type (``registry --all``), or only the manifest's, one line each."""
    lines = [f"{'type':<24}{'class':<7}{'mode':<10}{'manifest':<10}{'status':<10}description"]
    for e in entries():
        if manifest_only and not e.manifest:
            continue
        lines.append(
            f"{e.type:<24}{e.safety_class:<7}{'detected' if e.detected else 'forced':<10}"
            f"{'yes' if e.manifest else 'no':<10}"
            f"{'ready' if e.implemented else 'missing':<10}{e.description}"
        )
    return "\n".join(lines) + "\n"


def listing() -> list[dict]:
    """Every registered type as objects (``registry --all --format json``)."""
    return [
        {"type": e.type, "capability": e.capability, "safety_class": e.safety_class,
         "segment_kinds": list(e.segment_kinds), "detected": e.detected,
         "manifest": e.manifest, "implemented": e.implemented, "description": e.description}
        for e in entries()
    ]


def closest(name: str) -> str | None:
    """The registered type a mistyped ``name`` most likely meant."""
    import difflib

    found = difflib.get_close_matches(name, [e.type for e in entries()], n=1, cutoff=0.6)
    return found[0] if found else None
