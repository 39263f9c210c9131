"""Calls on one ``Memory`` while an agent search waits on its model: an agent stores the user's turn, searches, stores
the reply — and the planner's model takes seconds to answer.

  .venv/bin/python bench/agent_concurrency.py                          # this tree
  .venv/bin/python bench/agent_concurrency.py --base /tmp/base         # and another tree (e.g. a worktree of an
                                                                       # older commit), each in a process of its own

One user of ``--messages`` synthetic messages. Per tree, ``--calls`` adds (and BM25 searches) timed one at a time,
first with nothing else running (the baseline of the same run), then while an agent search on another thread is
held at its model for ``--hold`` seconds (a model callable that waits: no network). Printed: the median and the
slowest call of each, and the slowest held / slowest idle ratio — ~1× when calls do not wait for the search, about the hold when
they take turns with it (a call is let go when the model answers, so later calls of the same hold read as quick:
the slowest is the number that tells).
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
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORDS = [
    "hiking",
    "lake",
    "trail",
    "camping",
    "salmon",
    "kayak",
    "museum",
    "concert",
    "marathon",
    "bakery",
    "garden",
    "violin",
]


def measure(db: Path, messages: float, calls: float, hold: float) -> dict[str, float]:
    """In the process of the tree being measured (its refind_cli first on sys.path)."""
    messages, calls = int(messages), int(calls)
    from refind_cli import Memory
    from refind_cli.model import Reply

    rng = random.Random(7)
    memory = Memory(db, retention_days=None)
    t0 = 1_700_000_000_000
    batch = [
        {
            "request_id": f"r{i}",
            "user_id": "u",
            "session_id": f"s{i // 20}",
            "messages": [{"role": "user", "content": " ".join(rng.choices(WORDS, k=12)), "timestamp": t0 + i * 1000}],
        }
        for i in range(messages)
    ]
    memory.add_many(batch)
    memory.search("hiking lake", user="u")  # the index read once, as a warm process has it

    def timed(n: int, tag: str) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"add": [], "search": []}
        for i in range(n):
            started = time.perf_counter()
            memory.add(f"{tag} {i} " + " ".join(rng.choices(WORDS, k=8)), user="u", session=f"{tag}-live")
            out["add"].append(time.perf_counter() - started)
            started = time.perf_counter()
            memory.search("kayak trail", user="u")
            out["search"].append(time.perf_counter() - started)
        return out

    idle = timed(calls, "idle")
    waiting, release = threading.Event(), threading.Event()

    def model(_messages: list[dict[str, object]]) -> Reply:
        waiting.set()
        release.wait(hold)
        return Reply('{"action": "finish_search"}', prompt_tokens=1, completion_tokens=1)

    model.__name__ = "held"  # type: ignore[attr-defined]
    search = threading.Thread(
        target=lambda: memory.agent_search("where did we go hiking", user="u", model=model, deadline=hold + 30)
    )
    search.start()
    waiting.wait(30)
    held = timed(calls, "held")
    release.set()
    search.join()
    memory.close()
    result: dict[str, float] = {}
    for kind in ("add", "search"):
        result[f"{kind}_idle_median_ms"] = statistics.median(idle[kind]) * 1000
        result[f"{kind}_held_median_ms"] = statistics.median(held[kind]) * 1000
        result[f"{kind}_held_max_ms"] = max(held[kind]) * 1000
        result[f"{kind}_idle_max_ms"] = max(idle[kind]) * 1000
    return result


def run_tree(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="agent_conc_") as tmp:
        code = (
            "import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]);"
            "import agent_concurrency as a;"
            "print(json.dumps(a.measure(__import__('pathlib').Path(sys.argv[3]), *map(float, sys.argv[4:]))))"
        )
        env = {**os.environ, "PYTHONPATH": str(tree)}
        argv = [sys.executable, "-c", code, str(tree), str(HERE), str(Path(tmp) / "m.db")]
        argv += [str(args.messages), str(args.calls), str(args.hold)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=tree)
        return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--hold", type=float, default=5.0, help="seconds the model holds the agent search")
    parser.add_argument("--base", type=Path, help="another tree to measure in the same run")
    args = parser.parse_args(argv)
    trees = [("this tree", HERE.parent)] + ([("base", args.base.resolve())] if args.base else [])
    print(
        "| tree | add idle (median) | add while held (median / slowest) | search idle | search while held "
        "(median / slowest) | slowest while held / slowest idle: add, search |"
    )
    print("|---|---|---|---|---|---|")
    for name, tree in trees:
        r = run_tree(tree, args)
        ratio = [r[f"{k}_held_max_ms"] / max(r[f"{k}_idle_max_ms"], 1e-9) for k in ("add", "search")]
        print(
            f"| {name} | {r['add_idle_median_ms']:.1f} ms | {r['add_held_median_ms']:.1f} / {r['add_held_max_ms']:.1f} ms "
            f"| {r['search_idle_median_ms']:.1f} ms | {r['search_held_median_ms']:.1f} / "
            f"{r['search_held_max_ms']:.1f} ms | {ratio[0]:,.1f}×, {ratio[1]:,.1f}× |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
