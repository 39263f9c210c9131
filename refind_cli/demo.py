"""`make demo`: the main job, offline, on a fresh local database (demo.db in the repository root, made anew each run:
what was stored there before is removed first).

Replays the fixture conversations, searches them in bm25 mode (English, Chinese, a date range, the contract's JSON),
shows what the store holds, and scores retrieval on a small labelled fixture set against plain BM25. Every step is a
real `refind` command, printed before it runs.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

STEPS = [
    ["add", "--file", "fixtures/conversations.jsonl"],
    ["add", "--file", "fixtures/messages.jsonl"],
    ["add", "--file", "fixtures/messages.jsonl", "--quiet"],  # a second replay stores nothing twice
    ["search", "where was the Lisbon hotel", "--user", "alice", "--mode", "bm25", "--top-k", "2"],
    ["search", "杭州的茶", "--user", "bob", "--mode", "bm25", "--top-k", "1"],
    ["search", "Maya", "--user", "alice", "--mode", "bm25", "--date-from", "2023/09/01", "--top-k", "3"],
    ["search", "cello teacher", "--user", "carol", "--mode", "bm25", "--top-k", "1", "--json"],
    ["inspect"],
    ["inspect", "session", "alice", "s4"],
    ["eval", "fixtures/eval/locomo_small.json"],
]


def main() -> None:
    from .cli import app

    root = Path(__file__).resolve().parent.parent
    os.chdir(root)
    db = root / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.environ["REFIND_DB"] = str(db)
    for step in STEPS:
        # printed as run from the repository root: a command copied from here reads the same database
        argv = step if step[0] == "eval" else [*step, "--db", "demo.db"]
        print(f"\n$ refind {shlex.join(argv)}", flush=True)
        try:
            app(argv, prog_name="refind", standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                sys.exit(exc.code)
    print(
        "\nAgent mode (the LLM planner) needs a model: set OPENAI_API_KEY, or point --api-base at a local "
        "OpenAI-compatible server, then run e.g.\n"
        "  refind search 'where did Alice stay in Lisbon' --user alice --db demo.db --trace"
    )


if __name__ == "__main__":
    main()
