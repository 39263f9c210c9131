"""An output that cannot be written — a full disk, /dev/full — is one error line and exit 7, not a traceback (a probe
of round 17: export, inspect --json, search and inspect session --plain each ended in "OSError: [Errno 28]")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import add_request

from refind_cli.store import Store

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


@pytest.mark.parametrize(
    "args",
    [
        ["export", "--user", "alice"],
        ["inspect", "users", "--json"],
        ["search", "hiking", "--user", "alice", "--mode", "bm25"],
        ["search", "hiking", "--user", "alice", "--mode", "bm25", "--json"],
        ["inspect", "session", "alice", "s1", "--plain"],
    ],
)
def test_an_output_the_device_refuses_is_one_error_line(db_path, args):
    with Store(db_path, retention_days=None) as store:
        add_request(store, "r1", "alice", "s1", "I went hiking at Mount Rainier")
    env = {**os.environ, "REFIND_DB": str(db_path)}
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "refind_cli", *args], stdout=full, stderr=subprocess.PIPE, text=True, env=env
        )
    assert done.returncode == 7, done.stderr
    assert done.stderr == (
        "error: cannot write the output: No space left on device; what was written before it may be incomplete\n"
    )
