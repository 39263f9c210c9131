"""What matching a query's lone CJK characters inside bigrams costs (``SearchConfig.lone_units``): MemDaily's users
stored as one user (5,536 Chinese messages), warm, in-process, the stage off and on (the defaults) taking turns.

    .venv/bin/python bench/lone_units.py [--dataset ../shared/datasets/memdaily_dev] [--questions 200] [--rounds 3]

Two query sets: MemDaily's questions as asked (a lone character only where a CJK run is one character long) and one
character of each (the first of its question's CJK runs): the case the stage is for. Also the one-off cost of the
first lone character a vocabulary meets (its bigrams grouped by character, then cached), of a query of 3,000
characters apart (only the first few are expanded) and of the first lone character after an Add (its new segment grouped).
``--synthetic N`` adds N Chinese messages (8–40 characters drawn from 3,000 Han characters, Zipf-weighted) to the
user: a large vocabulary. Prints p50 / p95 (ms).

    .venv/bin/python bench/lone_units.py --synthetic 50000 --questions 50 --rounds 1
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from category_latency import replay_as_one_user, timed_in_turns  # (bench/ is the script's folder: on sys.path)

from refind_cli import search as S
from refind_cli import term_groups
from refind_cli.contract import AddRequest, parse_add
from refind_cli.evaluate import percentile, warm_up
from refind_cli.store import Store

HAN = re.compile(r"[\u4e00-\u9fff]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="../shared/datasets/memdaily_dev")
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--synthetic", type=int, default=0, help="also store this many synthetic Chinese messages")
    args = ap.parse_args()
    warm_up()
    configs = {"lone_units off": S.SearchConfig(lone_units=False), "defaults": S.SearchConfig()}
    with tempfile.TemporaryDirectory(prefix="refind-lone-") as tmp:
        store = Store(Path(tmp) / "l.db", retention_days=None)
        asked: list[str] = []
        for sample in replay_as_one_user(store, args.dataset):
            asked += [q.text for q in sample.questions]
        rng = random.Random(7)
        pool = [chr(0x4E00 + rng.randrange(0x5000)) for _ in range(3000)]
        weights = [1 / (i + 1) for i in range(len(pool))]
        for start in range(0, args.synthetic, 5000):
            texts = [
                "".join(rng.choices(pool, weights, k=rng.randrange(8, 40)))
                for _ in range(start, min(start + 5000, args.synthetic))
            ]
            store.add_many([_request(f"syn{start + i}", text) for i, text in enumerate(texts)])
        step = max(1, len(asked) // args.questions)
        asked = asked[::step][: args.questions]
        chars = [m.group(0) for q in asked if (m := HAN.search(q))]
        index = S.user_index(store, "all")
        term_groups.GROUPS.clear()
        t0 = time.perf_counter()
        index.search(chars[0], top_k=args.top_k)
        first_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        index.search(chars[1], top_k=args.top_k)
        second_ms = (time.perf_counter() - t0) * 1000
        print(f"{len(store.user_messages('all')):,} messages; first lone character {first_ms:.1f} ms (its vocabulary's")
        print(f"bigrams grouped by character, once), the next {second_ms:.1f} ms\n")
        print("| queries | top_k | lone_units off p50 / p95 | defaults p50 / p95 | ratio p50 |")
        print("|---|---:|---|---|---:|")
        for name, queries in (("MemDaily questions", asked), ("one character of each", chars)):
            times = timed_in_turns(index, queries, configs, rounds=args.rounds, top_k=args.top_k)
            off, on = times["lone_units off"], times["defaults"]
            ratio = statistics.median(on) / statistics.median(off)
            print(
                f"| {name} | {args.top_k} | {statistics.median(off):.2f} / {percentile(off, 95):.2f} | "
                f"{statistics.median(on):.2f} / {percentile(on, 95):.2f} | {ratio:.2f}× |"
            )
        t0 = time.perf_counter()
        index.search(" ".join(pool), top_k=args.top_k)
        print(f"\na query of {len(pool):,} characters apart: {(time.perf_counter() - t0) * 1000:.1f} ms")
        store.add_many([_request("after", "我的猫")])
        index = S.user_index(store, "all")
        t0 = time.perf_counter()
        index.search(chars[0], top_k=args.top_k)
        print(f"the first lone character after an Add: {(time.perf_counter() - t0) * 1000:.1f} ms")
        store.close()


def _request(request_id: str, text: str) -> AddRequest:
    message = {"role": "user", "content": text, "timestamp": 1_700_000_000_000}
    return parse_add({"request_id": request_id, "user_id": "all", "session_id": request_id, "messages": [message]})


if __name__ == "__main__":
    main()
