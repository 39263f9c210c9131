"""What a contest Add costs in process, and how much of it is indexing on write: this refind against another.

    .venv/bin/python bench/add_cost.py --baseline ../base ../shared/datasets/longmemeval_s_dev.json.gz [--rounds 4]

Each round runs both refinds, each in its own process (``python -P``: the working directory's package does not shadow
the baseline's), alternating which goes first: every Add request of the set (each user's, one after another, as the
platform sends them) through ``Store.add`` into a fresh database, as the server's writer does. Prints per refind the
medians over the rounds of the process's CPU per Add, and of the thread CPU spent in ``segments_of_rows`` (analysing
and numbering the new texts) and in ``write_segments`` (encoding, writing and merging segments; ``merge`` is part of
it), and the ratios this / baseline. The first Add (imports, the database's creation) is not counted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

CHILD = """
import os, sys, tempfile, time
from refind_cli import datasets, index_store
from refind_cli.store import Store
requests = [r for s in datasets.load(sys.argv[1]) for r in s.requests]
spent = dict.fromkeys(("segments_of_rows", "write_segments", "merge"), 0.0)
def timed(name):
    inner = getattr(index_store, name)
    def call(*args, **kwargs):
        started = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[name] += time.thread_time() - started
    setattr(index_store, name, call)
for name in spent:
    timed(name)
store = Store(os.path.join(tempfile.mkdtemp(), "bench.db"), retention_days=None)
store.add(requests[0])
spent = dict.fromkeys(spent, 0.0)
cpu = time.process_time()
for r in requests[1:]:
    store.add(r)
n = len(requests) - 1
print((time.process_time() - cpu) / n * 1e3, *(v / n * 1e3 for v in spent.values()))
store.close()
"""

COLUMNS = ("add cpu", "segments_of_rows", "write_segments", "merge")


def run(tree: Path, path: Path) -> list[float]:
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(path)], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    return [float(x) for x in done.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path, help="a labelled set refind eval reads (its Add requests are replayed)")
    parser.add_argument("--baseline", type=Path, required=True, help="the other refind's checkout")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    trees = {"this": HERE, "baseline": args.baseline.resolve()}
    rows: dict[str, list[list[float]]] = {name: [] for name in trees}
    for i in range(args.rounds):
        for name in trees if i % 2 == 0 else reversed(list(trees)):
            rows[name].append(run(trees[name], args.dataset.resolve()))
            print(f"round {i + 1} {name}: " + ", ".join(f"{c} {v:.3f}" for c, v in zip(COLUMNS, rows[name][-1])))
    med = {name: [statistics.median(r[c] for r in rows[name]) for c in range(len(COLUMNS))] for name in trees}
    for name in trees:
        said = ", ".join(f"{col} {v:.3f}" for col, v in zip(COLUMNS, med[name]))
        print(f"{name}: {said} ms an Add (medians of {args.rounds})")
    print(
        "this / baseline: " + ", ".join(f"{c} {t / b:.2f}×" for c, t, b in zip(COLUMNS, med["this"], med["baseline"]))
    )


if __name__ == "__main__":
    main()
