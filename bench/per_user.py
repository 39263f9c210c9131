"""Recall per user (per chat), refind against plain BM25 in the same run: is a set's margin carried by one chat?

    .venv/bin/python bench/per_user.py [--dataset ../shared/datasets/realtalk_dev] [--variant K=V ...] [--top-k 100]

A set's mean margin over plain BM25 can come from one chat while refind loses on the others; the held-back data of
issue 10 is more chats of the same kind. Replays the set (contest-style, as ``refind eval`` does), asks every
question of plain BM25, of refind's defaults and of each ``--variant`` (a SearchConfig override, one system each),
and prints R@2k / 8k / 32k per user, then over all questions, with each system's margin over plain BM25 in points.
One question of a 70-question chat is 1.4 points: a per-chat difference smaller than that is one question or less.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import datasets
from refind_cli.evaluate import (
    BUDGETS,
    BaselineBM25,
    Searcher,
    found_within,
    parse_variants,
    refind_bm25,
    replay_sample,
    search_config,
    warm_up,
)
from refind_cli.store import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="../shared/datasets/realtalk_dev")
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument(
        "--variant", action="append", default=[], help="SearchConfig overrides K=V[,K=V…] (one system each)"
    )
    args = ap.parse_args()

    warm_up()
    systems: list[tuple[str, Searcher]] = [
        ("plain BM25", BaselineBM25("analyze")),
        ("defaults", refind_bm25(search_config())),
    ]
    systems += [(v, refind_bm25(search_config(parse_variants(v.split(","))))) for v in args.variant]
    every: dict[str, list[list[float]]] = {name: [] for name, _ in systems}
    print("| user | questions | " + " | ".join(name for name, _ in systems) + " |")
    print("|---|---:|" + "---|" * len(systems))
    with tempfile.TemporaryDirectory(prefix="refind-per-user-") as tmp:
        store = Store(Path(tmp) / "u.db", retention_days=None)
        for sample in datasets.load(args.dataset):
            replay_sample(store, sample)
            mine: dict[str, list[list[float]]] = {name: [] for name, _ in systems}
            for q in sample.questions:
                for name, system in systems:
                    hits = system(store, user_id=q.user_id, query=q.text, options=q.options, top_k=args.top_k)
                    row = [f / len(q.evidence) for f in found_within(hits.contents, q.evidence)]  # refind eval's
                    mine[name].append(row)
                    every[name].append(row)
            print(
                f"| {sample.user_id} | {len(sample.questions)} | "
                + " | ".join(_cell(mine, name) for name, _ in systems)
                + " |",
                flush=True,
            )
        store.close()
    print(f"| **all** | {len(every['plain BM25'])} | " + " | ".join(_cell(every, name) for name, _ in systems) + " |")


def _cell(rows: dict[str, list[list[float]]], name: str) -> str:
    """R@2k / 8k / 32k, and for refind the margin over plain BM25 in points."""
    if not rows[name]:
        return "–"
    mean = [statistics.fmean(r[i] for r in rows[name]) for i in range(len(BUDGETS))]
    text = " / ".join(f"{m:.3f}" for m in mean)
    if name == "plain BM25":
        return text
    base = [statistics.fmean(r[i] for r in rows["plain BM25"]) for i in range(len(BUDGETS))]
    return text + " (" + " / ".join(f"{100 * (m - b):+.1f}" for m, b in zip(mean, base)) + ")"


if __name__ == "__main__":
    main()
