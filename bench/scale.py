"""Retrieval at scale: in-process search, whole-process `refind search`, and a 1,000-user database.

    .venv/bin/python bench/scale.py [--sizes 10000,100000] [--users 1000] [--other-turns 200] [--queries 50]

Builds synthetic databases (bench/synth.py, seeded) in a temporary folder and measures, in the same run:

* naive   — what a search costs with no cache: read the user's rows, build turns, tokenize, bm25s index, search;
* cached  — `search()` with the user's index already in the process (the server's steady state);
* loaded  — `search()` in a fresh process state whose index is persisted in the database (a CLI call's work);
* process — `refind search --mode bm25 --json` as a whole process (median of runs after the one that persists);
* users   — the same user's latencies in a single-user database and in one shared with 999 other users.

Prints a Markdown report (paste it under "## Retrieval scale" in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth

from refind_cli import search as S
from refind_cli.store import Store

ROOT = Path(__file__).resolve().parent.parent


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def _time(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def build(path: Path, users: dict[str, int]) -> None:
    if path.exists():
        return
    store = Store(path, retention_days=None)
    synth.fill_interleaved(store, users)
    store.close()


def naive(store: Store, user: str, query: str) -> None:
    S.UserIndex(store.user_messages(user)).search(query, top_k=10)


def measure_user(path: Path, user: str, queries: list[str], naive_repeat: int) -> dict[str, float]:
    store = Store(path, retention_days=None)
    out = {}
    out["naive"] = _time(lambda: naive(store, user, queries[0]), naive_repeat)
    S.clear()
    S.search(store, user, queries[0], top_k=10)  # builds, caches and persists
    out["cached"] = statistics.median(_time(lambda q=q: S.search(store, user, q, top_k=10), 1) for q in queries)

    def fresh():
        S.clear()
        S.search(store, user, queries[1], top_k=10)

    out["loaded"] = _time(fresh, naive_repeat)
    store.close()
    return out


def measure_pair(a: Path, b: Path, user: str, queries: list[str], rounds: int = 5) -> tuple[dict, dict]:
    """measure_user on two databases, alternating rounds so that machine load falls on both alike."""
    runs: tuple[list[dict], list[dict]] = ([], [])
    for _ in range(rounds):
        runs[0].append(measure_user(a, user, queries, naive_repeat=1))
        runs[1].append(measure_user(b, user, queries, naive_repeat=1))
    return tuple({k: statistics.median(r[k] for r in side) for k in side[0]} for side in runs)


def _search_cmd(path: Path, user: str, query: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "refind_cli",
        "search",
        query,
        "--user",
        user,
        "--mode",
        "bm25",
        "--json",
        "--db",
        str(path),
        "--retention-days",
        "off",
    ]


FLOOR_CMD = [sys.executable, "-m", "refind_cli", "--help"]


def processes(cmds: list[list[str]], repeat: int, cpu: list[float] | None = None) -> list[float]:
    """Median wall time of each command run as a whole process; the commands take turns, so that the load of a
    shared machine falls on all of them alike. Each runs once first, untimed (it persists the index if needed).
    ``cpu``, when given, receives each command's median CPU time (user + system) in the same runs."""
    env = {**os.environ, "REFIND_MODE": "bm25"}
    for cmd in cmds:
        subprocess.run(cmd, check=True, capture_output=True, env=env)
    runs: list[list[float]] = [[] for _ in cmds]
    cpus: list[list[float]] = [[] for _ in cmds]
    for _ in range(repeat):
        for i, cmd in enumerate(cmds):
            t = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            runs[i].append(time.perf_counter() - t)
            cpus[i].append(usage.ru_utime + usage.ru_stime)
            if os.waitstatus_to_exitcode(status) != 0:
                raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), cmd)
    if cpu is not None:
        cpu.extend(statistics.median(c) for c in cpus)
    return [statistics.median(r) for r in runs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--other-turns", type=int, default=200)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--workdir", default=None, help="Keep the databases here (default: a temporary folder).")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    queries = synth.queries(args.queries)
    tmp = tempfile.TemporaryDirectory()
    work = Path(args.workdir or tmp.name)
    work.mkdir(parents=True, exist_ok=True)

    print("## Retrieval scale\n")
    print(f"`{' '.join(['python', 'bench/scale.py', *sys.argv[1:]])}` — synthetic histories (bench/synth.py, seed 0):")
    print("20-message sessions, 8–40 words a message from a 6,000-word Zipf vocabulary; median latencies,")
    print(f"{args.queries} queries of 3–6 words, top_k 10.\n")
    print(
        "| turns | naive rebuild | cached search | naive ÷ cached | loaded from DB | whole process | `refind --help` |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        path = work / f"single-{n}.db"
        build(path, {"u": n})
        r = measure_user(path, "u", queries, naive_repeat=3 if n > 20_000 else 5)
        proc, floor = processes([_search_cmd(path, "u", queries[2]), FLOOR_CMD], repeat=9)
        print(
            f"| {n:,} | {_ms(r['naive'])} | {_ms(r['cached'])} | {r['naive'] / r['cached']:,.0f}× | "
            f"{_ms(r['loaded'])} | {_ms(proc)} | {_ms(floor)} |",
            flush=True,
        )

    n = sizes[0]
    single = work / f"single-{n}.db"
    multi = work / f"multi-{args.users}x{args.other_turns}-{n}.db"
    others = {f"user{i:04d}": args.other_turns for i in range(args.users - 1)}
    build(multi, {"u": n, **others})
    a, b = measure_pair(single, multi, "u", queries)
    pa, pb = processes([_search_cmd(single, "u", queries[2]), _search_cmd(multi, "u", queries[2])], repeat=9)
    print(
        f"\nThe same {n:,}-turn user alone and in a database of {args.users:,} users "
        f"({args.users - 1:,} others × {args.other_turns} turns, every user's Adds interleaved):\n"
    )
    print(f"| latency | 1 user | {args.users:,} users | ratio |")
    print("|---|---:|---:|---:|")
    for label, x, y in [
        ("naive rebuild", a["naive"], b["naive"]),
        ("cached search", a["cached"], b["cached"]),
        ("loaded from DB", a["loaded"], b["loaded"]),
        ("whole process", pa, pb),
    ]:
        print(f"| {label} | {_ms(x)} | {_ms(y)} | {y / x:.2f} |", flush=True)


if __name__ == "__main__":
    main()
