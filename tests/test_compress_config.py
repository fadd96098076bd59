"""``config`` (spec §6.9): every config vector of the general suite (all pass through: the
reference declines or does not save tokens) through the compressor and the token gate,
idempotence, and hand-checked YAML and TOML/INI examples."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine import configfmt
from caveman_engine.compressors import config

from .conftest import CONFORMANCE, count_tokens, gate, general_cases

GENERAL = CONFORMANCE / "general"
E = "\u2026"


def gated(data: bytes) -> bytes:
    return gate(config.compress(data), data)


VECTORS = [pytest.param(c, id=c["id"]) for c in general_cases("config")]


def test_vectors_present() -> None:
    assert len(VECTORS) == 14  # 13 forced + the one auto-detected as config


@pytest.mark.parametrize("case", VECTORS)
def test_general_vector(case: dict) -> None:
    data = (GENERAL / case["case"]).read_bytes()
    expected = (GENERAL / case["stdout"]).read_bytes() if case["stdout"] else data
    got = gated(data)
    assert got == expected
    assert count_tokens(got) == json.loads(case["stderr"])["tokens_after"]
    assert gated(got) == got


def test_yaml_vector_output_is_valid_but_not_cheaper() -> None:
    # the one vector the compressor does transform: children of kept parents leave only
    # 3 short lines to elide; the marker costs more tokens, so the engine passes it through
    data = (GENERAL / "config__cpan-kwalify-distroprefs.yml.in").read_bytes()
    out = config.compress(data)
    assert out is not None and configfmt.yaml_valid(out)
    assert out.count(f"{E} 3 config lines elided (caveman) {E}".encode()) == 1
    assert count_tokens(out) > count_tokens(data)


def test_vector_through_cli(cli) -> None:
    data = (GENERAL / "config__cpan-kwalify-distroprefs.yml.in").read_bytes()
    r = cli("compress", input=data)
    assert r.returncode == 0 and r.stdout == data
    assert json.loads(r.stderr) == {
        "content_type": "config", "tokens_before": 398, "tokens_after": 398,
        "token_count_basis": "o200k_base", "ratio": 0, "basis": "inferred",
    }


# --------------------------------------------------------------------------- YAML

SERVERS = [f"  - host: web-{i:02d}\n    port: 8080\n" for i in range(1, 11)]
YAML = "service: api\nversion: 3\nreplicas: 2\nservers:\n" + "".join(SERVERS) + "logging:\n  level: info\n"


def test_yaml_children_of_kept_parent() -> None:
    out = config.compress(YAML.encode())
    # top-level keys kept; "servers:" is a kept parent: its first 8 block lines stay
    # (web-01..web-04), the 12 near-duplicate lines after them become one marker
    assert out == (
        "service: api\nversion: 3\nreplicas: 2\nservers:\n"
        + "".join(SERVERS[:4])
        + f"# {E} 12 config lines elided (caveman) {E}\n"
        + "logging:\n  level: info\n"
    ).encode()
    assert configfmt.yaml_valid(out)
    assert config.compress(out) is None  # idempotent: own marker recognised


def test_yaml_parents_of_kept_deep_line() -> None:
    lines = ["name: demo", "kind: svc", "owner: ops", "spec:", "  pool:", "    members:"]
    lines += [f"      m{i}: standby" for i in range(1, 15)]
    lines[14] = "      m9: standby # WARNING drained"  # flagged, deep in the block
    lines += ["zone: a", "region: eu"]
    out = config.compress(("\n".join(lines) + "\n").encode()).decode().split("\n")
    # spec/pool/members are kept as parents; "members:" (a kept parent) keeps m1..m8, the
    # flagged m9 is kept, m10..m14 elide
    assert out == lines[:15] + [f"# {E} 5 config lines elided (caveman) {E}"] + lines[20:] + [""]


def test_yaml_compact_sequence_parent() -> None:
    # "- " items at the key's own indentation belong to the key
    lines = ["a: 1", "b: 2", "c: 3", "jobs:", "  build:", "    steps:"]
    for i in range(1, 9):
        lines += [f"    - uses: act/step@v{i}", f"      with: {{n: {i}}}"]
    lines += ["d: 4", "e: 5"]
    out = config.compress(("\n".join(lines) + "\n").encode())
    assert out is not None and configfmt.yaml_valid(out)
    text = out.decode().split("\n")
    # "steps:" (parent of the items) keeps 8 block lines: lines 6..13 (items v1..v4)
    assert text[:14] == lines[:14]
    assert text[14:] == [f"# {E} 8 config lines elided (caveman) {E}", "d: 4", "e: 5", ""]


def test_yaml_invalid_result_declines() -> None:
    # a flow mapping spread over lines: eliding its tail (with the closing brace) would leave
    # it unclosed, so the result is not valid YAML and the compressor declines
    lines = ["name: demo", "kind: quota", "owner: ops", "limits: {"]
    lines += [f"  slot{i}: {i}," for i in range(1, 14)] + ["  slot14: 14", "  }"]
    lines += ["region: eu", "zone: a"]
    data = ("\n".join(lines) + "\n").encode()
    assert configfmt.classify(data) == "yaml" and configfmt.yaml_valid(data)
    assert config.compress(data) is None
    # the same content as a block mapping compresses
    block = ["name: demo", "kind: quota", "owner: ops", "limits:"]
    block += [f"  slot{i}: {i}" for i in range(1, 15)] + ["region: eu", "zone: a"]
    out = config.compress(("\n".join(block) + "\n").encode())
    assert out == ("\n".join(block[:12] + [f"# {E} 6 config lines elided (caveman) {E}"] + block[18:]) + "\n").encode()


def test_crlf_marker() -> None:
    data = YAML.replace("\n", "\r\n").encode()
    out = config.compress(data)
    assert f"# {E} 12 config lines elided (caveman) {E}\r\n".encode() in out
    assert out.endswith(b"logging:\r\n  level: info\r\n")


# --------------------------------------------------------------------------- TOML / INI

TOML = (
    "# deployment settings\ntitle = \"demo\"\nowner = \"ops\"\n\n"
    "[database]\nhost = \"db.internal\"\nport = 5432\nuser = \"app\"\n\n"
    "[mirrors]\n"
    + "".join(f'm{i:02d} = "https://mirror-{i:02d}.example.org"\n' for i in range(1, 13))
    + "\n[limits]\npassword_min = 12\nretries = 3\n"
)


def test_toml_sections() -> None:
    out = config.compress(TOML.encode())
    # every line up to m01 is kept or promoted (distinct vocabularies) except the blank line
    # after the preamble; kept headers keep up to 8 lines after them ([database] reaches the
    # blank line before [mirrors]; [mirrors] m01..m08), m09..m12 + blank elide
    mirrors = "".join(f'm{i:02d} = "https://mirror-{i:02d}.example.org"\n' for i in range(1, 9))
    assert out == (
        "# deployment settings\ntitle = \"demo\"\nowner = \"ops\"\n"
        f"# {E} 1 config lines elided (caveman) {E}\n"
        "[database]\nhost = \"db.internal\"\nport = 5432\nuser = \"app\"\n\n"
        "[mirrors]\n" + mirrors + f"# {E} 5 config lines elided (caveman) {E}\n"
        "[limits]\npassword_min = 12\nretries = 3\n"
    ).encode()
    assert config.compress(out) is None


def test_ini_owning_section_of_flagged_line() -> None:
    lines = ["[main]", "name = demo", "mode = fast"]
    lines += ["[pool]"] + [f"worker{i} = idle" for i in range(1, 16)]
    lines[16] = "worker13 = idle ; WARNING overloaded"
    lines += ["[tail]", "end = yes"]
    out = config.compress(("\n".join(lines)).encode()).decode().split("\n")
    # [pool] keeps worker1..8; flagged worker13 kept; no trailing newline added
    assert out == (
        lines[:12] + [f"# {E} 4 config lines elided (caveman) {E}", lines[16],
                      f"# {E} 2 config lines elided (caveman) {E}"] + lines[19:]
    )


# --------------------------------------------------------------------------- declines


def test_declines() -> None:
    short = "\n".join(f"k{i}: v" for i in range(13)) + "\n"  # 13 lines
    assert config.compress(short.encode()) is None
    assert config.compress(b"just prose, not a config file\n" * 20) is None
    assert config.compress(b"\xff" + YAML.encode()) is None  # invalid UTF-8
    marked = YAML.replace("  level: info\n", f"# {E} 2 config lines elided (caveman) {E}\n")
    assert config.compress(marked.encode()) is None
    # every line distinct: keepNonRedundant keeps everything, nothing to elide
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima", "mike", "november", "oscar"]
    assert config.compress("".join(f"{w}: {w}x\n" for w in words).encode()) is None
    # YAML with a block scalar is not classified as config
    assert config.compress(("run: |\n  echo hi\n" + YAML).encode()) is None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["a: 1", "  b: x", "- c", "[s]", "k = v", "#", "", "  - d: 2",
                                 "{", "}", "  \"q", "x: [1,", "\t", "\u2026"]), min_size=14, max_size=40))
def test_never_raises(lines) -> None:
    data = ("\n".join(lines) + "\n").encode()
    out = config.compress(data)
    assert out is None or len(out) < len(data)
    if out is not None and configfmt.classify(data) == "yaml":
        assert configfmt.yaml_valid(out)
