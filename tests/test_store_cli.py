"""`caveman-engine store path|info|vacuum|export|purge` through the real console script, on
real SQLite files."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pty
import select
import sqlite3
import stat
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from caveman_engine.store import Store, handle_for

from .conftest import console_script

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tools.json"
OLD = "2020-01-02T03:04:05.5Z"


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def blob(tag: str, n: int = 4000) -> bytes:
    return (f"{tag} line ".encode() * n) + tag.encode()


def populate(db: Path) -> dict[str, list[str]]:
    """Three log originals, two json, one with metadata, one typed object; returns handles
    per type (``object`` for the typed object)."""
    out: dict[str, list[str]] = {"log": [], "json": [], "object": []}
    with Store(str(db)) as s:
        for i in range(3):
            out["log"].append(s.put(blob(f"log{i}"), content_type="log", compressor="log",
                                    tokens_before=1000, tokens_after=100))
        for i in range(2):
            out["json"].append(s.put(blob(f"json{i}", 2000), content_type="json",
                                     compressor="json", tokens_before=500, tokens_after=50,
                                     metadata=b"meta" if i == 0 else None))
        out["object"].append(s.put_object(b'{"path": "a.py"}', object_type="FileObservation",
                                          session_id="s1", source="a.py"))
    return out


def age_rows(db: Path, handles: list[str], created_at: str = OLD) -> None:
    """Make rows old by writing created_at straight into the file (column of store/*.sql)."""
    c = sqlite3.connect(db)
    with c:
        for h in handles:
            c.execute("UPDATE recoveries SET created_at = ? WHERE handle = ?", (created_at, h))
            c.execute("UPDATE typed_objects SET created_at = ? WHERE object_id = ?",
                      (created_at, h))
    c.close()


def jrun(cli, *args, **kw) -> dict:
    r = cli(*args, "--format", "json", **kw)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def files_in(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


# --------------------------------------------------------------------------- path


def test_path_follows_the_compress_resolution_and_creates_nothing(cli, store_dir, tmp_path):
    r = cli("store", "path")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{store_dir / 'ccr.db'}\n".encode(), b"")
    home = tmp_path / "nowhere" / ".caveman"
    r = cli("store", "path", env={"CAVEMAN_CCR_DB": "", "CAVEMAN_HOME": str(home)})
    assert r.stdout == f"{home / 'ccr.db'}\n".encode()
    user = tmp_path / "user"
    user.mkdir()
    r = cli("store", "path", env={"CAVEMAN_CCR_DB": None, "CAVEMAN_HOME": None, "HOME": str(user)})
    assert r.stdout == f"{user / '.caveman' / 'ccr.db'}\n".encode()
    assert cli("store", "path", env={"CAVEMAN_CCR_DB": ":memory:"}).stdout == b":memory:\n"
    assert not home.parent.exists() and files_in(user) == [] and files_in(store_dir) == []


# --------------------------------------------------------------------------- info


def test_info_on_a_missing_store_says_so_and_creates_nothing(cli, store_dir, tmp_path):
    r = cli("store", "info")
    assert r.returncode == 0 and b"does not exist yet" in r.stdout
    assert jrun(cli, "store", "info") == {"path": str(store_dir / "ccr.db"), "exists": False}
    home = tmp_path / "h" / ".caveman"
    r = cli("store", "info", env={"CAVEMAN_CCR_DB": "", "CAVEMAN_HOME": str(home)})
    assert r.returncode == 0
    assert files_in(store_dir) == [] and not home.parent.exists()


def test_info_on_an_empty_store(cli, store_dir):
    Store(str(store_dir / "ccr.db")).close()
    doc = jrun(cli, "store", "info")
    assert doc["exists"] is True and doc["originals"] == 0
    assert doc["kept_bytes"] == 0 and doc["max_bytes"] == 512 << 20
    assert doc["oldest"] is None and doc["newest"] is None
    assert doc["schema_version"] == 3 and doc["disk_bytes"] > 0
    assert cli("store", "info").returncode == 0


def test_info_on_a_populated_store(cli, store_dir):
    db = store_dir / "ccr.db"
    r = cli("compress", "--type", "toolschema", str(EXAMPLE))
    assert r.returncode == 0 and json.loads(r.stderr)["recovery_handle"]
    handles = populate(db)
    age_rows(db, handles["log"][:1])
    sizes = {n: os.path.getsize(store_dir / n) for n in files_in(store_dir)}
    doc = jrun(cli, "store", "info", env={"CAVEMAN_CCR_MAX_BYTES": str(4 << 20)})
    assert doc["path"] == str(db)
    assert doc["disk_bytes"] == sum(sizes.values())
    assert doc["originals"] == 7
    assert doc["blobs"]["count"] == 6
    by_type = doc["blobs"]["by_content_type"]
    assert {t: v["count"] for t, v in by_type.items()} == {"json": 2, "log": 3, "toolschema": 1}
    assert by_type["toolschema"]["bytes"] == EXAMPLE.stat().st_size
    assert by_type["json"]["bytes"] == len(blob("json0", 2000)) + 4 + len(blob("json1", 2000))
    assert doc["typed_objects"]["by_object_type"]["FileObservation"]["count"] == 1
    stats = json.loads(cli("stats").stdout)
    assert doc["kept_bytes"] == stats["storage_bytes"]
    assert doc["max_bytes"] == 4 << 20
    assert doc["percent_used"] == round(100 * doc["kept_bytes"] / (4 << 20), 2)
    assert doc["oldest"] == OLD
    assert doc["newest"] > "2024"
    text = cli("store", "info", env={"CAVEMAN_CCR_MAX_BYTES": str(4 << 20)}).stdout.decode()
    assert f"store      {db}" in text and "FileObservation (object)" in text
    assert f"of {4 << 20} bytes" in text and f"oldest     {OLD}" in text


# --------------------------------------------------------------------------- export


def check_export(root: dict[str, bytes], expected: set[str]) -> list[dict]:
    """Files by name → bytes: every original exact, manifest complete."""
    manifest = [json.loads(line) for line in root["manifest.jsonl"].decode().splitlines()]
    assert {m["handle"] for m in manifest} == expected
    for m in manifest:
        data = root[m["file"]]
        assert m["file"] == m["handle"]
        assert len(data) == m["size"]
        assert hashlib.sha256(data).hexdigest() == m["sha256"]
        assert {"content_type", "compressor", "tokens_before", "tokens_after",
                "created_at"} <= set(m)
        if m["kind"] == "blob":
            assert handle_for(data) == m["handle"]
            assert m["handle"] == "ccr_" + hashlib.sha256(data).digest()[:16].hex()
        else:
            assert m["object"]["content_hash"] == "sha256:" + m["sha256"]
    return manifest


def test_export_to_a_directory(cli, store_dir, tmp_path):
    handles = populate(store_dir / "ccr.db")
    (tmp_path / "backup").mkdir()
    dest = tmp_path / "backup" / "ccr"
    r = cli("store", "export", str(dest))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().startswith("exported 6 originals")
    assert mode(dest) == 0o700
    for name in files_in(dest):
        assert mode(dest / name) == 0o600, name
    everything = {h for hs in handles.values() for h in hs}
    manifest = check_export({n: (dest / n).read_bytes() for n in files_in(dest)}, everything)
    by_handle = {m["handle"]: m for m in manifest}
    first_json = by_handle[handles["json"][0]]
    assert (first_json["content_type"], first_json["compressor"], first_json["tokens_before"],
            first_json["tokens_after"]) == ("json", "json", 500, 50)
    assert (dest / first_json["metadata_file"]).read_bytes() == b"meta"
    assert by_handle[handles["object"][0]]["content_type"] == "FileObservation"
    for h in everything:  # what retrieve gives back is what was exported
        assert cli("retrieve", h).stdout == (dest / h).read_bytes()


def test_export_never_overwrites_silently(cli, store_dir, tmp_path):
    handles = populate(store_dir / "ccr.db")
    dest = tmp_path / "out"
    dest.mkdir(mode=0o700)
    victim = dest / handles["log"][0]
    victim.write_bytes(b"mine")
    r = cli("store", "export", str(dest))
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr.count(b"\n") == 1 and b"--force" in r.stderr
    assert files_in(dest) == [victim.name] and victim.read_bytes() == b"mine"
    r = cli("store", "export", str(dest), "--force", "-q")
    assert (r.returncode, r.stderr) == (0, b"")
    assert victim.read_bytes() == blob("log0") and mode(victim) == 0o600
    tar = tmp_path / "b.tar"
    tar.write_bytes(b"old")
    r = cli("store", "export", str(tar))
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and tar.read_bytes() == b"old"
    assert files_in(tmp_path) == ["b.tar", "out", "store"]  # no temporary left behind
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    r = cli("store", "export", str(plain))
    assert r.returncode == 1 and b"not a directory" in r.stderr


@pytest.mark.parametrize("name", ["backup.tar", "backup.tar.gz"])
def test_export_to_a_tar_file(cli, store_dir, tmp_path, name):
    handles = populate(store_dir / "ccr.db")
    dest = tmp_path / name
    doc = jrun(cli, "store", "export", str(dest), "--type", "log", "--type", "FileObservation")
    assert doc == {"dest": str(dest), "format": "tar", "count": 4,
                   "bytes": sum(len(blob(f"log{i}")) for i in range(3)) + 16}
    assert mode(dest) == 0o600
    with tarfile.open(dest) as t:
        members = t.getmembers()
        assert all(m.isfile() and m.mode == 0o600 and "/" not in m.name for m in members)
        root = {m.name: t.extractfile(m).read() for m in members}
    if name.endswith(".gz"):
        assert dest.read_bytes()[:2] == b"\x1f\x8b"
    check_export(root, set(handles["log"]) | set(handles["object"]))
    r = cli("store", "export", str(dest))
    assert r.returncode == 1 and b"exists" in r.stderr
    assert cli("store", "export", str(dest), "--force").returncode == 0


def test_export_names_unsafe_ids_by_hash(cli, store_dir, tmp_path):
    """A typed object written by another tool under an id that is no file name (``../x``)."""
    db = store_dir / "ccr.db"
    Store(str(db)).close()
    c = sqlite3.connect(db)
    with c:
        c.execute("INSERT INTO typed_objects VALUES ('../x', 'FileObservation', ?, '', ?, '',"
                  " 's', '', 'current', 'hot', 'null', 3, 3, ?)",
                  ("sha256:" + hashlib.sha256(b"abc").hexdigest(), OLD, b"abc"))
    c.close()
    dest = tmp_path / "out"
    assert jrun(cli, "store", "export", str(dest))["count"] == 1
    (line,) = (dest / "manifest.jsonl").read_text().splitlines()
    m = json.loads(line)
    assert m["handle"] == "../x" and m["file"].startswith("obj_") and "/" not in m["file"]
    assert (dest / m["file"]).read_bytes() == b"abc"
    assert files_in(tmp_path) == ["out", "store"]


def test_export_older_than(cli, store_dir, tmp_path):
    handles = populate(store_dir / "ccr.db")
    age_rows(store_dir / "ccr.db", [handles["json"][1]])
    dest = tmp_path / "old"
    assert jrun(cli, "store", "export", str(dest), "--older-than", "30d")["count"] == 1
    assert set(files_in(dest)) == {handles["json"][1], "manifest.jsonl"}


# --------------------------------------------------------------------------- purge


def test_purge_by_type(cli, store_dir):
    handles = populate(store_dir / "ccr.db")
    before = json.loads(cli("stats").stdout)
    doc = jrun(cli, "store", "purge", "--type", "log", "--yes")
    gone = sum(len(blob(f"log{i}")) for i in range(3))
    assert (doc["dry_run"], doc["count"], doc["bytes"]) == (False, 3, gone)
    assert sorted(doc["handles"]) == sorted(handles["log"])
    assert doc["kept_bytes_after"] == doc["kept_bytes_before"] - gone
    for h in handles["log"]:
        r = cli("retrieve", h)
        assert (r.returncode, r.stdout) == (1, b"")
        assert r.stderr == f"caveman-engine retrieve: {h}: recovery handle not found\n".encode()
    for h in handles["json"] + handles["object"]:
        assert cli("retrieve", h).returncode == 0
    assert cli("retrieve", handles["json"][0]).stdout == blob("json0", 2000)
    after = json.loads(cli("stats").stdout)
    assert after["totals"]["count"] == before["totals"]["count"] - 3
    assert "log" not in after["by_content_type"]
    assert after["by_content_type"]["json"] == before["by_content_type"]["json"]
    assert after["storage_bytes"] == before["storage_bytes"] - gone == doc["kept_bytes_after"]


def test_purge_by_age(cli, store_dir):
    db = store_dir / "ccr.db"
    handles = populate(db)
    old = [handles["log"][0], handles["json"][1], handles["object"][0]]
    age_rows(db, old)
    # ten minutes ago, with a fraction (compared as a time, not as text)
    ten = time.strftime("%Y-%m-%dT%H:%M:%S.5Z", time.gmtime(time.time() - 600))
    age_rows(db, [handles["log"][1]], ten)
    doc = jrun(cli, "store", "purge", "--older-than", "30d", "--yes")
    assert sorted(doc["handles"]) == sorted(old)
    assert doc["by_type"]["FileObservation"]["count"] == 1
    for h in old:
        assert cli("retrieve", h).stderr == (f"caveman-engine retrieve: {h}: recovery handle not "
                                             "found\n").encode()
    assert cli("retrieve", handles["log"][1]).returncode == 0
    doc = jrun(cli, "store", "purge", "--older-than", "5m", "--type", "json", "--yes")
    assert doc["count"] == 0  # the ten-minute-old row is a log
    doc = jrun(cli, "store", "purge", "--older-than", "5m", "--yes")
    assert doc["handles"] == [handles["log"][1]]
    r = cli("store", "purge", "--older-than", "1w", "--yes")
    assert r.returncode == 0 and r.stdout == b"no original matched; nothing deleted\n"


def test_dry_run_changes_nothing(cli, store_dir):
    db = store_dir / "ccr.db"
    handles = populate(db)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    r = cli("store", "purge", "--all", "--dry-run")
    assert r.returncode == 0
    assert r.stdout.decode().startswith("would delete 6 originals")
    doc = jrun(cli, "store", "purge", "--type", "json", "--dry-run")
    assert (doc["dry_run"], doc["count"]) == (True, 2)
    assert doc["kept_bytes_after"] == doc["kept_bytes_before"]
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    for h in sum(handles.values(), []):
        assert cli("retrieve", h).returncode == 0


def test_purge_refuses_what_it_cannot_be_sure_of(cli, store_dir):
    handles = populate(store_dir / "ccr.db")
    for args, needle in [
        ((), b"--older-than AGE and/or --type T, or --all"),
        (("--all", "--type", "log"), b"cannot be combined"),
        (("--older-than", "30x", "--yes"), b"not an age"),
        (("--older-than", "30", "--yes"), b"not an age"),
        (("--type", "log"), b"stdin is not a terminal"),  # no --yes, stdin a pipe
        (("--all",), b"stdin is not a terminal"),
    ]:
        r = cli("store", "purge", *args, input=b"y\n")
        assert (r.returncode, r.stdout) == (2, b""), args
        assert needle in r.stderr and r.stderr.count(b"\n") == 1, (args, r.stderr)
    for h in sum(handles.values(), []):
        assert cli("retrieve", h).returncode == 0


def on_terminal(args, env, answer: bytes, timeout=30):
    """Run with stdin on a pseudo-terminal and type ``answer`` once the question shows."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([console_script(), *args], env=env, stdin=slave,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        err = b""
        while b"[y/N]" not in err and time.monotonic() < deadline:
            ready, _, _ = select.select([p.stderr], [], [], 0.5)
            if ready:
                chunk = os.read(p.stderr.fileno(), 4096)
                if not chunk:
                    break
                err += chunk
        os.write(master, answer)
        out, rest = p.communicate(timeout=timeout)
    finally:
        os.close(master)
        os.close(slave)
    return p.returncode, out, err + rest


@pytest.fixture
def env(cli_env):
    return cli_env


def test_purge_asks_on_a_terminal(cli, store_dir, env):
    handles = populate(store_dir / "ccr.db")
    code, out, err = on_terminal(["store", "purge", "--type", "json"], env, b"n\n")
    assert code == 1 and out == b""
    assert b"Delete 2 originals (" in err and b"[y/N]" in err
    assert b"not confirmed; nothing deleted" in err
    assert cli("retrieve", handles["json"][0]).returncode == 0
    code, out, err = on_terminal(["store", "purge", "--type", "json"], env, b"y\n")
    assert code == 0, err
    assert out.decode().startswith("deleted 2 originals")
    assert cli("retrieve", handles["json"][0]).returncode == 1
    assert cli("retrieve", handles["log"][0]).returncode == 0


def test_purged_bytes_leave_the_file_and_vacuum_shrinks_it(cli, store_dir):
    db = store_dir / "ccr.db"
    secret = b"SECRET-" + os.urandom(8).hex().encode()
    with Store(str(db)) as s:
        s.put(secret + b" " + os.urandom(400_000).hex().encode(), content_type="log",
              compressor="log", tokens_before=10, tokens_after=1)
        kept = s.put(blob("keep"), content_type="json", compressor="json", tokens_before=10,
                     tokens_after=1)
    assert jrun(cli, "store", "purge", "--type", "log", "--yes")["count"] == 1
    on_disk = b"".join(p.read_bytes() for p in store_dir.iterdir())
    assert secret not in on_disk  # overwritten, not just unlinked from the b-tree
    r = cli("store", "vacuum", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["before_bytes"] > 800_000 and doc["after_bytes"] < doc["before_bytes"] // 4
    assert doc["reclaimed_bytes"] == doc["before_bytes"] - doc["after_bytes"]
    assert doc["after_bytes"] == sum(p.stat().st_size for p in store_dir.iterdir())
    text = cli("store", "vacuum").stdout.decode()
    assert text.startswith(f"vacuumed {db}: ")
    assert cli("retrieve", kept).stdout == blob("keep")
    for name in files_in(store_dir):
        assert mode(store_dir / name) == 0o600


# --------------------------------------------------------------------------- conventions


def test_missing_store_is_never_created(cli, store_dir, tmp_path):
    assert b"nothing to vacuum" in cli("store", "vacuum").stdout
    doc = jrun(cli, "store", "purge", "--all", "--yes")
    assert (doc["exists"], doc["count"]) == (False, 0)
    r = cli("store", "export", str(tmp_path / "x"))  # as purge and vacuum: exit 0, nothing
    assert (r.returncode, r.stderr) == (0, b"") and b"no recovery store" in r.stdout
    assert files_in(store_dir) == [] and not (tmp_path / "x").exists()


def test_quiet_and_usage_errors(cli, store_dir):
    populate(store_dir / "ccr.db")
    r = cli("store", "purge", "--type", "log", "--yes")
    assert r.returncode == 0 and b"store vacuum" in r.stderr
    r = cli("store", "purge", "--type", "json", "--yes", "-q")
    assert (r.returncode, r.stderr) == (0, b"")
    r = cli("store", "purge", "--type", "nope", "--yes")
    assert b"types in the store: FileObservation" in r.stderr
    r = cli("store", "purge", "-q")  # errors are not informational
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1
    r = cli("store", "frob")
    assert (r.returncode, r.stderr.count(b"\n")) == (2, 1) and b"unknown subcommand" in r.stderr
    r = cli("store", "info", "--bogus")
    assert (r.returncode, r.stderr.count(b"\n")) == (2, 1)
    r = cli("store", "info", "--format", "yaml")
    assert r.returncode == 2
    r = cli("store", "export")
    assert r.returncode == 2 and r.stderr.startswith(b"caveman-engine store export: ")


def test_bad_store_is_one_line_exit_1(cli, store_dir):
    (store_dir / "ccr.db").write_bytes(b"not a database" * 100)
    for args in (("info",), ("vacuum",), ("purge", "--all", "--yes"),
                 ("export", str(store_dir / "x"))):
        r = cli("store", *args)
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1, (args, r.stderr)
        assert r.stderr.startswith(f"caveman-engine store {args[0]}: cannot open recovery "
                                   "store: ".encode()), r.stderr


@pytest.mark.parametrize("sub", ["path", "info", "vacuum", "export", "purge"])
def test_every_subcommand_has_help_with_an_example(cli, sub, store_dir):
    r = cli("store", sub, "--help")
    assert r.returncode == 0 and b"Example" in r.stdout and b"caveman-engine store" in r.stdout
    assert files_in(store_dir) == []
    r = cli("store", "--help")
    assert r.returncode == 0 and b"purge" in r.stdout
    assert b"store" in cli("--help").stdout


# --------------------------------------------------------------------------- export failures (issue 27.7)


@pytest.mark.parametrize("dest", ["", " ", "\t"])
def test_export_to_an_empty_destination_is_a_usage_error(store_dir, tmp_path, cli_env, dest):
    """`store export ""` used to write every original into the current directory and then
    report failure: an empty destination is refused before anything is read or written."""
    populate(store_dir / "ccr.db")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = subprocess.run([console_script(), "store", "export", dest], capture_output=True,
                       cwd=cwd, env=cli_env, timeout=60)
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr == (b"caveman-engine store export: DEST is empty: name a directory or a "
                        b".tar or .tar.gz file\n")
    assert os.listdir(cwd) == []


def _export_with_file_limit(cli_env, dest, limit: int, *extra):
    """The real CLI with RLIMIT_FSIZE: a write past ``limit`` bytes fails (EFBIG), as on a
    full disk, part-way through the export."""
    import resource
    import signal

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([console_script(), "store", "export", str(dest), *extra],
                          capture_output=True, env=dict(cli_env, PYTHONDONTWRITEBYTECODE="1"),
                          timeout=60, preexec_fn=limited)


def _half_exportable(store_dir):
    """The json originals (~20 KB) sort first and fit the 36 KB limit, the logs (~40 KB) do
    not: the export fails after writing some files."""
    handles = populate(store_dir / "ccr.db")
    age_rows(store_dir / "ccr.db", handles["json"])
    return handles


def test_a_failed_directory_export_leaves_nothing(store_dir, tmp_path, cli_env):
    _half_exportable(store_dir)
    dest = tmp_path / "backup"
    r = _export_with_file_limit(cli_env, dest, 36_000)
    assert (r.returncode, r.stdout) == (1, b""), r.stderr
    assert r.stderr.count(b"\n") == 1 and b"File too large" in r.stderr, r.stderr
    assert os.listdir(tmp_path) == ["store"]  # not even the directory it made
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o700)
    (existing / "keep.txt").write_bytes(b"mine")
    r = _export_with_file_limit(cli_env, existing, 36_000)
    assert r.returncode == 1 and b"File too large" in r.stderr, r.stderr
    assert os.listdir(existing) == ["keep.txt"] and (existing / "keep.txt").read_bytes() == b"mine"
    r = _export_with_file_limit(cli_env, existing, 36_000, "--force")
    assert r.returncode == 1 and os.listdir(existing) == ["keep.txt"]
    r = _export_with_file_limit(cli_env, existing, 1 << 30)  # the same export, room enough
    assert r.returncode == 0, r.stderr
    assert len(os.listdir(existing)) == 1 + 6 + 1 + 1  # keep, 6 originals, metadata, manifest


def test_a_failed_tar_export_leaves_nothing(store_dir, tmp_path, cli_env):
    _half_exportable(store_dir)
    out = tmp_path / "out"
    out.mkdir()
    r = _export_with_file_limit(cli_env, out / "backup.tar", 36_000)
    assert (r.returncode, r.stdout) == (1, b"") and b"File too large" in r.stderr, r.stderr
    assert os.listdir(out) == []


def test_a_directory_export_without_hard_links(store_dir, tmp_path, monkeypatch):
    """A file system without hard links (os.link fails with EPERM): the staged files are
    renamed into place instead, still never over an existing one."""
    from caveman_engine import store as ccr

    populate(store_dir / "ccr.db")

    def no_links(*args, **kw):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    dest = tmp_path / "out"
    with Store(str(store_dir / "ccr.db")) as s:
        result = ccr.export_originals(s, str(dest))
        assert result.count == 6 and len(os.listdir(dest)) == 6 + 1 + 1
        with pytest.raises(ccr.ExportError, match="exists"):
            ccr.export_originals(s, str(dest))
        (dest / "manifest.jsonl").unlink()
        with pytest.raises(ccr.ExportError, match="exists"):  # the clash is found first
            ccr.export_originals(s, str(dest))
    assert len(os.listdir(dest)) == 6 + 1  # nothing added, no staging directory left
    assert not [n for n in os.listdir(dest) if n.startswith(".")]
