"""YAML vs TOML/INI classifier (spec §6.9), used by detection (§3.1 step 10) and by the config
compressor.

Each ``\\n``-separated line gets one kind (first that applies):

* ``blank``    — only Go whitespace;
* ``comment``  — trimmed line starts with ``#`` or ``;``;
* ``section``  — ``^\\s*\\[[A-Za-z0-9_.:"' -]+\\]\\s*(?:[#;].*)?$``;
* ``assign``   — ``^\\s*[A-Za-z0-9_.-]+\\s*=\\s*\\S``;
* ``key``      — ``^\\s*(?:-\\s*)?[A-Za-z0-9_.-]+\\s*:\\s*`` (YAML key, also ``- key:``);
* ``item``     — trimmed line starts with ``- `` (neutral: significant, neither key nor prose);
* ``prose``    — anything else.

Significant lines are all lines but blank and comment ones. Classification:

* ``"toml"`` (TOML/INI): ≥ 2 sections, ≥ 4 assignments, no prose, no ``\"\"\"`` / ``'''``;
* ``"yaml"``: ≥ 6 keys, 2·keys ≥ significant, 4·prose ≤ significant, no block scalar
  (``key: |``, ``key: >-`` …), and the text parses as ≥ 1 valid YAML document
  (:func:`yaml_valid`);
* else ``None``.

Regexes are RE2 semantics on bytes (``\\s`` = ``[\\t\\n\\f\\r ]``). PyYAML is imported only
when a YAML candidate needs parsing.
"""

from __future__ import annotations

import re

from .tables import _Value, trim_span

_S = rb"[\t\n\f\r ]"
_SECTION = re.compile(rb"%s*\[[A-Za-z0-9_.:\"' -]+\]%s*(?:[#;].*)?\Z" % (_S, _S))
_ASSIGN = re.compile(rb"%s*[A-Za-z0-9_.-]+%s*=%s*[^\t\n\f\r ]" % (_S, _S, _S))
_KEY = re.compile(rb"%s*(?:-%s*)?[A-Za-z0-9_.-]+%s*:" % (_S, _S, _S))
_BLOCK_SCALAR = re.compile(rb":%s*[|>][-+0-9]*%s*\Z" % (_S, _S))


class Shape(_Value):
    """Line kinds and counts of a config candidate."""

    __slots__ = ("kinds", "sections", "assignments", "keys", "items", "prose", "significant",
                 "block_scalar")  # fmt: skip
    kinds: tuple[str, ...]  # one per line of the input split on "\n"
    sections: int
    assignments: int
    keys: int
    items: int
    prose: int
    significant: int
    block_scalar: bool

    def __init__(self, kinds, sections, assignments, keys, items, prose, significant, block_scalar):
        self._init(kinds=kinds, sections=sections, assignments=assignments, keys=keys,
                   items=items, prose=prose, significant=significant, block_scalar=block_scalar)


def line_kind(line: bytes) -> str:
    a, b = trim_span(line)
    if a == b:
        return "blank"
    c = line[a]
    if c == 0x23 or c == 0x3B:  # "#" ";"
        return "comment"
    if _SECTION.match(line):
        return "section"
    if _ASSIGN.match(line):
        return "assign"
    if _KEY.match(line):
        return "key"
    if line.startswith(b"- ", a):
        return "item"
    return "prose"


def shape(data: bytes) -> Shape:
    kinds = []
    counts = {"section": 0, "assign": 0, "key": 0, "item": 0, "prose": 0}
    block = False
    for line in data.split(b"\n"):
        k = line_kind(line)
        kinds.append(k)
        if k in counts:
            counts[k] += 1
            if not block and _BLOCK_SCALAR.search(line):
                block = True
    significant = sum(counts.values())
    return Shape(
        tuple(kinds),
        counts["section"],
        counts["assign"],
        counts["key"],
        counts["item"],
        counts["prose"],
        significant,
        block,
    )


def classify(data: bytes) -> str | None:
    """``"yaml"``, ``"toml"`` (TOML or INI) or None. Same answer as ``decide(shape(data),
    data)``, but first rules out inputs where neither format is still possible (cheap byte
    counts, then a scan that stops once prose lines exclude both)."""
    toml_possible = (
        data.count(b"[") >= 2
        and data.count(b"=") >= 4
        and b'"""' not in data
        and b"'''" not in data
    )
    yaml_possible = data.count(b":") >= 6
    if not (toml_possible or yaml_possible):
        return None
    lines = data.split(b"\n")
    total = len(lines)  # ≥ significant, so 4·prose > total rules YAML out
    prose = 0
    kind = line_kind
    for line in lines:
        if kind(line) == "prose":
            prose += 1
            toml_possible = False
            if 4 * prose > total:
                return None
    return decide(shape(data), data)


def decide(s: Shape, data: bytes) -> str | None:
    """The classification of ``data`` given its :func:`shape`."""
    if (
        s.sections >= 2
        and s.assignments >= 4
        and s.prose == 0
        and b'"""' not in data
        and b"'''" not in data
    ):
        return "toml"
    if (
        s.keys >= 6
        and 2 * s.keys >= s.significant
        and 4 * s.prose <= s.significant
        and not s.block_scalar
        and yaml_valid(data)
    ):
        return "yaml"
    return None


def yaml_valid(data: bytes) -> bool:
    """At least one YAML document and every document well-formed (no syntax error, no
    undefined alias, no duplicate scalar key in a mapping — Go yaml.v3 rejects those)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        docs = 0
        for node in yaml.compose_all(text, Loader=loader):
            docs += 1
            if node is not None and _has_duplicate_key(node, yaml):
                return False
    except Exception:  # any parser/composer error, RecursionError on absurd nesting
        return False
    return docs >= 1


def _has_duplicate_key(root, yaml) -> bool:
    stack = [root]
    seen_ids: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen_ids:
            continue
        seen_ids.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in keys:
                        return True
                    keys.add(k.value)
                stack.append(k)
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return False
