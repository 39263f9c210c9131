"""What a long query repeating common words costs a bm25 search (the contest allows queries of 100,000 characters):
one synthetic user of N turns, all said in 2023 (so "2023" — each turn's year is indexed as a word — is in every
turn), warm, in-process; with ``--baseline CHECKOUT`` the same in a process of that checkout, and the ratio.

    .venv/bin/python bench/long_query.py --turns 50000 --baseline ../main

Prints the median ms of ``--rounds`` searches (top_k 100) per query. Both processes build the same user (seeded).
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

QUERIES = {
    "a question": "where did we go hiking in 2023",
    "'2023' x 1,000": "2023 " * 1_000,
    "'2023' x 20,000 (100,000 chars)": "2023 " * 20_000,
    "'on 29 Dec 2023' x 6,000": "on 29 Dec 2023 " * 6_000,
    "12,000 distinct words": None,  # drawn from the user's vocabulary below
}


def timings(turns: int, rounds: int) -> dict[str, float]:
    from refind_cli import Memory

    rng = random.Random(11)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(4, 9))) for _ in range(5_000)]
    queries = dict(QUERIES)
    queries["12,000 distinct words"] = " ".join(rng.sample(words, 5_000) + rng.choices(words, k=7_000))
    t0 = 1_672_531_200_000  # 2023-01-01 UTC
    with (
        tempfile.TemporaryDirectory(prefix="refind-longq-") as tmp,
        Memory(Path(tmp) / "q.db", retention_days=None) as m,
    ):
        per_add = 500
        for r in range(0, turns, per_add):
            batch = [
                {"role": "user", "content": " ".join(rng.choices(words, k=20)), "timestamp": t0 + (r + i) * 600_000}
                for i in range(min(per_add, turns - r))
            ]
            m.add(batch, user="u", session=f"s{r // 2_000}", request_id=f"r{r}")
        m.search("warm", user="u", top_k=100)
        out = {}
        for name, q in queries.items():
            assert q is not None
            m.search(q, user="u", top_k=100)  # untimed once
            times = []
            for _ in range(rounds):
                began = time.perf_counter()
                m.search(q, user="u", top_k=100)
                times.append((time.perf_counter() - began) * 1000)
            out[name] = statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="another checkout, timed in its own process")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(timings(args.turns, args.rounds)))
        return
    here = Path(__file__).resolve()
    sys.path.insert(0, str(here.parent.parent))
    mine = timings(args.turns, args.rounds)
    base = None
    if args.baseline:
        env = dict(os.environ, PYTHONPATH=str(Path(args.baseline).resolve()))
        cmd = [sys.executable, "-P", str(here), "--child", "--turns", str(args.turns), "--rounds", str(args.rounds)]
        base = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    print(f"{args.turns:,} turns, median of {args.rounds} (ms)")
    for name, ms in mine.items():
        line = f"  {name:34s} {ms:10.1f}"
        if base is not None:
            line += f"   baseline {base[name]:10.1f}   {ms / base[name]:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
