"""Fuzz inputs: the seed corpus and deterministic mutations of it.

A mutation is a plain tuple ``(name, *ints)``; :func:`apply` maps (seed bytes, mutations) to
the fuzzed bytes. Hypothesis draws the tuples (so failures shrink to a short, readable list)
and :func:`random_mutations` draws them from a ``random.Random`` for the non-Hypothesis
samples (CLI runs, fault writers).
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

# Byte strings that trip parsers: invalid UTF-8, BOMs, NUL, odd Unicode, JSON specials,
# terminal escapes, line-ending variants, wrapper lookalikes.
PAYLOADS: tuple[bytes, ...] = (
    b"\x00",
    b"\xff", b"\xfe\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
    b"\xe2\x82", b"\x80\x80\x80",
    b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff\x00{",
    "\u2028\u2029".encode(), "\ufeff".encode(), "\u0130\u212a\u017f".encode(),
    "\u0085\u00a0\u3000".encode(), "e\u0301\u0308".encode(), "\u202e\u200f\u200b".encode(),
    "\U0001f600\U0001f9d1\u200d\U0001f4bb".encode(), "\ufffd".encode(), "\ue000\U000f0000".encode(),
    b"NaN", b"-Infinity", b"Infinity", b"1e999", b"-0", b"1E+400", b"123456789012345678901234567890",
    b"0.1e-400", b"00", b"1.", b"-",
    b'"\\ud800"', b'"\\udc00\\ud800"', b'"\\u0000"', b'"\\u2028"', b'"\\ud83d\\ude00"', b'"\\x41"',
    b"\r\n", b"\r", b"\n\n\n", b"\t", b"\x0b\x0c",
    b"\x1b[31m", b"\x1b[2K\r", b"\x1b]0;title\x07", b"\x1b[?25l", b"\x1b",
    b"{", b"}", b"[", b"]", b'"', b",", b":", b'{"a":', b"[[[[", b"]]]]",
    b"<file path=\"x\">", b"</file>", b"     1\t", b"@@ -1,3 +1,4 @@\n", b"diff --git a/x b/x\n",
    b"<html><body><p>", b"</p></body></html>", b"ERROR ", b"Traceback (most recent call last):\n",
    b"| a | b |\n|---|---|\n", b"a,b,c\n1,2,3\n", b"key: value\n", b"[section]\n",
)

UNITS: tuple[bytes, ...] = (b"a", b" ", b"\n", b"\\", b'\\"', "\u00e9".encode(), b"\x00", b"ab\n", b"\xff")

OPS = (
    "truncate", "flip", "insert", "delete", "dup_range", "splice", "crlf", "cr", "bom",
    "deep", "huge", "dupkey", "number", "gutter", "filewrap", "nul_spray",
)

_KEY = re.compile(rb'[{,]\s*("(?:[^"\\\n]|\\.){0,64}")\s*:')
_NUMBER = re.compile(rb"(?<![\w.\"])-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![\w.\"])")


@lru_cache(maxsize=1)
def seeds() -> tuple[tuple[str, bytes], ...]:
    """Every corpus catalog and conformance input, sorted by path (stable indices)."""
    paths = sorted(TESTS.glob("corpus/**/*.json")) + sorted(TESTS.glob("conformance/*/*.in"))
    return tuple((str(p.relative_to(TESTS)), p.read_bytes()) for p in paths)


def small_seeds(limit: int = 40_000) -> tuple[int, ...]:
    return tuple(i for i, (_, d) in enumerate(seeds()) if len(d) <= limit)


def _pos(data: bytes, n: int) -> int:
    return n % (len(data) + 1)


def apply_one(data: bytes, op: tuple, max_huge: int) -> bytes:
    name, *a = op
    a = list(a) + [0] * (5 - len(a))
    if name == "truncate":
        return data[: _pos(data, a[0])]
    if name == "flip":
        if not data:
            return bytes([a[1] & 0xFF])
        i = a[0] % len(data)
        return data[:i] + bytes([data[i] ^ (a[1] % 255 + 1)]) + data[i + 1 :]
    if name == "insert":
        i = _pos(data, a[0])
        return data[:i] + PAYLOADS[a[1] % len(PAYLOADS)] + data[i:]
    if name == "delete":
        i = _pos(data, a[0])
        return data[:i] + data[i + a[1] % 4096 :]
    if name == "dup_range":
        i = _pos(data, a[0])
        chunk = data[i : i + 1 + a[1] % 512]
        return data[:i] + chunk * (2 + a[2] % 40) + data[i + len(chunk) :]
    if name == "splice":
        other = seeds()[a[0] % len(seeds())][1]
        j = _pos(other, a[1])
        chunk = other[j : j + 1 + a[2] % 4096]
        i = _pos(data, a[3])
        return data[:i] + chunk + data[i:]
    if name == "crlf":
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    if name == "cr":
        return data.replace(b"\n", b"\r")
    if name == "bom":
        return (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf\xef\xbb\xbf")[a[0] % 4] + data
    if name == "deep":
        depth = 1 + a[0] % 12_000
        kind = a[1] % 4
        if kind == 0:
            return b"[" * depth + data + b"]" * depth
        if kind == 1:
            return b'{"k":' * depth + (data or b"1") + b"}" * depth
        if kind == 2:  # unbalanced
            return b"[" * depth + data
        i = _pos(data, a[2])
        return data[:i] + b'{"d":[' * depth + b"0" + b"]}" * depth + data[i:]
    if name == "huge":
        i = _pos(data, a[0])
        n = a[1] % (max_huge + 1)
        unit = UNITS[a[2] % len(UNITS)]
        blob = unit * (n // len(unit) + 1)
        if a[3] % 2:  # as a JSON string value
            blob = b'"' + blob.replace(b"\\", b"\\\\").replace(b'"', b"") + b'"'
        return data[:i] + blob + data[i:]
    if name == "dupkey":
        m = _KEY.search(data, _pos(data, a[0])) or _KEY.search(data)
        if m is None:
            return data
        dup = m.group(1) + (b":null,", b":1,", b':"dup",', b":{},")[a[1] % 4]
        at = m.start(0) + 1
        return data[:at] + dup + data[at:]
    if name == "number":
        m = _NUMBER.search(data, _pos(data, a[0])) or _NUMBER.search(data)
        if m is None:
            return data
        repl = (b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-0", b"1E+400",
                b"123456789012345678901234567890", b"0.1e-400", b"-0.0", b"1.0000000000000001")[a[1] % 10]
        return data[: m.start()] + repl + data[m.end() :]
    if name == "gutter":
        lines = data.split(b"\n")
        return b"\n".join(b"%6d\t%s" % (n + 1, line) for n, line in enumerate(lines))
    if name == "filewrap":
        return b'<file path="src/x.txt">\n' + data + b"\n</file>\n"
    if name == "nul_spray":
        if not data:
            return b"\x00"
        step = 1 + a[0] % 97
        out = bytearray(data)
        for i in range(a[1] % step, len(out), step):
            out[i] = 0
        return bytes(out)
    raise ValueError(name)


def apply(data: bytes, ops, max_huge: int = 300_000) -> bytes:
    for op in ops:
        data = apply_one(data, tuple(op), max_huge)
    return data


def random_mutations(rng: random.Random, k: int | None = None) -> list[tuple]:
    k = rng.randint(0, 3) if k is None else k
    return [(rng.choice(OPS), *(rng.randrange(1 << 30) for _ in range(4))) for _ in range(k)]


# --------------------------------------------------------------------------- seed pools

_CATALOG_TYPES = ("toolschema", "toolschema-annotations", "toolschema-safe", "toolschema-max", "prose")


def seed_pool(content_type: str) -> tuple[int, ...]:
    """Indices of the seeds a type is meant for (its conformance inputs, catalogs for the
    tool-schema types, JSON for json/toon); every seed for auto-detect or when none match."""
    def wanted(name: str) -> bool:
        base = name.rsplit("/", 1)[-1]
        if content_type in _CATALOG_TYPES:
            return name.startswith("corpus/") or name.startswith("conformance/toolschema/") \
                or base.startswith("seed_catalog")
        if content_type in ("json", "toon"):
            return name.endswith(".json") or base.startswith(("json__", "xjson__", "seed_catalog"))
        if content_type == "repetition":
            return base.startswith(("repetition__", "xrepetition__", "log__", "terminal__"))
        return base.startswith((content_type + "__", "x" + content_type + "__"))

    pool = tuple(i for i, (name, _) in enumerate(seeds()) if wanted(name))
    return pool or tuple(range(len(seeds())))


# --------------------------------------------------------------------------- hypothesis


def _ax_tree(st):
    """CDP accessibility trees (``a11y`` input), valid and slightly broken."""
    roles = ["RootWebArea", "button", "link", "textbox", "StaticText", "InlineTextBox", "generic",
             "LabelText", "heading", "none", "presentation", "checkbox", "custom-widget", ""]
    names = st.sampled_from(["", "Save", "Save", "Email", "a\u2028b", "\x00", "x" * 300, "\ufffd"])

    @st.composite
    def build(draw):
        n = draw(st.integers(min_value=1, max_value=40))
        nodes = []
        for i in range(n):
            node = {"nodeId": str(i + 1), "ignored": draw(st.booleans()) and i > 0,
                    "role": {"type": "role", "value": draw(st.sampled_from(roles))}}
            if draw(st.booleans()):
                node["name"] = {"type": "string", "value": draw(names)}
            if draw(st.booleans()):
                node["backendDOMNodeId"] = draw(st.integers(min_value=-1, max_value=1 << 40))
            kids = [str(k + 1) for k in range(i + 1, n) if draw(st.integers(0, 3)) == 0]
            if kids:
                node["childIds"] = kids
            if draw(st.integers(0, 4)) == 0:
                node["properties"] = [{"name": draw(st.sampled_from(
                    ["focusable", "focused", "disabled", "checked", "expanded", "editable"])),
                    "value": {"type": "booleanOrUndefined", "value": draw(st.booleans())}}]
            nodes.append(node)
        import json

        doc = {"nodes": nodes} if draw(st.booleans()) else nodes
        return json.dumps(doc).encode()

    return build()


_STRATEGIES: dict = {}


def strategies(max_huge: int = 300_000, content_type: str = "auto"):
    """A Hypothesis strategy of fuzz inputs (bytes) for ``content_type``: mutated seeds (mostly
    from the type's own pool), raw bytes, odd text, JSON documents, accessibility trees, runs
    of lines."""
    key = (max_huge, content_type)
    if key in _STRATEGIES:
        return _STRATEGIES[key]
    from hypothesis import strategies as st

    ints = st.integers(min_value=0, max_value=(1 << 30) - 1)
    op = st.tuples(st.sampled_from(OPS), ints, ints, ints, ints)
    ops = st.lists(op, max_size=4)

    def mutated(pool):
        return st.builds(lambda i, o: apply(seeds()[i][1], o, max_huge), st.sampled_from(pool), ops)

    json_scalars = (
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=40)
    )
    json_docs = st.recursive(
        json_scalars,
        lambda kids: st.lists(kids, max_size=12) | st.dictionaries(st.text(max_size=12), kids, max_size=8),
        max_leaves=60,
    )

    def dump(v, indent):
        import json

        return json.dumps(v, indent=indent, ensure_ascii=indent == 2).encode()

    jsons = st.builds(dump, json_docs, st.sampled_from([None, 2, 0]))
    records = st.lists(
        st.fixed_dictionaries({"id": st.integers(0, 50), "status": st.sampled_from(["ok", "ok", "error"]),
                               "msg": st.sampled_from(["served", "served", "timeout"])}),
        min_size=0, max_size=120,
    ).map(lambda rows: dump({"items": rows}, None))
    line = st.sampled_from([
        b"2024-01-01T00:00:00Z INFO request ok id=1", b"ERROR failed to connect", b"WARN slow",
        b"src/a.py:12: match here", b"+added line", b"-removed line", b"@@ -1,2 +1,2 @@",
        b"def f(x):", b"    return x", b"", b"| a | b |", b"a,b,c", b"key = value",
        b"\x1b[32mok\x1b[0m", b"<div>hi</div>", b"The quick brown fox jumps over the lazy dog.",
    ])
    lines = st.lists(line, max_size=80).map(b"\n".join)
    runs = st.lists(st.tuples(line, st.integers(1, 30)), max_size=20).map(
        lambda rs: b"\n".join(l for l, k in rs for _ in range(k)))
    word = st.sampled_from(["ok", "ok", "ok", "nginx", "error", "timeout", "true", "1.25", ""])

    def config(kind, rows):
        out = []
        for i, (a, b) in enumerate(rows):
            if kind == 0:
                out.append(f"svc{i}:\n  image: {a}\n  restart: {b}\n  replicas: 1")
            elif kind == 1:
                out.append(f"[section{i}]\nimage = {a}\nrestart = {b}")
            else:
                out.append(f'[svc{i}]\nimage = "{a}"\nrestart = "{b}"')
        return "\n".join(out).encode()

    configs = st.builds(config, st.integers(0, 2), st.lists(st.tuples(word, word), max_size=120))

    def table(kind, rows):
        sep = {0: ",", 1: "\t", 2: " | "}[kind]
        head = sep.join(["id", "name", "status", "latency"])
        body = [sep.join([str(i), a, b, str(i % 7)]) for i, (a, b) in enumerate(rows)]
        if kind == 2:
            return ("| " + head + " |\n|---|---|---|---|\n"
                    + "\n".join("| " + r + " |" for r in body)).encode()
        return (head + "\n" + "\n".join(body)).encode()

    tables = st.builds(table, st.integers(0, 2), st.lists(st.tuples(word, word), max_size=150))
    own = seed_pool(content_type)
    mix = [mutated(own)] * 4 + [
        mutated(tuple(range(len(seeds())))), st.binary(max_size=3000),
        st.text(max_size=2000).map(lambda s: s.encode("utf-8", "surrogatepass")),
        jsons, records, st.builds(lambda d, o: apply(d, o, max_huge), jsons | records, ops),
        lines, runs, _ax_tree(st), configs, tables,
    ]
    if content_type in ("config", "tabular"):
        gen = configs if content_type == "config" else tables
        mix += [gen] * 3 + [st.builds(lambda d, o: apply(d, o, max_huge), gen, ops)]
    if content_type == "a11y":
        mix += [_ax_tree(st)] * 4 + [st.builds(lambda d, o: apply(d, o, max_huge), _ax_tree(st), ops)]
    _STRATEGIES[key] = st.one_of(*mix)
    return _STRATEGIES[key]
