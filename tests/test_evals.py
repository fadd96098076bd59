"""`caveman-engine evals run` (spec §1.10, without the pixel gate) through the console script."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


REPORT_KEYS = ["passed", "tokens_before", "tokens_after", "token_ratio", "words_before",
               "words_after", "word_ratio", "probes", "fixtures"]
FIXTURE_KEYS = ["name", "content_type", "tokens_before", "tokens_after", "ratio", "words_before",
                "words_after", "word_ratio", "basis", "passed", "byte_recoverable"]
TALLY_KEYS = ["total", "retained", "recoverable", "lost"]


def ratio(before: int, after: int) -> float:
    return 0 if before <= 0 or after >= before else (before - after) / before


def write_fixtures(root: Path, files: dict[str, bytes | str], manifest: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    (root / "manifest.yaml").write_text(manifest)
    return root


def run_json(cli, *args, **kw):
    r = cli("evals", "run", *args, **kw)
    assert r.stdout.endswith(b"}\n"), (r.returncode, r.stdout, r.stderr)
    return r, json.loads(r.stdout)


def by_name(doc: dict) -> dict[str, dict]:
    return {f["name"]: f for f in doc["fixtures"]}


# --------------------------------------------------------------------------- embedded fixtures


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """One run of the embedded fixtures, shared by the tests that only read its report."""
    import subprocess

    from tests.conftest import console_script

    d = tmp_path_factory.mktemp("embedded")
    env = dict(os.environ, CAVEMAN_CCR_DB=str(d / "ccr.db"), CAVEMAN_CACHE_DIR=str(d),
               CAVEMAN_HOME=str(d / "home"))
    env.pop("CAVE_ENGINE_TOON", None)
    p = subprocess.run([console_script(), "evals", "run"], capture_output=True, env=env,
                       timeout=300)
    return p, d


def test_embedded_fixtures_all_pass(embedded):
    p, d = embedded
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    assert p.stderr == b""
    doc = json.loads(p.stdout)
    assert doc["passed"] is True
    assert all(f["passed"] and f["byte_recoverable"] for f in doc["fixtures"])
    assert doc["probes"]["lost"] == 0
    assert not (d / "ccr.db").exists() and not (d / "home").exists()


def test_embedded_fixtures_cover_every_registered_compressor(embedded):
    from caveman_engine import registry

    doc = json.loads(embedded[0].stdout)
    compressed = {f["content_type"] for f in doc["fixtures"] if f["ratio"] > 0}
    types = {e.type for e in registry.entries()}
    assert len(types) >= 18 and types <= compressed


def test_embedded_report_shape_is_exact(embedded):
    raw = embedded[0].stdout
    doc = json.loads(raw)
    assert list(doc) == REPORT_KEYS
    # 2-space indentation, Go style separators, one trailing newline
    assert raw.startswith(b'{\n  "passed": true,\n  "tokens_before": ')
    assert raw.endswith(b"\n  ]\n}\n") and not raw.endswith(b"\n\n")
    assert list(doc["probes"])[:4] == TALLY_KEYS
    assert set(doc["probes"]) <= set(TALLY_KEYS) | {"by_dimension"}
    for dim, tally in doc["probes"]["by_dimension"].items():
        assert list(tally) == TALLY_KEYS
    assert list(doc["probes"]["by_dimension"]) == sorted(doc["probes"]["by_dimension"])
    for f in doc["fixtures"]:
        keys = list(f)
        assert keys[: len(FIXTURE_KEYS)] == FIXTURE_KEYS
        assert keys[len(FIXTURE_KEYS):] in ([], ["probes", "probe_summary"])
        assert f["basis"] == "inferred"
        assert f["ratio"] == ratio(f["tokens_before"], f["tokens_after"])
        assert f["word_ratio"] == ratio(f["words_before"], f["words_after"])
        if "probes" in f:
            assert list(f["probe_summary"]) == TALLY_KEYS
            assert f["probe_summary"]["total"] == len(f["probes"])
            for p in f["probes"]:
                assert list(p) in (["value", "status"], ["value", "dimension", "status"])
    fx = doc["fixtures"]
    assert doc["tokens_before"] == sum(f["tokens_before"] for f in fx)
    assert doc["tokens_after"] == sum(f["tokens_after"] for f in fx)
    assert doc["words_before"] == sum(f["words_before"] for f in fx)
    assert doc["words_after"] == sum(f["words_after"] for f in fx)
    assert doc["token_ratio"] == ratio(doc["tokens_before"], doc["tokens_after"])
    assert doc["word_ratio"] == ratio(doc["words_before"], doc["words_after"])
    assert doc["probes"]["total"] == sum(f["probe_summary"]["total"] for f in fx if "probes" in f)
    assert doc["probes"]["recoverable"] > 0 and doc["probes"]["retained"] > 0


def test_embedded_record_fixture_passes_through(embedded):
    f = by_name(json.loads(embedded[0].stdout))["json-orders-page-record"]
    assert f["tokens_before"] == f["tokens_after"] and f["ratio"] == 0
    assert f["probes"] == [{"value": "ord_4817", "dimension": "identifier", "status": "retained"}]


def test_text_format(cli):
    r = cli("evals", "run", "--format", "text")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert text.splitlines()[0].split() == ["fixture", "type", "tokens", "saved", "words",
                                            "probes", "result"]
    assert "toolschema-max-issue-tracker" in text
    assert text.rstrip().endswith("fixtures passed") and "PASSED" in text


def test_json_is_the_default_format(cli, tmp_path):
    root = write_fixtures(tmp_path / "fx", {"a.txt": "hello\n"}, """
fixtures:
  - {name: a, file: a.txt, graders: [{type: byte_identical}]}
""")
    a = cli("evals", "run", "--fixtures", str(root))
    b = cli("evals", "run", "--fixtures", str(root), "--format", "json")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout
    doc = json.loads(a.stdout)
    assert doc == {
        "passed": True, "tokens_before": 2, "tokens_after": 2, "token_ratio": 0,
        "words_before": 1, "words_after": 1, "word_ratio": 0,
        "probes": {"total": 0, "retained": 0, "recoverable": 0, "lost": 0},
        "fixtures": [{
            "name": "a", "content_type": "text", "tokens_before": 2, "tokens_after": 2,
            "ratio": 0, "words_before": 1, "words_after": 1, "word_ratio": 0,
            "basis": "inferred", "passed": True, "byte_recoverable": True,
        }],
    }
    assert b'"token_ratio": 0,' in a.stdout  # zero prints as 0, like Go


# --------------------------------------------------------------------------- graders

CATALOG = json.dumps({"tools": [
    {"name": "get_weather", "title": "Weather",
     "description": "Get the current weather for a city. Use this tool whenever the user asks "
                    "about weather, temperature, rain or wind in a place. Returns temperature "
                    "in degrees Celsius, humidity and a one-line summary of the conditions.",
     "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                     "title": "Args",
                     "properties": {"city": {"type": "string", "title": "City",
                                             "description": "The name of the city.",
                                             "examples": ["Berlin"]},
                                    "units": {"type": "string", "enum": ["c", "f"]}},
                     "required": ["city"]}},
    {"name": "get_forecast", "title": "Forecast",
     "description": "Get a multi-day weather forecast for a city. Use this tool when the user "
                    "asks about the weather on a future day. Returns one entry per day with "
                    "minimum and maximum temperature and the chance of rain.",
     "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                     "properties": {"city": {"type": "string", "title": "City"},
                                    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                     "required": ["city", "days"]}},
]}, indent=2)

ROWS = json.dumps({"items": [{"id": i, "sku": f"SKU-{1000 + i}", "qty": i % 4, "ok": True}
                             for i in range(12)]}, indent=2)

GRADER_CASES = {
    # name: (file, type, grader, passes, failure message or None)
    "exact_match-pass": ("plain.txt", None, {"type": "exact_match", "expected": "just a line\n"},
                         True),
    "exact_match-file-pass": ("plain.txt", None,
                              {"type": "exact_match", "expected_file": "plain.txt"}, True),
    "exact_match-fail": ("plain.txt", None, {"type": "exact_match", "expected": "other\n"},
                         "exact_match: output differs from expected at byte 0 "
                         "(output 12 bytes, expected 6)"),
    "exact_match-config": ("plain.txt", None, {"type": "exact_match"},
                           "exact_match: needs expected or expected_file"),
    "ratio_threshold-pass": ("rows.json", "toon", {"type": "ratio_threshold", "min": 0.2}, True),
    "ratio_threshold-max-pass": ("rows.json", "toon",
                                 {"type": "ratio_threshold", "min": 0.2, "max": 0.99}, True),
    "ratio_threshold-max-zero-pass": ("rows.json", "toon",
                                      {"type": "ratio_threshold", "min": 0.2, "max": 0}, True),
    "ratio_threshold-fail": ("plain.txt", None, {"type": "ratio_threshold", "min": 0.1},
                             "ratio_threshold: ratio 0.0000 below min 0.1"),
    "ratio_threshold-max-fail": ("rows.json", "toon",
                                 {"type": "ratio_threshold", "min": 0, "max": 0.05},
                                 "ratio_threshold: ratio "),
    "ratio_threshold-config": ("plain.txt", None, {"type": "ratio_threshold"},
                               "ratio_threshold: min is required"),
    "valid_json-pass": ("catalog.json", "toolschema", {"type": "valid_json"}, True),
    "valid_json-fail": ("rows.json", "toon", {"type": "valid_json"},
                        "valid_json: output is not valid JSON"),
    "json_or_toon_round_trip-toon-pass": ("rows.json", "toon",
                                          {"type": "json_or_toon_round_trip"}, True),
    "json_or_toon_round_trip-json-pass": ("rows.json", "record-mode",
                                          {"type": "json_or_toon_round_trip"}, True),
    "json_or_toon_round_trip-fail": ("catalog.json", "toolschema",
                                     {"type": "json_or_toon_round_trip"},
                                     "json_or_toon_round_trip: output JSON does not decode to "
                                     "the input's data"),
    "toon_round_trip-pass": ("rows.json", "toon", {"type": "toon_round_trip"}, True),
    "toon_round_trip-fail": ("catalog.json", "toolschema", {"type": "toon_round_trip"},
                             "toon_round_trip: output"),
    "json_schema-pass": ("catalog.json", "toolschema",
                         {"type": "json_schema", "schema": {
                             "type": "object", "required": ["tools"],
                             "properties": {"tools": {"type": "array", "minItems": 2,
                                                      "items": {"$ref": "#/$defs/tool"}}},
                             "$defs": {"tool": {"type": "object", "required": ["name"]}}}},
                         True),
    "json_schema-file-pass": ("catalog.json", "toolschema",
                              {"type": "json_schema", "schema_file": "schemas/catalog.json"},
                              True),
    "json_schema-fail": ("catalog.json", "toolschema",
                         {"type": "json_schema", "schema": {
                             "type": "object",
                             "properties": {"tools": {"type": "array", "maxItems": 1}}}},
                         "json_schema: output does not match the schema: /tools: more than 1 "
                         "items"),
    "tool_sequence-pass": ("catalog.json", "toolschema", {"type": "tool_sequence"}, True),
    "tool_sequence-expected-pass": ("catalog.json", "toolschema",
                                    {"type": "tool_sequence",
                                     "expected": ["get_weather", "get_forecast"]}, True),
    "tool_sequence-fail": ("catalog.json", "toolschema",
                           {"type": "tool_sequence", "expected": ["get_forecast", "get_weather"]},
                           "tool_sequence: tools out of order: get_weather, get_forecast"),
    "tool_sequence-missing": ("catalog.json", "toolschema",
                              {"type": "tool_sequence", "expected": ["get_weather", "get_alerts"]},
                              "tool_sequence: missing get_alerts; unexpected get_forecast"),
    "contains-pass": ("plain.txt", None, {"type": "contains", "value": "a line"}, True),
    "contains-fail": ("plain.txt", None, {"type": "contains", "values": ["a line", "nope"]},
                      'contains: output lacks "nope"'),
    "not_contains-pass": ("catalog.json", "toolschema",
                          {"type": "not_contains", "values": ["$schema", "examples"]}, True),
    "not_contains-fail": ("plain.txt", None, {"type": "not_contains", "value": "line"},
                          'not_contains: output contains "line"'),
    "byte_identical-pass": ("plain.txt", None, {"type": "byte_identical"}, True),
    "byte_identical-fail": ("rows.json", "toon", {"type": "byte_identical"},
                            "byte_identical: output differs from the input"),
    "compressed-pass": ("rows.json", "toon", {"type": "compressed"}, True),
    "compressed-fail": ("plain.txt", None, {"type": "compressed"},
                        "compressed: output was not compressed (the input passed through)"),
    "recall_keys-pass": ("rows.json", "toon", {"type": "recall_keys"}, True),
    "recall_keys-keys-pass": ("catalog.json", "toolschema",
                              {"type": "recall_keys", "keys": ["city", "units", "days"]}, True),
    "recall_keys-min-pass": ("catalog.json", "toolschema",
                             {"type": "recall_keys", "keys": ["city", "title"], "min": 0.5},
                             True),
    "recall_keys-fail": ("catalog.json", "toolschema", {"type": "recall_keys"},
                         "recall_keys: recall "),
    "recall_keys-text-fail": ("plain.txt", None, {"type": "recall_keys", "keys": ["zzz"]},
                              "recall_keys: recall 0.0000 below min 1 (missing zzz)"),
}


@pytest.fixture(scope="module")
def grader_report(tmp_path_factory):
    import subprocess

    import yaml

    from tests.conftest import console_script

    root = tmp_path_factory.mktemp("graders")
    schema = {"type": "object", "required": ["tools"],
              "properties": {"tools": {"type": "array",
                                       "items": {"required": ["name", "inputSchema"]}}}}
    write_fixtures(root, {"plain.txt": "just a line\n", "catalog.json": CATALOG,
                          "rows.json": ROWS, "schemas/catalog.json": json.dumps(schema)}, "")
    fixtures = []
    for name, (file, ctype, grader, _) in GRADER_CASES.items():
        entry = {"name": name, "file": file, "graders": [grader]}
        if ctype == "record-mode":
            entry["mode"] = "record"
        elif ctype:
            entry["type"] = ctype
        fixtures.append(entry)
    (root / "manifest.yaml").write_text(yaml.safe_dump({"fixtures": fixtures}))
    env = dict(os.environ, CAVEMAN_CCR_DB=str(root / "ccr.db"), CAVEMAN_CACHE_DIR=str(root))
    p = subprocess.run([console_script(), "evals", "run", "--fixtures", str(root)],
                       capture_output=True, env=env, timeout=300)
    assert p.returncode == 1, p.stderr
    assert p.stderr == b""
    return json.loads(p.stdout)


@pytest.mark.parametrize("name", sorted(GRADER_CASES))
def test_grader(grader_report, name):
    expect = GRADER_CASES[name][3]
    f = by_name(grader_report)[name]
    if expect is True:
        assert f["passed"] is True, f.get("failures")
        assert "failures" not in f
    else:
        assert f["passed"] is False
        assert len(f["failures"]) == 1
        assert f["failures"][0].startswith(expect), f["failures"]


def test_every_grader_type_is_tested_passing_and_failing():
    from caveman_engine.evals.graders import GRADERS

    passing = {g[2]["type"] for g in GRADER_CASES.values() if g[3] is True}
    failing = {g[2]["type"] for g in GRADER_CASES.values() if g[3] is not True}
    assert passing == failing == set(GRADERS) == {
        "exact_match", "ratio_threshold", "valid_json", "json_or_toon_round_trip",
        "json_schema", "tool_sequence", "contains", "not_contains", "byte_identical",
        "compressed", "toon_round_trip", "recall_keys"}


def test_one_failure_fails_the_report(grader_report):
    assert grader_report["passed"] is False
    assert all(f["byte_recoverable"] for f in grader_report["fixtures"])


def test_unknown_grader_and_no_graders(cli, tmp_path):
    root = write_fixtures(tmp_path / "fx", {"a.txt": "hello\n"}, """
fixtures:
  - name: unknown
    file: a.txt
    graders: [{type: byte_identical}, {type: bogus_grader}]
  - {name: none, file: a.txt}
  - {name: empty, file: a.txt, graders: []}
  - {name: ok, file: a.txt, graders: [{type: contains, value: hello}]}
  - {name: shorthand, file: a.txt, graders: [byte_identical, compressed]}
  - {name: not-a-mapping, file: a.txt, graders: [[1, 2]]}
""")
    r, doc = run_json(cli, "--fixtures", str(root))
    assert r.returncode == 1 and r.stderr == b""
    assert doc["passed"] is False
    f = by_name(doc)
    assert f["unknown"]["failures"] == ["unknown grader type: bogus_grader"]
    assert f["none"]["failures"] == ["no graders configured"]
    assert f["empty"]["failures"] == ["no graders configured"]
    assert f["ok"]["passed"] is True and "failures" not in f["ok"]
    assert list(f["unknown"])[-1] == "failures"
    assert f["shorthand"]["failures"] == [
        "compressed: output was not compressed (the input passed through)"]
    assert f["not-a-mapping"]["failures"] == ["grader must be a mapping with a type, got [1, 2]"]


# --------------------------------------------------------------------------- probes, modes


def test_probes_retained_and_recoverable(cli, tmp_path):
    root = write_fixtures(tmp_path / "fx", {"rows.json": ROWS}, """
fixtures:
  - name: rows
    file: rows.json
    type: toon
    probes:
      - SKU-1003
      - {value: '"sku": "SKU-1004"', dimension: shape}
      - {value: 'items[12]', dimension: shape}
      - {value: 7, dimension: number}
    graders: [{type: compressed}]
""")
    r, doc = run_json(cli, "--fixtures", str(root))
    assert r.returncode == 0, r.stderr
    f = doc["fixtures"][0]
    assert f["probes"] == [
        {"value": "SKU-1003", "status": "retained"},
        {"value": '"sku": "SKU-1004"', "dimension": "shape", "status": "recoverable"},
        {"value": "items[12]", "dimension": "shape", "status": "retained"},
        {"value": "7", "dimension": "number", "status": "retained"},
    ]
    assert f["probe_summary"] == {"total": 4, "retained": 3, "recoverable": 1, "lost": 0}
    assert doc["probes"] == {
        "total": 4, "retained": 3, "recoverable": 1, "lost": 0,
        "by_dimension": {
            "number": {"total": 1, "retained": 1, "recoverable": 0, "lost": 0},
            "shape": {"total": 2, "retained": 1, "recoverable": 1, "lost": 0},
        },
    }


def test_probe_lost_when_the_original_is_not_recoverable(tmp_path, monkeypatch):
    """A store that hands back other bytes: probes not in the output are lost, and the
    fixture fails (in-process: no real store misbehaves on purpose)."""
    from caveman_engine.engine import Engine
    from caveman_engine.evals import run

    write_fixtures(tmp_path, {"rows.json": ROWS}, """
fixtures:
  - name: rows
    file: rows.json
    type: toon
    probes: [SKU-1003, '"sku": "SKU-1004"']
    graders: [{type: compressed}]
""")
    monkeypatch.setenv("CAVEMAN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(Engine, "retrieve", lambda self, handle, query=None: b"not it")
    doc = run.report(run.run(run.load_manifest(tmp_path)))
    f = doc["fixtures"][0]
    assert doc["passed"] is False
    assert f["byte_recoverable"] is False
    assert [p["status"] for p in f["probes"]] == ["retained", "lost"]
    assert f["failures"] == ["original is not byte-recoverable",
                             'probe lost: "\\"sku\\": \\"SKU-1004\\""']
    assert doc["probes"]["lost"] == 1


def test_record_mode_and_forced_and_detected_types(cli, tmp_path):
    root = write_fixtures(tmp_path / "fx", {"rows.json": ROWS}, """
fixtures:
  - {name: record, file: rows.json, type: toon, mode: record, graders: [{type: byte_identical}]}
  - {name: forced, file: rows.json, type: toon, mode: compress, graders: [{type: compressed}]}
  - {name: detected, file: rows.json, graders: [{type: valid_json}]}
""")
    r, doc = run_json(cli, "--fixtures", str(root))
    assert r.returncode == 0, doc
    f = by_name(doc)
    assert f["record"]["content_type"] == "toon" and f["record"]["ratio"] == 0
    assert f["forced"]["content_type"] == "toon" and f["forced"]["ratio"] > 0
    assert f["detected"]["content_type"] == "json"


def test_quality_fields_are_accepted(cli, tmp_path):
    root = write_fixtures(tmp_path / "fx", {"a.txt": "hello\n"}, """
fixtures:
  - name: a
    file: a.txt
    query: hello
    quality_task: Say hello.
    quality_graders: [{type: llm_judge}]
    graders: [{type: byte_identical}]
""")
    r, doc = run_json(cli, "--fixtures", str(root))
    assert r.returncode == 0 and doc["passed"] is True


# --------------------------------------------------------------------------- manifest errors


@pytest.mark.parametrize("manifest, message", [
    ("fixtures: []\n", "caveman-engine evals run: manifest has no fixtures"),
    ("", "caveman-engine evals run: manifest has no fixtures"),
    ("fixtures:\n", "caveman-engine evals run: manifest has no fixtures"),
    ("other: 1\n", "caveman-engine evals run: manifest has no fixtures"),
    ("fixtures: {a: 1}\n", "caveman-engine evals run: parse manifest: fixtures must be a list"),
    ("- a\n", "caveman-engine evals run: parse manifest: top level must be a mapping with a fixtures list"),
    ("fixtures: [\n", "caveman-engine evals run: parse manifest: "),
    ("fixtures: [{file: a.txt}]\n", "caveman-engine evals run: fixture 1: name is required"),
    ("fixtures: [{name: a}]\n", 'caveman-engine evals run: fixture "a": file is required'),
    ("fixtures: [{name: a, file: a.txt}, {name: a, file: a.txt}]\n",
     'caveman-engine evals run: fixture "a": duplicate name'),
    ("fixtures: [{name: a, file: missing.txt, graders: [{type: compressed}]}]\n",
     'caveman-engine evals run: read fixture "missing.txt": No such file or directory'),
])
def test_manifest_errors(cli, tmp_path, manifest, message):
    root = write_fixtures(tmp_path / "fx", {"a.txt": "hello\n"}, manifest)
    r = cli("evals", "run", "--fixtures", str(root))
    assert r.returncode == 1
    assert r.stdout == b""
    line = r.stderr.decode()
    assert line.startswith(message) and line.endswith("\n") and line.count("\n") == 1, line


def test_missing_manifest(cli, tmp_path):
    r = cli("evals", "run", "--fixtures", str(tmp_path / "nowhere"))
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr == (f"caveman-engine evals run: cannot read {tmp_path / 'nowhere'}"
                        "/manifest.yaml: No such file or directory\n").encode()


@pytest.mark.parametrize("path, message", [
    ("../secret.txt", 'fixture path escapes root: "../secret.txt"'),
    ("sub/../../secret.txt", 'fixture path escapes root: "sub/../../secret.txt"'),
    ("..", 'fixture path escapes root: ".."'),
    ("link.txt", 'fixture path escapes root: "link.txt"'),
    ("linkdir/secret.txt", 'fixture path escapes root: "linkdir/secret.txt"'),
    ("SECRET", 'invalid fixture path "SECRET"'),  # replaced by the absolute path below
    ("sub\\a.txt", 'invalid fixture path "sub\\\\a.txt"'),
    ("", 'invalid fixture path ""'),
])
def test_fixture_path_escapes(cli, tmp_path, path, message):
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret\n")
    if path == "SECRET":
        path, message = str(outside), f'invalid fixture path "{outside}"'
    root = write_fixtures(tmp_path / "fx", {"sub/a.txt": "x\n"}, json.dumps(
        {"fixtures": [{"name": "a", "file": path, "graders": [{"type": "byte_identical"}]}]}))
    (root / "link.txt").symlink_to(outside)
    (root / "linkdir").symlink_to(tmp_path)
    r = cli("evals", "run", "--fixtures", str(root))
    assert (r.returncode, r.stdout) == (1, b"")
    assert r.stderr == f"caveman-engine evals run: {message}\n".encode()


def test_paths_inside_root_are_fine(cli, tmp_path):
    root = write_fixtures(tmp_path / "fx", {"sub/a.txt": "x y\n"}, """
fixtures:
  - {name: a, file: sub/../sub/./a.txt, graders: [{type: byte_identical}]}
  - {name: b, file: inner-link.txt, graders: [{type: exact_match, expected_file: sub/a.txt}]}
""")
    (root / "inner-link.txt").symlink_to(root / "sub" / "a.txt")
    r, doc = run_json(cli, "--fixtures", str(root))
    assert r.returncode == 0 and doc["passed"] is True


@pytest.mark.parametrize("key", ["expected_file", "schema_file"])
def test_grader_file_escapes(cli, tmp_path, key):
    (tmp_path / "secret.txt").write_text("{}")
    grader = {"type": "exact_match" if key == "expected_file" else "json_schema",
              key: "../secret.txt"}
    root = write_fixtures(tmp_path / "fx", {"a.txt": "x\n"}, json.dumps(
        {"fixtures": [{"name": "a", "file": "a.txt", "graders": [grader]}]}))
    r = cli("evals", "run", "--fixtures", str(root))
    assert (r.returncode, r.stdout) == (1, b"")
    assert r.stderr == b'caveman-engine evals run: fixture path escapes root: "../secret.txt"\n'


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize("args, message", [
    (["evals"], "caveman-engine evals: missing COMMAND (one of run, tools)"),
    (["evals", "bogus"], "caveman-engine evals: unknown subcommand: bogus (one of run, tools)"),
    (["evals", "run", "extra"], "caveman-engine evals run: unexpected argument: extra"),
    (["evals", "run", "--fixtures"], "caveman-engine evals run: option --fixtures needs a value"),
    (["evals", "run", "--fixtures", ""],
     "caveman-engine evals run: --fixtures is empty: name a directory"),
    (["evals", "run", "--bogus"], "caveman-engine evals run: no such option: --bogus"),
    (["evals", "run", "--format", "xml"],
     "caveman-engine evals run: --format xml: not one of text, json"),
    (["evals", "--bogus", "run"], "caveman-engine evals: no such option: --bogus"),
])
def test_usage_errors(cli, args, message):
    """Usage errors are exit 2 and one line, as everywhere (no vector pins the reference's
    exit 1 here; docs/cli.md)."""
    r = cli(*args)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", message + "\n")


def test_help_mentions_the_missing_pixel_gate(cli):
    r = cli("evals", "run", "--help")
    assert r.returncode == 0
    out = r.stdout.decode()
    assert "--fixtures DIR" in out and "--format" in out and "pixel" in out
    g = cli("evals", "--help")
    assert g.returncode == 0 and "run" in g.stdout.decode()


def test_group_works_without_the_tools_module(monkeypatch):
    import click

    from caveman_engine.evals import cli as evals_cli

    monkeypatch.setattr(evals_cli.EvalsGroup, "lazy",
                        {"tools": ("caveman_engine.evals.no_such_module", "tools_command")})
    ctx = click.Context(evals_cli.evals)
    assert evals_cli.evals.get_command(ctx, "tools") is None
    assert evals_cli.evals.list_commands(ctx) == ["run"]
    assert evals_cli.evals.get_command(ctx, "run") is evals_cli.run_command


# --------------------------------------------------------------------------- the user's store


def test_user_store_is_untouched(cli, store_dir, tmp_path):
    home = tmp_path / "home"
    r = cli("evals", "run", env={"CAVEMAN_CCR_DB": None, "CAVEMAN_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert not home.exists()
    r = cli("evals", "run")
    assert r.returncode == 0, r.stderr
    assert not (store_dir / "ccr.db").exists()
    assert list(store_dir.iterdir()) == []


def test_existing_store_keeps_its_bytes(cli, store_dir):
    c = cli("compress", "--type", "toon", input=ROWS.encode())
    assert c.returncode == 0
    stats = cli("stats").stdout
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in store_dir.iterdir()}
    assert "ccr.db" in before
    r = cli("evals", "run")
    assert r.returncode == 0, r.stderr
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in store_dir.iterdir()
             if p.name in before}
    assert after == before
    assert cli("stats").stdout == stats
