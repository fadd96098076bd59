"""Line/section compressors: log, diff, text, terminal, search-result, repetition (spec §6.2,
§6.4–§6.6, §6.14, §6.15), run directly on the general conformance vectors and on the spec's
examples (§10.2 #36, #38, #39)."""

from __future__ import annotations

import importlib
import json

import pytest

from caveman_engine.compressors import Compressed
from caveman_engine.compressors import diff, log, repetition, search_result, terminal, text

from .conftest import CONFORMANCE, gate, general_cases

GENERAL = CONFORMANCE / "general"
LINE_TYPES = ("log", "diff", "text", "terminal", "search-result", "repetition")


def vector_cases(types: tuple[str, ...]) -> list:
    """``compress`` cases of the general suite whose (forced or detected) type is in
    ``types``, as (type, input name, expected output name or None)."""
    return [
        pytest.param(json.loads(c["stderr"])["content_type"], c["case"], c["stdout"], id=c["id"])
        for c in general_cases(*types)
    ]


def module_for(ctype: str):
    return importlib.import_module("caveman_engine.compressors." + ctype.replace("-", "_"))


def run(ctype: str, data: bytes) -> bytes | None:
    result = module_for(ctype).compress(data)
    if isinstance(result, Compressed):
        return result.data
    return result


def gated(ctype: str, data: bytes) -> bytes:
    """What the engine emits for ``data`` (no wrappers): the compressor output when it has
    fewer o200k_base tokens and differs from the input, else the input."""
    return gate(run(ctype, data), data)


def check_vector(ctype: str, case: str, stdout: str | None) -> None:
    data = (GENERAL / case).read_bytes()
    expected = (GENERAL / stdout).read_bytes() if stdout else data
    got = gated(ctype, data)
    assert got == expected
    # idempotence (§2.5): compressing the output again changes nothing
    assert gated(ctype, got) == got


@pytest.mark.parametrize(("ctype", "case", "stdout"), vector_cases(LINE_TYPES))
def test_general_vector(ctype: str, case: str, stdout: str | None) -> None:
    check_vector(ctype, case, stdout)


def test_vectors_cover_every_line_type() -> None:
    seen = {p.values[0] for p in vector_cases(LINE_TYPES)}
    assert seen == set(LINE_TYPES)


# --------------------------------------------------------------------------- log


LOG_39 = (
    b"[INFO] starting\n"
    + b"".join(b"[INFO] step %d ok\n" % i for i in range(50))
    + b"[ERROR] kaboom: undefined symbol\n  at frame (file.go:10)\n[INFO] done\n"
)


def test_log_spec_example_39() -> None:
    assert log.compress(LOG_39) == (
        b"[INFO] starting\n[INFO] step 0 ok\n\xe2\x80\xa6 49 lines elided (caveman) \xe2\x80\xa6\n"
        b"[ERROR] kaboom: undefined symbol\n  at frame (file.go:10)\n[INFO] done\n"
    )
    assert log.compress(log.compress(LOG_39)) is None


def test_log_crlf_marker_gets_cr() -> None:
    data = LOG_39.replace(b"\n", b"\r\n")
    out = log.compress(data)
    assert b"\xe2\x80\xa6 49 lines elided (caveman) \xe2\x80\xa6\r\n" in out
    assert out.endswith(b"[INFO] done\r\n")


def test_log_logfmt_summary_and_short_runs() -> None:
    lines = [b"level=info msg=boot"]
    lines += [b"level=info user=u%d status=200 path=/api/v1/items" % i for i in range(2, 8)]
    lines += [b"level=error msg=boom", b"level=info msg=end"]
    out = log.compress(b"\n".join(lines) + b"\n").decode()
    # 6 lines: user=u2 kept (first 2), u3..u7 elided (5 units) with a summary of what is
    # common to all of them; 'user' values share a prefix and cover 3..7 densely.
    assert (
        "\u2026 5 lines elided (caveman): all level=info status=200 path=/api/v1/items; "
        "user: u3..u7 all 5 present \u2026"
    ) in out


def test_log_declines() -> None:
    assert log.compress(b"a\nb\nc\n") is None  # < 4 lines
    assert log.compress(b"\xff\xfe bad utf8\n" * 10) is None
    # nothing redundant: every line distinct
    assert log.compress(b"alpha one\nbeta two\ngamma three\ndelta four\nepsilon five\n") is None


def test_log_contract_note_once() -> None:
    body = b"".join(b"[INFO] worker pool tick %d nominal and healthy\n" % i for i in range(200))
    out = log.compress(body)
    assert out.count("resemble shown lines".encode()) == 1
    assert out.endswith(
        "\u2026 caveman: elided lines resemble shown lines and match the stated invariants \u2014 "
        "answer from this view; if you truly cannot, one broad caveman_retrieve \u2026\n".encode()
    )
    assert log.compress(out) is None


# --------------------------------------------------------------------------- repetition


REP_38 = (
    b"starting build\n"
    + b"downloading dependency... please wait\n" * 40
    + b"ERROR: undefined symbol caveman_main\nbuild failed\n"
)


def test_repetition_spec_example_38() -> None:
    assert repetition.compress(REP_38) == (
        b"starting build\ndownloading dependency... please wait\n"
        b"\xe2\x80\xa6 caveman: 39 identical lines elided \xe2\x80\xa6\n"
        b"ERROR: undefined symbol caveman_main\nbuild failed\n"
    )
    assert len(REP_38) == 1585
    assert repetition.compress(repetition.compress(REP_38)) is None


def test_repetition_declines() -> None:
    assert repetition.compress(b"x\n" * 50) is None  # < 200 bytes
    assert repetition.compress(b"\n" * 300) is None  # blank lines never collapse
    assert repetition.compress(b"".join(b"line %03d\n" % i for i in range(40))) is None
    two = b"pad " * 60 + b"\nsame\nsame\nother\n"
    assert repetition.compress(two) is None  # a run of 2 is not collapsed


# --------------------------------------------------------------------------- diff


def test_diff_keeps_changes_and_two_context_lines() -> None:
    ctx = [f" line {i}" for i in range(20)]
    src = ["diff --git a/f b/f", "--- a/f", "+++ b/f", "@@ -1,20 +1,20 @@"]
    src += ctx[:10] + ["-old", "+new"] + ctx[10:]
    out = diff.compress(("\n".join(src) + "\n").encode()).decode().split("\n")
    assert out == [
        "diff --git a/f b/f", "--- a/f", "+++ b/f", "@@ -1,20 +1,20 @@",
        " line 0", " line 1",
        "\u2026 6 context lines elided (caveman) \u2026",
        " line 8", " line 9", "-old", "+new", " line 10", " line 11",
        "\u2026 8 context lines elided (caveman) \u2026",
        "",
    ]
    assert diff.compress("\n".join(out).encode()) is None


def test_diff_declines_short_or_all_kept() -> None:
    assert diff.compress(b"+a\n-b\n context\n" * 3) is None  # 9 lines < 12
    assert diff.compress(b"+a\n-b\n" * 8) is None  # nothing to drop


# --------------------------------------------------------------------------- terminal


def test_terminal_spec_example_36() -> None:
    data = (
        b"$ pytest -q\n"
        + b"".join(b"\x1b[32m.\x1b[0m collected test_module_%d ok\n" % i for i in range(60))
        + b"E   AssertionError: token expiry uses < not <=\n"
        + b"auth/token.py:42: AssertionError\n1 failed, 60 passed in 2.10s\n"
    )
    assert terminal.compress(data) == (
        b"$ pytest -q\n. collected test_module_0 ok\n. collected test_module_1 ok\n"
        b"\xe2\x80\xa6 58 lines elided (caveman) \xe2\x80\xa6\n"
        b"E   AssertionError: token expiry uses < not <=\n"
        b"auth/token.py:42: AssertionError\n1 failed, 60 passed in 2.10s\n"
    )


def test_terminal_progress_and_ansi() -> None:
    assert terminal.clean_line("fetch 10%\rfetch 40%\rfetch done\r") == "fetch done\r"
    assert terminal.clean_line("a\r\r") == "a\r"
    assert terminal.clean_line("\x1b]0;t\x07\x1b[1;31mred\x1b[0m \x1bMx\x1b]8;;u\x1b\\") == "red x"
    # ESC ( is not a two-byte escape of the pattern ([@-Z\\-_]): it stays
    assert terminal.clean_line("\x1b(B") == "\x1b(B"
    # fewer than 4 lines: cleaned only
    assert terminal.compress(b"\x1b[32mPASS\x1b[0m ok\n") == b"PASS ok\n"
    assert terminal.compress(b"plain\n") is None  # identical → decline
    assert terminal.compress(b"") is None


# --------------------------------------------------------------------------- search-result


def test_search_result_elides_near_duplicate_hits() -> None:
    hits = [f"src/pkg/file{i}.go:{i + 10}:\treturn nil" for i in range(30)]
    hits[15] = "src/pkg/auth.go:99:\tpassword := os.Getenv(\"X\")"
    out = search_result.compress(("\n".join(hits) + "\n").encode()).decode().split("\n")
    assert out[:8] == hits[:8]
    assert out[8] == "\u2026 7 search result lines elided (caveman) \u2026"
    assert out[9] == hits[15]
    assert out[10] == "\u2026 10 search result lines elided (caveman) \u2026"
    assert out[11:] == hits[26:] + [""]


# --------------------------------------------------------------------------- text


def test_text_sections_and_headings() -> None:
    para = "The service restarted cleanly after the deploy and served traffic as usual."
    parts = ["# Report", "Intro paragraph one is here.", "Short Heading Here"]
    parts += [para] * 20
    parts += ["NOTE: the cache was cold.", "Closing words end here.", "Bye now."]
    data = ("\n\n".join(parts) + "\n").encode()
    out = text.compress(data).decode()
    assert out == "\n\n".join(
        parts[:4] + ["\u2026 19 sections elided (caveman) \u2026"] + parts[-3:]
    )
    assert text.compress(out.encode()) is None


def test_text_fence_is_one_section() -> None:
    src = "intro\n```\ncode one\n\ncode two\n```\nafter"
    assert text.split_sections(src) == ["intro", "```\ncode one\n\ncode two\n```", "after"]


def test_text_paragraph_mode_needs_an_empty_line_but_blank_lines_split() -> None:
    # Rule: paragraph mode needs an empty line ("\n\n" in the trimmed text); a line of spaces
    # alone (a diff's blank context line) leaves the text in one-line-per-section mode ...
    assert text.split_sections("a\n \nb\n\t\nc") == ["a", "b", "c"]
    assert text.split_sections(" x\n \n y ") == ["x", "y"]
    # ... CRLF blank lines ("\r") do not switch it on either ...
    assert text.split_sections("a\r\nb\r\n\r\nc") == ["a", "b", "c"]
    # ... but once it is on, a whitespace-only line separates paragraphs like an empty one.
    assert text.split_sections("a\nb\n\nc\n \nd\ne") == ["a\nb", "c", "d\ne"]


def test_text_line_mode_with_blank_context_lines_through_compress() -> None:
    lines = [f"line {i} of the change, with enough words to weigh something." for i in range(40)]
    lines[20] = " "  # whitespace-only, not empty: still line mode, and not a section
    data = ("\n".join(lines) + "\n").encode()
    out = text.compress(data)
    assert out == "\n\n".join(
        lines[:2] + ["\u2026 35 sections elided (caveman) \u2026"] + lines[-2:]
    ).encode()


def test_text_heading_counts_words_like_go_fields() -> None:
    # strings.Fields does not split at U+001C..U+001F (Python's str.split does).
    assert text.is_heading("\x1c".join("abcdefghi"))
    assert not text.is_heading(" ".join("abcdefghi"))
    assert text.is_heading("a\u00a0b\u3000c")


def test_text_heading_rule() -> None:
    assert text.is_heading("# anything at all. really!")
    assert text.is_heading("Install Notes")
    assert not text.is_heading("One sentence.")
    assert not text.is_heading("one two three four five six seven eight nine")
    assert not text.is_heading("x" * 97)


def test_text_declines_short() -> None:
    assert text.compress(b"short text\n\n" * 10) is None
