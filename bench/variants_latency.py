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
import statistics
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


def main() -> None:
    from latency_since import checkout_args, side_by_side

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    checkout_args(ap)
    args = ap.parse_args()
    if args.worker:
        worker(args.turns, args.queries)
        return
    rows = side_by_side(
        __file__, args.baseline, ["--turns", str(args.turns), "--queries", str(args.queries)], args.rounds
    )
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
