"""What the kinds stage costs on real category questions: LoCoMo's "what / which" questions against all ten of its
chats stored as one user (5,882 turns), warm, in-process, with the stage off, on (the defaults), and without its cap
of 64 kinds per word (``kinds_max`` 10**6; a word's candidates stay bounded by ``kinds.MAX_CANDIDATES``).

    .venv/bin/python bench/category_latency.py [--dataset ../shared/datasets/locomo10.json] [--questions 80]
                                               [--rounds 3] [--top-k 10]

bench/ranking_latency.py's synthetic words are random letters, so few kinds match there; real chats hold hundreds
of a broad category's kinds ("What event did John …"). Every question is asked once untimed by each configuration,
then timed in rounds, the three taking turns. Prints p50, p95 and the maximum (ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import datasets
from refind_cli import search as S
from refind_cli.evaluate import percentile, replay_sample, warm_up
from refind_cli.store import Store


def replay_as_one_user(store: Store, dataset: str) -> Iterator[datasets.Sample]:
    """Replay every sample of ``dataset`` as the one user "all" (a user as big as the whole set); each sample as it
    is stored."""
    for sample in datasets.load(dataset):
        one_user = tuple(replace(r, user_id="all") for r in sample.requests)
        replay_sample(store, replace(sample, user_id="all", requests=one_user))
        yield sample


def timed_in_turns(
    index: S.UserIndex, queries: list[str], configs: dict[str, S.SearchConfig], *, rounds: int, top_k: int
) -> dict[str, list[float]]:
    """Each query asked once untimed by each configuration, then timed (ms) in ``rounds``, the configurations taking
    turns at going first (so that the machine's load falls on all alike)."""
    for q in queries:
        for cfg in configs.values():
            index.search(q, top_k=top_k, config=cfg)
    times: dict[str, list[float]] = {name: [] for name in configs}
    for r in range(rounds):
        for j, q in enumerate(queries):
            order = list(configs.items())
            k = (j + r) % len(order)
            for name, cfg in order[k:] + order[:k]:
                t = time.perf_counter()
                index.search(q, top_k=top_k, config=cfg)
                times[name].append((time.perf_counter() - t) * 1000)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="../shared/datasets/locomo10.json")
    ap.add_argument("--questions", type=int, default=80, help="every Nth what/which question, this many")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--top-k", type=int, default=10)
    args = ap.parse_args()
    warm_up()
    configs = {
        "kinds off": S.SearchConfig(kinds_weight=0),
        "defaults": S.SearchConfig(),
        "kinds_max 10**6": S.SearchConfig(kinds_max=10**6),
    }
    with tempfile.TemporaryDirectory(prefix="refind-category-") as tmp:
        store = Store(Path(tmp) / "c.db", retention_days=None)
        asked: list[str] = []
        for sample in replay_as_one_user(store, args.dataset):
            asked += [q.text for q in sample.questions if q.text.lower().startswith(("what", "which"))]
        step = max(1, len(asked) // args.questions)
        asked = asked[::step][: args.questions]
        index = S.user_index(store, "all")
        times = timed_in_turns(index, asked, configs, rounds=args.rounds, top_k=args.top_k)
        store.close()
    print(
        f"{len(index)} turns as one user, {len(asked)} what/which questions × {args.rounds} rounds, top_k {args.top_k}"
    )
    print()
    print("| configuration | p50 ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|")
    for name, v in times.items():
        print(f"| {name} | {statistics.median(v):.2f} | {percentile(v, 95):.2f} | {max(v):.2f} |")


if __name__ == "__main__":
    main()
