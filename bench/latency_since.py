"""Warm search latency of this checkout against another one (an older commit), in the same run: what every ranking
stage added since then costs together, where ``bench/ranking_latency.py`` measures one stage against the defaults.

    git worktree add --detach ../before <commit>       # e.g. the commit before issue 10's first pass
    .venv/bin/python bench/latency_since.py --baseline ../before [--turns 10000] [--queries 50] [--rounds 5]

Each checkout runs in a worker process of its own (``python -P``, the checkout on PYTHONPATH) that stores the same
synthetic user (``bench/synth.py`` of this checkout, seeded: sessions of 20 messages, "Name: …" user lines and
assistant replies) and builds its index; then the two workers take turns, round by round (which one goes first
alternates too), each asking every query once through ``refind_cli.search.search`` — the public entry point — at
top_k 10 and 100, each query once untimed first (its turns' text read into the turn cache), then timed. The queries
are ``bench/scale.py``'s (3–6 mid-frequency words) and, as in ``ranking_latency.py``, the same with one word
misspelt, with a day named, and as a category question. Prints medians (ms) and the ratio this ÷ baseline.

``--unwarmed``: no untimed search before each timed one, so a question's turns are read as a user's next question
reads them (a user with more turns than a process keeps text for re-reads them from SQLite).

``--after-add``: the agent's pattern instead — each query asked once untimed, then one message added (a "Name: …"
line of a new session), then the query timed: what a search pays for the Add before it, its text already read.
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

HERE = Path(__file__).resolve().parent
TOP_KS = (10, 100)


def query_sets(n: int) -> dict[str, list[str]]:
    import synth

    rng = random.Random(0)
    queries = synth.queries(n)
    nouns = ("sports", "foods", "cities", "books", "activities", "animals", "games", "countries")
    return {
        "queries": queries,
        "one word misspelt": [synth.misspell(q, rng) for q in queries],
        "a day named": [f"{q} on 12 March 2024" for q in queries],
        "a category named": [f"What {nouns[j % len(nouns)]} {q}?" for j, q in enumerate(queries)],
    }


def worker(turns: int, queries: int, after_add: bool, unwarmed: bool = False) -> None:
    """Store the user, then answer each line on stdin ("round") with one round's timings (JSON) on stdout."""
    import synth

    from refind_cli import search as S
    from refind_cli.contract import AddRequest, Message
    from refind_cli.store import Store

    added = 0

    def add_one() -> None:
        nonlocal added
        added += 1
        at = synth.T0 + 1_000 * synth.DAY + added * 60_000
        message = Message("user", f"Gina: a new line, number {added}, about {synth.queries(1, seed=added)[0]}", at)
        store.add_many([AddRequest(f"added{added}", "u", f"added{added}", (message,))])

    kinds = query_sets(queries)
    with tempfile.TemporaryDirectory(prefix="refind-since-") as tmp:
        store = Store(Path(tmp) / "db.sqlite", retention_days=None)
        synth.fill(store, "u", turns)
        S.search(store, "u", "warm up", top_k=10)
        print(json.dumps({"ready": True}), flush=True)
        for _ in sys.stdin:
            out: dict[str, list[float]] = {}
            for kind, qs in kinds.items():
                for top_k in TOP_KS:
                    times = out.setdefault(f"{kind}\t{top_k}", [])
                    for q in qs:
                        if not unwarmed:
                            S.search(store, "u", q, top_k=top_k)  # untimed: its turns read
                        if after_add:
                            add_one()
                        t = time.perf_counter()
                        S.search(store, "u", q, top_k=top_k)
                        times.append(time.perf_counter() - t)
            print(json.dumps(out), flush=True)
        store.close()


def start_worker(script: str, checkout: Path, args: list[str]) -> subprocess.Popen[str]:
    """``script --worker ARGS`` in a process of its own that imports ``checkout``'s refind (``python -P``, the
    checkout on PYTHONPATH), once it says it is ready."""
    env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{HERE}"}
    command = [sys.executable, "-P", script, "--worker", *args]
    proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if not json.loads(proc.stdout.readline()).get("ready"):
        raise SystemExit(f"{checkout}: the worker did not start")
    return proc


def ask_round(proc: subprocess.Popen[str]) -> dict[str, list[float]]:
    """One round's timings from a worker."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("round\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"a worker stopped (exit {proc.wait()})")
    return json.loads(line)


def checkout_args(ap: argparse.ArgumentParser) -> None:
    """The options of a script that times this checkout against another one."""
    ap.add_argument("--baseline", type=Path, help="the other checkout (a directory holding refind_cli)")
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


def side_by_side(
    script: str, baseline: Path | None, args: list[str], rounds: int
) -> dict[tuple[str, str], list[float]]:
    """Each checkout's timings by (checkout, key), "baseline" and "this": ``script``'s workers for the two take
    turns, round by round, the first alternating."""
    if baseline is None or not (baseline / "refind_cli").is_dir():
        raise SystemExit("--baseline: a checkout of refind (a directory holding refind_cli) is needed")
    procs = {
        "baseline": start_worker(script, baseline.resolve(), args),
        "this": start_worker(script, HERE.parent, args),
    }
    rows: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        for name in ("baseline", "this") if r % 2 == 0 else ("this", "baseline"):
            for key, times in ask_round(procs[name]).items():
                rows.setdefault((name, key), []).extend(times)
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    checkout_args(ap)
    ap.add_argument("--after-add", action="store_true", help="each timed search right after an Add")
    ap.add_argument("--unwarmed", action="store_true", help="no untimed search before each timed one")
    args = ap.parse_args()
    if args.worker:
        worker(args.turns, args.queries, args.after_add, args.unwarmed)
        return
    worker_args = ["--turns", str(args.turns), "--queries", str(args.queries)]
    worker_args += (["--after-add"] if args.after_add else []) + (["--unwarmed"] if args.unwarmed else [])
    rows = side_by_side(__file__, args.baseline, worker_args, args.rounds)
    after = ", each search right after an Add" if args.after_add else ""
    after += ", no untimed search before" if args.unwarmed else ""
    print(f"{args.turns:,} turns, {args.queries} queries × {args.rounds} rounds{after}, medians (ms)\n")
    print("| queries | top_k | baseline | this | ratio |")
    print("|---|---:|---:|---:|---:|")
    for kind in query_sets(args.queries):
        for top_k in TOP_KS:
            a = statistics.median(rows[("baseline", f"{kind}\t{top_k}")]) * 1000
            b = statistics.median(rows[("this", f"{kind}\t{top_k}")]) * 1000
            print(f"| {kind} | {top_k} | {a:.2f} | {b:.2f} | {b / a:.2f}× |")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
