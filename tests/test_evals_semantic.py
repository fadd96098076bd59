"""``evals tools``' semantic grader: the real WordLlama model (offline, from the wheel), on real
MCP catalogs of tests/corpus where a question shares no word with the right tool."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("wordllama") is None:  # not imported here: it configures logging
    pytest.skip("wordllama is not installed (pip install 'caveman-engine[evals]')",
                allow_module_level=True)

from caveman_engine.catalog import envelope  # noqa: E402
from caveman_engine.evals import bfcl, lexical, semantic, tools  # noqa: E402

CASES = Path(__file__).parent / "fixtures" / "semantic" / "cases.jsonl"
# the fixture's cases whose right tool shares no indexed word with the question
NO_SHARED_WORD = {"elevation", "coffee", "forget"}


@pytest.fixture(scope="module")
def cases() -> dict[str, bfcl.Case]:
    (loaded,) = bfcl.resolve(str(CASES))
    return {c.id: c for c in loaded}


def _tool(case, name):
    return next(t for t in envelope.iter_tools(case.catalog) if t.name == name)


def test_fixture_questions_share_no_word_with_the_right_tool(cases):
    for cid, case in cases.items():
        shared = set(lexical.words(case.query)) & set(
            lexical.words(lexical.tool_text(_tool(case, case.expected[0]))))
        assert (not shared) == (cid in NO_SHARED_WORD), (cid, shared)


def test_semantic_grader_finds_what_bm25_misses(cases):
    lex, sem = lexical.LexicalGrader(), semantic.SemanticGrader()
    for cid, case in cases.items():
        assert sem.choose(case, case.catalog) == case.expected[0], cid
        if cid in NO_SHARED_WORD:
            # every BM25 score is 0, so the lexical pick is the catalog's first tool
            ranked = lexical.rank(case.query, case.catalog)
            assert {s for _, s in ranked} == {0.0}, cid
            assert lex.choose(case, case.catalog) == ranked[0][0] != case.expected[0], cid
        else:
            assert lex.choose(case, case.catalog) == case.expected[0], cid


def test_ranking_is_by_cosine_of_the_plain_word_texts(cases):
    case = cases["elevation"]
    emb = semantic.embedder()
    ranked = semantic.rank(case.query, case.catalog)
    names = [t.name for t in envelope.iter_tools(case.catalog)]
    assert sorted(n for n, _ in ranked) == sorted(names)
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    tool = _tool(case, "maps_elevation")
    q = emb.model.embed([semantic.plain_words(case.query)], norm=True)[0]
    t = emb.model.embed([semantic.plain_words(lexical.tool_text(tool))], norm=True)[0]
    assert ranked[0] == ("maps_elevation", pytest.approx(float(q @ t), abs=1e-6))
    assert ranked[0][1] == pytest.approx(0.3012, abs=1e-4)  # measured with wordllama 0.4.0


def test_plain_words():
    assert semantic.plain_words("get_user_id") == "get user id"
    assert semantic.plain_words("getUserID, math.hypot(x)") == "get User ID, math hypot(x)"
    assert semantic.plain_words("HTTPServer v2") == "HTTP Server v 2"


def test_embeddings_are_deterministic():
    texts = ["how high above sea level is Denver?", "Get elevation data for locations", "x"]
    a, b = semantic.Embedder(semantic.embedder().model), semantic.Embedder(
        semantic.embedder().model)
    first = [a.vector(t).tobytes() for t in texts]
    assert [b.vector(t).tobytes() for t in reversed(texts)][::-1] == first  # order-free
    assert [a.vector(t).tobytes() for t in texts] == first
    fresh = semantic.Embedder(semantic.load_model())  # a second load of the model
    assert [fresh.vector(t).tobytes() for t in texts] == first
    for t in texts:
        assert float(a.vector(t) @ a.vector(t)) == pytest.approx(1.0)


def test_loading_the_model_leaves_logging_as_it_was():
    code = ("import logging, sys\n"
            "root = logging.getLogger()\n"
            "if sys.argv[1] == 'grader':\n"
            "    from caveman_engine.evals import semantic\n"
            "    semantic.load_model()\n"
            "else:\n"
            "    import wordllama.inference\n"
            "print(len(root.handlers), root.level)\n")
    runs = {how: subprocess.run([sys.executable, "-c", code, how], capture_output=True,
                                text=True, timeout=120) for how in ("grader", "plain")}
    assert runs["plain"].stdout.split() == ["1", "20"]  # a plain import adds a handler, INFO
    assert runs["grader"].stdout.split() == ["0", "30"], runs["grader"].stderr


def test_text_without_tokens_scores_zero_and_keeps_catalog_order(cases):
    case = cases["coffee"]
    ranked = semantic.rank("", case.catalog)
    assert [n for n, _ in ranked] == [t.name for t in envelope.iter_tools(case.catalog)]
    assert {s for _, s in ranked} == {0.0}


def test_runner_with_both_graders(cases):
    runner = tools.Runner(["toolschema-safe"], [lexical.LexicalGrader(), semantic.SemanticGrader()])
    st = runner.run_dataset("semantic", list(cases.values()))
    assert st.choice == {"lexical": 2, "semantic": 5} and st.top1 == 2
    rep = tools.report([st], ["toolschema-safe"], ["lexical", "semantic"], "o200k_base", True)
    assert rep["grader"] == "lexical" and rep["graders"] == ["lexical", "semantic"]
    row = rep["total"]
    assert row["by_grader"] == {"lexical": {"top1": 2, "top1_percent": 40.0},
                                "semantic": {"top1": 5, "top1_percent": 100.0}}
    for g, before in (("lexical", 2), ("semantic", 5)):
        c = row["types"]["toolschema-safe"]["by_grader"][g]
        assert c["top1"] == before - c["lost"] + c["gained"]
        assert c["lost"] + c["gained"] <= c["flips"]
    assert row["types"]["toolschema-safe"]["top1"] == row["types"]["toolschema-safe"][
        "by_grader"]["lexical"]["top1"]


# --------------------------------------------------------------------------- console script


def test_console_script_both_graders_json(cli):
    r = cli("evals", "tools", str(CASES), "--grader", "both", "--type", "toolschema-max",
            "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["grader"] == "lexical" and rep["graders"] == ["lexical", "semantic"]
    (ds,) = rep["datasets"]
    assert ds["name"] == "cases" and ds["cases"] == 5 and ds["valid"] == 1
    assert ds["by_grader"]["lexical"]["top1"] == ds["top1"] == 2
    assert ds["by_grader"]["semantic"] == {"top1": 5, "top1_percent": 100.0}
    c = ds["types"]["toolschema-max"]["by_grader"]["semantic"]
    assert c["top1"] == 5 - c["lost"] + c["gained"]


def test_console_script_default_is_both_and_text_has_the_grader_table(cli):
    r = cli("evals", "tools", str(CASES), "--type", "toolschema-safe")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "top-1 by grader" in out
    lines = out.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("cases ") and "lexical" in line)
    assert lines[i].split()[:4] == ["cases", "lexical", "2", "40.0%"]
    assert lines[i + 1].split()[:3] == ["semantic", "5", "100.0%"]


def test_console_script_semantic_only(cli):
    r = cli("evals", "tools", str(CASES), "--grader", "semantic", "--type", "toolschema",
            "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["grader"] == "semantic" and rep["graders"] == ["semantic"]
    assert rep["total"]["top1"] == 5


def test_console_script_offline(cli):
    """No network namespace (unshare -rn) and HF_HUB_OFFLINE: the model loads from the wheel."""
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a network namespace here")
    env = {k: v for k, v in os.environ.items()}
    env.update(HF_HUB_OFFLINE="1", HOME=os.environ.get("TMPDIR", "/tmp") + "/no-such-home")
    r = subprocess.run(["unshare", "-rn", str(Path(sys.executable).with_name("caveman-engine")),
                        "evals", "tools", str(CASES), "--grader", "semantic", "--type",
                        "toolschema", "--format", "json"], capture_output=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total"]["top1"] == 5
    assert r.stderr == b""  # nothing logged (wordllama's basicConfig is undone)


# Runs the console script with an import hook that makes wordllama not importable.
_WITHOUT_WORDLLAMA = r"""
import sys

class NoWordLlama:
    def find_spec(self, name, path=None, target=None):
        if name == "wordllama" or name.startswith("wordllama."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoWordLlama())
sys.argv[0] = "caveman-engine"
from caveman_engine.launcher import main
main()
"""


def test_without_wordllama(cli_env):
    def run(*args):
        return subprocess.run([sys.executable, "-c", _WITHOUT_WORDLLAMA, "evals", "tools",
                               str(CASES), "--type", "toolschema", "--format", "json", *args],
                              capture_output=True, env=cli_env, timeout=120)

    r = run()  # the default falls back to the lexical grader
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["graders"] == ["lexical"] and rep["total"]["top1"] == 2
    for grader in ("semantic", "both"):
        r = run("--grader", grader)
        assert r.returncode == 1 and r.stdout == b""  # an error, not a usage error
        assert r.stderr.decode() == ("caveman-engine evals tools: the semantic grader needs "
                                     "wordllama: pip install 'caveman-engine[evals]'\n")


_MODULES_AFTER = r"""
import sys
out = sys.argv.pop(1)
sys.argv[0] = "caveman-engine"
from caveman_engine.launcher import main
try:
    main()
finally:
    with open(out, "w") as f:
        f.write("\n".join(sorted(sys.modules)))
"""


def test_lexical_grader_does_not_load_the_model(cli_env, tmp_path):
    out = tmp_path / "modules.txt"
    r = subprocess.run([sys.executable, "-c", _MODULES_AFTER, str(out), "evals", "tools",
                        str(CASES), "--grader", "lexical", "--type", "toolschema"],
                       capture_output=True, env=cli_env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "top-1 by grader" not in r.stdout.decode()  # one grader: one table
    loaded = set(out.read_text().split())
    assert not loaded & {"wordllama", "numpy", "tokenizers", "safetensors"}
    assert "caveman_engine.evals.tools" in loaded
