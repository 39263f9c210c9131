"""One-message Adds, then the same Adds again (identical replays): this refind against another, in the same run.

    .venv/bin/python bench/noop_writes.py --baseline PYTHONPATH [--requests 2000] [--rounds 5]

Each round runs both refinds, each in its own process (``python -P``: the working directory's package does not shadow
the baseline's), alternating which goes first: ``--requests`` one-message ``Store.add`` calls into a fresh database
(each its own transaction, committed with ``synchronous=FULL``), then the same requests again, which store nothing.
Prints, per refind, the medians over the rounds of milliseconds per request by the wall clock and by the process's CPU
time, and the ratios this / baseline. A replay that changes nothing commits nothing since round 30 (Store.write rolls
it back): no fsync.
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
from refind_cli.contract import AddRequest, Message
from refind_cli.store import Store
n = int(sys.argv[1])
store = Store(os.path.join(tempfile.mkdtemp(), "bench.db"), retention_days=None)
reqs = [AddRequest(f"r{i}", "u1", "s1", (Message("user", f"Jon said hiking {i} at Mount Rainier", None),)) for i in range(n)]
out = []
for _ in range(2):  # added, then replayed
    wall, cpu = time.perf_counter(), time.process_time()
    for r in reqs:
        store.add(r)
    out += [(time.perf_counter() - wall) / n * 1e3, (time.process_time() - cpu) / n * 1e3]
store.close()
print(*out)
"""

COLUMNS = ("add wall", "add cpu", "replay wall", "replay cpu")


def run(tree: Path, n: int) -> list[float]:
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(n)], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    return [float(x) for x in done.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="the other refind's checkout")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trees = {"this": HERE, "baseline": args.baseline.resolve()}
    rows: dict[str, list[list[float]]] = {name: [] for name in trees}
    for i in range(args.rounds):
        for name in trees if i % 2 == 0 else reversed(list(trees)):
            rows[name].append(run(trees[name], args.requests))
    med = {name: [statistics.median(r[c] for r in rows[name]) for c in range(4)] for name in trees}
    for name in trees:
        said = ", ".join(f"{col} {v:.3f}" for col, v in zip(COLUMNS, med[name]))
        print(f"{name}: {said} ms a request (medians of {args.rounds})")
    print(
        "this / baseline: " + ", ".join(f"{c} {t / b:.2f}×" for c, t, b in zip(COLUMNS, med["this"], med["baseline"]))
    )


if __name__ == "__main__":
    main()
