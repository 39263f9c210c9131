"""The index maintained on write: search right after an Add, a cold process against SQLite FTS5, the index's size.

    .venv/bin/python bench/index.py [--sizes 10000,100000] [--repeat 5] [--workdir DIR] [--baseline PYTHONPATH]

For each size, one synthetic user (bench/synth.py, seed 0) in its own database, measured in the same run:

* rebuild     — the baseline: what every search after an Add cost before the index was maintained (read the user's
                rows, build turns, tokenize, bm25s index, search);
* after Add   — ``search()`` right after ``Store.add()`` of one message, the user's index warm before the Add (the
                agent pattern: store the turn, then search);
* warm        — ``search()`` with nothing changed;
* new process — ``search()`` in a process that holds nothing yet (the segments and the rows are read);
* whole process — ``refind search --mode bm25 --json``, against ``sqlite-utils search`` (SQLite FTS5) over a copy of
                the same messages and against ``refind --help``, taking turns;
* index size  — the segments' bytes ÷ the messages' content bytes.

``--baseline PYTHONPATH`` also runs the whole-process search and ``refind --help`` of another refind, taking turns
with this one's: PYTHONPATH names its checkout (and, first, a directory holding the typer it was locked with, e.g.
``pip install --no-deps --target DIR typer==X``); it runs with ``python -P`` so that the working directory's
refind_cli does not shadow it, over a database of the same synthetic user written by its own code (its index format
may differ).

In brackets, CPU time (user + system) of the same runs: on a shared machine it moves less with the load than wall
time does.

Prints a Markdown report (BENCHMARKS.md, "Index on write").
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth
from scale import FLOOR_CMD, _search_cmd, build, processes

from refind_cli import index_store
from refind_cli import search as S
from refind_cli.contract import AddRequest, Message
from refind_cli.store import Store


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(path: Path, queries: list[str], repeat: int) -> dict[str, float]:
    store = Store(path, retention_days=None)
    out: dict[str, float] = {}
    out["rebuild"] = statistics.median(
        _timed(lambda: S.UserIndex(store.user_messages("u")).search(queries[0], top_k=10)) for _ in range(repeat)
    )
    S.clear()
    out["new process"] = _timed(lambda: S.search(store, "u", queries[1], top_k=10))
    out["warm"] = statistics.median(_timed(lambda q=q: S.search(store, "u", q, top_k=10)) for q in queries)
    after, after_cpu = [], []
    for i in range(repeat):
        msg = Message("user", f"Caroline: a new message {i} about {queries[i % len(queries)]}", synth.T0 + i)
        store.add(AddRequest(f"bench-add-{time.time_ns()}", "u", "s-bench", (msg,)))
        cpu = time.process_time()
        after.append(_timed(lambda i=i: S.search(store, "u", queries[(i + 3) % len(queries)], top_k=10)))
        after_cpu.append(time.process_time() - cpu)
    out["after add"] = statistics.median(after)
    out["after add cpu"] = statistics.median(after_cpu)
    stats = index_store.stats(store.conn)
    out["ratio"] = float(stats["bytes_per_content_byte"] or 0)
    out["segments"] = float(stats["segments"])
    store.close()
    return out


def fts_copy(path: Path, work: Path) -> Path:
    """A copy of the database with an FTS5 index over the messages' content (sqlite-utils enable-fts)."""
    fts = work / f"{path.stem}-fts.db"
    if not fts.exists():
        shutil.copy(path, fts)
        subprocess.run(
            [sys.executable, "-m", "sqlite_utils", "enable-fts", str(fts), "messages", "content", "--fts5"],
            check=True,
            capture_output=True,
        )
    return fts


def baseline_db(pythonpath: str, work: Path, n: int) -> Path:
    """The same synthetic user written by the baseline's own code (its index format may differ from this one's)."""
    path = work / f"single-{n}-baseline.db"
    if not path.exists():
        bench = str(Path(__file__).resolve().parent)
        code = f"import sys; sys.path.insert(0, {bench!r}); import scale; scale.build(__import__('pathlib').Path(sys.argv[1]), {{'u': {n}}})"
        subprocess.run(_under(pythonpath, [sys.executable, "-c", code, str(path)]), check=True)
    return path


def _under(pythonpath: str, cmd: list[str]) -> list[str]:
    """``cmd`` (``python -m …``) run by the refind found on ``pythonpath``, not the working directory's."""
    return ["env", f"PYTHONPATH={pythonpath}", cmd[0], "-P", *cmd[1:]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--baseline", default=None, metavar="PYTHONPATH", help="another refind to compare with")
    args = ap.parse_args()
    queries = synth.queries(args.queries)
    tmp = tempfile.TemporaryDirectory()
    work = Path(args.workdir or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print("## Index on write\n")
    print(f"`{' '.join(['python', 'bench/index.py', *sys.argv[1:]])}` — one synthetic user (bench/synth.py), medians")
    print(f"of {args.repeat} (warm: of {args.queries} queries), top_k 10; load average {load:.1f} at the start.\n")
    print(
        "| turns | rebuild (before) | after a 1-message Add (CPU) | warm | new process | whole process (CPU) | "
        "`sqlite-utils search` (FTS5) (CPU) | `refind --help` (CPU) | ÷ FTS5 (CPU) | ÷ `--help` (CPU) | index ÷ text "
        "| segments |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in [int(s) for s in args.sizes.split(",")]:
        path = work / f"single-{n}.db"
        t = time.perf_counter()
        build(path, {"u": n})
        built = time.perf_counter() - t
        fts = fts_copy(path, work)
        r = measure(path, queries, args.repeat)
        fts_cmd = [sys.executable, "-m", "sqlite_utils", "search", str(fts), "messages", queries[2], "--limit", "10"]
        cpu: list[float] = []
        cmds = [_search_cmd(path, "u", queries[2]), fts_cmd, FLOOR_CMD]
        if args.baseline:
            base = baseline_db(args.baseline, work, n)
            cmds += [_under(args.baseline, _search_cmd(base, "u", queries[2])), _under(args.baseline, FLOOR_CMD)]
        times = processes(cmds, repeat=args.repeat, cpu=cpu)
        proc, fts_s, floor = times[:3]
        c_proc, c_fts, c_floor = cpu[:3]
        print(
            f"| {n:,} | {_ms(r['rebuild'])} | {_ms(r['after add'])} ({_ms(r['after add cpu'])}) | {_ms(r['warm'])} | "
            f"{_ms(r['new process'])} | {_ms(proc)} ({_ms(c_proc)}) | {_ms(fts_s)} ({_ms(c_fts)}) | "
            f"{_ms(floor)} ({_ms(c_floor)}) | {proc / fts_s:.2f}× ({c_proc / c_fts:.2f}×) | "
            f"{proc / floor:.2f}× ({c_proc / c_floor:.2f}×) | {r['ratio']:.2f}× | {r['segments']:.0f} |",
            flush=True,
        )
        if args.baseline:
            (b_proc, b_floor), (c_b_proc, c_b_floor) = times[3:], cpu[3:]
            print(
                f"<!-- baseline ({args.baseline}), {n:,} turns: whole process {_ms(b_proc)} ({_ms(c_b_proc)}), "
                f"÷ FTS5 {b_proc / fts_s:.2f}× ({c_b_proc / c_fts:.2f}×), `refind --help` {_ms(b_floor)} "
                f"({_ms(c_b_floor)}), ÷ its `--help` {b_proc / b_floor:.2f}× ({c_b_proc / c_b_floor:.2f}×); "
                f"this refind ÷ baseline {proc / b_proc:.2f}× ({c_proc / c_b_proc:.2f}×) -->",
                flush=True,
            )
        print(f"<!-- built {n:,} turns (synth, batched Adds, indexed on write) in {built:.1f} s -->", flush=True)


if __name__ == "__main__":
    main()
