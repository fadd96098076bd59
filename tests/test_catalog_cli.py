"""measure / check / diff through the console script, exit codes included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caveman_engine.catalog import envelope
from caveman_engine.compressors import toolschema_safe
from caveman_engine.tokens import make_counter

from .conftest import count_tokens

CORPUS = Path(__file__).parent / "corpus"

CATALOG = [
    {"name": "small", "description": "S", "inputSchema": {"type": "object"}},
    {"name": "big", "description": "A much longer description of the big tool with many words.",
     "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "title": "Q"}}}},
    {"name": "mid", "description": "Medium one here.", "inputSchema": {"type": "object", "properties": {}}},
]


def _tokens(element) -> int:
    return make_counter(None).count(json.dumps(element, separators=(",", ":"), ensure_ascii=False).encode())


@pytest.fixture
def catalog(tmp_path) -> Path:
    p = tmp_path / "tools.json"
    p.write_text(json.dumps(CATALOG, indent=2))
    return p


def test_measure_table_sorted_by_cost(cli, catalog):
    r = cli("measure", str(catalog))
    assert r.returncode == 0, r.stderr
    counts = {t["name"]: _tokens(t) for t in CATALOG}
    total = sum(counts.values())
    order = sorted(counts, key=lambda n: -counts[n])
    assert order == ["big", "mid", "small"]
    expected = ["tool     tokens  % of total"]
    for n in order:
        expected.append(f"{n:<5}  {counts[n]:>8}  {100 * counts[n] / total:>9.1f}%")
    expected.append(f"total  {total:>8}  {100.0:>9.1f}%")
    expected.append(f"3 tools, {total} tokens (o200k_base)")
    data = catalog.read_bytes()
    minified = json.dumps(json.loads(data), separators=(",", ":"), ensure_ascii=False).encode()
    expected.append(f"whole catalog: {count_tokens(data)} tokens as written, "
                    f"{count_tokens(minified)} minified")
    assert r.stdout.decode() == "\n".join(expected) + "\n"


def test_measure_json_stdin_and_envelopes(cli):
    openai = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                "parameters": t["inputSchema"]}} for t in CATALOG]
    r = cli("measure", "-", "--format", "json", input=json.dumps({"tools": openai}).encode())
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    counts = {t["function"]["name"]: _tokens(t) for t in openai}
    assert out["tokenizer"] == "o200k_base"
    assert out["total"] == sum(counts.values())
    assert [(t["name"], t["tokens"]) for t in out["tools"]] == sorted(counts.items(), key=lambda x: -x[1])
    assert abs(sum(t["percent"] for t in out["tools"]) - 100) < 0.05
    # default source is stdin too
    anthropic = [{"name": t["name"], "input_schema": t["inputSchema"]} for t in CATALOG]
    r = cli("measure", "--format", "json", input=json.dumps(anthropic).encode())
    assert [t["name"] for t in json.loads(r.stdout)["tools"]] == ["big", "mid", "small"]


def test_measure_with_type_shows_after(cli, catalog):
    r = cli("measure", str(catalog), "--type", "toolschema-safe", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    safe_doc = json.loads(toolschema_safe.compress(catalog.read_bytes()))
    after = {t["name"]: _tokens(t) for t in safe_doc}
    assert {t["name"]: t["after"] for t in out["tools"]} == after
    assert out["total_after"] == sum(after.values()) < out["total"]


@pytest.mark.parametrize("data,needle", [(b"{bad", "invalid JSON"), (b'{"a":1}', "no tools found"), (b"", "invalid JSON")])
def test_measure_bad_input_exit_2(cli, data, needle):
    r = cli("measure", "-", input=data)
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode().startswith("caveman-engine measure: stdin: ")
    assert needle in r.stderr.decode()
    assert r.stderr.count(b"\n") == 1


def test_measure_missing_file_and_unknown_rule(cli, tmp_path, catalog):
    r = cli("measure", str(tmp_path / "none.json"))  # a missing FILE is exit 1 (docs/cli.md)
    assert r.returncode == 1 and b"cannot read" in r.stderr
    r = cli("measure", str(catalog), "--disable-rule", "bogus")
    assert r.returncode == 2
    assert r.stderr.startswith(b"caveman-engine measure: --disable-rule bogus: not one of ")


# ----------------------------------------------------------------------------- check

def test_check_update_then_pass_then_fail(cli, catalog, tmp_path):
    base = tmp_path / "baseline.json"
    r = cli("check", str(catalog), "--baseline", str(base), "--update-baseline")
    assert r.returncode == 0, r.stderr
    saved = json.loads(base.read_text())
    counts = {t["name"]: _tokens(t) for t in CATALOG}
    assert saved == {"version": 1, "tokenizer": "o200k_base", "total": sum(counts.values()), "tools": counts}
    r = cli("check", str(catalog), "--baseline", str(base))
    assert r.returncode == 0
    assert r.stdout.decode().startswith(f"check OK: {sum(counts.values())} tokens (baseline {sum(counts.values())}, +0, +0.0%)")

    grown = json.loads(json.dumps(CATALOG))
    grown[2]["description"] += " And now it grew by a whole sentence of extra words."
    g = tmp_path / "grown.json"
    g.write_text(json.dumps(grown))
    delta = _tokens(grown[2]) - counts["mid"]
    assert delta > 0
    r = cli("check", str(g), "-b", str(base))
    assert r.returncode == 1
    lines = r.stdout.decode().splitlines()
    assert lines[0].startswith("check FAILED: ")
    assert any(ln.startswith(f"  over budget: total grew by {delta} tokens") for ln in lines)
    assert f"  grew    mid: {counts['mid']} -> {counts['mid'] + delta} (+{delta})" in lines
    # within a generous budget, in percent or tokens
    assert cli("check", str(g), "-b", str(base), "--max-increase", "50%").returncode == 0
    assert cli("check", str(g), "-b", str(base), "--max-increase", str(delta)).returncode == 0
    assert cli("check", str(g), "-b", str(base), "--max-increase", str(delta - 1)).returncode == 1
    j = cli("check", str(g), "-b", str(base), "--format", "json")
    out = json.loads(j.stdout)
    assert j.returncode == 1 and out["ok"] is False
    assert out["grown"] == [{"name": "mid", "baseline": counts["mid"], "tokens": counts["mid"] + delta}]


def test_check_absolute_caps_new_and_removed_tools(cli, catalog, tmp_path):
    base = tmp_path / "baseline.json"
    assert cli("check", str(catalog), "-b", str(base), "--update-baseline").returncode == 0
    counts = {t["name"]: _tokens(t) for t in CATALOG}
    total = sum(counts.values())
    assert cli("check", str(catalog), "-b", str(base), "--max-total", str(total)).returncode == 0
    r = cli("check", str(catalog), "-b", str(base), "--max-total", str(total - 1))
    assert r.returncode == 1 and f"total {total} tokens exceeds --max-total {total - 1}".encode() in r.stdout
    r = cli("check", str(catalog), "-b", str(base), "--max-tool", str(counts["big"] - 1))
    assert r.returncode == 1 and b"tool big has" in r.stdout
    swapped = [CATALOG[0], dict(CATALOG[2], name="other")]
    s = tmp_path / "s.json"
    s.write_text(json.dumps(swapped))
    r = cli("check", str(s), "-b", str(base))
    assert r.returncode == 0  # smaller in total
    text = r.stdout.decode()
    assert f"  new     other: {counts['mid']}" in text and f"  removed big: was {counts['big']}" in text


@pytest.mark.parametrize("problem", ["missing", "not_json", "not_baseline", "tokenizer", "increase", "catalog"])
def test_check_bad_input_exit_2(cli, catalog, tmp_path, problem):
    base = tmp_path / "baseline.json"
    args = ["check", str(catalog), "-b", str(base)]
    if problem == "not_json":
        base.write_text("{")
    elif problem == "not_baseline":
        base.write_text('{"tools": [1]}')
    elif problem == "tokenizer":
        base.write_text('{"version":1,"tokenizer":"cl100k_base","total":1,"tools":{"big":1}}')
    elif problem == "increase":
        base.write_text('{"version":1,"tokenizer":"o200k_base","total":1,"tools":{"big":1}}')
        args += ["--max-increase", "five"]
    elif problem == "catalog":
        base.write_text('{"version":1,"tokenizer":"o200k_base","total":1,"tools":{"big":1}}')
        args[1] = str(tmp_path / "absent.json")
    r = cli(*args)
    assert r.returncode == 2, r.stdout
    prefix = ("caveman-engine check: cannot read " if problem in ("catalog", "missing")
              else "caveman-engine check: ")
    assert r.stderr.decode().startswith(prefix) and r.stderr.count(b"\n") == 1


# ----------------------------------------------------------------------------- diff

def test_diff_per_tool_unified(cli, catalog):
    r = cli("diff", "--type", "toolschema-safe", str(catalog), "--exit-code")
    assert r.returncode == 1, r.stderr
    assert r.stdout.decode() == (
        "--- a/big\n+++ b/big\n@@ -3,7 +3,6 @@\n"
        '   "inputSchema": {\n     "properties": {\n       "q": {\n-        "title": "Q",\n         "type": "string"\n'
        "       }\n     },\n"
    )
    assert r.stderr == b"diff: 1 of 3 tools would change\n"
    assert cli("diff", "--type", "toolschema-safe", str(catalog)).returncode == 0


def test_diff_nothing_changes(cli, catalog):
    minified = toolschema_safe.compress(catalog.read_bytes())
    r = cli("diff", "--type", "toolschema-safe", "--exit-code", "-", input=minified)
    assert r.returncode == 0 and r.stdout == b""
    # formatting only (pretty in, compact out) is not a change
    pretty = json.dumps(json.loads(minified), indent=2).encode()
    r = cli("diff", "--type", "toolschema-safe", "--exit-code", "-", input=pretty)
    assert r.returncode == 0 and r.stdout == b""
    assert r.stderr == b"diff: 0 of 3 tools would change\n"


def test_diff_rule_options(cli, catalog):
    r = cli("diff", "--type", "toolschema-safe", "--disable-rule", "titles", "--exit-code", str(catalog))
    assert r.returncode == 0 and r.stdout == b""
    r = cli("diff", "--type", "toolschema-safe", "--rules", "titles", "--exit-code", str(catalog))
    assert r.returncode == 1
    r = cli("diff", "--type", "toolschema-safe", str(catalog), env={"CAVEMAN_SAFE_RULES": "-titles"})
    assert r.stdout == b""


def test_diff_other_types_and_errors(cli, catalog):
    r = cli("diff", "--type", "toolschema", str(CORPUS / "fetch.tools.json"), "--exit-code")
    assert r.returncode == 1 and r.stdout.startswith(b"--- a/fetch\n+++ b/fetch\n")
    r = cli("diff", "--type", "nope", str(catalog))
    assert r.returncode == 2 and r.stderr.startswith(
        b"caveman-engine diff: --type nope: unknown or unavailable content type")
    r = cli("diff", str(catalog))
    assert r.returncode == 2  # --type is required


def test_diff_matches_compress(cli):
    data = (CORPUS / "git.tools.json").read_bytes()
    r = cli("diff", "--type", "toolschema-safe", "-", input=data)
    before = envelope.load(data)
    after = envelope.load(toolschema_safe.compress(data))
    changed = [a["name"] for a, b in zip(before, after) if a != envelope.load(envelope.dumps(b))]
    heads = [ln[6:] for ln in r.stdout.decode().splitlines() if ln.startswith("--- a/")]
    assert heads == changed and changed


def test_measure_reports_savings_against_the_minified_catalog(cli):
    """What the rewrite itself saves: against the minified catalog, not the pretty-printed
    file (minifying is free)."""
    import json as _json

    from .conftest import count_tokens, CORPUS, count_tokens

    path = CORPUS / "github.tools.json"
    data = path.read_bytes()
    minified = _json.dumps(_json.loads(data), separators=(",", ":"), ensure_ascii=False).encode()
    rewritten = cli("compress", "--type", "toolschema-max", input=data).stdout
    r = cli("measure", "--format", "json", "--type", "toolschema-max", str(path))
    assert r.returncode == 0, r.stderr
    whole = _json.loads(r.stdout)["catalog"]
    assert whole["as_written"] == count_tokens(data)
    assert whole["minified"] == count_tokens(minified)
    assert whole["after"] == count_tokens(rewritten)
    expected = (whole["minified"] - whole["after"]) / whole["minified"]
    assert whole["saved_vs_minified"] == round(expected, 4)
    text = cli("measure", "--type", "toolschema-max", str(path)).stdout.decode()
    assert text.splitlines()[-1] == (
        f"whole catalog: {whole['as_written']} tokens as written, {whole['minified']} minified, "
        f"{whole['after']} after the rewrite: {100 * expected:.1f}% saved against minified")


def test_diff_json_and_quiet(cli):
    from .conftest import CORPUS

    path = str(CORPUS / "time.tools.json")
    text = cli("diff", "--type", "toolschema-safe", path)
    r = cli("diff", "--type", "toolschema-safe", "--format", "json", "-q", path)
    assert r.returncode == 0 and r.stderr == b""
    doc = json.loads(r.stdout)
    assert doc["type"] == "toolschema-safe" and doc["changed"] is True
    assert (doc["tools_total"], doc["tools_changed"]) == (2, 2)
    assert "".join(doc["hunks"]).encode() == text.stdout
    assert text.stderr == b"diff: 2 of 2 tools would change\n"
