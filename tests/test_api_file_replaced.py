"""The database file deleted or replaced under a long-lived process that is not the server — a Python ``Memory`` and
the tools of ``refind mcp`` (which serve through one Memory): every call is refused with StorageError, nothing is
read or written (not into the orphaned file, not into a new one at the path), as the server refuses with 503."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from refind_cli import Memory
from refind_cli.errors import StorageError

T0 = "2023-06-01T08:00"
REFUSED = "the file was deleted or replaced while this process had it open; nothing was read or written"


def _bytes_of(*paths: Path) -> list[bytes | None]:
    return [p.read_bytes() if p.exists() else None for p in paths]


def _contents(db: Path, user: str) -> list[str]:
    with Memory(db, retention_days=None) as memory:
        return [m["content"] for r in memory.export(user=user) for m in r["messages"]]


def _orphan_contents(orphan: Path, wal: Path, user: str) -> list[str]:
    """What the deleted file holds with its WAL (SQLite does not checkpoint into a file whose path is gone)."""
    copy = orphan.with_name("copy.db")
    shutil.copy(orphan, copy)
    shutil.copy(wal, f"{copy}-wal")
    return _contents(copy, user)


def _every_call(memory: Memory) -> list[tuple[str, Callable[[], Any]]]:
    return [
        ("add", lambda: memory.add("the kayak is blue", user="u", session="s", at=T0)),
        ("add_many", lambda: memory.add_many([memory_request("r9")])),
        ("search", lambda: memory.search("kayak", user="u")),
        ("sessions", lambda: memory.sessions(user="u")),
        ("export", lambda: memory.export(user="u")),
        ("forget", lambda: memory.forget(user="u")),
        ("expire", memory.expire),
    ]


def memory_request(request_id: str) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "user_id": "u",
        "session_id": "s",
        "messages": [{"role": "user", "content": "a kayak on the lake"}],
    }


def test_a_memory_refuses_every_call_once_its_file_was_deleted(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    memory = Memory(db, retention_days=None)
    memory.add("I keep my kayak at the lake", user="u", session="s", at=T0)
    orphan = tmp_path / "orphan.db"
    os.link(db, orphan)  # the deleted file's inode stays readable here: nothing may be written into it
    db.unlink()
    wal = Path(f"{db}-wal")  # the old connection's WAL, still at its path
    before = _bytes_of(orphan, wal)
    for name, call in _every_call(memory):
        with pytest.raises(StorageError) as refused:
            call()
        assert f"database {db}: {REFUSED}" in refused.value.message, name
        assert "open a new Memory" in refused.value.message
    assert not db.exists()  # no new, empty database beside the old -wal
    assert _bytes_of(orphan, wal) == before
    memory.close()
    assert _orphan_contents(orphan, wal, "u") == ["I keep my kayak at the lake"]


def test_a_memory_refuses_a_file_replaced_by_a_copy_and_writes_nothing_into_either(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    memory = Memory(db, retention_days=None)
    memory.add("I keep my kayak at the lake", user="u", session="s", at=T0)
    with Memory(tmp_path / "restore.db", retention_days=None) as other:
        other.add("a restored backup", user="u", session="s", at=T0)
    (tmp_path / "restore.db").replace(db)  # a restore by rename while the Memory is open
    before = _bytes_of(db, Path(f"{db}-wal"))
    with pytest.raises(StorageError, match="deleted or replaced while this process had it open"):
        memory.add("written after the restore", user="u", session="s", at=T0)
    with pytest.raises(StorageError, match="deleted or replaced"):
        memory.search("kayak", user="u")
    assert _bytes_of(db, Path(f"{db}-wal")) == before
    memory.close()
    for stale in (Path(f"{db}-wal"), Path(f"{db}-shm")):  # the old file's, as README's recovery says
        stale.unlink()
    assert _contents(db, "u") == ["a restored backup"]  # what is there now, usable once opened again


def test_a_memory_on_a_relative_path_goes_on_after_a_chdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    with Memory("m.db", retention_days=None) as memory:
        monkeypatch.chdir(tmp_path / "b")  # "m.db" names no file here; the one opened is still where it was
        memory.add("the kayak is blue", user="u", session="s", at=T0)
        assert memory.search("kayak", user="u")
    assert not (tmp_path / "b" / "m.db").exists()


@pytest.mark.slow  # the SDK's import (seconds), as tests/test_mcp.py
def test_the_mcp_tools_refuse_once_the_database_file_was_deleted(tmp_path: Path) -> None:
    from mcp import Client

    from refind_cli.mcp_server import build
    from refind_cli.mcp_start import McpSettings

    db = tmp_path / "m.db"
    orphan = tmp_path / "orphan.db"
    wal = Path(f"{db}-wal")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("remember", {"content": "the kayak is blue", "at": T0}),
        ("remember_exchange", {"user_message": "kayak?", "assistant_reply": "blue", "at": T0}),
        ("search_memory", {"query": "kayak"}),
        ("recent_sessions", {}),
        ("forget_session", {"session": "s"}),
    ]
    with Memory(db, retention_days=None) as memory:
        server = build(memory, McpSettings(user="alice", session="s", allow_forget=True))

        async def script() -> list[Any]:
            async with Client(server) as client:
                stored = await client.call_tool("remember", {"content": "I keep my kayak at the lake", "at": T0})
                assert not stored.is_error and json.loads(stored.content[0].text)["stored"]
                os.link(db, orphan)
                db.unlink()
                before = _bytes_of(orphan, wal)
                results = [await client.call_tool(name, args) for name, args in calls]
                assert _bytes_of(orphan, wal) == before
                return results

        results = asyncio.run(script())
    for (name, _), result in zip(calls, results):
        assert result.is_error, name
        assert f"database {db}: {REFUSED}" in result.content[0].text, (name, result.content[0].text)
    assert not db.exists()
    assert _orphan_contents(orphan, wal, "alice") == ["I keep my kayak at the lake"]
