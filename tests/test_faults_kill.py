"""``kill -9`` in every phase of forget and expire, for real.

A child process runs ``lifecycle.forget`` or ``lifecycle.expire`` on a real database and SIGKILLs itself the moment
SQLite is about to run a given statement (``set_trace_callback`` sees each statement as it starts): before the
first read, at each delete, at the tombstone, the version bump, the event, the COMMIT, and the WAL checkpoint. After
each kill the file must pass ``integrity_check``, hold either all of the change or none of it (never a part), and a
rerun of the same command must complete the work, leaving none of the removed text in the database or its WAL.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import sound

from refind_cli.contract import parse_add
from refind_cli.store import DAY_MS, Store, system_clock

CHILD = """
import os, signal, sys
from refind_cli import lifecycle
from refind_cli.store import Store

db, op, pattern = sys.argv[1:4]
store = Store(db, retention_days=30)

def trace(sql):
    if pattern in sql:
        os.kill(os.getpid(), signal.SIGKILL)

store.conn.set_trace_callback(trace)
if op == "forget":
    lifecycle.forget(store, "alice", session_id="s1")
else:
    lifecycle.expire(store)
store.close()
print("finished", flush=True)
"""

SECRET = "zebra-crossing-secret"  # only in what forget or expire removes

pytestmark = pytest.mark.slow  # subprocesses, real servers or fuzzing: `make test-fast` skips them


def add(store: Store, rid: str, user: str, session: str, text: str) -> None:
    store.add(
        parse_add(
            {"request_id": rid, "user_id": user, "session_id": session, "messages": [{"role": "user", "content": text}]}
        )
    )


def build(db: Path, op: str) -> None:
    now = system_clock()
    old = now - 40 * DAY_MS
    # forget removes alice's session s1; expire removes what was recorded 40 days ago
    with Store(db, retention_days=None, clock=(lambda: old) if op == "expire" else system_clock) as store:
        for i in range(20):
            add(store, f"gone{i}", "alice" if i % 2 else "bob", "s1", f"{SECRET} number {i} " + "x" * 300)
    with Store(db, retention_days=None) as store:
        for i in range(10):
            add(store, f"kept{i}", "alice", "s2", f"kept message {i}")
            add(store, f"kept-bob{i}", "bob", "s2", f"kept message of bob {i}")


def state(db: Path, op: str) -> tuple[int, int, int]:
    """(messages that the operation removes still present, tombstones or expire events, kept messages)."""
    sound(db)  # integrity, and no request holding part of its messages
    conn = sqlite3.connect(db)
    try:
        if op == "forget":
            target = conn.execute("SELECT count(*) FROM messages WHERE user_id = 'alice' AND session_id = 's1'")
            marks = conn.execute("SELECT count(*) FROM tombstones").fetchone()[0]
            assert marks == conn.execute("SELECT count(*) FROM events WHERE kind = 'forget'").fetchone()[0]
        else:
            target = conn.execute("SELECT count(*) FROM messages WHERE request_id LIKE 'gone%'")
            marks = conn.execute("SELECT count(*) FROM events WHERE kind = 'expire'").fetchone()[0]
        kept = conn.execute("SELECT count(*) FROM messages WHERE request_id LIKE 'kept%'").fetchone()[0]
        return target.fetchone()[0], marks, kept
    finally:
        conn.close()


FORGET_PHASES = [
    ("SELECT id, content, request_id", False),  # the first read inside the transaction
    ("DELETE FROM messages", False),
    ("DELETE FROM requests", False),
    ("INSERT INTO tombstones", False),
    ("INSERT INTO users", False),  # the version bump that makes caches stale
    ("INSERT INTO events", False),
    ("DELETE FROM write_grant", False),  # the grant given back (m009), the transaction not yet committed
    ("COMMIT", False),  # killed as COMMIT starts: not committed
    ("wal_checkpoint", True),  # committed, the scrub of the WAL not yet done
]
EXPIRE_PHASES = [
    ("SELECT user_id, count(*) FROM messages", False),
    ("DELETE FROM messages", False),
    ("DELETE FROM requests", False),
    ("INSERT INTO users", False),
    ("INSERT INTO events", False),
    ("DELETE FROM write_grant", False),
    ("COMMIT", False),
    ("wal_checkpoint", True),
]


@pytest.mark.parametrize(
    ("op", "pattern", "committed"),
    [("forget", p, c) for p, c in FORGET_PHASES] + [("expire", p, c) for p, c in EXPIRE_PHASES],
)
def test_kill_9_in_each_phase_then_a_rerun_completes(cli, db_path, op, pattern, committed):
    build(db_path, op)
    removed = 10 if op == "forget" else 20
    assert state(db_path, op) == (removed, 0, 20)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(db_path), op, pattern], capture_output=True, text=True, env=os.environ
    )
    assert child.returncode == -9, f"the kill at {pattern!r} did not happen: {child.stdout}{child.stderr}"
    assert state(db_path, op) == ((0, 1 if op == "forget" else 2, 20) if committed else (removed, 0, 20))

    args = ("forget", "--user", "alice", "--session", "s1", "--yes") if op == "forget" else ("expire",)
    rerun = cli(*args)
    assert "Traceback" not in rerun.output
    assert rerun.exit_code == (4 if committed and op == "forget" else 0), rerun.output
    target, marks, kept = state(db_path, op)
    assert (target, kept) == (0, 20)
    assert marks >= 1
    for suffix in ("", "-wal"):  # scrubbed: no byte of the removed text in the file or its WAL
        path = Path(f"{db_path}{suffix}")
        if path.exists():
            data = path.read_bytes()
            if op == "forget":  # bob's s1 messages share the marker and stay: look for alice's odd numbers
                assert not any(f"{SECRET} number {i} ".encode() in data for i in range(1, 20, 2)), suffix
            else:
                assert SECRET.encode() not in data, suffix


def test_the_child_finishes_when_no_phase_matches(db_path):
    """The harness itself: without a matching statement the child runs to the end (so a kill above is real)."""
    build(db_path, "forget")
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(db_path), "forget", "no statement looks like this"],
        capture_output=True,
        text=True,
    )
    assert child.returncode == 0 and child.stdout.strip() == "finished", child.stderr
    assert state(db_path, "forget") == (0, 1, 20)
