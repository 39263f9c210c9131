"""`refind add --file - --strict` reads stdin twice through an unnamed temporary file: no copy of the text is left
in the temporary folder, while it runs or after (a SIGKILL cannot leave one behind)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from refind_cli import replay
from refind_cli.store import Store

LINES = [
    {"user_id": "alice", "session_id": "s1", "role": "user", "content": "my PIN is 4417"},
    {"user_id": "alice", "session_id": "s1", "role": "assistant", "content": "noted"},
]


@pytest.fixture
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder as the temporary folder (TMPDIR; tempfile caches it, so reset too)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return folder


def test_the_strict_spool_of_stdin_leaves_no_file_while_or_after(cli, spool_dir, monkeypatch) -> None:
    seen: list[list[str]] = []
    check = replay._strict_check

    def watched(*args, **kwargs):  # the first pass, with stdin spooled
        seen.append(os.listdir(spool_dir))
        return check(*args, **kwargs)

    monkeypatch.setattr(replay, "_strict_check", watched)
    body = "".join(json.dumps(line) + "\n" for line in LINES)
    result = cli("add", "--file", "-", "--strict", "--json", input=body)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["messages_added"] == 2
    assert seen == [[]]  # while it ran: nothing with a name (the spool is unlinked as it is made)
    assert os.listdir(spool_dir) == []


def test_a_bad_line_on_stdin_under_strict_is_named_as_stdin_and_nothing_is_stored(cli, spool_dir, db_path) -> None:
    body = json.dumps(LINES[0]) + "\n{not json\n"
    result = cli("add", "--file", "-", "--strict", input=body)
    assert result.exit_code != 0
    assert "<stdin>:2: not valid JSON" in result.output
    with Store(db_path, retention_days=None) as store:
        assert store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    assert os.listdir(spool_dir) == []
