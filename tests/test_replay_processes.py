"""Replays as real processes: killed mid-way and re-run, and several processes writing one database at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # subprocesses, real servers or fuzzing: `make test-fast` skips them


def write_replay(path: Path, user: str, n_requests: int, per_request: int = 10) -> int:
    with path.open("w", encoding="utf-8") as f:
        for r in range(n_requests):
            messages = [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"{user} request {r} message {i}: the quick brown fox {r * per_request + i}",
                    "timestamp": 1_700_000_000_000 + r * 1000 + i,
                }
                for i in range(per_request)
            ]
            f.write(
                json.dumps(
                    {"request_id": f"{user}-{r}", "user_id": user, "session_id": f"s{r // 50}", "messages": messages}
                )
                + "\n"
            )
    return n_requests * per_request


def refind(*args: str, db: Path) -> subprocess.Popen:
    env = {**os.environ, "REFIND_DB": str(db)}
    return subprocess.Popen(
        [sys.executable, "-m", "refind_cli", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def count(db: Path, sql: str = "SELECT count(*) FROM messages") -> int:
    try:
        conn = sqlite3.connect(db, timeout=30)
        try:
            return conn.execute(sql).fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def test_replay_killed_mid_way_then_rerun_stores_each_message_once(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    source = tmp_path / "big.jsonl"
    total = write_replay(source, "u1", n_requests=3000)
    proc = refind("add", "--file", str(source), "--quiet", db=db)
    deadline = time.monotonic() + 60
    while count(db) == 0 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = count(db)
    assert 0 < partial < total, f"the kill should land mid-replay (stored {partial} of {total})"
    rerun = refind("add", "--file", str(source), "--json", db=db)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    summary = json.loads(out)
    assert summary["messages_added"] == total - partial
    assert summary["duplicates"] * 10 == partial
    assert count(db) == total
    assert count(db, "SELECT count(DISTINCT content) FROM messages") == total
    assert count(db, "SELECT count(*) FROM requests") == 3000


def test_several_processes_adding_to_one_database(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    expected = write_replay(a, "alice", 400) + write_replay(b, "bob", 400) + write_replay(c, "carol", 400)
    # Two processes race on the same file (same new request ids), two others write their own users.
    procs = [refind("add", "--file", str(p), "--json", db=db) for p in (a, a, b, c)]
    results = [p.communicate(timeout=180) for p in procs]
    for proc, (_out, err) in zip(procs, results):
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "IntegrityError" not in err and "locked" not in err
    summaries = [json.loads(out) for out, _ in results]
    # The racing pair wrote each request exactly once between them.
    assert summaries[0]["requests_added"] + summaries[1]["requests_added"] == 400
    assert summaries[0]["duplicates"] + summaries[1]["duplicates"] == 400
    assert count(db) == expected
    assert count(db, "SELECT count(*) FROM requests") == 1200
    assert count(db, "SELECT count(*) FROM events WHERE kind = 'add'") == 1200
