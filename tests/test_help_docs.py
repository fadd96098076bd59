"""The command reference in README.md and docs/cli.md is the real ``--help`` output of the
installed console script, so it cannot drift. After changing a command's help, regenerate with

    CAVEMAN_UPDATE_DOCS=1 .venv/bin/python -m pytest tests/test_help_docs.py

docs/cli.md opens with hand-written conventions; everything after its REFERENCE marker is
generated.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .conftest import console_script

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"
START, END = "<!-- commands:start -->", "<!-- commands:end -->"
REFERENCE = "<!-- reference: generated from --help by tests/test_help_docs.py -->\n"


def _help(*words: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("_CAVEMAN")}
    r = subprocess.run([console_script(), *words, "--help"], capture_output=True, env=env,
                       timeout=60)
    assert r.returncode == 0, (words, r.stderr)
    return r.stdout.decode()


def _subcommands(text: str) -> list[str]:
    if "\nCommands:\n" not in text:
        return []
    block = text.split("\nCommands:\n", 1)[1]
    names = []
    for line in block.splitlines():
        m = re.match(r"  (\S+)\s", line + " ")
        if not line.strip():
            break
        if m and not line.startswith("    "):
            names.append(m.group(1))
    return names


def _walk(words: tuple[str, ...] = ()):
    text = _help(*words)
    yield words, text
    for name in _subcommands(text):
        yield from _walk(words + (name,))


def render() -> tuple[str, str]:
    pages = list(_walk())
    top = pages[0][1]
    readme_block = f"{START}\n```console\n$ caveman-engine --help\n{top}```\n{END}"
    parts = ["# Command reference\n",
             "Generated from the installed `caveman-engine`'s own `--help`; "
             "`tests/test_help_docs.py` keeps it in step.\n"]
    for words, text in pages:
        title = " ".join(("caveman-engine",) + words)
        parts.append(f"## `{title}`\n\n```\n{text}```\n")
    return readme_block, "\n".join(parts)


def test_reference_matches_the_real_help():
    readme_block, cli_doc = render()
    readme = README.read_text()
    current = readme[readme.index(START):readme.index(END) + len(END)]
    conventions, marker, reference = CLI_DOC.read_text().partition(REFERENCE)
    assert marker, "docs/cli.md lost its reference marker"
    if os.environ.get("CAVEMAN_UPDATE_DOCS") == "1":
        README.write_text(readme.replace(current, readme_block))
        CLI_DOC.write_text(conventions + REFERENCE + "\n" + cli_doc)
        return
    assert current == readme_block, "README command reference is stale (see module doc)"
    assert reference == "\n" + cli_doc, "docs/cli.md is stale (see module doc)"


def test_every_command_is_documented():
    doc = CLI_DOC.read_text()
    for name in _subcommands(_help()):
        assert f"## `caveman-engine {name}`" in doc
