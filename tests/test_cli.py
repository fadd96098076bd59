"""The command-line contract through the real console script: exit codes, one-line errors,
the stdin limit, and inputs that must never produce a traceback."""

from __future__ import annotations

import json

import pytest

from caveman_engine.limits import MAX_INPUT

from .conftest import CONFORMANCE

PASSTHROUGH_KEYS = ["content_type", "tokens_before", "tokens_after", "token_count_basis",
                    "ratio", "basis"]


def test_no_arguments_prints_help(cli):
    r = cli()
    assert r.returncode == 0
    assert b"Usage: caveman-engine" in r.stdout and b"compress" in r.stdout


def test_help_and_version(cli):
    assert cli("--help").returncode == 0
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith(b"caveman-engine, version ")


def test_unknown_subcommand(cli):
    r = cli("frobnicate")
    assert (r.returncode, r.stderr) == (2, b"unknown caveman-engine subcommand: frobnicate\n")
    r = cli("")
    assert (r.returncode, r.stderr) == (2, b"unknown caveman-engine subcommand: \n")


def test_compress_flag_errors(cli):
    """No vector pins the reference's `unknown compress flag` (exit 1): these are usage
    errors like everywhere else (docs/cli.md)."""
    r = cli("compress", "--bogus")
    assert (r.returncode, r.stderr) == (2, b"caveman-engine compress: no such option: --bogus\n")
    r = cli("compress", "--type")
    assert (r.returncode, r.stderr) == (
        2, b"caveman-engine compress: option --type needs a value\n")
    r = cli("compress", "stray")
    assert (r.returncode, r.stderr) == (
        1, b"caveman-engine compress: cannot read stray: No such file or directory\n")


def test_type_value_may_start_with_dashes_and_last_wins(cli):
    r = cli("compress", "--type", "--weird", input=b"abc")
    assert r.returncode == 0 and json.loads(r.stderr)["content_type"] == "--weird"
    r = cli("compress", "--type", "json", "--type", "no-such-type", input=b"abc")
    assert json.loads(r.stderr)["content_type"] == "no-such-type"


def test_empty_input(cli):
    r = cli("compress")
    assert r.returncode == 0 and r.stdout == b""
    assert r.stderr == (b'{"content_type":"text","tokens_before":0,"tokens_after":0,'
                        b'"token_count_basis":"o200k_base","ratio":0,"basis":"inferred"}\n')
    assert cli("detect").stdout == b"text\n"


@pytest.mark.parametrize("data", [b" ", b"\n", b"\t\r\n  \n", "\u3000\u2028 ".encode()])
def test_whitespace_only_is_a_plain_passthrough(cli, data):
    r = cli("compress", input=data)
    assert r.returncode == 0 and r.stdout == data
    report = json.loads(r.stderr)
    assert list(report) == PASSTHROUGH_KEYS and report["content_type"] == "text"
    assert cli("detect", input=data).stdout == b"text\n"


def test_input_over_the_limit_is_refused(cli):
    big = b"ab cd\n" * (MAX_INPUT // 6) + b"x" * (MAX_INPUT % 6 + 1)
    assert len(big) == MAX_INPUT + 1
    for args in (("compress",), ("detect",), ("toon", "encode")):
        r = cli(*args, input=big)
        assert r.returncode == 1
        assert r.stdout == b""
        assert r.stderr == (f"caveman-engine {' '.join(args)}: cannot read stdin: larger than "
                            "67108864 bytes\n").encode()


def test_input_at_the_limit_is_accepted(cli):
    data = b"ab cd\n" * (MAX_INPUT // 6) + b"x" * (MAX_INPUT % 6)
    assert len(data) == MAX_INPUT
    r = cli("compress", "--type", "no-such-type", input=data)
    assert r.returncode == 0 and r.stdout == data
    assert json.loads(r.stderr)["tokens_before"] > 0


ODD_INPUTS = {
    "invalid-utf8": b"caf\xe9 \xff\xfe broken \xc3 utf-8\n" * 50,
    "binary": bytes(range(256)) * 40,
    "deep-array": b"[" * 100_000 + b"]" * 100_000,
    "deep-object": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "deep-unclosed": b"[" * 100_000,
    "nul-bytes": b"\x00" * 5000,
    "lone-surrogate-escapes": b'{"a":"\\ud800\\udc00\\udfff","b":[' + b"1," * 20 + b"2]}",
    "bom-json": b"\xef\xbb\xbf" + b'{"a":[1,2,3,4,5,6,7,8,9,10,11,12]}',
    "huge-number": b"[" + b"9" * 5000 + b"]",
    "nan": b'{"a":NaN}',
}


@pytest.mark.parametrize("name", sorted(ODD_INPUTS))
@pytest.mark.parametrize("ctype", [None, "json", "toolschema", "toolschema-annotations", "log",
                                   "text", "toon", "a11y", "repetition", "terminal"])
def test_odd_inputs_give_a_normal_report(cli, name, ctype):
    data = ODD_INPUTS[name]
    args = ["compress"] + (["--type", ctype] if ctype else [])
    r = cli(*args, input=data)
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr
    report = json.loads(r.stderr)
    assert list(report)[:6] == PASSTHROUGH_KEYS
    if "recovery_handle" in report:
        back = cli("retrieve", report["recovery_handle"])
        assert back.stdout == data
    else:
        assert r.stdout == data


def test_detect_refuses_unknown_options(cli):
    r = cli("detect", "--whatever", "x", input=b'{"a":1}')
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr == b"caveman-engine detect: no such option: --whatever\n"


def test_registry_is_one_line_of_json(cli):
    r = cli("registry")
    assert r.returncode == 0 and r.stdout.endswith(b"}\n") and r.stdout.count(b"\n") == 1
    doc = json.loads(r.stdout)
    ids = [c["transform_id"] for c in doc["capabilities"]]
    assert ids == sorted(ids)
    assert "caveman.engine.toolschema-annotations.v1" not in ids
    full = (CONFORMANCE / "registry" / "registry.full.out").read_bytes()
    if len(ids) == 14:
        assert r.stdout == full


def test_registry_all_lists_every_type(cli):
    r = cli("registry", "--all")
    assert r.returncode == 0
    for t in ("toolschema", "toolschema-annotations", "prose", "toolschema-max"):
        assert f"\n{t} ".encode() in r.stdout


def test_toon_usage_errors(cli):
    r = cli("toon")
    assert (r.returncode, r.stderr) == (
        2, b"caveman-engine toon: missing COMMAND (one of encode, decode)\n")
    r = cli("toon", "encod", input=b"{}")
    assert (r.returncode, r.stderr) == (
        2, b"caveman-engine toon: unknown subcommand: encod (one of encode, decode) "
           b"(did you mean encode?)\n")


def test_best_of_json_picks_the_smaller_encoding(cli):
    """CAVE_ENGINE_TOON=best-of (spec §2.7, §10.2 #34): eight uniform rows (too few to
    elide) → TOON, lossless; twelve rows TOON cannot encode → elision."""
    rows = [{"id": n, "status": "healthy", "region": "eu-west-1", "tier": "standard"}
            for n in range(1, 9)]
    uniform = json.dumps({"rows": rows}).encode()
    r = cli("compress", input=uniform, env={"CAVE_ENGINE_TOON": "Best-Of"})
    report = json.loads(r.stderr)
    assert (report["method"], report["lossless_to_model"]) == ("toon", True)
    assert r.stdout.startswith(b"rows[8]{id,status,region,tier}:")
    back = cli("toon", "decode", input=r.stdout)
    assert json.loads(back.stdout) == {"rows": rows}
    assert "recovery_handle" not in json.loads(cli("compress", input=uniform).stderr)

    rows = rows + [dict(rows[0], id=n) for n in range(9, 13)]
    rows[5] = dict(rows[5], extra=True)  # no longer uniform: TOON declines
    mixed = json.dumps({"rows": rows}).encode()
    r = cli("compress", input=mixed, env={"CAVE_ENGINE_TOON": "best-of"})
    report = json.loads(r.stderr)
    assert (report["method"], report["lossless_to_model"]) == ("elision", False)
    assert b"__caveman_elided__" in r.stdout
