"""`producer | refind add --file -`: a live input's lines are committed when it goes idle (not only once 500 requests
or its end came), SIGTERM is handled as Ctrl-C (the summary, exit 143, the reader process ended), and the advice for
what was not stored is true of an input that cannot be read again; a reader process killed says so."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import PRINTS_READER_PID, ended

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a forked reader, /proc: Linux's")

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _line(i: int) -> str:  # an Add request a line (message lines group: the last group waits for the next line)
    message = {"role": "user", "content": f"m {i}"}
    return json.dumps({"request_id": f"r{i}", "user_id": "u", "session_id": "s", "messages": [message]})


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db, timeout=10)
    try:
        return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    except sqlite3.OperationalError:  # (not created yet)
        return 0
    finally:
        conn.close()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _wait_for(check, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_a_live_pipe_is_committed_when_idle_and_sigterm_prints_the_summary(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    writer = subprocess.Popen(
        [sys.executable, "-m", "refind_cli", "add", "--file", "-", "--db", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert writer.stdin is not None
    try:
        writer.stdin.write("".join(_line(i) + "\n" for i in range(3)) + _line(3)[:20])  # and half a line
        writer.stdin.flush()  # left open: the producer is waiting
        # committed once the input was idle ~1 s (was: nothing before 500 requests or the input's end)
        assert _wait_for(lambda: _stored(db) == 3), "the lines read were not committed while the input was idle"
        (reader,) = _children(writer.pid)
        writer.send_signal(signal.SIGTERM)
        out, err = writer.communicate(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 143, (writer.returncode, err)  # (was -15: killed, no summary)
    assert "requests added │ 3" in " ".join(out.split())
    assert (
        "interrupted: 3 requests (3 messages) were stored before SIGTERM; <stdin> cannot be read again, and its lines "
        "after line 3 were not stored: give refind add those lines again (or the whole input: what is stored is "
        "skipped)"
    ) in " ".join(err.split()), err
    assert _wait_for(lambda: ended(reader), 5) and ended(reader)
    assert _stored(db) == 3


KILLED_READER = (
    PRINTS_READER_PID
    + """
from refind_cli import replay as replay_module
from refind_cli.store import Store

with Store(sys.argv[1], retention_days=None) as store:
    summary = replay_module.replay(store, "-", parallel=True)
print(summary.fault.message, flush=True)
"""
)


def test_a_reader_process_killed_is_said_so_not_blamed_on_the_file(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_READER), str(tmp_path / "k.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write("".join(_line(i) + "\n" for i in range(2)))
        child.stdin.flush()
        reader = int(child.stdout.readline())
        assert _wait_for(lambda: _stored(tmp_path / "k.db") == 2)
        os.kill(reader, signal.SIGKILL)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert out.strip() == (
        "the replay's reader process (which reads the file ahead of the writer) ended (was killed by SIGKILL); stored "
        "before it: 2 requests (2 messages), kept; <stdin> cannot be read again, and its lines after line 2 were not "
        "stored: give refind add those lines again (or the whole input: what is stored is skipped)"
    ), out + err


def test_a_reader_process_that_dies_inside_a_message_is_said_so_not_a_traceback(tmp_path: Path) -> None:
    """Killed while it sent a batch (a probe's kill -9, 2 of 4 tries), the reader left half a message in the pipe:
    the writer's receive raised OSError, which escaped as a traceback with no summary. Here the reader writes half a
    message itself and exits, so the test does not depend on when a kill lands."""
    import gc
    import struct
    from multiprocessing.connection import Connection

    from refind_cli import replay as replay_module

    def chunks():
        yield ["a whole chunk"]
        (send,) = [c for c in gc.get_objects() if isinstance(c, Connection) and not c.closed and c.writable]
        send._send(struct.pack("!i", 1000) + b"half a message")  # (the reader process: Connection's own framing)
        os._exit(9)

    with replay_module._read_ahead(chunks(), parallel=True) as received:
        assert next(received) == ["a whole chunk"]
        with pytest.raises(replay_module._ReaderGone) as gone:
            next(received)
    assert gone.value.message == (
        "the replay's reader process (which reads the file ahead of the writer) ended (exit code 9)"
    )
