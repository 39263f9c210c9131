"""What a Search returns when one page of a session of big pages matches: the list backfilled to ``top_k`` (as
before) against backfill that stops once the list holds ``backfill_chars`` (the default), in the same run.

    .venv/bin/python bench/backfill_size.py [--pages 416] [--page-chars 37000] [--top-k 100] [--repeat 5]

One user, one session of ``--pages`` JSON pages (the contest's one session of 416 pages of ~37 KB, ~16 MB), each a
distinct record; the query names a word only one page holds. Prints the response's items and characters (as the
contract's JSON carries them) and the search's median wall time for each setting, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import search as S
from refind_cli.contract import AddRequest, Message
from refind_cli.store import Store

T0 = 1_700_000_000_000


def page(i: int, chars: int) -> str:
    """A JSON page of records (``{"id": …, "name": …, "note": …}``) of about ``chars`` characters."""
    rows, size, j = [], 2, 0
    while size < chars:
        row = json.dumps({"id": f"{i}-{j}", "name": f"item {i} {j}", "note": f"stock level {j % 97} bin {j % 13}"})
        rows.append(row)
        size += len(row) + 1
        j += 1
    return "[" + ",".join(rows) + "]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=416)
    ap.add_argument("--page-chars", type=int, default=37_000)
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "b.db")
        pages = [page(i, args.page_chars) for i in range(args.pages)]
        pages[args.pages // 2] = pages[args.pages // 2][:-1] + ',{"note": "zeppelin"}]'
        for start in range(0, args.pages, 8):  # the platform's Adds: a few pages each
            msgs = tuple(Message("user", p, T0 + i) for i, p in enumerate(pages[start : start + 8], start))
            store.add(AddRequest(f"r{start}", "u", "s", msgs))
        print(f"{args.pages} pages, {sum(map(len, pages)) / 1e6:.1f} MB; query 'zeppelin', top_k {args.top_k}")
        configs = {"backfill to top_k (before)": S.SearchConfig(backfill_chars=None), "default": S.SearchConfig()}
        times: dict[str, list[float]] = {name: [] for name in configs}
        sizes: dict[str, tuple[int, int]] = {}
        for cfg in configs.values():  # warm: the index and the pages' text read once
            S.search(store, "u", "zeppelin", top_k=args.top_k, config=cfg)
        for _ in range(args.repeat):  # the two alternating, the JSON response made as the server makes it
            for name, cfg in configs.items():
                t = time.perf_counter()
                blocks = S.search(store, "u", "zeppelin", top_k=args.top_k, config=cfg)
                body = json.dumps({"data": [b.as_contract() for b in blocks]}, ensure_ascii=False)
                times[name].append(time.perf_counter() - t)
                sizes[name] = (len(blocks), len(body))
        rows = {name: (*sizes[name], statistics.median(times[name]) * 1000) for name in configs}
        for name, (n, size, ms) in rows.items():
            print(f"{name:28} {n:4} items {size:>12,} chars  {ms:8.1f} ms (search and JSON)")
        (n0, c0, t0), (n1, c1, t1) = rows.values()
        print(f"ratio default / before: items {n1 / n0:.3f}, chars {c1 / c0:.4f}, time {t1 / t0:.2f}")


if __name__ == "__main__":
    main()
