"""How late an agent search ends past its deadline while another process holds a lock on the database.

  .venv/bin/python bench/deadline_under_lock.py                 # every scenario, deadline 3 s, busy timeout 30 s
  .venv/bin/python bench/deadline_under_lock.py --deadline 5 --only lock_slow_model

Each scenario builds a fresh database (one user, a few hundred messages), starts a second process that takes a lock
on it and keeps it for far longer than the deadline, and runs ``refind search --mode agent --deadline D --json`` in
this process (typer's CliRunner: the real command, open included; litellm imported beforehand, so its import is not
what is measured) against a scripted OpenAI-compatible model on loopback (tests/llm_server.py). It prints, per
scenario, the wall time of the search, how far past the deadline it ended, its exit code, and what the answer said
(deadline_passed, whether the trace was stored, or the error line).

The locks:

* ``write``: ``BEGIN IMMEDIATE`` (another writer's transaction: an add, a forget, an expire mid-way);
* ``exclusive``: ``PRAGMA locking_mode = EXCLUSIVE`` and a write — a lock readers wait on too (what a WAL recovery, a
  last connection's checkpoint or a journal-mode switch holds, briefly, in real use);

taken before the search starts. (Taken once the search has opened the file, neither delays it: a WAL reader never
waits on a writer, and no process can take a lock readers wait on while another connection has the file open — the
holder waits for the search to end.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from llm_server import ScriptedLLM, Slow, start  # noqa: E402  (the tests' scripted model server)

SEARCH = '{"action": "search_chatrecord", "keywords": "hiking"}'
NOTE = '{"action": "take_note", "results": [1]}'
FINISH = '{"action": "finish_search"}'
HOLD_S = 120.0  # how long the second process keeps its lock: far past every deadline and the busy timeout

HOLDER = r"""
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
if sys.argv[2] == "exclusive":
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO events (at, kind, rows, detail) VALUES (0, 'bench', 0, 'held')")
else:
    conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


def build(path: Path, *, index_pending: bool = False, migration_pending: bool = False) -> None:
    """A database with one user's few hundred messages; ``index_pending``: its index left behind (as an analyzer
    upgrade leaves it: the next open indexes everything again); ``migration_pending``: its last migration not applied
    (as a refind upgrade leaves it)."""
    import sqlite3

    from refind_cli.contract import parse_add
    from refind_cli.store import Store

    day = 86_400_000
    with Store(path, retention_days=None) as store:
        for i in range(60):
            said = 1_683_000_000_000 + i * day
            lines = (
                ("user", f"Caroline: day {i}, I went hiking near lake {i}"),
                ("assistant", f"That sounds lovely, tell me about lake {i}"),
                ("user", f"We camped and watched the stars on night {i}"),
            )
            messages = [{"role": r, "content": c, "timestamp": said + n * 60_000} for n, (r, c) in enumerate(lines)]
            store.add(
                parse_add({"request_id": f"r{i}", "user_id": "alice", "session_id": f"s{i}", "messages": messages})
            )
    conn = sqlite3.connect(path, isolation_level=None)
    if index_pending:
        conn.execute("UPDATE index_meta SET value = 'an older analyzer' WHERE key = 'analyzer'")
    if migration_pending:
        from refind_cli import migrations

        last = migrations.MIGRATIONS[-1][0]
        conn.execute("DELETE FROM _migrations WHERE name = ?", (last,))
    conn.close()


class Holder:
    """A second process holding a lock on the database until stopped."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        self.proc: subprocess.Popen[str] | None = None

    def take(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(self.path), self.kind, str(HOLD_S)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # "held"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


SCENARIOS = {
    # name: (lock, script of the model's replies, how the database is left)
    "lock_fast_model": ("write", (SEARCH, NOTE, FINISH), {}),
    "lock_slow_model": ("write", (SEARCH, NOTE, Slow(60, FINISH)), {}),
    "lock_slow_first_call": ("write", (Slow(60, SEARCH),), {}),  # the fallback: BM25 past the deadline
    "lock_index_pending": ("write", (SEARCH, NOTE, FINISH), {"index_pending": True}),
    "lock_migration_pending": ("write", (SEARCH, NOTE, FINISH), {"migration_pending": True}),
    "exclusive_before": ("exclusive", (SEARCH, NOTE, FINISH), {}),
}


def run(name: str, deadline: float, llm: ScriptedLLM) -> dict[str, object]:
    from typer.testing import CliRunner

    from refind_cli.cli import app

    lock, script, leave = SCENARIOS[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "refind.db"
        build(path, **leave)
        holder = Holder(path, lock)
        llm.play(*script)
        holder.take()
        try:
            began = time.monotonic()
            r = CliRunner().invoke(
                app,
                ["search", "where did Caroline go hiking", "--user", "alice", "--db", str(path), "--mode", "agent"]
                + ["--model", "openai/scripted", "--api-base", llm.url, "--deadline", str(deadline), "--json"],
            )
            took = time.monotonic() - began
        finally:
            holder.stop()
    said: str
    if r.exit_code == 0:
        found = json.loads(r.stdout)
        said = (
            f"path={found['path']} deadline_passed={found['deadline_passed']} stored={found['search_id'] is not None}"
        )
    else:
        said = " ".join((r.output or repr(r.exception)).split())[:200]
    return {
        "scenario": name,
        "took_s": round(took, 2),
        "late_s": round(took - deadline, 2),
        "exit": r.exit_code,
        "said": said,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deadline", type=float, default=3.0)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    import litellm  # noqa: F401  (its import counts against a deadline: paid here, once, not inside a search)

    llm = ScriptedLLM(default=FINISH)
    server = start(llm)
    try:
        for name in args.only or list(SCENARIOS):
            print(json.dumps(run(name, args.deadline, llm)), flush=True)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
