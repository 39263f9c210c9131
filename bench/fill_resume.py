"""What filling a short list costs a search, and what starting its second pass where the first reached ``fill_after``
saves: every question of a set asked at top_k 100 with filling off, with the second pass made from scratch (as round
20 made it), and resumed (the default), in alternating rounds; medians of the rounds, ms a search.

    .venv/bin/python bench/fill_resume.py fixtures/blind/chat_zh fixtures/blind/chat_zh4 ../shared/datasets/memdaily_dev

The three give the same evidence for the two filling variants (tests/test_ranking_stages.py checks it); this times them.

``--synth N``: instead, how often a search makes a second pass at all, on bench/ranking_latency.py's synthetic user
of N turns and its four kinds of query (50 each), at top_k 10 and 100, with the lists' median length.

    .venv/bin/python bench/fill_resume.py --synth 10000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="*")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--synth", type=int, default=0, help="count second passes on a synthetic user of N turns")
    args = ap.parse_args()
    if args.synth:
        second_passes(args.synth)
        return

    from refind_cli import blocks, datasets
    from refind_cli import search as S
    from refind_cli.evaluate import replay_sample, warm_up
    from refind_cli.store import Store

    resumed = blocks._render

    def from_scratch(*a: Any, start: Any = None, **kw: Any) -> Any:
        return resumed(*a, **kw)

    warm_up()
    systems = {
        "fill off": (S.SearchConfig(fill_chars=None), resumed),
        "second pass from scratch": (S.SearchConfig(), from_scratch),
        "second pass resumed": (S.SearchConfig(), resumed),
    }
    print("| set | " + " | ".join(systems) + " |\n|---|" + "---|" * len(systems))
    for path in args.datasets:
        with tempfile.TemporaryDirectory(prefix="refind-fill-") as tmp:
            store = Store(Path(tmp) / "f.db", retention_days=None)
            samples = list(datasets.load(path))
            for sample in samples:
                replay_sample(store, sample)
            questions = [(s.user_id, q.text) for s in samples for q in s.questions]
            for user, text in questions:  # indexes built and text read once, untimed
                S.search(store, user, text, top_k=100)
            took: dict[str, list[float]] = {name: [] for name in systems}
            for r in range(args.rounds):
                names = list(systems) if r % 2 == 0 else list(systems)[::-1]
                for name in names:
                    cfg, render = systems[name]
                    blocks._render = render  # (in this process only)
                    t0 = time.perf_counter()
                    for user, text in questions:
                        S.search(store, user, text, top_k=100, config=cfg)
                    took[name].append((time.perf_counter() - t0) * 1000 / len(questions))
            blocks._render = resumed
            store.close()
        print(f"| {Path(path).name} | " + " | ".join(f"{statistics.median(took[n]):.2f}" for n in systems) + " |")


def second_passes(turns: int) -> None:
    import random
    from collections import Counter

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import synth

    from refind_cli import blocks
    from refind_cli import search as S
    from refind_cli.store import Store

    rng = random.Random(7)
    plain = synth.queries(50)
    nouns = ("sports", "foods", "cities", "books", "activities", "animals", "games", "countries")
    queries = [
        *plain,
        *(synth.misspell(q, rng) for q in plain),
        *(f"{q} on 12 March 2024" for q in plain),
        *(f"What {nouns[j % len(nouns)]} {q}?" for j, q in enumerate(plain)),
    ]
    passes: Counter[tuple[int, str]] = Counter()
    real = blocks._render

    def counting(*a: Any, start: Any = None, **kw: Any) -> Any:
        spare = kw.get("spare")
        passes[kw["top_k"], "second" if spare is not None and not spare.probe else "first"] += 1
        return real(*a, start=start, **kw)

    blocks._render = counting  # (in this process only)
    with tempfile.TemporaryDirectory(prefix="refind-fill-") as tmp:
        store = Store(Path(tmp) / "f.db", retention_days=None)
        synth.fill(store, "u", turns)
        index = S.user_index(store, "u")
        for top_k in (10, 100):
            chars = [sum(len(b.content) + 2 for b in index.search(q, top_k=top_k)) for q in queries]
            print(
                f"top_k {top_k}: {passes[top_k, 'second']} of {passes[top_k, 'first']} searches made a second pass; "
                f"lists {statistics.median(chars):,.0f} characters at the median, {max(chars):,} at most"
            )
        store.close()
    blocks._render = real


if __name__ == "__main__":
    main()
