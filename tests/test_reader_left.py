"""A reader that closes stdout early (`refind export --user alice | head -1`) ends the command quietly with exit 141,
as a shell reports for cat or git there: no traceback, no "Exception ignored", nothing on stderr, the database only
read. Before, click and rich ended it with exit 1 (refind's "any other error"), and under PYTHONUNBUFFERED a partial
write dropped the rest unsaid and exited 0. Run through a real pipe: CliRunner has no pipe whose reader can leave."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
from helpers import add_request, sound

from refind_cli.store import Store

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

LARGE = [  # each writes well past a pipe's 64 KiB buffer
    ["export", "--user", "alice"],
    ["search", "hiking", "--user", "alice", "--mode", "bm25", "-k", "1000", "--json"],
    ["search", "hiking", "--user", "alice", "--mode", "bm25", "-k", "1000"],
    ["inspect", "session", "alice", "s1", "--plain"],
    ["inspect", "session", "alice", "s1", "--json"],
]


@pytest.fixture
def large_db(tmp_path):
    path = tmp_path / "large.db"
    with Store(path, retention_days=None) as store:
        for i in range(300):
            add_request(store, f"r{i}", "alice", "s1", f"hiking day {i} at Mount Rainier 北京 " + "trail " * 60)
    return path


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(db, args, *, read: int, unbuffered: bool) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"REFIND_DB": str(db)}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    process = subprocess.Popen(
        [sys.executable, "-m", "refind_cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert process.stdout is not None and process.stderr is not None
    if read:
        assert process.stdout.read(read)  # (blocks until the command has written: then the reader leaves)
    process.stdout.close()
    err = process.stderr.read().decode()
    return process.wait(timeout=60), err


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
@pytest.mark.parametrize("args", LARGE, ids=lambda a: " ".join(a[:2]))
def test_a_reader_that_leaves_early_ends_the_command_quietly_with_141(large_db, args, unbuffered):
    before = _digest(large_db)
    code, err = _run(large_db, args, read=10, unbuffered=unbuffered)
    assert (code, err) == (141, "")
    assert _digest(large_db) == before  # only read: no WAL left, nothing written
    assert not large_db.with_name(large_db.name + "-wal").exists()
    assert sound(large_db) == 300


@pytest.mark.parametrize(
    "args", [["inspect", "users"], ["inspect", "users", "--json"], ["export", "--user", "alice"]], ids=" ".join
)
def test_a_reader_gone_before_the_first_write_is_141_too(large_db, args):
    """`refind inspect users | true`: small output, written (or flushed at exit) after the reader left."""
    assert _run(large_db, args, read=0, unbuffered=False) == (141, "")


def test_a_whole_output_read_to_its_end_is_still_0(large_db):
    env = {**os.environ, "REFIND_DB": str(large_db)}
    done = subprocess.run(
        [sys.executable, "-m", "refind_cli", "export", "--user", "alice"], capture_output=True, env=env, check=False
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.count(b"\n") == 300
