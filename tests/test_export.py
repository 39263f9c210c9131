"""Export: Add-request JSONL that `refind add --file` reads back into an identical store, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from refind_cli.store import Store

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _run(runner, db: Path, *args: str):
    from refind_cli.cli import app

    return runner.invoke(app, [*args, "--db", str(db)], catch_exceptions=False)


def _rows(db: Path) -> list[tuple]:
    with Store(db, retention_days=None) as s:
        return s.conn.execute(
            "SELECT id, user_id, session_id, request_id, idx, role, content, said_at FROM messages "
            "ORDER BY user_id, seq"
        ).fetchall()


def test_round_trip_is_byte_identical(runner, tmp_path: Path) -> None:
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    for name in ("conversations.jsonl", "messages.jsonl"):
        assert _run(runner, first, "add", "--file", str(FIXTURES / name)).exit_code == 0
    for user in ("alice", "bob", "carol", "dave"):
        out1, out2 = tmp_path / f"{user}-1.jsonl", tmp_path / f"{user}-2.jsonl"
        assert _run(runner, first, "export", "--user", user, "--output", str(out1)).exit_code == 0
        assert _run(runner, second, "add", "--file", str(out1)).exit_code == 0
        assert _run(runner, second, "export", "--user", user, "--output", str(out2)).exit_code == 0
        assert out1.read_bytes() == out2.read_bytes()
    # Same messages: stable ids, request ids, per-user order, roles, text and said-at (users were re-added
    # one after another, so only the interleaving across users differs).
    assert _rows(first) == _rows(second)


def test_export_keeps_ids_order_whitespace_and_missing_timestamps(runner, tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    lines = [
        {
            "request_id": "eval:run_1:chunk-0",
            "user_id": "u",
            "session_id": "s1",
            "messages": [
                {"role": "user", "content": "  padded  \n", "timestamp": None},
                {"role": "assistant", "content": "第二条", "timestamp": 1700000000000},
            ],
        },
        {
            "request_id": "r2",
            "user_id": "u",
            "session_id": "s2",
            "messages": [{"role": "user", "content": "later", "timestamp": 1690000000000}],
        },
        {
            "request_id": "r3",
            "user_id": "other",
            "session_id": "s1",
            "messages": [{"role": "user", "content": "not u's", "timestamp": 1690000000000}],
        },
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    assert _run(runner, db, "add", "--file", str(src)).exit_code == 0
    out = _run(runner, db, "export", "--user", "u")
    assert out.exit_code == 0
    assert [json.loads(line) for line in out.output.splitlines()] == lines[:2]
    one = _run(runner, db, "export", "--user", "u", "--session", "s2")
    assert [json.loads(line)["request_id"] for line in one.output.splitlines()] == ["r2"]


def test_export_of_nothing_fails_and_writes_no_file(runner, tmp_path: Path) -> None:
    db, target = tmp_path / "x.db", tmp_path / "out.jsonl"
    assert _run(runner, db, "export", "--user", "alice").exit_code == 4  # no database there: none is created
    assert not db.exists()
    assert _run(runner, db, "add", "hello", "--user", "alice", "--session", "s1").exit_code == 0
    result = _run(runner, db, "export", "--user", "nobody", "--output", str(target))
    assert result.exit_code == 4 and "nothing to export" in result.output
    assert not target.exists() and list(tmp_path.glob(".out.jsonl.*")) == []


def test_export_never_replaces_the_database_it_reads(runner, tmp_path: Path, monkeypatch) -> None:
    # `--output` naming the database (a typo, or $REFIND_DB) would have replaced every user's memory with one
    # user's JSONL; its -wal and -shm files too. Refused, by any spelling of the path, and nothing is written.
    db = tmp_path / "x.db"
    assert _run(runner, db, "add", "--file", str(FIXTURES / "conversations.jsonl")).exit_code == 0
    before = _rows(db)
    monkeypatch.chdir(tmp_path)
    for output, what in (
        (db, "the database itself"),
        (Path("x.db"), "the database itself"),
        (tmp_path / "sub" / ".." / "x.db-wal", "the database -wal file itself"),
        (Path("./x.db-shm"), "the database -shm file itself"),
    ):
        (tmp_path / "sub").mkdir(exist_ok=True)
        result = _run(runner, db, "export", "--user", "alice", "--output", str(output))
        assert result.exit_code == 2, result.output
        assert f"--output: {output} is {what}; name another file, e.g. alice.jsonl" in result.output
    assert _rows(db) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_export_into_a_stream_writes_into_it_and_never_replaces_it(runner, tmp_path: Path) -> None:
    # `--output /dev/stdout` (a link to a pipe or terminal) and a FIFO: the old rename put a regular file holding the
    # user's memory in their place (as root, /dev/stdout itself) and the reader got nothing
    import os

    db, fifo, link = tmp_path / "x.db", tmp_path / "pipe", tmp_path / "stdout"
    assert _run(runner, db, "add", "hello", "--user", "alice", "--session", "s1").exit_code == 0
    os.mkfifo(fifo)
    link.symlink_to(os.devnull)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader is there, so the export's open does not wait
    try:
        assert _run(runner, db, "export", "--user", "alice", "--output", str(fifo)).exit_code == 0
        assert _run(runner, db, "export", "--user", "alice", "--output", str(link)).exit_code == 0
        received = os.read(reader, 65536)
    finally:
        os.close(reader)
    assert json.loads(received)["messages"][0]["content"] == "hello"
    assert fifo.is_fifo() and link.is_symlink()
    assert list(tmp_path.glob(".pipe.*")) == list(tmp_path.glob(".stdout.*")) == []
