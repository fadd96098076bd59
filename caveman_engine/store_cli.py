"""The ``store`` command group (loaded lazily by ``caveman_engine.cli``): see, vacuum, back up
and purge the recovery store without ``rm``.

This module parses and prints; the storage work is done by methods of
:class:`caveman_engine.store.Store` (``info``, ``vacuum``, ``entries``/``read``, ``purge``) and
by :func:`caveman_engine.store.export_originals`. Reports go to stdout (``--format text|json``);
informational lines go to stderr (silenced by ``-q``); errors are one line on stderr, exit 1,
usage errors exit 2. Nothing here creates a store that does not exist yet.
"""

from __future__ import annotations

import os
import re
import sys
import time

import click

from .cli import (FORMAT, RequiredSubcommand, error, fail, json_bytes, nonempty,
                  open_store_or_fail, text_bytes, usage_error, usage_line, warn, write_stdout)

SUBCOMMANDS = ("path", "info", "export", "purge", "vacuum")
_AGE = re.compile(r"([0-9]+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class StoreCommand(click.Command):
    """A usage error is one line naming the subcommand, exit 2."""

    def make_context(self, info_name, args, parent=None, **extra):
        given = list(args)  # click's parser consumes args
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            fail(usage_line(exc, given, where=f"caveman-engine store {info_name}", command=self),
                 2)


class StoreGroup(RequiredSubcommand):
    command_class = StoreCommand
    names = SUBCOMMANDS


class Age(click.ParamType):
    """``30d``: a whole number and a unit, s m h d or w; converted to seconds."""

    name = "AGE"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        m = _AGE.fullmatch(str(value).strip())
        if m is None:
            self.fail(f"{value!r} is not an age: a whole number and a unit s, m, h, d or w "
                      "(e.g. 30d, 12h, 2w)", param, ctx)
        return int(m.group(1)) * _UNIT_SECONDS[m.group(2)]


AGE = Age()

STORE_HELP = """See, vacuum, back up and purge the recovery store (the SQLite file, or the
PostgreSQL database when CAVEMAN_CCR_DB is a postgresql:// URL, that keeps every original
behind a ccr_… handle), without rm.

\b
Examples:
  caveman-engine store info
  caveman-engine store export backup.tar.gz --older-than 30d
  caveman-engine store purge --older-than 30d --yes && caveman-engine store vacuum
"""


@click.group("store", cls=StoreGroup, help=STORE_HELP,
             short_help="See, vacuum, back up and purge the recovery store.")
def store() -> None:
    pass


# --------------------------------------------------------------------------- helpers


def _path(command: str) -> str:
    """The store's path as ``compress`` resolves it, without creating anything."""
    from .store import StoreError, resolve_path

    try:
        return resolve_path(create=False)
    except StoreError as exc:
        error(command, f"cannot locate recovery store: {exc}")


def _shown(path: str) -> str:
    """The store as the user may see it: a file path made absolute, a PostgreSQL URL with its
    password masked (and a ``password=`` of a key/value string, which is no file, too)."""
    from .store import MEMORY, is_postgres_url, mask_url, redact

    if is_postgres_url(path):
        return mask_url(path)
    return path if path == MEMORY else redact(os.path.abspath(path))


def _emit(fmt: str, doc: dict, text: str) -> None:
    if fmt == "json":
        write_stdout(json_bytes(doc, indent=2) + b"\n")
    else:
        write_stdout(text_bytes(text))


def _human(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # pragma: no cover


def _percent(kept: int, budget: int) -> float:
    return round(100.0 * kept / budget, 2) if budget else 0.0


def _selection(types: tuple[str, ...], older: int | None):
    from .store import Selection

    before = None if older is None else time.time_ns() - older * 1_000_000_000
    return Selection(frozenset(types), before)


def _types_doc(counts) -> dict:
    return {t: {"count": c.count, "bytes": c.bytes} for t, c in counts.items()}


def _types_text(counts) -> str:
    return ", ".join(f"{t} {c.count}" for t, c in counts.items())


def _quiet_option(f):
    return click.option("-q", "--quiet", is_flag=True,
                        help="No informational lines on stderr (errors still show).")(f)


def _format_option(f):
    return click.option("--format", "fmt", type=FORMAT, default="text", show_default=True,
                        help="text for people, json for scripts.")(f)


def _type_option(f):
    return click.option("--type", "types", multiple=True, metavar="T",
                        callback=nonempty("a content type"),
                        help="Only originals of content type T (a typed object's object type); "
                             "repeatable.")(f)


def _older_option(f):
    return click.option("--older-than", "older", type=AGE, metavar="AGE",
                        help="Only originals stored more than AGE ago: a number and a unit "
                             "s, m, h, d or w (30d).")(f)


# --------------------------------------------------------------------------- path


@store.command("path", short_help="Print the store's path (creates nothing).")
@_quiet_option
def path_command(quiet: bool) -> None:
    """Print the path of the recovery store, resolved as `compress` resolves it:
    CAVEMAN_CCR_DB if set (`:memory:` printed as is; a postgresql:// URL with its password
    shown as ***), else $CAVEMAN_HOME/ccr.db, else ~/.caveman/ccr.db. Nothing is created, and
    the store need not exist yet.

    \b
    Example:
      ls -l "$(caveman-engine store path)"*
    """
    write_stdout(text_bytes(_shown(_path("store path")) + "\n"))


# --------------------------------------------------------------------------- info


@store.command(short_help="Size, counts per type, budget use, oldest and newest entry.")
@_format_option
@_quiet_option
def info(fmt: str, quiet: bool) -> None:
    """Describe the recovery store: its path, its size on disk (the database plus its -wal and
    -shm files), how many originals it keeps per content type (blobs and typed objects), the
    bytes they hold against the CAVEMAN_CCR_MAX_BYTES budget, the oldest and newest entry and
    the schema version. A store that does not exist yet is reported as such and not created.

    \b
    Example:
      caveman-engine store info --format json | jq .kept_bytes
    """
    from .store import StoreError, disk_usage, exists

    path = _path("store info")
    shown = _shown(path)
    if not exists(path):
        _emit(fmt, {"path": shown, "exists": False},
              f"store      {shown}\nstatus     does not exist yet (nothing was created; the "
              "first compress that rewrites something creates it)\n")
        return
    disk = disk_usage(path)
    s = open_store_or_fail("store info")
    try:
        i = s.info()
        if not s.is_local:
            disk = s.disk_usage()
    except StoreError as exc:
        error("store info", str(exc))
    finally:
        s.close()
    on_disk = sum(disk.values())
    blobs = sum(c.count for c in i.blobs.values())
    objects = sum(c.count for c in i.objects.values())
    doc = {
        "path": shown, "exists": True,
        "disk_bytes": on_disk, "disk_files": disk,
        "schema_version": i.schema_version,
        "originals": i.count,
        "blobs": {"count": blobs, "by_content_type": _types_doc(i.blobs)},
        "typed_objects": {"count": objects, "by_object_type": _types_doc(i.objects)},
        "kept_bytes": i.kept_bytes, "max_bytes": i.max_bytes,
        "percent_used": _percent(i.kept_bytes, i.max_bytes),
        "oldest": i.oldest, "newest": i.newest,
    }
    if i.undated:
        doc["undated"] = i.undated
    lines = [
        f"store      {shown}",
        f"on disk    {_human(on_disk)} (ccr.db {disk['db']}, -wal {disk['wal']}, "
        f"-shm {disk['shm']} bytes)" if s.is_local else
        f"on server  {_human(on_disk)} (tables, indexes and TOAST)",
        f"schema     version {i.schema_version}",
        f"originals  {i.count} ({blobs} blobs, {objects} typed objects)",
    ]
    rows = [(t, c) for t, c in i.blobs.items()] + [(f"{t} (object)", c)
                                                   for t, c in i.objects.items()]
    width = max([len(t) for t, _ in rows] + [12])
    for t, c in rows:
        lines.append(f"  {t:<{width}} {c.count:>8} {c.bytes:>14} bytes")
    lines.append(f"kept       {i.kept_bytes} of {i.max_bytes} bytes "
                 f"({_percent(i.kept_bytes, i.max_bytes):.2f}% of the budget)")
    lines.append(f"oldest     {i.oldest or '-'}")
    lines.append(f"newest     {i.newest or '-'}")
    if i.undated:
        lines.append(f"undated    {i.undated} (created_at unreadable; never purged by age)")
    _emit(fmt, doc, "\n".join(lines) + "\n")


# --------------------------------------------------------------------------- vacuum


@store.command(short_help="Give free space back to the disk (checkpoint + VACUUM).")
@_format_option
@_quiet_option
def vacuum(fmt: str, quiet: bool) -> None:
    """Give the space of deleted originals back to the file system: copy the write-ahead log
    into the database, rewrite the database without its free pages (VACUUM) and truncate the
    log, then print the bytes on disk before and after. Run it after `store purge`; it takes
    the write lock for a moment, so concurrent compresses wait (up to 5 s) rather than fail.

    \b
    Example:
      caveman-engine store purge --older-than 30d --yes && caveman-engine store vacuum
    """
    from .store import MEMORY, StoreError, disk_usage, exists

    path = _path("store vacuum")
    shown = _shown(path)
    if not exists(path) or path == MEMORY:
        why = "does not exist yet" if path != MEMORY else "is in memory"
        _emit(fmt, {"path": shown, "exists": path == MEMORY, "before_bytes": 0,
                    "after_bytes": 0, "reclaimed_bytes": 0},
              f"the recovery store {shown} {why}; nothing to vacuum\n")
        return
    before = sum(disk_usage(path).values())
    s = open_store_or_fail("store vacuum")
    try:
        if not s.is_local:
            before = sum(s.disk_usage().values())
        complete = s.vacuum()
        after = None if s.is_local else sum(s.disk_usage().values())
    except StoreError as exc:
        error("store vacuum", str(exc))
    finally:
        s.close()
    if after is None:
        after = sum(disk_usage(path).values())
    if not complete:
        warn("caveman-engine store vacuum: another process is reading the store, so its "
             "write-ahead log (-wal) was not truncated; run vacuum again later", quiet)
    _emit(fmt, {"path": shown, "exists": True, "before_bytes": before, "after_bytes": after,
                "reclaimed_bytes": max(0, before - after), "wal_truncated": complete},
          f"vacuumed {shown}: {before} -> {after} bytes on disk "
          f"({_human(max(0, before - after))} reclaimed)\n")


# --------------------------------------------------------------------------- export


@store.command(short_help="Back up originals to a directory or a .tar/.tar.gz file.")
@click.argument("dest", metavar="DEST")
@_type_option
@_older_option
@click.option("--force", is_flag=True, help="Overwrite files that already exist at DEST.")
@_format_option
@_quiet_option
def export(dest: str, types: tuple[str, ...], older: int | None, force: bool, fmt: str,
           quiet: bool) -> None:
    """Write the exact original bytes for backup, into the directory DEST (created 0700; one
    0600 file per original, named by its handle, plus manifest.jsonl with handle, content
    type, compressor, tokens, created time, size and sha256 per line), or into a tar file when
    DEST ends in .tar or .tar.gz (same layout inside, archive 0600), or, for DEST -, as an
    uncompressed tar stream on stdout (the summary then goes to stderr; ./- names a directory
    called -). Existing files are never overwritten unless --force. A blob's handle is ccr_ +
    the first 16 bytes of its sha256, so every exported file can be checked against its name.

    \b
    Examples:
      caveman-engine store export ~/ccr-backup.tar.gz --older-than 30d
      caveman-engine store export - | ssh backup 'cat > ccr.tar'
    """
    from .store import ExportError, StoreError, exists, export_originals

    if not dest.strip() or "\x00" in dest:  # "" would be the current directory
        usage_error("store export", "DEST is empty: name a directory or a .tar or .tar.gz file")
    if dest == "-":
        _export_stdout(types, older, fmt, quiet)
        return
    path = _path("store export")
    shown = _shown(path)
    if not exists(path):  # as purge and vacuum: nothing to do is no error
        _emit(fmt, {"path": shown, "exists": False, "dest": dest, "count": 0, "bytes": 0},
              f"no recovery store at {shown}; nothing to export\n")
        return
    s = open_store_or_fail("store export")
    try:
        result = export_originals(s, dest, _selection(types, older), force=force,
                                  warn=lambda text: warn(f"caveman-engine store {text}", quiet))
    except ExportError as exc:
        fail(f"caveman-engine store {exc}")
    except StoreError as exc:
        error("store export", str(exc))
    finally:
        s.close()
    if result.count == 0:
        warn("caveman-engine store export: no original matched; the export holds an empty "
             "manifest", quiet)
    doc = {"dest": dest, "format": "tar" if result.archive else "directory",
           "count": result.count, "bytes": result.bytes}
    if result.mismatched:
        doc["hash_mismatches"] = result.mismatched
    if result.skipped:
        doc["skipped"] = result.skipped
    _emit(fmt, doc, f"exported {result.count} originals ({result.bytes} bytes) to {dest}\n")


def _export_stdout(types: tuple[str, ...], older: int | None, fmt: str, quiet: bool) -> None:
    """``store export -``: an uncompressed tar stream on stdout, as tar's ``-f -``; nothing
    is created on disk, and the summary goes to stderr (stdout carries the archive)."""
    from .store import StoreError, exists, export_tar_stream

    if sys.stdout.isatty():
        usage_error("store export", "DEST - writes a tar archive to stdout, which is a "
                                    "terminal: redirect it, or name a directory or a .tar file "
                                    "(./- for one named -)")
    path = _path("store export")
    shown = _shown(path)
    warn_ = lambda text: warn(f"caveman-engine store {text}", quiet)  # noqa: E731
    if not exists(path):
        export_tar_stream(None, sys.stdout.buffer)
        sys.stdout.flush()
        warn(f"caveman-engine store export: no recovery store at {shown}; the archive holds an "
             "empty manifest", quiet)
        return
    s = open_store_or_fail("store export")
    try:
        result = export_tar_stream(s, sys.stdout.buffer, _selection(types, older), warn=warn_)
    except StoreError as exc:
        error("store export", str(exc))
    finally:
        s.close()
    sys.stdout.flush()  # a short write is the error, not the summary below
    if result.count == 0:
        warn("caveman-engine store export: no original matched; the archive holds an empty "
             "manifest", quiet)
    doc = {"dest": "-", "format": "tar", "count": result.count, "bytes": result.bytes}
    if result.mismatched:
        doc["hash_mismatches"] = result.mismatched
    if result.skipped:
        doc["skipped"] = result.skipped
    warn("caveman-engine store export: " + (
        json_bytes(doc).decode("utf-8", "surrogateescape") if fmt == "json" else
        f"exported {result.count} originals ({result.bytes} bytes) to stdout"), quiet)


# --------------------------------------------------------------------------- purge


@store.command(short_help="Delete originals by age and/or type (asks first).")
@_older_option
@_type_option
@click.option("--all", "everything", is_flag=True, help="Delete every original.")
@click.option("--yes", "-y", "yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", "-n", "dry_run", is_flag=True,
              help="Only say what would be deleted.")
@_format_option
@_quiet_option
def purge(older: int | None, types: tuple[str, ...], everything: bool, yes: bool,
          dry_run: bool, fmt: str, quiet: bool) -> None:
    """Delete originals stored more than --older-than ago and/or of the given --type (--all:
    every one), report how many and how many bytes went, and ask first on a terminal (--yes
    skips the question; without a terminal --yes is required). Their handles stop
    retrieving, everything else still does, and `stats` counts only what remains. Deleted
    bytes are overwritten in the file; `store vacuum` then gives the space back to the disk.

    \b
    Example:
      caveman-engine store purge --older-than 30d --dry-run
    """
    from .store import StoreError, exists

    if everything and (older is not None or types):
        usage_error("store purge", "--all cannot be combined with --older-than or --type")
    if not everything and older is None and not types:
        usage_error("store purge", "say what to delete: --older-than AGE and/or --type T, or "
                                   "--all")
    if not yes and not dry_run and not sys.stdin.isatty():
        usage_error("store purge", "stdin is not a terminal, so it cannot ask; add --yes to "
                                   "delete without asking (or --dry-run to see what would go)")
    selection = _selection(types, older)
    path = _path("store purge")
    shown = _shown(path)
    if not exists(path):
        _emit(fmt, {"path": shown, "exists": False, "dry_run": dry_run, "count": 0,
                    "bytes": 0, "by_type": {}, "handles": []},
              f"no recovery store at {shown}; nothing to purge\n")
        return
    s = open_store_or_fail("store purge")
    try:
        plan = s.purge(selection, dry_run=True)
        if plan.count == 0 and types:
            present = sorted({e.content_type for e in s.entries()})
            warn(f"caveman-engine store purge: no original matched; types in the store: "
                 f"{', '.join(present) or 'none'}", quiet)
        if dry_run or plan.count == 0:
            _report(fmt, shown, plan, s.max_bytes, dry_run)
            return
        if not yes and not _confirm(f"Delete {plan.count} originals ({plan.bytes} bytes: "
                                    f"{_types_text(plan.by_type)}) from {shown}?"):
            error("store purge", "not confirmed; nothing deleted")
        done = s.purge(selection, only={(e.kind, e.key) for e in plan.entries})
    except StoreError as exc:
        error("store purge", str(exc))
    finally:
        s.close()
    _report(fmt, shown, done, s.max_bytes, False)
    if done.count:
        warn("caveman-engine store purge: the file keeps its size until `caveman-engine store "
             "vacuum`", quiet)


def _confirm(question: str) -> bool:
    sys.stderr.write(question + " [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _report(fmt: str, shown: str, result, budget: int, dry_run: bool) -> None:
    doc = {"path": shown, "exists": True, "dry_run": dry_run, "count": result.count,
           "bytes": result.bytes, "by_type": _types_doc(result.by_type),
           "handles": [e.key for e in result.entries],
           "kept_bytes_before": result.kept_before, "kept_bytes_after": result.kept_after,
           "max_bytes": budget}
    what = f"{result.count} originals ({result.bytes} bytes)"
    if result.count:
        what += f": {_types_text(result.by_type)}"
    if not result.count:
        text = "no original matched; nothing deleted\n"
    elif dry_run:
        text = f"would delete {what}; nothing deleted (dry run)\n"
    else:
        text = (f"deleted {what}; the store now keeps {result.kept_after} of {budget} bytes "
                f"({_percent(result.kept_after, budget):.2f}%)\n")
    _emit(fmt, doc, text)
