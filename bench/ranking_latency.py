"""What the ranking stages of issue 10 cost: warm in-process search, the earlier pipeline against today's defaults.

    .venv/bin/python bench/ranking_latency.py [--turns 10000] [--queries 50] [--rounds 5] [--earlier K=V,K=V]

One synthetic user (bench/synth.py, seeded) is indexed once; then, in alternating rounds so that machine load falls
on both alike, every query is asked once untimed by each pipeline (so that both find their turns' text already read)
and then, timed and
taking turns at going first, with the earlier pipeline (every neighbour, no fuzzy expansion, no backfill,
no deferral, no kinds) and with the defaults, at top_k 10 and 100, and once more with one query word misspelt (a word the
vocabulary lacks, so fuzzy expansion runs), once with a day named ("… on 12 March 2024", so the date boost
runs) and once as a category question ("What sports …?", so the kinds of sports are looked up in the vocabulary). ``--earlier`` replaces the earlier pipeline by the defaults with those fields changed (``--earlier
date_boost=0`` measures what the date boost costs). Prints medians and the ratio defaults ÷ earlier.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synth

from refind_cli import search as S
from refind_cli.store import Store

EARLIER = S.SearchConfig(neighbour_filter="all", fuzzy=False, backfill=False, defer_chars=None, kinds_weight=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--earlier", default=None, help="the baseline: the defaults with these K=V fields changed")
    args = ap.parse_args()
    earlier = EARLIER
    if args.earlier:
        from refind_cli.evaluate import parse_variants, search_config

        earlier = search_config(parse_variants(args.earlier.split(",")))
    rng = random.Random(0)
    queries = synth.queries(args.queries)
    typos = [synth.misspell(q, rng) for q in queries]
    dated = [f"{q} on 12 March 2024" for q in queries]
    nouns = ("sports", "foods", "cities", "books", "activities", "animals", "games", "countries")
    category = [f"What {nouns[j % len(nouns)]} {q}?" for j, q in enumerate(queries)]
    kinds = (("queries", queries), ("one word misspelt", typos), ("a day named", dated), ("a category named", category))
    with tempfile.TemporaryDirectory(prefix="refind-latency-") as tmp:
        store = Store(Path(tmp) / "db.sqlite", retention_days=None)
        synth.fill(store, "u", args.turns)
        index = S.user_index(store, "u")
        rows: dict[tuple[str, int, str], list[float]] = {}
        configs = (("earlier", earlier), ("defaults", S.SearchConfig()))
        for _ in range(args.rounds):
            for kind, qs in kinds:
                for top_k in (10, 100):
                    for j, q in enumerate(qs):
                        # untimed first, by each pipeline: a query's turns are read into the per-user turn cache by
                        # whichever asks first, which made the second look faster (review of round 4) — and a
                        # pipeline that ranks other turns first read those in its timed run (round 15: the answer
                        # lift read 1.47x that way, 1.2x warm); the two take turns at going first
                        for _, cfg in configs:
                            index.search(q, top_k=top_k, config=cfg)
                        for name, cfg in configs if j % 2 == 0 else configs[::-1]:
                            t = time.perf_counter()
                            index.search(q, top_k=top_k, config=cfg)
                            rows.setdefault((kind, top_k, name), []).append(time.perf_counter() - t)
        store.close()
    print(f"{args.turns:,} turns, {args.queries} queries × {args.rounds} rounds, medians (ms)\n")
    print("| queries | top_k | earlier pipeline | defaults | ratio |")
    print("|---|---:|---:|---:|---:|")
    for kind, _ in kinds:
        for top_k in (10, 100):
            a = statistics.median(rows[(kind, top_k, "earlier")]) * 1000
            b = statistics.median(rows[(kind, top_k, "defaults")]) * 1000
            print(f"| {kind} | {top_k} | {a:.2f} | {b:.2f} | {b / a:.2f}× |")


if __name__ == "__main__":
    main()
