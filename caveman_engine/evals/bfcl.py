"""Cases for ``evals tools``: the Berkeley Function Calling Leaderboard's own files, and a JSONL
format for users' catalogs.

BFCL (``pip install --no-deps bfcl-eval``, Apache-2.0) ships its data inside the package:
``bfcl_eval/data/BFCL_v4_<category>.json`` (one JSON object a line: ``id``, ``question`` — a list
of turns, each a list of chat messages — and ``function``, the functions offered) and
``bfcl_eval/data/possible_answer/BFCL_v4_<category>.json`` (``id`` and ``ground_truth``: a list of
calls ``{name: {param: [acceptable values…]}}``). The files are read from the installed package;
nothing is fetched.

Functions are turned into OpenAI Chat Completions tools as BFCL's own OpenAI handler does
(``convert_to_tool`` with ``GORILLA_TO_OPENAPI``): dots in names become underscores, the
parameters' ``type`` becomes ``object``, each property's Gorilla type (``dict``, ``float``,
``tuple``, ``any``, Java names…) is mapped to a JSON Schema type (unknown or missing: ``string``),
a ``float`` property also gets ``"format": "float"`` and " This is a float type value." appended
to its description, and the mapping recurses into object properties and array items the way
BFCL's does (one or two levels of ``items``, properties of objects and of object items).

A ground-truth call is made concrete by taking, for every argument, the first acceptable value
that is not ``""`` (BFCL's "may be omitted"); an argument whose only acceptable value is ``""`` is
left out. Object arguments (and arrays of objects) list acceptable values per member, and are
resolved the same way, member by member.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Our names for BFCL's categories → the file stem after ``BFCL_v4_``.
CATEGORIES = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "live_simple": "live_simple",
    "live_multiple": "live_multiple",
    "live_parallel": "live_parallel",
    "live_parallel_multiple": "live_parallel_multiple",
}

# Gorilla (BFCL) type names → JSON Schema types, as BFCL's OpenAI handler maps them.
GORILLA_TYPES = {
    "integer": "integer", "number": "number", "float": "number", "double": "number",
    "string": "string", "char": "string", "String": "string", "any": "string", "Any": "string",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array", "tuple": "array", "ArrayList": "array", "Array": "array",
    "Queue": "array", "Stack": "array",
    "dict": "object", "object": "object", "HashMap": "object", "Hashtable": "object",
    "byte": "integer", "short": "integer", "long": "integer", "Bigint": "integer",
}

FLOAT_NOTE = " This is a float type value."


class DatasetError(ValueError):
    """A dataset cannot be read (one line, for the CLI)."""


class Unreadable(DatasetError):
    """A dataset FILE (or stdin) that cannot be read at all: ``name`` and ``reason``."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"cannot read {name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass
class Case:
    """One benchmark question: what the user asks, the catalog offered, the right tools."""

    id: str
    dataset: str
    query: str                       # the user's words (what the lexical grader reads)
    messages: list[dict]             # the chat messages (what the LLM grader is sent)
    catalog: Any                     # any catalog shape caveman_engine.catalog.envelope reads
    expected: list[str]              # acceptable top-1 tool names (ground-truth calls' names)
    calls: list[tuple[str, dict]] = field(default_factory=list)  # concrete ground-truth calls


# --------------------------------------------------------------------------- conversion


def tool_name(name: str) -> str:
    """BFCL's OpenAI handler: ``.`` is not allowed in a function name, so it becomes ``_``."""
    return name.replace(".", "_")


def _mapped(gorilla_type: Any) -> str:
    return GORILLA_TYPES.get(gorilla_type, "string") if isinstance(gorilla_type, str) else "string"


def _cast_properties(properties: dict) -> dict:
    """Map every property's type in place (and return ``properties``), recursing like BFCL."""
    for prop in properties.values():
        if not isinstance(prop, dict):
            continue
        if "type" not in prop:
            prop["type"] = "string"
        else:
            original = prop["type"]
            if original == "float":
                prop["format"] = "float"
                prop["description"] = str(prop.get("description", "")) + FLOAT_NOTE
            prop["type"] = _mapped(original)
        if prop["type"] not in ("array", "object"):
            continue
        if isinstance(prop.get("properties"), dict):
            _cast_properties(prop["properties"])
        elif isinstance(prop.get("items"), dict) and "type" in prop["items"]:
            items = prop["items"]
            items["type"] = _mapped(items["type"])
            inner = items.get("items")
            if items["type"] == "array" and isinstance(inner, dict) and "type" in inner:
                inner["type"] = _mapped(inner["type"])
            elif items["type"] == "object" and isinstance(items.get("properties"), dict):
                _cast_properties(items["properties"])
    return properties


def to_openai_tool(function: dict) -> dict:
    """One BFCL function → one OpenAI Chat Completions tool (a new tree)."""
    item = json.loads(json.dumps(function))
    if isinstance(item.get("name"), str):
        item["name"] = tool_name(item["name"])
    params = item.get("parameters")
    if not isinstance(params, dict):
        params = item["parameters"] = {}
    params["type"] = "object"
    props = params.get("properties")
    params["properties"] = _cast_properties(props if isinstance(props, dict) else {})
    return {"type": "function", "function": item}


def to_openai_tools(functions: list[dict]) -> list[dict]:
    return [to_openai_tool(f) for f in functions]


# --------------------------------------------------------------------------- ground truth


def _first(acceptable: Any) -> tuple[bool, Any]:
    """(present, value): the first acceptable value that is not ``""``."""
    if not isinstance(acceptable, list):
        return True, acceptable
    for v in acceptable:
        if v != "":
            return True, v
    return False, None


def _resolve_object(value: Any) -> Any:
    """An object's acceptable values are given member by member (``{key: [values…]}``)."""
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        out = {}
        for k, acceptable in value.items():
            present, v = _first(acceptable)
            if present:
                out[k] = _resolve_object(v)
        return out
    return value


def _concrete(value: Any, schema: Any) -> Any:
    t = schema.get("type") if isinstance(schema, dict) else None
    if t == "object" and isinstance(value, dict):
        return _resolve_object(value)
    if t == "array" and isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict) and items.get("type") == "object":
            return [_resolve_object(v) for v in value]
    return value


def concrete_call(call: dict, tools: list[dict]) -> tuple[str, dict]:
    """``{name: {param: [acceptable…]}}`` → ``(tool name, arguments)`` (first acceptable values)."""
    (name, params), = call.items()
    name = tool_name(name)
    schema: dict = {}
    for t in tools:
        fn = t.get("function", t)
        if fn.get("name") == name:
            schema = fn.get("parameters") or {}
            break
    props = schema.get("properties") or {}
    args = {}
    for param, acceptable in (params or {}).items():
        present, v = _first(acceptable)
        if present:
            args[param] = _concrete(v, props.get(param))
    return name, args


# --------------------------------------------------------------------------- BFCL files


def package_data_dir() -> Path | None:
    """``bfcl_eval/data`` of the installed package, found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("bfcl_eval")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        d = Path(loc) / "data"
        if d.is_dir():
            return d
    return None


def _read_jsonl(path: Path, text: str | None = None) -> list[dict]:
    if text is None:
        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise Unreadable(str(path), exc.strerror or str(exc)) from None
        except UnicodeDecodeError:
            raise DatasetError(f"{path}: not UTF-8 text") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{n}: invalid JSON: {exc.msg}") from None
    return out


def category_file(data_dir: Path, category: str) -> Path | None:
    """The question file of ``category`` in a BFCL data directory (any ``BFCL_v*`` version)."""
    stem = CATEGORIES.get(category, category)
    pattern = re.compile(rf"BFCL_v(\d+)_{re.escape(stem)}\.json")
    found = sorted((int(m.group(1)), p) for p in data_dir.glob("BFCL_v*.json")
                   if (m := pattern.fullmatch(p.name)))
    return found[-1][1] if found else None


def _user_text(messages: list[dict]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")


def load_bfcl_file(path: Path, label: str | None = None, limit: int | None = None) -> list[Case]:
    """Cases of one BFCL question file; answers from ``possible_answer/<same name>`` beside it."""
    answers_path = path.parent / "possible_answer" / path.name
    if not answers_path.is_file():
        raise DatasetError(f"{path}: no ground truth at {answers_path}")
    answers = {a.get("id"): a.get("ground_truth") for a in _read_jsonl(answers_path)}
    label = label or _label(path)
    cases = []
    for q in _read_jsonl(path):
        if limit is not None and len(cases) >= limit:
            break
        truth = answers.get(q.get("id"))
        if not truth or not isinstance(q.get("function"), list):
            continue
        turns = q.get("question") or [[]]
        messages = turns[0] if turns and isinstance(turns[0], list) else []
        tools = to_openai_tools(q["function"])
        calls = [concrete_call(c, tools) for c in truth if isinstance(c, dict) and len(c) == 1]
        expected = list(dict.fromkeys(name for name, _ in calls))
        cases.append(Case(str(q.get("id")), label, _user_text(messages), messages, tools,
                          expected, calls))
    return cases


def _label(path: Path) -> str:
    m = re.match(r"BFCL_v\d+_(.+)\.json$", path.name)
    stem = m.group(1) if m else path.stem
    for ours, theirs in CATEGORIES.items():
        if theirs == stem:
            return ours
    return stem


def load_bfcl_dir(data_dir: Path, categories: list[str] | None = None,
                  limit: int | None = None) -> list[list[Case]]:
    """One list of cases per category found in ``data_dir`` (all eight by default)."""
    out = []
    for cat in categories or list(CATEGORIES):
        f = category_file(data_dir, cat)
        if f is None:
            if categories:
                raise DatasetError(f"{data_dir}: no BFCL file for category {cat}")
            continue
        out.append(load_bfcl_file(f, cat, limit))
    if not out:
        raise DatasetError(f"{data_dir}: no BFCL category files (BFCL_v*_<category>.json)")
    return out


def is_bfcl_file(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
        obj = json.loads(first)
    except (OSError, ValueError):
        return False
    return isinstance(obj, dict) and "function" in obj and "question" in obj


# --------------------------------------------------------------------------- user JSONL


def load_user_jsonl(path: Path, limit: int | None = None, *, text: str | None = None,
                    label: str | None = None) -> list[Case]:
    """``{"catalog", "query", "expected_tool"[, "arguments"][, "id"]}`` a line. ``catalog`` is a
    path (relative to the JSONL file) or the catalog itself; ``expected_tool`` a name or a list
    of acceptable names; ``arguments`` makes a ground-truth call on the first expected tool.
    ``text``: the file's content, already read (stdin)."""
    cache: dict[str, Any] = {}
    cases = []
    for n, row in enumerate(_read_jsonl(path, text), 1):
        if limit is not None and len(cases) >= limit:
            break
        where = f"{path}:{n}"
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: expected a JSON object")
        for key in ("catalog", "query", "expected_tool"):
            if key not in row:
                raise DatasetError(f"{where}: missing {key!r}")
        catalog = row["catalog"]
        if isinstance(catalog, str):
            p = Path(catalog)
            p = p if p.is_absolute() else path.parent / p
            if str(p) not in cache:
                try:
                    cache[str(p)] = json.loads(p.read_bytes())
                except OSError as exc:
                    raise DatasetError(f"{where}: cannot read catalog {p}: "
                                       f"{exc.strerror or exc}") from None
                except ValueError as exc:
                    raise DatasetError(f"{where}: catalog {p}: invalid JSON: {exc}") from None
            catalog = cache[str(p)]
        from ..catalog import envelope

        if not envelope.iter_tools(catalog):
            raise DatasetError(f"{where}: the catalog has no tools")
        expected = row["expected_tool"]
        expected = [expected] if isinstance(expected, str) else expected
        if not (isinstance(expected, list) and expected
                and all(isinstance(e, str) for e in expected)):
            raise DatasetError(f"{where}: 'expected_tool' must be a name or a list of names")
        query = row["query"]
        if not isinstance(query, str):
            raise DatasetError(f"{where}: 'query' must be a string")
        calls = []
        if "arguments" in row:
            if not isinstance(row["arguments"], dict):
                raise DatasetError(f"{where}: 'arguments' must be an object")
            calls.append((expected[0], row["arguments"]))
        cases.append(Case(str(row.get("id", n)), label or path.stem, query,
                          [{"role": "user", "content": query}], catalog, expected, calls))
    return cases


# --------------------------------------------------------------------------- datasets


def resolve(spec: str, limit: int | None = None, stdin=None) -> list[list[Case]]:
    """A DATASET argument → lists of cases (one per dataset shown): a BFCL data directory; a
    BFCL question file; a user JSONL file (``-``: ``stdin``, a binary stream); or, when no
    such path exists, a BFCL category name (or ``bfcl`` for all eight) read from the installed
    ``bfcl-eval``. Any other word is a FILE: :class:`Unreadable` when it cannot be read."""
    if spec == "-":
        try:
            raw = (stdin if stdin is not None else sys.stdin.buffer).read()
        except OSError as exc:
            raise Unreadable("stdin", exc.strerror or str(exc)) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DatasetError("stdin: not UTF-8 text") from None
        return [load_user_jsonl(Path("-"), limit, text=text, label="stdin")]
    path = Path(spec)
    if path.is_dir():
        return load_bfcl_dir(path, None, limit)
    if path.is_file():
        if is_bfcl_file(path):
            return [load_bfcl_file(path, None, limit)]
        return [load_user_jsonl(path, limit)]
    if not os.path.lexists(spec) and (spec == "bfcl" or spec in CATEGORIES):
        data = package_data_dir()
        if data is None:
            raise DatasetError("BFCL data needs the bfcl-eval package (its data files only): "
                               "pip install --no-deps bfcl-eval")
        return load_bfcl_dir(data, None if spec == "bfcl" else [spec], limit)
    return [load_user_jsonl(path, limit)]  # a FIFO, a device, or what cannot be read
