"""Slow paths found by a probe (round 28): legal inputs of uncommon shapes, each run as a `refind` command in a
fresh process, timed with its peak memory (wait4's ru_maxrss), in this checkout and in a baseline tree in the same
run (``--base``: a checkout of main, ``git worktree add --detach /tmp/base main``), the two taking turns.

  .venv/bin/python bench/slow_paths.py --base /tmp/base                 # every case, 2 rounds
  .venv/bin/python bench/slow_paths.py --base /tmp/base --case replay_fat --rounds 3

Cases (the inputs are generated, seeded, into a temporary directory):

- ``replay_fat``: ``refind add --file`` of 40 Adds of one 5 MB message each (a pasted log; 200 MB).
- ``replay_big_adds``: ``refind add --file`` of 1,000,000 short messages of one user in 200 Adds of 5,000.
- ``replay_groups``: the control, 200,000 messages in Adds of 20 (cut as before: 500 Adds a batch).

What each stored is compared between the trees (ids and text of every message, in order): answers must not change.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000_000


def _write_adds(path: Path, adds: int, per_add: int, text: Callable[[random.Random], str], session: int) -> None:
    rng = random.Random(7)
    with path.open("w") as out:
        for r in range(adds):
            messages = [
                {"role": "user" if i % 2 == 0 else "assistant", "content": text(rng), "timestamp": T0 + r * 100_000 + i}
                for i in range(per_add)
            ]
            out.write(
                json.dumps(
                    {"request_id": f"r{r}", "user_id": "u", "session_id": f"s{r // session}", "messages": messages}
                )
                + "\n"
            )


def _words(k: int) -> Callable[[random.Random], str]:
    vocab = [f"w{i}" for i in range(20_000)]
    return lambda rng: " ".join(rng.choices(vocab, k=k))


def setup_replay_fat(tmp: Path) -> Path:
    path = tmp / "fat.jsonl"
    _write_adds(path, 40, 1, _words(625_000), 1)  # ~5 MB a message
    return path


def setup_replay_big_adds(tmp: Path) -> Path:
    path = tmp / "big_adds.jsonl"
    _write_adds(path, 200, 5_000, _words(5), 4)
    return path


def setup_replay_groups(tmp: Path) -> Path:
    path = tmp / "groups.jsonl"
    _write_adds(path, 10_000, 20, _words(5), 1)
    return path


CASES: dict[str, Callable[[Path], Path]] = {
    "replay_fat": setup_replay_fat,
    "replay_big_adds": setup_replay_big_adds,
    "replay_groups": setup_replay_groups,
}


def run(tree: Path, args: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of ``python -m refind_cli ARGS`` run from ``tree``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")} | {"PYTHONPATH": str(tree)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "refind_cli", *args],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{tree}: refind {' '.join(args[:2])} exited {os.waitstatus_to_exitcode(status)}")
    return seconds, usage.ru_maxrss / 1024


def stored(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        digest = hashlib.sha256()
        for mid, content in conn.execute("SELECT id, content FROM messages ORDER BY seq"):
            digest.update(f"{mid}\0{content}\0".encode())
        return digest.hexdigest()
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="a checkout of the code to compare with (main)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="default: every case")
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args(argv)
    trees = {"this": ROOT, "base": Path(options.base).resolve()}
    with tempfile.TemporaryDirectory(prefix="refind-slow-") as tmp:
        for case in options.case or list(CASES):
            log = CASES[case](Path(tmp))
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
            answers: dict[str, str] = {}
            for _ in range(options.rounds):
                for name, tree in trees.items():
                    db = Path(tmp) / f"{name}.db"
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{db}{suffix}").unlink(missing_ok=True)
                    times[name].append(run(tree, ["add", "--file", str(log), "--quiet", "--db", str(db)]))
                    answers[name] = stored(db)
            row = {name: (min(s for s, _ in t), max(m for _, m in t)) for name, t in times.items()}
            (ts, tm), (bs, bm) = row["this"], row["base"]
            same = "same" if answers["this"] == answers["base"] else "DIFFERENT"
            print(
                f"{case:16} this {ts:6.2f} s {tm:7.0f} MiB | base {bs:6.2f} s {bm:7.0f} MiB | "
                f"time {ts / bs:4.2f}× memory {tm / bm:4.2f}× | stored: {same}",
                flush=True,
            )
            log.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
