"""Whole-sentence selection (``caveman_engine.catalog.sentences``) and the cut scanner: no
description that ``toolschema-max`` or ``toolschema-safe`` writes for the corpus holds a
sentence cut mid-way or glued to another one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from caveman_engine.catalog import envelope, sentences
from caveman_engine.catalog import schema as js
from caveman_engine.compressors import toolschema, toolschema_max, toolschema_safe

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.glob("*.tools.json")) + sorted((CORPUS / "formats").glob("*.json"))
FIXTURES = Path(__file__).parent / "fixtures" / "catalogs"
AGENT = FIXTURES / "agent-tools.tools.json"

# ----------------------------------------------------------------------------- the scanner

_WORD = re.compile(r"[A-Za-z0-9]+")
# Words the word-level rules of toolschema-max may delete inside a kept sentence: articles and
# fillers (prose guard), slot openers (slot_verbs, restated_type), "This tool" (self_reference),
# auxiliaries (copula), "specified"/"given"/"provided" (filler_adjectives), the long forms of
# the stock phrases (phrases), "optional" markers (restated_facts). A sentence cut mid-way loses
# the content words of its end, which are none of these.
DROPPABLE = frozenset("""
a an the just really basically actually simply quite very essentially literally please kindly
you can i will we let me lets ll
specifies indicates determines defines denotes represents describes sets controls configures
contains flag boolean that which indicating specifying determining controlling to indicate
specify determine control whether if
list array of string representing containing integer number specifying dictionary object
this function tool api method endpoint
is are was were be been being will has have had
specified given provided
such as e g in order well prior not supplied passed set or
optional
""".split())
# Words the phrase rules write in place of a longer phrase ("such as" -> "like").
INSERTED = frozenset("like to and before omitted whether".split())
_PAREN_NOTE = re.compile(r"\s*\((?:the\s+)?(?:optional|default|defaults\s+to|default\s+is)\b[^()]*\)", re.I)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(_PAREN_NOTE.sub("", text))]


def whole_of(unit: str, original: str) -> bool:
    """``unit`` is ``original`` minus droppable words (and plus the phrase rules' short forms):
    every word of ``unit`` is found in order in ``original``, every word skipped is droppable."""
    out, src = _words(unit), _words(original)
    if not out:
        return True
    i = 0
    for w in out:
        j = i
        while j < len(src) and src[j] != w and src[j] in DROPPABLE:
            j += 1
        if j < len(src) and src[j] == w:
            i = j + 1
        elif w not in INSERTED:
            return False
    return all(w in DROPPABLE for w in src[i:])


def _descriptions(tool: envelope.Tool) -> list[str]:
    out = []
    for holder in (tool.element, tool.container):
        if isinstance(holder.get("description"), str):
            out.append(holder["description"])
    for _, s in tool.schemas():
        for n in js.nodes(s):
            if isinstance(n.get("description"), str):
                out.append(n["description"])
    return out


def cuts(before, after) -> list[tuple[str, str]]:
    """``[(tool, unit)]``: units of ``after``'s descriptions that are no whole unit of any
    description of the same tool in ``before``."""
    found = []
    for x, y in zip(envelope.iter_tools(before), envelope.iter_tools(after), strict=True):
        pool = [u for d in _descriptions(x) for u in sentences.split(d)]
        for d in _descriptions(y):
            for u in sentences.split(d):
                if u not in pool and not any(whole_of(u, p) for p in pool):
                    found.append((x.name, u))
    return found


@pytest.mark.parametrize("path", FILES + sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
@pytest.mark.parametrize("mod", [toolschema_max, toolschema_safe], ids=lambda m: m.CONTENT_TYPE)
def test_no_sentence_cut_in_the_corpus(mod, path):
    raw = path.read_bytes()
    out = mod.compress(raw)
    assert out is not None
    assert cuts(envelope.load(raw), envelope.load(out)) == []


def test_the_scanner_finds_the_reducers_cuts():
    """toolschema's 80-byte lead cap, run on the agent fixture, leaves cut sentences: the
    scanner reports them (so it can fail)."""
    raw = AGENT.read_bytes()
    found = cuts(envelope.load(raw), envelope.load(toolschema.compress(raw)))
    # the lead cut at 80 bytes and glued to the next kept sentence
    assert any(t == "Bash" and u.startswith("Runs a shell command in a persistent bash session, "
                                            "with an optional timeout, Usage notes:") for t, u in found)


@pytest.mark.parametrize("unit,original,ok", [
    ("Returns list of users.", "Returns a list of the users.", True),
    ("User ID (like 42).", "The user ID (such as 42).", True),
    ("- End git commit messages", "- End git commit messages with a blank line.", False),
    ("on existing record using The record must already exist.", "Updates a field on an existing record using its id.", False),
    ("Command argument required", "The command argument is required.", True),
])
def test_whole_of(unit, original, ok):
    assert whole_of(unit, original) is ok


# ----------------------------------------------------------------------------- splitting

@pytest.mark.parametrize("text,expected", [
    ("Get a user. Use it, e.g. for admins. Works with v1.2 and a.json files.",
     ["Get a user.", "Use it, e.g. for admins.", "Works with v1.2 and a.json files."]),
    ("See https://x.example/a.html. Then go.", ["See https://x.example/a.html.", "Then go."]),
    ("Mr. Smith, i.e. Rome. Stop! Go? Yes. Fonts, etc. Done.",
     ["Mr. Smith, i.e. Rome.", "Stop!", "Go?", "Yes.", "Fonts, etc.", "Done."]),
    ("**3. Large service:**\n4. Next", ["**3. Large service:**", "4. Next"]),
    ("A wrapped\nsentence goes on. Next.", ["A wrapped\nsentence goes on.", "Next."]),
    ("Notes:\n- first item. Two sentences.\n  continued\n- second", ["Notes:", "- first item. Two sentences.\n  continued", "- second"]),
    ("Intro.\n```\ncode. Here\n```\n| a | b |\n| c | d |\n## Head\nText.",
     ["Intro.", "```\ncode. Here\n```", "| a | b |\n| c | d |", "## Head", "Text."]),
    ("1. one\n2) two\n* three", ["1. one", "2) two", "* three"]),
    # a closing "**" belongs to its sentence: the bold lead-in is a sentence of its own
    ("**Don't peek.** A fork's result has a path. Read it.",
     ["**Don't peek.**", "A fork's result has a path.", "Read it."]),
])
def test_split(text, expected):
    assert sentences.split(text) == expected


def test_units_join_back():
    text = "Lead one. Lead two.\n\nUsage:\n- a\n- b\n\nEnd."
    us = sentences.units(text)
    assert "".join(s + u for s, u in us) == text


# ----------------------------------------------------------------------------- selection

LONG_LEAD = ("Creates a new record in the table you name, with the fields you pass and the "
             "owner set to the caller of the API.")


def test_the_lead_is_kept_whole_however_long():
    text = LONG_LEAD + " It is stored at once. It goes to the table's own region. The id must be unique."
    assert sentences.select(text) == LONG_LEAD + " The id must be unique."


def test_up_to_three_sentences_lose_only_boilerplate_and_notes():
    text = LONG_LEAD + " It is stored at once, in the table's own region. Optional."
    assert sentences.select(text) == LONG_LEAD + " It is stored at once, in the table's own region."
    assert sentences.select(text, frozenset({"it is stored at once in the table s own region"})) == LONG_LEAD
    assert sentences.select(text + " It goes to a region.") == LONG_LEAD  # four: selected


@pytest.mark.parametrize("sentence", [
    "Never pass a password here.", "Always quote paths.", "Do not retry.", "Don't retry.",
    "Avoid huge pages.", "IMPORTANT: this deletes data.", "Prefer the batch endpoint.",
    "Use search instead.", "Call list first before this.", "Run it after the import.",
    "Fails when the file is open.", "Pass a token if you have one.", "Skipped unless forced.",
    "Files up to 5 MB are read.", "Default: 8080.", "Times out after 30 seconds.",
])
def test_instruction_sentences_are_kept(sentence):
    text = LONG_LEAD + " Some context about the table follows here. " + sentence + " More context."
    assert sentences.select(text) == LONG_LEAD + " " + sentence


@pytest.mark.parametrize("sentence", [
    "Use the topic parameter to narrow the results.",   # a sentence opening with its verb
    "Batch several URLs in one call.",
    "Clearly say which rows you want.",                 # an adverb before the verb
    "To end the loop, call this tool with stop set.",   # its purpose first
    "- Briefly describe the change you want",           # a list item, adverb first
])
def test_imperative_sentences_are_instructions(sentence):
    assert sentences.is_instruction(sentence)
    text = LONG_LEAD + " Some context about the table follows here. " + sentence + " More context."
    assert sentence in sentences.select(text)


@pytest.mark.parametrize("sentence", [
    "Some context about the table follows here.", "Usually the table is small.",
    "Uses the cache.", "To the table belong its rows.", "- Images are shown as pictures",
])
def test_statements_are_no_instructions(sentence):
    assert not sentences.is_instruction(sentence)


def test_a_nested_list_keeps_its_indentation():
    text = (LONG_LEAD + " Some context about the table follows here.\n\n"
            "Steps:\n- Check the table first:\n  - Run the count query\n  - Some sample rows\n"
            "- Write the rows")
    assert sentences.select(text) == (
        LONG_LEAD + "\n\nSteps:\n- Check the table first:\n  - Run the count query\n"
        "  - Some sample rows\n- Write the rows")


def test_no_empty_description_and_optional_lead():
    text = "Optional. " + LONG_LEAD + " Some background. Not needed here for anything."
    assert sentences.select(text) == LONG_LEAD
    only_notes = "Optional. " + "Background that says nothing more at all, " * 4 + "really."
    assert sentences.select(only_notes) == "Background that says nothing more at all, " * 4 + "really."


def test_boilerplate_opener_goes_and_the_distinctive_sentence_stays():
    opener = "This endpoint is part of the Acme Messaging REST API, version 2010-04-01, beta."
    tools = [{"name": f"t{i}", "description": f"{opener} Fetches the resource number {i} of the account, "
              f"with its links and its status. Pagination follows the usual rules of the service.",
              "inputSchema": {"type": "object"}} for i in range(8)]
    shared = sentences.boilerplate(t["description"] for t in tools)
    assert sentences.normal(opener) in shared
    out = json.loads(toolschema_max.compress(json.dumps(tools).encode()))
    assert len({t["description"] for t in out}) == 8
    assert out[3]["description"].startswith("Fetches resource number 3 of account")
    assert "Acme" not in out[3]["description"]


def test_boilerplate_needs_many_tools():
    opener = "This endpoint is part of the Acme Messaging REST API."
    assert sentences.boilerplate([opener + " A.", opener + " B."]) == frozenset()
    descs = [opener + f" Tool {i}." for i in range(3)] + [f"Other {i}." for i in range(10)]
    assert sentences.normal(opener) not in sentences.boilerplate(descs)  # 3 of 13 < 25 %
    assert sentences.normal(opener) in sentences.boilerplate(descs[:3] + descs[3:8])


def test_list_items_under_an_instruction_heading_and_headings_of_kept_items():
    text = (LONG_LEAD + "\n\nWhen to use this tool:\n- Breaking down big tasks\n- Planning work\n\n"
            "Background:\n- Some history of the table\n- Its first users\n\n"
            "## Limits\n\nRows are capped at 500 rows a call.\n\n## History\n\nIt was built long ago.")
    assert sentences.select(text) == (
        LONG_LEAD + "\n\nWhen to use this tool:\n- Breaking down big tasks\n- Planning work\n\n"
        "## Limits\n\nRows are capped at 500 rows a call.")


def test_required_is_no_optional_note():
    text = LONG_LEAD + " Some context about it. More context about it here. Required."
    assert sentences.select(text) == LONG_LEAD + " Required."


def test_short_descriptions_stay_whole():
    text = "Gets a user. Returns the profile."
    assert sentences.select(text) == text


# ----------------------------------------------------------------------------- the agent fixture

# Lines of the fixture's tool descriptions that state a fact and instruct nothing (the author's
# reading, not the selector's): the only list items toolschema-max may drop.
DESCRIPTIVE = {
    "- Output is numbered like cat -n: line numbers start at 1.",
    "- Images (PNG, JPG) are shown to you visually, since the model is multimodal.",
    "- Notebooks (.ipynb) come back with every cell and its outputs.",
    "- An empty existing file gives a system reminder in place of its contents.",
    '- The pattern is a full regular expression (like "log.*Error" or "function\\\\s+\\\\w+").',
    '- Output modes: "content" shows the matching lines, "files_with_matches" (the default) only the file paths, "count" the number of matches per file.',
}


def test_agent_tools_keep_every_instruction_line():
    raw = AGENT.read_bytes()
    before = envelope.load(raw)
    after = envelope.load(toolschema_max.compress(raw))
    lost = []
    for x, y in zip(envelope.iter_tools(before), envelope.iter_tools(after), strict=True):
        kept = sentences.split(y.container["description"])
        for line in x.container["description"].split("\n"):
            line = line.strip()
            if not re.match(r"(?:-|\d+\.) ", line) or line in DESCRIPTIVE:
                continue
            if not any(whole_of(k.strip(), line) and _words(k) for k in kept):
                lost.append((x.name, line))
    assert lost == []
    bash = envelope.iter_tools(after)[0].container["description"]
    assert bash.rstrip(".").endswith("End git commit messages with blank line followed by co-author trailer")
    count = __import__("caveman_engine.tokens", fromlist=["make_counter"]).make_counter(None).count
    assert count(toolschema_max.compress(raw)) < count(json.dumps(json.loads(raw), separators=(",", ":")).encode())


# ----------------------------------------------------------------------------- Claude Code

# What makes a line of Claude Code's tool descriptions an instruction, by the test's own
# reading (independent of the selector's rules): an emphasised rule word, or a sentence or list
# item that opens with "never", "always", "do not", "only", "prefer" or "use".
_CC_RULE = re.compile(r"\b(?:NEVER|ALWAYS|MUST|IMPORTANT|CRITICAL|DO NOT)\b|"
                      r"^(?:[-*]\s+|\d+\.\s+)?(?:Never|Always|Do not|Don't|Only|Prefer|Use)\b")


@pytest.fixture(scope="module")
def claude_code_catalog(tmp_path_factory) -> bytes:
    """The tool catalog the installed Claude Code sends with its first request."""
    from tests.fixtures import claude_code
    from tests.fixtures.proxy.harness import Harness
    from caveman_engine.proxy import catalog

    claude_code.require()
    h = Harness(proxy=False).start()
    try:
        home = tmp_path_factory.mktemp("cc-home")
        done = claude_code.run(h.upstream_url, str(home))
        assert done.returncode == 0, done.stderr
        found = [catalog.extract(r.body) for r in h.fake.received]
        found = [f[0] for f in found if f]
    finally:
        h.stop()
    assert found, "Claude Code sent no tool catalog"
    return max(found, key=len)


def test_claude_code_keeps_every_rule_line_whole(claude_code_catalog):
    raw = claude_code_catalog
    before, after = envelope.load(raw), envelope.load(toolschema_max.compress(raw))
    assert cuts(before, after) == []
    lost = []
    for x, y in zip(envelope.iter_tools(before), envelope.iter_tools(after), strict=True):
        desc = x.container.get("description") or ""
        if "<example>" in desc:  # the dialogues of an example are not the tool's rules
            desc = re.sub(r"<example>.*?</example>", "", desc, flags=re.S)
        kept = sentences.split(y.container.get("description") or "")
        for u in sentences.split(desc):
            if _CC_RULE.search(u) and not any(whole_of(k, u) and _words(k) for k in kept):
                lost.append((x.name, u))
    assert lost == []
    count = __import__("caveman_engine.tokens", fromlist=["make_counter"]).make_counter(None).count
    assert count(toolschema_max.compress(raw)) < count(json.dumps(json.loads(raw), separators=(",", ":")).encode())
