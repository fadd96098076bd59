"""Security of the recovery store: private from the first syscall, refusals of links and of
other users' files, another OS user locked out, handles validated before SQL, SQL always
parameterised. (Basics — 0600/0700 after creation, a symlinked database, a loose parent, a
database owned by someone else — are in test_store.py.)"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

import caveman_engine
from caveman_engine import store as ccr
from caveman_engine.engine import Engine
from caveman_engine.store import InvalidHandle, NotFound, Store, StoreError

from .conftest import console_script

OTHER_UID = 65534  # nobody
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="needs root to act as another user / chown")


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def log(lines: int = 300, tag: bytes = b"a") -> bytes:
    return b"".join(b"2026-06-01 INFO %s request served id=%d\n" % (tag, i) for i in range(lines))


def run_cli(*args: str, data: bytes = b"", env: dict, umask: int | None = None):
    full = {k: v for k, v in os.environ.items() if k not in ("CAVE_ENGINE_TOON", "CAVEMAN_CCR_DB")}
    full.update(env)
    return subprocess.run(
        [console_script(), *args], input=data, capture_output=True, env=full, timeout=120,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


# --------------------------------------------------------------------------- private from creation


STRACE_CALLS = ("open,openat,creat,mkdir,mkdirat,chmod,fchmod,fchmodat,rename,renameat,renameat2,"
                "link,linkat")
_SYSCALL = re.compile(r'^\d+\s+(\w+)\((?:AT_FDCWD, )?"([^"]*)"(.*)\)\s+=\s+(-?\d+)')


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace(1) not installed")
def test_every_file_and_directory_is_created_private_under_umask_000(tmp_path):
    """Under umask 000 a fresh ``CAVEMAN_HOME`` three levels deep: every directory is
    created 0700 and every file (database, journal, -wal, -shm, rank cache) is created
    with no group/other bits in the creating syscall itself — there is no window in which
    another user could open them. (A file that already exists is not created again; the
    database is made by an exclusive 0600 create before SQLite opens it -- of a temporary
    file, built complete and hard-linked into place: the link gives the same file a name.)"""
    home = tmp_path / "h" / "x" / ".caveman"
    trace = tmp_path / "trace.txt"
    env = {"CAVEMAN_HOME": str(home), "CAVEMAN_CACHE_DIR": ""}
    p = subprocess.run(
        ["strace", "-f", "-qq", "-e", f"trace={STRACE_CALLS}", "-o", str(trace),
         console_script(), "compress"],
        input=log(), capture_output=True, timeout=120, preexec_fn=lambda: os.umask(0),
        env={**{k: v for k, v in os.environ.items() if k != "CAVEMAN_CCR_DB"}, **env},
    )
    if p.returncode != 0 and b"PTRACE" in p.stderr.upper():
        pytest.skip(f"strace cannot trace here: {p.stderr[:200]!r}")
    assert p.returncode == 0, p.stderr
    assert "recovery_handle" in json.loads(p.stderr.splitlines()[-1])
    created_dirs, created_files = [], []
    for line in trace.read_text().splitlines():
        m = _SYSCALL.match(line)
        if not m or not m.group(2).startswith(str(tmp_path / "h")):
            continue
        call, path, rest, rc = m.groups()
        if call in ("link", "linkat") and rc == "0":
            assert path in created_files, line  # only a file this run created is linked
            created_files.append(re.search(r'"([^"]*)"', rest).group(1))
            continue
        if call in ("mkdir", "mkdirat") and rc == "0":
            created_dirs.append(path)
            assert rest.strip(", ") == "0700", line
        if call in ("open", "openat", "creat") and "O_CREAT" in rest and int(rc) >= 0:
            file_mode = int(rest.rsplit(",", 1)[1].strip(), 8)
            if path in created_files or (path.endswith("/ccr.db") and "O_EXCL" not in rest
                                         and str(home / "ccr.db") in created_files):
                continue  # re-opening a file this run already created exclusively
            created_files.append(path)
            assert file_mode & 0o077 == 0, line
        assert call not in ("chmod", "fchmodat") or int(rest.strip(", ").split(",")[0], 8) & 0o077 == 0, line
    assert created_dirs == [str(tmp_path / "h"), str(tmp_path / "h" / "x"), str(home),
                            str(home / "results")]  # the last: kept compress results
    names = {Path(f).name for f in created_files}
    assert {"ccr.db", "ccr.db-wal", "ccr.db-shm"} <= names
    assert any(n.startswith(".rankcache") for n in names)
    for d in (tmp_path / "h", tmp_path / "h" / "x", home, home / "results"):
        assert mode(d) == 0o700
    for f in [*home.iterdir(), *(home / "results").iterdir()]:
        if f.is_file():
            assert mode(f) == 0o600, f


def test_watcher_sees_no_readable_store_file_during_many_creations(tmp_path, rank_cache_dir):
    """Independent of strace: a thread polls the modes of every entry under 12 fresh store
    homes while 12 CLIs create them concurrently under umask 000."""
    base = tmp_path / "homes"
    base.mkdir(mode=0o700)
    homes = [base / f"u{i}" / ".caveman" for i in range(12)]
    seen: list[tuple[str, int]] = []
    stop = threading.Event()
    polls = [0]

    def watch():
        while not stop.is_set():
            polls[0] += 1
            for root, dirs, files in os.walk(base):
                for name in dirs + files:
                    p = os.path.join(root, name)
                    try:
                        m = stat.S_IMODE(os.lstat(p).st_mode)
                    except FileNotFoundError:
                        continue
                    if m & 0o077:
                        seen.append((p, m))

    t = threading.Thread(target=watch)
    t.start()
    try:
        procs = [
            subprocess.Popen(
                [console_script(), "compress"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, preexec_fn=lambda: os.umask(0),
                env={**{k: v for k, v in os.environ.items() if k != "CAVEMAN_CCR_DB"},
                     "CAVEMAN_HOME": str(h), "CAVEMAN_CACHE_DIR": str(rank_cache_dir)},
            )
            for h in homes
        ]
        for p in procs:
            out, err = p.communicate(log(), timeout=120)
            assert p.returncode == 0, err
    finally:
        stop.set()
        t.join()
    assert polls[0] > 10
    assert seen == []
    for h in homes:
        assert mode(h.parent) == mode(h) == 0o700 and mode(h / "ccr.db") == 0o600


def test_missing_parents_of_caveman_home_are_created_0700(tmp_path, rank_cache_dir):
    """Regression: ``os.makedirs`` created the missing parents of ``CAVEMAN_HOME`` with
    0777 & ~umask (world-writable under umask 0, so another user could swap the store's
    directory); Go's ``MkdirAll(home, 0700)`` — the spec's ``mkdir -p`` mode 0700 —
    gives every created directory 0700."""
    home = tmp_path / "p" / "q" / "r" / ".caveman"
    r = run_cli("compress", data=log(), umask=0,
                env={"CAVEMAN_HOME": str(home), "CAVEMAN_CACHE_DIR": str(rank_cache_dir)})
    assert r.returncode == 0, r.stderr
    for d in (tmp_path / "p", tmp_path / "p" / "q", tmp_path / "p" / "q" / "r", home):
        assert mode(d) == 0o700, d
    existing = tmp_path / "open"
    existing.mkdir()
    existing.chmod(0o755)  # an existing directory is left as it is (like MkdirAll)
    r = run_cli("compress", data=log(), umask=0,
                env={"CAVEMAN_HOME": str(existing / ".caveman"),
                     "CAVEMAN_CACHE_DIR": str(rank_cache_dir)})
    assert r.returncode == 0 and mode(existing) == 0o755 and mode(existing / ".caveman") == 0o700


# --------------------------------------------------------------------------- links and swaps


@pytest.fixture
def made_store(store_dir, rank_cache_dir):
    """A store with one original in it, closed (so no -wal/-shm are left)."""
    env = {"CAVEMAN_CCR_DB": str(store_dir / "ccr.db"), "CAVEMAN_CACHE_DIR": str(rank_cache_dir)}
    r = run_cli("compress", data=log(), env=env)
    assert r.returncode == 0
    assert not (store_dir / "ccr.db-wal").exists() and not (store_dir / "ccr.db-shm").exists()
    return store_dir / "ccr.db", env, json.loads(r.stderr)["recovery_handle"]


@pytest.mark.parametrize("sidecar", ["-wal", "-shm"])
def test_symlinked_sidecar_is_refused_and_its_target_untouched(made_store, tmp_path, sidecar):
    db, env, handle = made_store
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"not yours\n")
    victim.chmod(0o644)
    link = Path(str(db) + sidecar)
    link.symlink_to(victim)
    for args in (["compress"], ["retrieve", handle], ["stats"]):
        r = run_cli(*args, data=log(50), env=env)
        assert (r.returncode, r.stdout) == (1, b"")
        assert r.stderr.decode() == (
            f'caveman-engine {args[0]}: cannot open recovery store: secure sqlite sidecar '
            f'"{link}": refusing non-regular file\n'
        )
    assert victim.read_bytes() == b"not yours\n" and mode(victim) == 0o644
    assert os.path.islink(link)


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling-symlink"])
def test_non_regular_sidecar_is_refused_without_hanging(made_store, kind):
    db, env, _ = made_store
    wal = Path(str(db) + "-wal")
    if kind == "fifo":
        os.mkfifo(wal, 0o600)
    elif kind == "directory":
        wal.mkdir(mode=0o700)
    else:
        wal.symlink_to(db.parent / "nowhere")
    r = run_cli("compress", data=log(50), env=env)
    assert r.returncode == 1
    assert r.stderr.decode() == (
        f'caveman-engine compress: cannot open recovery store: secure sqlite sidecar "{wal}": '
        'refusing non-regular file\n'
    )
    assert not (db.parent / "nowhere").exists()


def test_parent_symlink_swapped_after_validation(tmp_path, monkeypatch):
    """ccr_spec §6: every step after validation uses the canonical path, so repointing the
    parent symlink right after it was resolved cannot redirect the database."""
    good, evil = tmp_path / "good", tmp_path / "evil"
    good.mkdir(mode=0o700)
    evil.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(good)
    real = os.path.realpath
    swapped = []

    def realpath_then_swap(p, *a, **kw):
        out = real(p, *a, **kw)
        if os.fspath(p) == str(link) and not swapped:
            link.unlink()
            link.symlink_to(evil)  # the attacker wins the race
            swapped.append(out)
        return out

    monkeypatch.setattr(os.path, "realpath", realpath_then_swap)
    with Store(str(link / "ccr.db")) as s:
        s.put(b"secret", content_type="t", compressor="t", tokens_before=2, tokens_after=1)
        assert s.path == str(good / "ccr.db")
    monkeypatch.undo()
    assert swapped == [str(good)]
    assert os.listdir(evil) == []
    assert "ccr.db" in os.listdir(good) and mode(good / "ccr.db") == 0o600


# --------------------------------------------------------------------------- another OS user


def as_user(uid: int, fn) -> object:
    """Run ``fn`` in a forked child that has dropped to ``uid``; returns its JSON result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            out = json.dumps(fn()).encode()
            os.write(w, out)
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent
            os.write(w, json.dumps({"child-error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks))


def errno_of(fn) -> str:
    try:
        fn()
    except OSError as exc:
        return os.strerror(exc.errno)
    return "ok"


@pytest.fixture
def shared_tmp():
    """A world-traversable directory (pytest's tmp dirs are 0700 to everyone else) with a
    sticky world-writable ``shared`` (like /tmp) and a private ``home`` (0700) inside."""
    base = Path(tempfile.mkdtemp(prefix="caveman-sec-"))
    base.chmod(0o755)
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o777 | stat.S_ISVTX)
    home = base / "home"
    home.mkdir(mode=0o700)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@needs_root
def test_another_user_cannot_read_list_link_or_replace_the_store(shared_tmp):
    """The real check of 0700/0600: another OS user (uid 65534) gets EACCES/EPERM for every
    way in — even in a sticky world-writable directory where only the file modes protect."""
    results = {}
    for where in ("home", "shared"):
        d = shared_tmp / where
        s = Store(str(d / "ccr.db"))
        s.put(b"top secret original", content_type="t", compressor="t", tokens_before=9,
              tokens_after=1)
        # keep it open: -wal and -shm exist while the attacker tries
        assert (d / "ccr.db-wal").exists() and (d / "ccr.db-shm").exists()
        paths = [str(d / n) for n in ("ccr.db", "ccr.db-wal", "ccr.db-shm")]

        def attack(d=d, paths=paths):
            out = {"list": errno_of(lambda: os.listdir(d))}
            for p in paths:
                name = os.path.basename(p)
                out["read " + name] = errno_of(lambda p=p: open(p, "rb").close())
                out["write " + name] = errno_of(lambda p=p: open(p, "r+b").close())
                out["unlink " + name] = errno_of(lambda p=p: os.unlink(p))
                out["rename " + name] = errno_of(lambda p=p: os.rename(p, p + ".x"))
                out["link " + name] = errno_of(lambda p=p: os.link(p, str(shared_tmp / "shared" / ("l-" + name))))
            return out

        results[where] = as_user(OTHER_UID, attack)
        assert Engine(s).retrieve(ccr.handle_for(b"top secret original")) == b"top secret original"
        s.close()
    denied = {"Permission denied", "Operation not permitted"}
    for where, out in results.items():
        assert "child-error" not in out, out
        for action, err in out.items():
            if where == "shared" and action == "list":
                assert err == "ok"  # the directory is listable; the files are not readable
                continue
            if action.startswith("link ") and where == "shared":
                # protected_hardlinks refuses it; were it allowed, the link has the same 0600 inode
                assert err in denied or Path(shared_tmp / "shared" / ("l-" + action[5:])).stat().st_mode & 0o077 == 0
                continue
            assert err in denied, (where, action, err)


@needs_root
@pytest.mark.parametrize("name", ["ccr.db", "ccr.db-wal", "ccr.db-shm"])
def test_files_planted_by_another_user_in_a_sticky_dir_are_refused(shared_tmp, name):
    """In /tmp-like directories another user can create our file names first."""
    shared = shared_tmp / "shared"
    planted = shared / name

    def plant():
        fd = os.open(planted, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        os.close(fd)
        os.chmod(planted, 0o666)
        return "planted"

    assert as_user(OTHER_UID, plant) == "planted"
    label = "secure sqlite" if name == "ccr.db" else "secure sqlite sidecar"
    with pytest.raises(StoreError) as exc:
        Store(str(shared / "ccr.db"))
    assert str(exc.value) == f'{label} "{planted}": refusing file owned by another user'
    assert planted.stat().st_uid == OTHER_UID and mode(planted) == 0o666


@needs_root
def test_symlink_planted_by_another_user_is_refused(shared_tmp, tmp_path):
    shared = shared_tmp / "shared"
    target = shared_tmp / "home" / "mine.txt"
    target.write_bytes(b"mine")

    def plant():
        os.symlink(target, shared / "ccr.db")
        return "planted"

    assert as_user(OTHER_UID, plant) == "planted"
    with pytest.raises(StoreError, match="refusing non-regular file"):
        Store(str(shared / "ccr.db"))
    assert target.read_bytes() == b"mine"


# --------------------------------------------------------------------------- handles and SQL


HOSTILE = [
    "'; DROP TABLE recoveries; --",
    "ccr_x' OR '1'='1",
    'ccr_" OR 1=1 --',
    "ccr_%",
    "ccr_*",
    "ccr_00000000000000000000000000000000; DELETE FROM recoveries",
    "../../etc/passwd",
    "/etc/passwd",
    "ccr_\u0441\u0441r",  # Cyrillic lookalikes
    "ccr_0000\n0000",
    "ccr_00 00",
    " ccr_00",
    "ccr_" + "0" * 200,
    "ccr_\u200b",
    "\\x00",
]


def test_hostile_handles_are_rejected_before_any_sql(store_dir):
    with Store(str(store_dir / "ccr.db")) as s:
        h = s.put(b"original", content_type="t", compressor="t", tokens_before=2, tokens_after=1)
        statements: list[str] = []
        s._conn.set_trace_callback(statements.append)
        engine = Engine(s)
        for bad in HOSTILE:
            with pytest.raises(InvalidHandle):
                engine.retrieve(bad)
            with pytest.raises(InvalidHandle):
                s.get_metadata(bad)
        assert statements == []  # validated before any query reached SQLite
        # well-formed but absent: bound as an exact match (no LIKE, no case folding); the
        # trace shows statements with the bound value expanded
        absent = ["ccr_" + "_" * 32, h.upper(), h[:-1], h + "0", "ccr_obj_" + h[4:]]
        for a in absent:
            with pytest.raises(NotFound):
                engine.retrieve(a)
        expected = {f"SELECT original FROM recoveries WHERE handle = '{a}'" for a in absent} | {
            f"SELECT data FROM typed_objects WHERE object_id = '{a}'" for a in absent}
        assert statements and set(statements) <= expected
        assert engine.retrieve(h) == b"original"
        assert s._conn.execute("SELECT COUNT(*) FROM recoveries").fetchone()[0] == 1


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_handle_through_the_cli_is_a_one_line_error(made_store, bad):
    db, env, handle = made_store
    r = run_cli("retrieve", bad, env=env)
    assert (r.returncode, r.stdout) == (1, b"")
    from caveman_engine.stdio import one_line

    assert r.stderr == f"caveman-engine retrieve: {one_line(bad)}: malformed recovery handle\n" \
        .encode()
    assert r.stderr.count(b"\n") == 1
    r = run_cli("retrieve", handle, bad, env=env)  # hostile query: narrowing, not SQL
    assert r.returncode == 0 and r.stdout == log()
    with Store(str(db)) as s:
        assert s._conn.execute("SELECT COUNT(*) FROM recoveries").fetchone()[0] == 1


def _sql_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("execute", "executemany", "executescript") and node.args):
            yield node


def _is_int_expr(node: ast.AST) -> bool:
    """An expression that can only produce a number: an int literal, ``int(...)``, a floor
    division (``//`` never yields a string), min/max or + - * of such."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "int":
            return True
        if node.func.id in ("max", "min"):
            return bool(node.args) and all(_is_int_expr(a) for a in node.args)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.FloorDiv):
            return True
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            return _is_int_expr(node.left) and _is_int_expr(node.right)
    return False


# SQL passed by name: the migration statements read from the package's own SQL files, and
# _fetch's ``sql`` (every caller passes a literal — checked below).
ALLOWED_NAMES = {("store.py", "stmt"), ("store.py", "sql")}


def test_sql_is_always_a_literal_or_parameterised():
    """Guard: every execute() in the package takes a string literal (values bound as ``?``),
    a PRAGMA f-string interpolating only integers (PRAGMA values cannot be bound), or an
    allow-listed name; never %-formatting, .format(), concatenation or other f-strings."""
    root = Path(caveman_engine.__file__).resolve().parent
    checked = 0
    problems = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for call in _sql_calls(tree):
            sql = call.args[0]
            where = f"{path.relative_to(root)}:{call.lineno}"
            checked += 1
            if isinstance(sql, ast.Constant) and isinstance(sql.value, str):
                continue
            if isinstance(sql, ast.JoinedStr):
                literal = "".join(v.value for v in sql.values if isinstance(v, ast.Constant))
                values = [v.value for v in sql.values if isinstance(v, ast.FormattedValue)]
                if literal.startswith("PRAGMA ") and all(_is_int_expr(v) for v in values):
                    continue
            if isinstance(sql, ast.Name) and (path.name, sql.id) in ALLOWED_NAMES:
                continue
            problems.append(f"{where}: {ast.unparse(sql)}")
        for node in ast.walk(tree):  # callers of _fetch pass literals
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "_fetch"):
                if not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                    problems.append(f"{path.name}:{node.lineno}: _fetch({ast.unparse(node.args[0])})")
    assert problems == []
    assert checked >= 10  # the scan does see the store's statements


def test_sql_guard_catches_formatted_sql():
    """The guard itself fails on the patterns it exists to catch."""
    bad = [
        'c.execute(f"SELECT original FROM recoveries WHERE handle = \'{handle}\'")',
        'c.execute("SELECT * FROM recoveries WHERE handle = \'%s\'" % handle)',
        'c.execute("SELECT * FROM recoveries WHERE handle = \'{}\'".format(handle))',
        'c.execute("SELECT * FROM recoveries WHERE handle = \'" + handle + "\'")',
        'c.execute(f"PRAGMA user_version={handle}")',
        "c.execute(query)",
    ]
    for src in bad:
        call = next(_sql_calls(ast.parse(src)))
        sql = call.args[0]
        ok = (isinstance(sql, ast.Constant)
              or (isinstance(sql, ast.JoinedStr)
                  and all(_is_int_expr(v.value) for v in sql.values if isinstance(v, ast.FormattedValue))))
        assert not ok, src
