"""The first search after an Add — the agent's pattern, store a turn then search — when it holds a lone Chinese
character or a misspelt word, against a baseline checkout in the same run: both query expansions group words of the
user's vocabulary (fuzzy buckets, bigrams by character), once per segment since round 11, once per view before (an
Add makes a new view, so every such search after an Add grouped the whole vocabulary again).

    .venv/bin/python bench/first_after_add.py --baseline ../base [--messages 10000,50000] [--adds 5] [--rounds 3]

Each (checkout, size) runs in its own process (``python -P``, the checkout on PYTHONPATH), the checkouts taking turns
size by size. The user: N synthetic messages, each 8–40 Chinese characters drawn from 3,000 Han characters and three
words drawn from 20,000 made-up Latin words (both Zipf-weighted; seeded), stored 5,000 per Add; then every stage is
searched once (the groups built). Then ``--adds`` times over: an Add of one message, and its first search — a plain
query (nothing grouped: what any first search after an Add costs), or a lone character (the most common, then one of
rank ~100), or a misspelt word (one letter changed) — each after its own Add. Then warm: the same queries, each
asked again ``--rounds`` times, and the two expansion stages alone (``expand.fuzzy_scores``,
``expand.lone_unit_scores``) ten times as often. Prints medians (ms) and the ratio this checkout ÷ baseline.
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
KINDS = ("plain", "lone character", "misspelt word")


def measure(messages: int, adds: int, rounds: int) -> dict[str, list[float]]:
    """Milliseconds of each kind of search: first after an Add, and warm."""
    from refind_cli import expand
    from refind_cli import search as S
    from refind_cli.contract import AddRequest, parse_add
    from refind_cli.evaluate import warm_up
    from refind_cli.store import Store
    from refind_cli.tokenize import analyze

    warm_up()
    rng = random.Random(11)
    han = [chr(0x4E00 + rng.randrange(0x5000)) for _ in range(3000)]
    han_weights = [1 / (i + 1) for i in range(len(han))]
    latin = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randrange(5, 11))) for _ in range(20_000)]
    latin_weights = [1 / (i + 1) ** 0.8 for i in range(len(latin))]

    def text() -> str:
        words = " ".join(rng.choices(latin, latin_weights, k=3))
        return "".join(rng.choices(han, han_weights, k=rng.randrange(8, 40))) + " " + words

    def request(n: int) -> AddRequest:
        message = {"role": "user", "content": text(), "timestamp": 1_700_000_000_000 + n}
        return parse_add({"request_id": f"r{n}", "user_id": "u", "session_id": f"s{n // 50}", "messages": [message]})

    def misspelt(i: int) -> str:
        word = latin[10 + i]  # a common word, one letter changed (not its first two: fuzzy's fixed prefix)
        at = 2 + i % (len(word) - 2)
        return word[:at] + ("q" if word[at] != "q" else "x") + word[at + 1 :]

    queries = {
        "plain": [f"{latin[i]} {han[i]}{han[i + 1]}" for i in range(adds)],
        "lone character": [han[0] if i % 2 == 0 else han[100 + i] for i in range(adds)],
        "misspelt word": [misspelt(i) for i in range(adds)],
    }
    out: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="refind-first-") as tmp:
        store = Store(Path(tmp) / "f.db", retention_days=None)
        for start in range(0, messages, 5000):
            store.add_many([request(n) for n in range(start, min(start + 5000, messages))])
        for kind in KINDS:
            S.search(store, "u", queries[kind][0], top_k=10)
        n = messages
        for i in range(adds):
            for kind in KINDS:
                store.add_many([request(n)])
                n += 1
                t0 = time.perf_counter()
                S.search(store, "u", queries[kind][i], top_k=10)
                out.setdefault(f"first {kind}", []).append((time.perf_counter() - t0) * 1000)
        for _ in range(rounds):
            for kind in KINDS:
                for q in queries[kind]:
                    t0 = time.perf_counter()
                    S.search(store, "u", q, top_k=10)
                    out.setdefault(f"warm {kind}", []).append((time.perf_counter() - t0) * 1000)
        idx = S.user_index(store, "u").index  # the two stages alone, warm (a search's other stages are most of it)
        stages = {"fuzzy_scores": expand.fuzzy_scores, "lone_unit_scores": expand.lone_unit_scores}
        for _ in range(rounds * 10):
            for name, stage in stages.items():
                for q in queries["misspelt word" if name == "fuzzy_scores" else "lone character"]:
                    t0 = time.perf_counter()
                    stage(idx, analyze(q))
                    out.setdefault(f"warm stage {name}", []).append((time.perf_counter() - t0) * 1000)
        store.close()
    try:  # what the groups hold beside the index (this checkout's term_groups: absent from a baseline before it)
        from refind_cli import index_cache, term_groups

        out["memory MB: index cache, groups"] = [index_cache.CACHE.used / 1e6, term_groups.GROUPS.used / 1e6]
    except ImportError:
        pass
    return out


def _run(pythonpath: str, messages: int, adds: int, rounds: int) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    args = ["--one", str(messages), "--adds", str(adds), "--rounds", str(rounds)]
    out = subprocess.run([sys.executable, "-P", __file__, *args], env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="PYTHONPATH", help="the other refind's checkout")
    ap.add_argument("--messages", default="10000,50000")
    ap.add_argument("--adds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.adds, args.rounds)))
        return
    if not args.baseline:
        ap.error("--baseline is required")
    print(f"`python bench/first_after_add.py {' '.join(sys.argv[1:])}`\n")
    print("| messages | search | this checkout ms (median) | baseline ms (median) | ratio |")
    print("|---:|---|---:|---:|---:|")
    for size in (int(s) for s in args.messages.split(",")):
        mine = _run(str(HERE.parent), size, args.adds, args.rounds)
        theirs = _run(args.baseline, size, args.adds, args.rounds)
        memory = mine.pop("memory MB: index cache, groups", None)
        for key in mine:
            a, b = statistics.median(mine[key]), statistics.median(theirs[key])
            print(f"| {size:,} | {key} | {a:.1f} | {b:.1f} | {a / b:.2f}× |", flush=True)
        if memory:
            print(
                f"| {size:,} | (this checkout's index cache / term groups: {memory[0]:.1f} / {memory[1]:.1f} MB) | | | |"
            )


if __name__ == "__main__":
    main()
