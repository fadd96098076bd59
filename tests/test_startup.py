"""Start-up cost of `compress` (issue 16): what each path imports, and that the cheap stand-ins
for what it no longer imports (dataclasses, tomllib, pathlib, urllib.parse, regular
expressions) behave exactly like the originals. Nothing here is timed: the modules a run loads
are a fact of the code, the time they take is a fact of the machine."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tomllib
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caveman_engine import registry, resources, results, store
from caveman_engine.compressors import Compressed
from caveman_engine.engine import Result

from .conftest import CORPUS

CATALOG = (CORPUS / "github.tools.json").read_bytes()

# Runs the console script's entry point as the installed script does, then writes the names
# of the loaded modules to the file named by argv[1] (the fast paths end in os._exit).
_PROBE = r"""
import os, sys
out = sys.argv.pop(1)
sys.argv[0] = "caveman-engine"

def write_modules():
    with open(out, "w") as f:
        f.write("\n".join(sorted(sys.modules)))

_exit = os._exit
def exit_after_writing(code):
    write_modules()
    _exit(code)
os._exit = exit_after_writing
from caveman_engine.launcher import main
try:
    main()
finally:
    write_modules()
"""


@pytest.fixture
def modules_of(cli_env, tmp_path):
    """``modules_of(*args, input=...)``: (the run, the set of modules it had loaded)."""

    def run(*args: str, input: bytes = b"", env: dict | None = None):
        out = tmp_path / "modules.txt"
        p = subprocess.run([sys.executable, "-c", _PROBE, str(out), *args], input=input,
                           capture_output=True, env={**cli_env, **(env or {})}, timeout=120)
        return p, set(out.read_text().split("\n"))

    return run


# Loaded by no `compress --type T` (the click CLI, detection, the TOML parser, ...).
NEVER_ON_COMPRESS = {"click", "caveman_engine.cli", "caveman_engine.detect", "tomllib",
                     "difflib", "pathlib", "urllib.parse", "caveman_engine.store_pg",
                     "psycopg"}
# Besides those, not loaded when a kept result is replayed: no tokenizer, no compressor, no
# JSON, no pathlib, no dataclasses.
NOT_ON_REPLAY = NEVER_ON_COMPRESS | {
    "caveman_engine.engine", "caveman_engine.tokens", "caveman_engine.registry",
    "caveman_engine.jsonio", "caveman_engine.wrappers", "caveman_engine.compressors",
    "caveman_engine.compressors.toolschema", "tiktoken", "orjson", "json", "pathlib",
    "dataclasses", "inspect", "typing", "base64", "tempfile", "threading", "contextlib",
}


def test_a_forced_type_loads_neither_click_nor_detection(modules_of, cli, tmp_path):
    cli("compress", input=b"warm up")  # the tokenizer's rank cache is written (once) first
    # A store path that needs no quoting, and one that does (urllib.parse is not used for it).
    for sub in ("plain", "needs %20 quoting é"):
        d = tmp_path / sub
        d.mkdir(mode=0o700)
        p, loaded = modules_of("compress", "--type", "toolschema", input=CATALOG,
                               env={"CAVEMAN_CCR_DB": str(d / "ccr.db"),
                                    "CAVEMAN_RESULT_CACHE": "0"})  # a fresh run each time
        assert p.returncode == 0, p.stderr
        assert "recovery_handle" in json.loads(p.stderr)
        assert "caveman_engine.compressors.toolschema" in loaded
        assert not NEVER_ON_COMPRESS & loaded, sorted(NEVER_ON_COMPRESS & loaded)
        # a catalog this size is written without orjson (and what it imports), and nothing
        # on the path imports typing for its annotations
        small = {"orjson", "dataclasses", "inspect", "typing"}
        assert not small & loaded, sorted(small & loaded)


def test_a_replayed_result_loads_no_engine(modules_of):
    first, _ = modules_of("compress", "--type", "toolschema", input=CATALOG)
    again, loaded = modules_of("compress", "--type", "toolschema", input=CATALOG)
    assert (again.returncode, again.stdout, again.stderr) == (0, first.stdout, first.stderr)
    assert "caveman_engine.results" in loaded
    assert not NOT_ON_REPLAY & loaded, sorted(NOT_ON_REPLAY & loaded)


def test_a_replay_does_not_load_openssl(modules_of):
    """A replay hashes with BLAKE2b, which the interpreter carries: loading OpenSSL (hashlib's
    SHA-256) would cost more than the rest of the replay."""
    small = b'{"tools": [{"name": "a", "description": "Lists the things. Really.",' \
            b' "inputSchema": {"type": "object", "title": "x"}}]}'
    big = (CORPUS / "zereight-gitlab.tools.json").read_bytes()  # SHA-256 would use OpenSSL
    for data in (small, big):
        first, _ = modules_of("compress", "--type", "toolschema", input=data)
        again, loaded = modules_of("compress", "--type", "toolschema", input=data)
        assert (again.stdout, again.stderr) == (first.stdout, first.stderr)
        assert "_hashlib" not in loaded and "caveman_engine.engine" not in loaded


def test_the_replay_still_stores_the_original(cli, store_dir):
    """The replay makes sure the store holds the original the report names, exactly as a
    fresh run leaves it: gone, it is stored again; changed accounting is put back."""
    import sqlite3

    first = cli("compress", "--type", "toolschema", input=CATALOG)
    handle = json.loads(first.stderr)["recovery_handle"]
    with sqlite3.connect(store_dir / "ccr.db") as db:
        row = db.execute("SELECT tokens_before, created_at FROM recoveries WHERE handle = ?",
                         (handle,)).fetchone()
        db.execute("UPDATE recoveries SET tokens_after = tokens_after + 1")
    again = cli("compress", "--type", "toolschema", input=CATALOG)
    assert (again.stdout, again.stderr) == (first.stdout, first.stderr)
    with sqlite3.connect(store_dir / "ccr.db") as db:
        tokens_after, created = db.execute(
            "SELECT tokens_after, created_at FROM recoveries WHERE handle = ?",
            (handle,)).fetchone()
    assert tokens_after == json.loads(first.stderr)["tokens_after"]
    assert created != row[1]  # rewritten, as a fresh run's put does
    # unchanged: nothing written (created_at kept)
    cli("compress", "--type", "toolschema", input=CATALOG)
    with sqlite3.connect(store_dir / "ccr.db") as db:
        assert db.execute("SELECT created_at FROM recoveries WHERE handle = ?",
                          (handle,)).fetchone()[0] == created


# --------------------------------------------------------------------------- store.holds


def test_holds_is_true_exactly_when_put_would_write_nothing(tmp_path):
    args = dict(content_type="toolschema", compressor="toolschema", tokens_before=10,
                tokens_after=5, metadata=b"m")
    with store.Store(str(tmp_path / "ccr.db")) as s:
        data = b"original bytes"
        h = store.handle_for(data)
        assert not s.holds(data, handle=h, **args)
        s.put(data, **args)
        assert s.holds(data, handle=h, **args)
        for change in ({"tokens_after": 6}, {"content_type": "json"}, {"compressor": "x"},
                       {"metadata": None}, {"metadata": b"n"}):
            assert not s.holds(data, handle=h, **{**args, **change})
        s.put(b"other", **{**args, "metadata": None})
        h2 = store.handle_for(b"other")
        assert s.holds(b"other", handle=h2, **{**args, "metadata": b""})  # b"" is None to put
        assert not s.holds(b"not other", handle=h2, **{**args, "metadata": None})


# --------------------------------------------------------------------------- kept entries


def test_a_kept_entry_round_trips_and_damage_is_a_miss():
    put = {"content_type": "toolschema", "compressor": "toolschema", "tokens_before": 12,
           "tokens_after": 7, "metadata": b"\x00meta\n", "handle": "ccr_" + "ab" * 16}
    for kept in (results.Kept(b'{"r":1}', b"out\nput", put),
                 results.Kept(b'{"r":2}', None, None),
                 results.Kept(b"", b"", {**put, "metadata": None})):
        blob = kept.to_bytes()
        back = results.Kept.parse(blob)
        assert (back.report, back.output, back.put) == (kept.report, kept.output, kept.put)
        for cut in range(len(blob)):
            assert results.Kept.parse(blob[:cut]) is None
        for i in range(len(blob)):
            damaged = blob[:i] + bytes([blob[i] ^ 1]) + blob[i + 1:]
            parsed = results.Kept.parse(damaged)
            assert parsed is None or (parsed.report, parsed.output, parsed.put) == (
                kept.report, kept.output, kept.put)


# --------------------------------------------------------------------------- registry.toml


def test_the_plain_reader_reads_registry_toml_as_tomllib_does():
    raw = open(resources.registry_location(), "rb").read()
    assert registry._read_plain_toml(raw) == tomllib.loads(raw.decode())


_LINES = st.sampled_from([
    "", "# comment", "  # indented comment", "[json]", "[toolschema-max]", "[ json ]",
    "[a.b]", "[[x]]", "[json] # c", 'capability = "caveman.engine.json.v1"', 'k = "a # b"',
    'k = "tab\there"', 'k = "esc\\"aped"', "k = 'literal'", "detected = true",
    "manifest = false", "manifest = False", 'segment_kinds = ["artifact", "skill"]',
    'segment_kinds = []', 'segment_kinds = [ "a" , "b" ]', 'segment_kinds = ["a", ]',
    'segment_kinds = ["a,b"]', 'k = "x" # c', "k = 1", 'k.x = "v"', '"k" = "v"', "k = ",
    "= 1", 'description = ""', 'k="v"', 'k\t=\t"v"', 'k = "ctl\x01"', "k = \"é\u2028\"",
    "\ufeff[json]", "k = [\"a\",\n \"b\"]", 'k = """x"""',
])


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINES, max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_the_plain_reader_agrees_with_tomllib_or_defers(lines, newline):
    text = newline.join(lines)
    mine = registry._read_plain_toml(text.encode())
    if mine is None:
        return  # tomllib decides (and raises where it raises)
    assert mine == tomllib.loads(text)


def test_registry_entries_are_immutable_values():
    e = registry.entry("toolschema")
    assert e == registry.entry("toolschema") and hash(e) == hash(registry.entry("toolschema"))
    assert e != registry.entry("json")
    assert repr(e).startswith("Entry(type='toolschema', capability='caveman.engine.toolschema.v1'")
    with pytest.raises(AttributeError):
        e.type = "x"
    assert registry.SAFETY_CLASSES["S4"] == registry.SafetyClass("S4", False, True, False)
    mod, cls = registry.compressor("toolschema")
    assert mod.CONTENT_TYPE == "toolschema" and cls.requires_ccr
    assert registry.compressor("no-such") is None


# --------------------------------------------------------------------------- value classes


def test_result_compares_and_prints_as_the_dataclass_did():
    a = Result(b"o", "json", 3, 2, "o200k_base", ratio=1 / 3, store_args={"x": 1})
    b = Result(b"o", "json", 3, 2, "o200k_base", ratio=1 / 3, store_args={"y": 2})
    assert a == b and a != Result(b"p", "json", 3, 2, "o200k_base", ratio=1 / 3)
    assert repr(a) == ("Result(output=b'o', content_type='json', tokens_before=3, "
                       "tokens_after=2, token_count_basis='o200k_base', "
                       "ratio=0.3333333333333333, basis='inferred', recovery_handle=None, "
                       "method=None, lossless_to_model=None, error=None, error_detail=None)")
    with pytest.raises(TypeError):
        hash(a)


def test_compressed_and_store_records_behave_as_their_dataclasses_did():
    c = Compressed(b"x", method="m")
    assert c == Compressed(b"x", "m") and hash(c) == hash(Compressed(b"x", "m"))
    assert repr(c) == "Compressed(data=b'x', method='m', lossless_to_model=None, metadata=None)"
    with pytest.raises(AttributeError):
        c.data = b"y"
    sel = store.Selection(frozenset({"log"}), 5)
    assert sel == store.Selection(frozenset({"log"}), 5) and len({sel, sel}) == 1
    assert repr(sel) == "Selection(types=frozenset({'log'}), created_before_ns=5)"
    with pytest.raises(AttributeError):
        sel.types = frozenset()
    assert store.Selection().everything
    b = store.Bucket(2, 10, 4)
    assert b == store.Bucket(2, 10, 4) and repr(b) == (
        "Bucket(count=2, tokens_before=10, tokens_after=4)")
    s1, s2 = store.Summary(store.Bucket()), store.Summary(store.Bucket())
    assert s1 == s2 and s1.by_content_type is not s2.by_content_type
    e1, e2 = store.ExportResult("d", False), store.ExportResult("d", False)
    assert e1 == e2 and e1.skipped is not e2.skipped
    entry = store.Entry("blob", "ccr_x", "log", "2025-01-01T00:00:00Z", 3, 3)
    assert entry.metadata_size == 0 and entry.object_fields is None


# --------------------------------------------------------------------------- store helpers


_PATH_TEXT = st.lists(st.sampled_from(["/", ".", "a", "b", "~", " ", "%", "é", "//", ".."]),
                      max_size=8).map("".join)


@given(_PATH_TEXT)
def test_store_path_helpers_match_pathlib_and_urllib(path):
    assert store._quote_path(path) == urllib.parse.quote(path, safe="/")
    if path:
        assert store._pathlib_join(path, ".caveman") == str(pathlib.PurePosixPath(path)
                                                             / ".caveman")
        assert store._pathlib_parent(path) == str(pathlib.PurePosixPath(path).parent)


_HANDLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")


@given(st.text(alphabet=st.sampled_from(list("aZ09_.:-/ é\n")), max_size=130))
def test_handle_check_matches_its_pattern(name):
    assert store._handle_ok(name) == bool(_HANDLE.fullmatch(name))


def test_handle_check_lengths():
    for n in (1, 127, 128, 129):
        assert store._handle_ok("a" * n) == (n <= 128)


@pytest.mark.parametrize("raw, ok", [("1", True), (" +70000 ", True), ("-5", False),
                                     ("+", False), ("1_000", False), ("١٢", False),
                                     ("0x10", False), ("", True)])
def test_budget_env_is_read_as_before(monkeypatch, raw, ok):
    monkeypatch.setenv("CAVEMAN_CCR_MAX_BYTES", raw)
    if ok:
        assert store.budget_from_env() == (int(raw) if raw.strip() else store.DEFAULT_MAX_BYTES)
    else:
        with pytest.raises(store.StoreError):
            store.budget_from_env()


def test_caveman_home_is_what_pathlib_gave(monkeypatch):
    monkeypatch.delenv("CAVEMAN_HOME", raising=False)
    for home in ("/h/someone", "/h/someone/", "//net/x", "/a/./b", "rel/dir", "."):
        monkeypatch.setenv("HOME", home)
        assert store.caveman_home() == str(pathlib.Path.home() / ".caveman")


def test_sha256_is_hashlib_sha256():
    import hashlib

    for data in (b"", b"abc", os.urandom(store._SMALL_HASH + 1)):
        assert store.sha256(data).digest() == hashlib.sha256(data).digest()
        assert store.handle_for(data) == "ccr_" + hashlib.sha256(data).hexdigest()[:32]


# --------------------------------------------------------------------------- a new store


def _schema(path) -> tuple:
    import sqlite3

    c = sqlite3.connect(path)
    try:
        return (c.execute("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master"
                          " ORDER BY rowid").fetchall(),
                [c.execute(f"PRAGMA {p}").fetchall() for p in (
                    "user_version", "journal_mode", "page_size", "auto_vacuum", "encoding",
                    "freelist_count", "integrity_check")])
    finally:
        c.close()


def _made_in_place(monkeypatch, path):
    with monkeypatch.context() as m:
        m.setattr(store, "_create_complete", lambda p: None)
        store.Store(path).close()


def test_a_new_store_is_the_store_sqlite_makes_in_place(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(mode=0o700)
    b.mkdir(mode=0o700)
    store.Store(str(a / "ccr.db")).close()
    _made_in_place(monkeypatch, str(b / "ccr.db"))
    assert _schema(a / "ccr.db") == _schema(b / "ccr.db")
    assert _schema(a / "ccr.db")[1][:2] == [[(3,)], [("wal",)]]
    assert os.listdir(a) == ["ccr.db"] and (a / "ccr.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("failure", [FileExistsError, PermissionError])
def test_a_new_store_when_linking_fails(tmp_path, monkeypatch, failure):
    """Another process linked its store first (that one is used), or the file system has no
    hard links (SQLite creates the file in place): either way a working store, nothing left
    behind."""
    db = tmp_path / "ccr.db"
    tmp_path.chmod(0o700)

    def link(src, dst):
        if failure is FileExistsError:
            _made_in_place(monkeypatch, dst)
        raise failure(dst)

    monkeypatch.setattr(os, "link", link)
    with store.Store(str(db)) as s:
        s.put(b"x", content_type="t", compressor="t", tokens_before=2, tokens_after=1)
        assert s.get(store.handle_for(b"x")) == b"x"
    assert sorted(os.listdir(tmp_path)) == ["ccr.db"]
    assert _schema(db)[1][0] == [(3,)]


def test_an_existing_store_is_never_rebuilt(tmp_path):
    db = tmp_path / "ccr.db"
    tmp_path.chmod(0o700)
    with store.Store(str(db)) as s:
        s.put(b"kept", content_type="t", compressor="t", tokens_before=2, tokens_after=1)
    inode = db.stat().st_ino
    store._create_complete(str(db))
    with store.Store(str(db)) as s:
        assert s.get(store.handle_for(b"kept")) == b"kept"
    assert db.stat().st_ino == inode


def test_the_code_fingerprint_covers_a_registry_outside_the_package(tmp_path, monkeypatch):
    toml = tmp_path / "registry.toml"
    toml.write_bytes(b"# one\n")
    monkeypatch.setattr(resources, "registry_location", lambda: str(toml))

    def fingerprint():
        monkeypatch.setattr(results, "_fingerprint", None)
        return results.code_fingerprint()

    first = fingerprint()
    assert fingerprint() == first
    toml.write_bytes(b"# two, longer\n")
    assert fingerprint() != first


def test_many_processes_making_one_new_store(tmp_path):
    """Eight processes open the same new store at once: one file is linked into place, every
    process uses it, and nothing else is left in the directory."""
    tmp_path.chmod(0o700)
    db = tmp_path / "ccr.db"
    start = tmp_path / "go"
    script = (
        "import os, sys, time\n"
        "from caveman_engine.store import Store\n"
        "while not os.path.exists(sys.argv[2]): time.sleep(0.001)\n"
        "with Store(sys.argv[1]) as s:\n"
        "    print(s.put(sys.argv[3].encode() * 100, content_type='t', compressor='t',"
        " tokens_before=2, tokens_after=1))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(db), str(start), f"p{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(8)]
    start.write_bytes(b"")
    handles = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        handles.append(out.decode().strip())
    start.unlink()
    assert sorted(os.listdir(tmp_path)) == ["ccr.db"]
    with store.Store(str(db)) as s:
        for i, h in enumerate(handles):
            assert s.get(h) == f"p{i}".encode() * 100
