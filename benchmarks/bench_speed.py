"""Issue 16 (speed and memory): every row is one whole `caveman-engine compress --type T`
process, cold, against a recovery store on disk, with the reference's figures beside ours.

    python benchmarks/bench_speed.py            # the table (5 runs per row, median)
    python benchmarks/bench_speed.py --quick    # without the 58 MB log and 60 MB JSON rows
    python benchmarks/bench_speed.py --runs 9
    python benchmarks/bench_speed.py --crossover [--max-mib 64]
                                               # token counter: Python path vs tiktoken

Cold = a new process per run, OS file cache warm, the tokenizer's rank cache already written
(it is written once per cache directory), a fresh empty store and cache directory per run --
except the "repeat" row, which reuses those of the catalog row's first run (the same input
compressed a second time).
Wall time is measured around the process; its CPU time (user + system) and peak RSS come
from wait4() on it. Medians over the runs, for all three; on a loaded machine the CPU time is
the steadier figure (the targets are wall times on a quiet machine). Inputs that are not in the repository (the log, the JSON
array, the deep HTML, the junk) are generated deterministically (fixed seeds), so every run
of this script measures the same bytes.

The machine matters: the reference's figures were taken on a quiet 2-core machine. The load
average is printed above the table; on a loaded machine compare the ratios with care.

Bytecode: an installed wheel has its ``.pyc`` files compiled (pip does it at install). A source
tree run through an editable install may not: after any edit the cached bytecode is stale, and
with ``PYTHONDONTWRITEBYTECODE=1`` (set in some environments, this one included) no run ever
writes it back, so every process would compile the engine's sources again -- tens of ms of
compiler in each row. Before measuring, this script compiles the stale bytecode of the package
the console script imports (``compileall``, as an installation would) and says how many files
it compiled; it checks again after the runs and warns if a source changed meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _script import console_script

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
FIXTURE = ROOT / "tests" / "conformance" / "toolschema" / "seed_catalog_min.json.in"
MIB = 1024 * 1024

# -- inputs


def all_catalogs() -> bytes:
    """All corpus catalogs' tools, in file-name order, as one {"tools": [...]} (~923 KB)."""
    tools = []
    for path in sorted(CORPUS.glob("*.tools.json")):
        doc = json.loads(path.read_bytes())
        tools.extend(doc["tools"] if isinstance(doc, dict) else doc)
    return json.dumps({"tools": tools}).encode()


_WORDS = (
    "the of and to in is that for it as with was on be by this are or from at an which have "
    "not but all can has were one their will more when there been would who if no so what up "
    "out about into than them only other some could time these two may then first any new "
    "like our over such after also most made between very through should because each those "
    "request server client cache token store memory process thread queue worker build deploy "
    "release version config value error warning timeout retry connection database index query "
    "table column record field schema user account project repository branch commit merge "
    "pipeline job stage artifact image container volume network service endpoint route handler"
).split()
_ZIPF = [1 / (i + 1) for i in range(len(_WORDS))]


def prose(size: int, seed: int = 7) -> bytes:
    """English-like text: Zipf-distributed words, sentences, paragraphs."""
    rnd = random.Random(seed)
    out, n = [], 0
    while n < size:
        words = rnd.choices(_WORDS, _ZIPF, k=rnd.randint(8, 24))
        if rnd.random() < 0.3:
            words.insert(rnd.randrange(len(words)), str(rnd.randint(2, 9999)))
        s = " ".join(words).capitalize() + rnd.choice(".....?!") + rnd.choice("  \n") + (
            "\n" if rnd.random() < 0.15 else "")
        out.append(s)
        n += len(s)
    return "".join(out).encode()[:size]


_SERVICES = ["api-gateway", "auth", "billing", "search", "scheduler", "ingest", "notifier"]
_PATHS = ["/api/v2/projects/{}/issues", "/api/v2/users/{}", "/api/v2/search", "/healthz",
          "/api/v2/projects/{}/pipelines/{}/jobs", "/static/app.{}.js", "/api/v2/orgs/{}/members"]
_MESSAGES = [
    "request completed", "cache miss, fetching from upstream", "connection reset by peer",
    "retrying after backoff", "slow query detected", "token refreshed", "job scheduled",
    "payload validation failed: missing field", "rate limit exceeded for client",
]


def log(size: int, seed: int = 11) -> bytes:
    """A service log: key=value access lines, warnings, errors with a Java-style stack trace."""
    rnd = random.Random(seed)
    t = 1_764_000_000.0
    out, n = [], 0
    while n < size:
        t += rnd.expovariate(50)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"
        level = rnd.choices(["INFO", "DEBUG", "WARN", "ERROR"], [70, 15, 10, 5])[0]
        svc = rnd.choice(_SERVICES)
        path = rnd.choice(_PATHS).format(rnd.randint(1, 99999), rnd.randint(1, 999))
        line = (
            f"{stamp} {level:<5} {svc}[{rnd.randint(1000, 9999)}]: {rnd.choice(_MESSAGES)} "
            f"request_id={rnd.getrandbits(64):016x} method={rnd.choice(['GET', 'GET', 'POST', 'PUT'])} "
            f"path={path} status={rnd.choice([200, 200, 200, 201, 204, 304, 400, 404, 500])} "
            f"duration_ms={rnd.randint(1, 3000)} bytes={rnd.randint(0, 500000)} "
            f"user=user{rnd.randint(1, 5000)}@example.com\n"
        )
        if level == "ERROR" and rnd.random() < 0.5:
            line += "java.lang.IllegalStateException: connection pool exhausted\n" + "".join(
                f"\tat com.example.{svc.replace('-', '')}.{rnd.choice(['Pool', 'Client', 'Handler'])}"
                f".{rnd.choice(['acquire', 'run', 'handle', 'dispatch'])}"
                f"({rnd.choice(['Pool', 'Client', 'Handler'])}.java:{rnd.randint(20, 900)})\n"
                for _ in range(rnd.randint(3, 9))
            )
        out.append(line)
        n += len(line)
    return "".join(out).encode()[:size]


def json_array(size: int, seed: int = 13) -> bytes:
    """A JSON array of API records (compact, one line), cut to about ``size`` bytes."""
    rnd = random.Random(seed)
    items, n, i = [], 2, 0
    while n < size:
        i += 1
        name = f"{rnd.choice(_WORDS).capitalize()} {rnd.choice(_WORDS).capitalize()}"
        item = {
            "id": i,
            "uuid": f"{rnd.getrandbits(128):032x}",
            "name": name,
            "email": f"{name.split()[0].lower()}.{i}@example.com",
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                        time.gmtime(1_600_000_000 + rnd.randint(0, 10**8))),
            "status": rnd.choice(["active", "inactive", "pending", "archived"]),
            "score": round(rnd.random() * 100, 3),
            "tags": rnd.sample(_WORDS, rnd.randint(0, 5)),
            "address": {"city": rnd.choice(["Lyon", "Oslo", "Austin", "Pune", "Osaka"]),
                        "zip": f"{rnd.randint(10000, 99999)}"},
            "description": " ".join(rnd.choices(_WORDS, _ZIPF, k=rnd.randint(5, 30))),
        }
        s = json.dumps(item)
        items.append(s)
        n += len(s) + 2
    return ("[" + ", ".join(items) + "]").encode()


def random_bytes(size: int, seed: int = 17) -> bytes:
    return random.Random(seed).randbytes(size)


def deep_html(n: int = 100_000) -> bytes:
    return b"<div>" * n


# -- rows: (label, --type, input, reference ms, reference MiB, target text, check)
# check(ms, mib, size) -> bool | None (None: nothing to check)


def rows(quick: bool):
    catalog = all_catalogs()
    out = [
        ("doc fixture 1,840 B", "toolschema", FIXTURE.read_bytes(), 35, 26, "<= 60 ms",
         lambda ms, mib, size: ms <= 60),
        ("github.tools.json 26 KB", "toolschema", (CORPUS / "github.tools.json").read_bytes(),
         30, 28, "<= 55 ms", lambda ms, mib, size: ms <= 55),
        ("zereight-gitlab 220 KB", "toolschema",
         (CORPUS / "zereight-gitlab.tools.json").read_bytes(), 65, 36, "<= 100 ms, <= 45 MiB",
         lambda ms, mib, size: ms <= 100 and mib <= 45),
        ("38 catalogs 923 KB", "toolschema", catalog, 334, 56, "<= 330 ms, <= 70 MiB",
         lambda ms, mib, size: ms <= 330 and mib <= 70),
        ("same catalog, repeat", "toolschema", catalog, None, None, "<= 45 ms",
         lambda ms, mib, size: ms <= 45),
    ]
    if not quick:
        out += [
            ("58 MB log", "log", log(58_000_000), 24_600, None,
             "mem <= 6x input (ours was 13.8 s)", lambda ms, mib, size: mib * MIB <= 6 * size),
            ("60 MB JSON array", "json", json_array(60_000_000), None, None, "mem <= 6x input",
             lambda ms, mib, size: mib * MIB <= 6 * size),
        ]
    out += [
        ("deep html <div>x100000", "html", deep_html(), None, None, "linear / decline", None),
        ("junk code 1 MB random", "code", random_bytes(1 << 20), None, None, "<= 1 us/byte",
         lambda ms, mib, size: ms * 1000 / size <= 1.0),
    ]
    return out


# -- measuring


_WRAPPER = r"""
import os, resource, subprocess, sys, time
with open(sys.argv[1], "rb") as stdin:
    start = time.perf_counter()
    code = subprocess.call(sys.argv[2:], stdin=stdin, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall * 1000, u.ru_maxrss / 1024, (u.ru_utime + u.ru_stime) * 1000, code)
"""


def _run_once(args, path: Path, env: dict) -> tuple[float, float, float]:
    """Wall ms, peak RSS MiB and CPU ms (user + system) of one process reading ``path`` on
    stdin. Measured by a small wrapper process (a fresh interpreter without site packages):
    a process forked from this one, holding the generated inputs, would report this one's
    memory as its own peak (Linux keeps the high-water mark across exec)."""
    out = subprocess.run([sys.executable, "-S", "-c", _WRAPPER, str(path), *args], env=env,
                         capture_output=True, check=True, text=True).stdout.split()
    wall, mib, cpu, code = float(out[0]), float(out[1]), float(out[2]), int(out[3])
    if code != 0:
        sys.stderr.write(f"warning: {' '.join(args)} exited {code}\n")
    return wall, mib, cpu


def _package_dir() -> Path:
    """The caveman_engine package the console script runs (this interpreter's)."""
    import importlib.util

    spec = importlib.util.find_spec("caveman_engine")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("caveman_engine is not importable by this interpreter")
    return Path(list(spec.submodule_search_locations)[0])


def stale_bytecode(package: Path) -> list[Path]:
    """Sources of ``package`` whose cached bytecode is missing or out of date (what the
    interpreter would compile again on import)."""
    import importlib.util
    import struct

    stale = []
    for src in sorted(package.rglob("*.py")):
        pyc = Path(importlib.util.cache_from_source(str(src)))
        try:
            head = pyc.read_bytes()[:16]
            st = src.stat()
        except OSError:
            stale.append(src)
            continue
        flags, mtime, size = struct.unpack("<III", head[4:16]) if len(head) == 16 else (1, 0, 0)
        if flags == 0 and (mtime, size) != (int(st.st_mtime) & 0xFFFFFFFF,
                                            st.st_size & 0xFFFFFFFF):
            stale.append(src)
    return stale


def compile_bytecode() -> Path:
    """Compile the stale bytecode of the engine's package, as pip does for a wheel."""
    import compileall

    package = _package_dir()
    stale = stale_bytecode(package)
    if stale:
        compileall.compile_dir(str(package), quiet=2)
    left = stale_bytecode(package)
    print(f"bytecode of {package}: {len(stale)} stale file(s) compiled before measuring"
          + (f"; {len(left)} could not be" if left else ""), file=sys.stderr)
    return package


def measure(runs: int, quick: bool) -> list[dict]:
    script = console_script()
    package = compile_bytecode()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-speed-") as tmp:
        tmp = Path(tmp)
        os.chmod(tmp, 0o700)
        warm = tmp / "warm"
        warm.mkdir(mode=0o700)
        base_env = dict(os.environ)
        for var in ("CAVEMAN_CCR_DB", "CAVEMAN_CACHE_DIR", "CAVEMAN_HOME"):
            base_env.pop(var, None)
        # Write the rank cache once (as any installation does on its first count); each run
        # gets a copy of it in a directory of its own, so that nothing else cached by an
        # earlier run (such as a result of the same input) is found.
        subprocess.run([script, "compress"], input=b"warm up",
                       env=dict(base_env, CAVEMAN_CCR_DB=str(warm / "ccr.db")),
                       capture_output=True, check=True)
        rank_cache = next(warm.rglob("*.rankcache")).read_bytes()
        repeat_home = None
        for k, (label, ctype, data, ref_ms, ref_mib, target, check) in enumerate(rows(quick)):
            path = tmp / f"in{k}"
            path.write_bytes(data)
            args = [script, "compress", "--type", ctype]
            walls, peaks, cpus = [], [], []
            for r in range(runs):
                if label.startswith("same catalog"):
                    home = repeat_home
                else:
                    home = tmp / f"home{k}-{r}"
                    home.mkdir(mode=0o700)
                    (home / "o200k_base.rankcache").write_bytes(rank_cache)
                    os.chmod(home / "o200k_base.rankcache", 0o600)
                env = dict(base_env, CAVEMAN_CCR_DB=str(home / "ccr.db"),
                           CAVEMAN_CACHE_DIR=str(home), CAVEMAN_HOME=str(home))
                wall, peak, cpu = _run_once(args, path, env)
                cpus.append(cpu)
                walls.append(wall)
                peaks.append(peak)
                if label.startswith("38 catalogs") and repeat_home is None:
                    repeat_home = home  # holds this catalog now
            ms, mib = statistics.median(walls), statistics.median(peaks)
            results.append(dict(label=label, size=len(data), ms=ms, mib=mib, ref_ms=ref_ms,
                                cpu=statistics.median(cpus),
                                ref_mib=ref_mib, target=target,
                                ok=None if check is None else check(ms, mib, len(data)),
                                walls=walls))
            path.unlink()
            print(f"  measured {label}: {ms:.0f} ms, {mib:.1f} MiB "
                  f"(runs: {', '.join(f'{w:.0f}' for w in walls)} ms; "
                  f"CPU: {', '.join(f'{c:.0f}' for c in cpus)} ms)", file=sys.stderr)
    changed = stale_bytecode(package)
    if changed:
        print(f"warning: {len(changed)} source file(s) changed while measuring (e.g. "
              f"{changed[0]}): those runs compiled them", file=sys.stderr)
    return results


def _fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms / 1000:.2f} s" if ms >= 10_000 else f"{ms:.0f} ms"


def table(results: list[dict]) -> str:
    head = ("| case | bytes | ours wall | ours CPU | ours RSS | ref wall | ref RSS | "
            "wall ours/ref | RSS ours/ref | target | met |")
    lines = [head, "|" + "---|" * 11]
    for r in results:
        size = r["size"]
        extra = ""
        if r["label"].startswith("junk"):
            extra = f" ({r['ms'] * 1000 / size:.2f} us/B)"
        elif size >= 10 * MIB:
            extra = f" ({r['mib'] * MIB / size:.1f}x input)"
        ratio_ms = f"{r['ms'] / r['ref_ms']:.2f}" if r["ref_ms"] else "-"
        ratio_mib = f"{r['mib'] / r['ref_mib']:.2f}" if r["ref_mib"] else "-"
        ok = {None: "-", True: "yes", False: "NO"}[r["ok"]]
        lines.append(
            f"| {r['label']} | {size:,} | {_fmt_ms(r['ms'])}{extra if 'us/B' in extra else ''} "
            f"| {_fmt_ms(r['cpu'])} | {r['mib']:.1f} MiB{extra if 'input' in extra else ''} | {_fmt_ms(r['ref_ms'])} | "
            f"{'-' if r['ref_mib'] is None else str(r['ref_mib']) + ' MiB'} | {ratio_ms} | "
            f"{ratio_mib} | {r['target']} | {ok} |"
        )
    return "\n".join(lines)


# -- the token counter's crossover (in process)


def crossover(max_mib: int) -> None:
    """For each kind of text and size, `O200kCounter.count` in this process (a fresh counter
    each time: empty memo; it turns to the encoder on its own when merging gets expensive)
    against the same count with tiktoken's encoder built beforehand (its build, then the
    count). CPU seconds of this process (steadier than wall time on a loaded
    machine)."""
    sys.path.insert(0, str(ROOT))
    from caveman_engine import tokens

    cpu = time.process_time
    with tempfile.TemporaryDirectory(prefix="bench-xover-") as tmp:
        os.chmod(tmp, 0o700)
        cache = Path(tmp)
        tokens.O200kCounter(cache).load()  # write the rank cache

        def fresh():
            c = tokens.O200kCounter(cache)
            c.load()
            return c

        builds = []
        for _ in range(3):
            c = fresh()
            t = cpu()
            c.encoding()
            builds.append(cpu() - t)
        build = statistics.median(builds)
        print(f"tiktoken encoder build, CPU (median of 3): {build * 1000:.0f} ms")
        catalog = all_catalogs()
        kinds = {
            "catalog JSON": lambda n: (catalog * (n // len(catalog) + 1))[:n],
            "JSON array": json_array,
            "log": log,
            "prose": prose,
            "random bytes": random_bytes,
        }
        sizes = [s for s in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64) if s <= max_mib]
        print("| kind | MiB | python path CPU ms | encoder built? | encoder count CPU ms | "
              "+ build ms | python / (count + build) |")
        print("|---|---|---|---|---|---|---|")
        for kind, make in kinds.items():
            for mib in sizes:
                data = make(int(mib * MIB))
                c = fresh()
                t = cpu()
                n_py = c.count(data)
                py = cpu() - t
                adaptive = "yes" if c._encoding is not None else "no"
                c = fresh()
                c.encoding()
                t = cpu()
                n_enc = c.count(data)
                e = cpu() - t
                assert n_py == n_enc, (kind, mib, n_py, n_enc)
                print(f"| {kind} | {mib:g} | {py * 1000:.0f} | {adaptive} | {e * 1000:.0f} | "
                      f"{(e + build) * 1000:.0f} | {py / (e + build):.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 58 MB log and 60 MB JSON")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--crossover", action="store_true",
                    help="token counter: Python path vs tiktoken's encoder, by size and kind")
    ap.add_argument("--max-mib", type=int, default=64)
    opts = ap.parse_args()
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if opts.crossover:
        crossover(opts.max_mib)
        return
    results = measure(opts.runs, opts.quick)
    load = os.getloadavg()
    print(f"median of {opts.runs} cold runs each; load average afterwards {load[0]:.2f}")
    print(table(results))


if __name__ == "__main__":
    main()
