"""Warm time of the variants stage alone (``variants.variant_scores``) of this checkout against another one, in the
same run: a cost of a few microseconds that a whole search's median (``bench/latency_since.py``) cannot see.

    git worktree add --detach ../before <commit>
    .venv/bin/python bench/variants_latency.py --baseline ../before [--turns 10000] [--queries 50] [--rounds 5]

Each checkout runs in a worker process of its own (``python -P``, the checkout on PYTHONPATH) that stores
``bench/latency_since.py``'s synthetic user and asks its queries (``bench/scale.py``'s, the same with one word
misspelt, with a day named, as a category question); the two workers take turns, round by round, the first
alternating. Each query is asked once untimed, then timed three times. Prints medians (µs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMED = 3


def worker(turns: int, queries: int) -> None:
    """Store the user, then answer each line on stdin with one round's timings (JSON) on stdout."""
    import synth
    from latency_since import query_sets

    from refind_cli import search as S
    from refind_cli import variants
    from refind_cli.store import Store
    from refind_cli.tokenize import analyze

    kinds = query_sets(queries)
    with tempfile.TemporaryDirectory(prefix="refind-variants-") as tmp:
        store = Store(Path(tmp) / "db.sqlite", retention_days=None)
        synth.fill(store, "u", turns)
        index = S.user_index(store, "u").index
        S.search(store, "u", "warm up", top_k=10)
        print(json.dumps({"ready": True}), flush=True)
        for _ in sys.stdin:
            out: dict[str, list[float]] = {}
            for kind, qs in kinds.items():
                times = out.setdefault(kind, [])
                for q in qs:
                    tokens = analyze(q)
                    variants.variant_scores(index, q, tokens)  # untimed: its words' tokens remembered
                    for _ in range(TIMED):
                        t = time.perf_counter()
                        variants.variant_scores(index, q, tokens)
                        times.append(time.perf_counter() - t)
            print(json.dumps(out), flush=True)
        store.close()


def _start(checkout: Path, turns: int, queries: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{HERE}"}
    args = [sys.executable, "-P", __file__, "--worker", "--turns", str(turns), "--queries", str(queries)]
    proc = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if not json.loads(proc.stdout.readline()).get("ready"):
        raise SystemExit(f"{checkout}: the worker did not start")
    return proc


def _round(proc: subprocess.Popen[str]) -> dict[str, list[float]]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("round\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"a worker stopped (exit {proc.wait()})")
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="the other checkout (a directory holding refind_cli)")
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.turns, args.queries)
        return
    if args.baseline is None or not (args.baseline / "refind_cli").is_dir():
        raise SystemExit("--baseline: a checkout of refind (a directory holding refind_cli) is needed")
    procs = {"baseline": _start(args.baseline.resolve(), args.turns, args.queries)}
    procs["this"] = _start(HERE.parent, args.turns, args.queries)
    rows: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for name in ("baseline", "this") if r % 2 == 0 else ("this", "baseline"):
            for kind, times in _round(procs[name]).items():
                rows.setdefault((name, kind), []).extend(times)
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    print(f"variant_scores alone, {args.turns:,} turns, {args.queries} queries × {args.rounds} rounds, medians (µs)\n")
    print("| queries | baseline | this | ratio |")
    print("|---|---:|---:|---:|")
    for kind in dict.fromkeys(k for _, k in rows):
        a = statistics.median(rows[("baseline", kind)]) * 1e6
        b = statistics.median(rows[("this", kind)]) * 1e6
        print(f"| {kind} | {a:.1f} | {b:.1f} | {b / a:.2f}× |")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
