"""Property/fuzz tests of the whole compress pipeline, for every registered type and auto-detect.

For any input — mutated corpus catalogs and conformance inputs (truncation, byte flips, deep
nesting, huge strings, odd Unicode, invalid UTF-8, NaN, duplicate keys, CRLF, NUL, BOM, …), raw
bytes, generated JSON — ``Engine.compress`` on a real SQLite store either passes the input
through untouched (no handle, equal tokens, ratio 0) or emits fewer tokens under a handle that
retrieves the exact input; JSON-emitting types emit valid JSON; TOON decodes back to the input's
value; nothing raises; ``detect`` always answers one of the ten detected types.

Profiles (Hypothesis settings local to this file, chosen by ``CAVEMAN_FUZZ_PROFILE``):

* ``ci`` (default): derandomized, 100 examples per type (under a second each);
* ``long``: 100,000 examples of the compress property in total, spread evenly over the types
  (``CAVEMAN_FUZZ_EXAMPLES`` overrides the total), randomized; see ``docs/hardening.md``.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caveman_engine import registry
from caveman_engine.detect import detect
from caveman_engine.engine import Engine

from .conftest import CONFORMANCE
from .hardening import invariants, mutate
from .hardening.invariants import AUTO, DETECTED, RotatingEngine, check_compress

PROFILE = os.environ.get("CAVEMAN_FUZZ_PROFILE", "ci").strip().lower() or "ci"
if PROFILE not in ("ci", "long"):
    raise pytest.UsageError(f"CAVEMAN_FUZZ_PROFILE must be ci or long, not {PROFILE!r}")
LONG = PROFILE == "long"
TYPES = invariants.fuzz_types()
CASES = TYPES + ["json+best-of"]
LONG_TOTAL = int(os.environ.get("CAVEMAN_FUZZ_EXAMPLES", "100000"))
PER_CASE = math.ceil(LONG_TOTAL / len(CASES)) if LONG else 100
MAX_HUGE = 1_000_000 if LONG else 100_000

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
          HealthCheck.filter_too_much]
settings.register_profile(
    "caveman-fuzz-ci", max_examples=PER_CASE, deadline=None, derandomize=True, database=None,
    suppress_health_check=_QUIET, print_blob=True,
)
settings.register_profile(
    "caveman-fuzz-long", max_examples=PER_CASE, deadline=None, derandomize=False,
    database=None, suppress_health_check=_QUIET, print_blob=True,
)
FUZZ = settings(settings.get_profile(f"caveman-fuzz-{PROFILE}"))
DETECT = settings(FUZZ, max_examples=LONG_TOTAL if LONG else 200)

# Examples run / transformed per case (printed at the end of the module: run with -s).
TRIED: dict[str, int] = {}
TRANSFORMED: dict[str, int] = {}


@pytest.fixture(scope="module")
def fuzz_engine(tmp_path_factory, rank_cache_dir):
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CAVE_ENGINE_TOON", raising=False)
        mp.setenv("CAVEMAN_CACHE_DIR", str(rank_cache_dir))
        d = tmp_path_factory.mktemp("fuzzstore")
        d.chmod(0o700)
        rot = RotatingEngine(d)
        yield rot
        rot.close()
    if TRIED:
        print(f"\nfuzz examples ({PROFILE}): {sum(TRIED.values())} tried,"
              f" {sum(TRANSFORMED.values())} transformed")
        for case in TRIED:
            print(f"  {case:<24} {TRIED[case]:>7} tried {TRANSFORMED.get(case, 0):>7} transformed")


def test_every_registered_type_is_fuzzed():
    implemented = {e.type for e in registry.entries() if e.implemented}
    assert set(TYPES) == implemented | {AUTO}
    assert len(DETECTED) == 10
    assert {"json", "toolschema", "toolschema-annotations", "toon"} <= implemented


@pytest.mark.parametrize("case", CASES)
def test_compress_contract(fuzz_engine, case):
    content_type, _, mode = case.partition("+")

    @FUZZ
    @given(data=mutate.strategies(MAX_HUGE, content_type))
    def run(data):
        TRIED[case] = TRIED.get(case, 0) + 1
        if check_compress(fuzz_engine, data, content_type):
            TRANSFORMED[case] = TRANSFORMED.get(case, 0) + 1

    with pytest.MonkeyPatch.context() as mp:
        if mode == "best-of":
            mp.setenv("CAVE_ENGINE_TOON", "best-of")
        run()


@DETECT
@given(data=mutate.strategies(MAX_HUGE))
def test_detect_is_total(data):
    assert detect(data) in DETECTED


@settings(FUZZ, max_examples=LONG_TOTAL // 10 if LONG else 150)
@given(data=mutate.strategies(MAX_HUGE, "toon"))
def test_toon_codec_is_total_and_lossless(data):
    """``toon encode|decode`` (CLI subcommands) only ever raise ValueError (a one-line
    error); whatever encodes decodes back to the input's value."""
    from caveman_engine import jsonio
    from caveman_engine.compressors import toon

    try:
        encoded = toon.encode(data)
    except ValueError:
        encoded = None
    if encoded is not None:
        assert toon.decode(encoded) == jsonio.dumps(jsonio.loads(data))
    try:
        decoded = toon.decode(data)
    except ValueError:
        return
    assert jsonio.valid(decoded)


@settings(FUZZ, max_examples=LONG_TOTAL // 10 if LONG else 150)
@given(data=mutate.strategies(MAX_HUGE), query=st.text(max_size=60))
def test_narrowed_retrieve_is_total(data, query):
    """``retrieve <handle> <query>`` never raises and returns the original or something
    strictly shorter (ccr_spec §9.3)."""
    from caveman_engine.narrow import narrow

    out = narrow(data, query)
    assert isinstance(out, bytes) and (out == data or len(out) < len(data))


# --------------------------------------------------------------------------- fixed hard cases


def hard_inputs(scale: int) -> dict[str, bytes]:
    """Inputs that break parsers; ``scale`` multiplies the big ones (10 in the slow run)."""
    return {
        "empty": b"",
        "nul": b"\x00",
        "bom-json": b'\xef\xbb\xbf{"a":[1,2,3]}',
        "utf16-bom": b"\xff\xfe{\x00}\x00",
        "nan": b'{"a":NaN,"b":[Infinity,-Infinity]}',
        "dup-keys": b'{"a":1,"a":2,"tools":[{"name":"x","name":"y"}]}',
        "lone-surrogates": b'{"a":"\\ud800","b":"\\udc00x","c":"\\ud83d\\ude00"}',
        "invalid-utf8": b"\xff\xfe\xfd line\n" * 50,
        "crlf-log": b"2024-01-01 INFO served id=1\r\n" * 300,
        "cr-only": b"progress 1%\rprogress 2%\rprogress 100%\r" * 200,
        "deep-array-10000": b"[" * 10_000 + b"]" * 10_000,
        "deep-array-10001": b"[" * 10_001 + b"]" * 10_001,
        "deep-object": b'{"k":' * (20_000 * scale) + b"1" + b"}" * (20_000 * scale),
        "unbalanced": b"[" * (50_000 * scale),
        "huge-string": b'{"a":"' + b"x" * (300_000 * scale) + b'"}',
        "huge-line": b"ok\n" * 10 + b"a" * (200_000 * scale) + b"\n" + b"ok\n" * 10,
        "many-lines": b"\n" * (100_000 * scale),
        "u2028": '{"a":"\u2028\u2029","b":"\u0130\u212a\u017f"}'.encode(),
        "big-number": b'{"n":123456789012345678901234567890e99999,"m":-0.0}',
    }


@pytest.mark.parametrize("name", sorted(hard_inputs(1)))
def test_hard_inputs_every_type(fuzz_engine, name):
    data = hard_inputs(1)[name]
    for content_type in TYPES:
        check_compress(fuzz_engine, data, content_type)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["deep-object", "unbalanced", "huge-string", "huge-line", "many-lines"])
def test_hard_inputs_every_type_large(fuzz_engine, name):
    data = hard_inputs(10)[name]
    for content_type in TYPES:
        check_compress(fuzz_engine, data, content_type)


# --------------------------------------------------------------------------- real CLI sample


def test_cli_sample(cli):
    """A small sample through the real console script: exit 0, one-line JSON report, output
    equal to the input or retrievable byte-exact by the printed handle."""
    rng = random.Random(20260808)
    pool = mutate.small_seeds(20_000)
    forced = [t for t in TYPES if t != AUTO]
    handles = 0
    for _ in range(8):
        data = mutate.apply(mutate.seeds()[rng.choice(pool)][1], mutate.random_mutations(rng, 2))
        for args in (["compress"], ["compress", "--type", rng.choice(forced)]):
            r = cli(*args, input=data)
            assert r.returncode == 0, (args, r.stderr)
            assert r.stderr.count(b"\n") == 1 and r.stderr.endswith(b"\n"), r.stderr
            report = json.loads(r.stderr)
            assert "error" not in report
            assert report["content_type"] == (args[2] if len(args) == 3 else detect(data))
            if "recovery_handle" in report:
                handles += 1
                assert report["tokens_after"] < report["tokens_before"]
                assert r.stdout != data
                back = cli("retrieve", report["recovery_handle"])
                assert (back.returncode, back.stdout, back.stderr) == (0, data, b"")
            else:
                assert r.stdout == data
                assert report["tokens_after"] == report["tokens_before"]
                assert report["ratio"] == 0
        d = cli("detect", input=data)
        assert d.returncode == 0 and d.stdout.decode().strip() in DETECTED
    assert handles >= 3  # the sample does exercise the store


# --------------------------------------------------------------------------- regressions


def test_terminal_keep_pattern_is_linear_and_unchanged():
    """Regression: ``[A-Za-z]+Error\\b`` backtracked quadratically in Python's re (a 46 KB
    line of letters took 20 s in ``terminal``); the single-letter spelling finds a match in
    exactly the same lines."""
    from caveman_engine.compressors import terminal

    spec = re.compile(
        r"(?i)(\b(ERROR|ERR|FATAL|PANIC|EXCEPTION|TRACEBACK|FAIL|FAILED|FAILURE|WARN|WARNING)\b"
        r"|[A-Za-z]+Error\b|[A-Za-z]+Exception\b|^[\t\n\f\r ]+at[\t\n\f\r ]|^[\t\n\f\r ]+File \""
        r"|\.go:[0-9]+|:[0-9]+:[0-9]+:|^[\t\n\f\r ]*--->|caused by|\bexit status [1-9])",
        re.ASCII,
    )
    rng = random.Random(7)
    alphabet = ["a", "Z", "Error", "error", "Exception", "x", " ", "_", "1", ":", "\t", "é", ".go"]
    for _ in range(5000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert bool(terminal._KEEP.search(line)) == bool(spec.search(line)), line
    data = b"ok\n" * 6 + b"a" * 200_000 + b"\n" + b"ok\n" * 6
    start = time.monotonic()
    out = terminal.compress(data)
    assert time.monotonic() - start < 5
    assert out == b"ok\n" * 3 + "\u2026 3 lines elided (caveman) \u2026\n".encode() + b"a" * 200_000 \
        + b"\n" + "\u2026 3 lines elided (caveman) \u2026\n".encode() + b"ok\n" * 3


def test_toon_declines_hopeless_quadratic_output(fuzz_engine):
    """Regression: 10,000 nested objects (60 KB) encode to 100 MB of TOON indentation; counting
    it took ~20 s. Over 128 bytes of output per input byte (o200k's longest token) the token
    gate must refuse, so ``compress`` stops there; ``toon encode`` still converts."""
    from caveman_engine.compressors import toon

    deep = (CONFORMANCE / "toolschema" / "deep_limit_9998.json.in").read_bytes()
    start = time.monotonic()
    check_compress(fuzz_engine, deep, "toon")
    assert time.monotonic() - start < 10
    assert toon.compress(deep) is None
    doc = b'{"k":' * 2999 + b'{"a":[1,2,3]}' + b"}" * 2999
    encoded = toon.encode(doc)
    # 2,999 lines "k:" indented 0, 2, 4, … then "a[3]: 1,2,3" indented 5,998, joined by \n
    assert len(encoded) == sum(2 * d + 2 for d in range(2999)) + 2 * 2999 + 11 + 2999
    assert len(encoded) > toon.MAX_GROWTH * len(doc)
    assert toon.compress(doc) is None
    small = b'{"k":' * 20 + b'{"a":[1,2,3]}' + b"}" * 20
    assert toon.compress(small).data == toon.encode(small)


def test_million_space_run_is_counted_not_a_crash(cli, rank_cache_dir):
    """Regression: tiktoken's splitter overflowed its stack on ~1M consecutive spaces and
    raised pyo3's PanicException (a BaseException the engine did not catch): the CLI died
    with a Rust backtrace. The run is one pre-split piece, so the count is that piece's
    byte-pair merge plus the pieces around it."""
    from caveman_engine import tokens

    n = 1_100_000
    data = b"x\n" + b" " * n + b"y\n"
    counter = tokens.make_counter(rank_cache_dir)
    assert counter.name == "o200k_base"
    # pieces: "x", "\n", n-1 spaces (\s+(?!\S)), " y", "\n"
    run = len(counter.encoding()._encode_single_piece(b" " * (n - 1)))
    assert counter.count(data) == 4 + run
    r = cli("compress", input=data)
    assert r.returncode == 0 and r.stdout == data
    report = json.loads(r.stderr)
    assert r.stderr.count(b"\n") == 1
    assert report["tokens_before"] == report["tokens_after"] == 4 + run
    assert report["token_count_basis"] == "o200k_base"


def test_long_blank_run_detection():
    from caveman_engine.tokens import _BLANK_RUN, _long_blank_run

    assert _BLANK_RUN == 32768
    for ws in (" ", "\t", "\u3000", " \t\u2028"):
        for at in (0, 1, 12345, 50_000):
            run = (ws * _BLANK_RUN)[:_BLANK_RUN]
            assert _long_blank_run("a" * at + run + "b"), (ws, at)
            short = (ws * _BLANK_RUN)[: _BLANK_RUN // 2 - 1]
            assert not _long_blank_run(("a" * at + short + "b") * 3), (ws, at)
    assert not _long_blank_run("\n" * 100_000 + " \n" * 100_000)


# --------------------------------------------------------------------------- long only


@pytest.mark.slow
def test_every_seed_every_type_unmutated(fuzz_engine):
    for _, data in mutate.seeds():
        for content_type in TYPES:
            check_compress(fuzz_engine, data, content_type)


def test_engine_without_store_never_transforms_lossy(rank_cache_dir, monkeypatch):
    """No store: S4 output cannot be made recoverable, so every type passes through."""
    monkeypatch.setenv("CAVEMAN_CACHE_DIR", str(rank_cache_dir))
    engine = Engine(None)
    log = b"".join(b"2024-01-01 INFO request served id=%d\n" % i for i in range(300))
    for content_type in TYPES:
        r = engine.compress(log, None if content_type == AUTO else content_type)
        assert r.is_clean_passthrough(log) and r.error is None
