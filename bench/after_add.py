"""Search right after a 1-message Add, in-process, on a copy of a database — to compare two trees on the same data.

    PYTHONPATH=<tree> .venv/bin/python bench/after_add.py --db single-100000.db [--user u] [--repeat 9]

Copies the database (the copy is deleted afterwards), warms the user's index with three searches, then ``--repeat``
times: ``Store.add()`` of one message (said-at later than every other, in one session), then ``search()``. Prints
the median wall and CPU time of those searches. Run it with each tree on the path in turn (bench/index.py's
databases serve: ``--workdir``'s ``single-N.db``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth

from refind_cli import search as S
from refind_cli.contract import AddRequest, Message
from refind_cli.store import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--user", default="u")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    queries = synth.queries(20)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "copy.db"
        shutil.copy(args.db, path)
        store = Store(path, retention_days=None)
        for q in queries[:3]:
            S.search(store, args.user, q, top_k=10)
        wall, cpu = [], []
        for i in range(args.repeat):
            msg = Message(
                "user", f"Caroline: a new message {i} about {queries[i % len(queries)]}", synth.T0 + 10**6 + i
            )
            store.add(AddRequest(f"after-add-{time.time_ns()}", args.user, "s-bench", (msg,)))
            t, c = time.perf_counter(), time.process_time()
            S.search(store, args.user, queries[(i + 3) % len(queries)], top_k=10)
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        store.close()
    print(
        f"{args.db}: after a 1-message Add, median of {args.repeat}: "
        f"{statistics.median(wall) * 1000:.1f} ms wall, {statistics.median(cpu) * 1000:.1f} ms CPU"
    )


if __name__ == "__main__":
    main()
