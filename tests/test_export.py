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


# ---- a line refind add reads back, or a refusal (a probe of round 18) ----------------------------------------------
# An Add line just under the replay limit without timestamps was stored, and its export ("timestamp":null for each
# message) was a line refind add refused; so were message lines grouped by their own bytes, and the Python API took
# 65 MiB. The limits are lowered here (the same checks, at 64 MiB, would take that much memory).

LIMIT = 400


def _lowered(monkeypatch) -> None:
    from refind_cli import lifecycle, replay, store

    for module, name in ((replay, "MAX_LINE_BYTES"), (store, "MAX_EXPORT_LINE"), (lifecycle, "MAX_LINE_BYTES")):
        monkeypatch.setattr(module, name, LIMIT)


def _add_line(rid: str, text: str) -> dict:
    return {"request_id": rid, "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": text}]}


def test_a_request_export_could_not_write_back_is_refused_when_added(runner, tmp_path: Path, monkeypatch) -> None:
    from refind_cli.api import Memory
    from refind_cli.errors import InvalidInput

    _lowered(monkeypatch)
    db = tmp_path / "m.db"
    fits = _add_line("r1", "a" * 250)
    near = _add_line("r2", "b" * (LIMIT - len(json.dumps(_add_line("r2", ""), separators=(",", ":"))) - 1))
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps(line, separators=(",", ":")) for line in (fits, near)) + "\n")
    assert len(log.read_text().splitlines()[1]) == LIMIT - 1  # under the replay limit as written …
    result = _run(runner, db, "add", "--file", str(log), "--json")
    assert result.exit_code == 2, result.output
    (problem,) = json.loads(result.output)["problems"]
    assert f"request_id 'r2': refind export would write it as a line of {LIMIT + 16} bytes, over the {LIMIT}" in problem
    assert problem.startswith(f"{log}:2: ")
    assert [r[3] for r in _rows(db)] == ["r1"]  # … its export, with "timestamp":null, is not: refused; r1 stored
    with Memory(str(db), retention_days=None) as memory:
        try:
            memory.add("c" * LIMIT, user="u", session="s", request_id="r3")
        except InvalidInput as exc:
            assert "refind export would write it as a line of" in str(exc)
        else:
            raise AssertionError("stored a request its export could not write back")
    out = tmp_path / "out.jsonl"
    assert _run(runner, db, "export", "--user", "u", "--output", str(out)).exit_code == 0
    assert all(len(line) <= LIMIT for line in out.read_bytes().splitlines())


def test_message_lines_are_grouped_by_the_line_export_writes_for_them(runner, tmp_path: Path, monkeypatch) -> None:
    _lowered(monkeypatch)
    db = tmp_path / "m.db"
    line = {"request_id": "r", "user_id": "u", "session_id": "s", "role": "user"}
    lines = [json.dumps({**line, "content": f"{i}" * 124}, separators=(",", ":")) for i in range(2)]
    assert sum(len(x) for x in lines) == LIMIT  # two lines fit by their own bytes (not over the limit) …
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n")
    result = _run(runner, db, "add", "--file", str(log), "--json")
    assert result.exit_code == 2, result.output
    (problem,) = json.loads(result.output)["problems"]  # … the second's export line does not: past one Add
    assert problem.startswith(f"{log}:2: request_id 'r': its lines come to {LIMIT + 2} bytes as one Add line, over")
    out = tmp_path / "out.jsonl"
    assert _run(runner, db, "export", "--user", "u", "--output", str(out)).exit_code == 0
    copy = tmp_path / "copy.db"
    assert _run(runner, copy, "add", "--file", str(out)).exit_code == 0
    assert _rows(copy) == _rows(db) and len(_rows(db)) == 1


def test_an_export_escaped_past_the_limit_is_refused_naming_the_request(tmp_path: Path, monkeypatch) -> None:
    import io

    from refind_cli import lifecycle
    from refind_cli.errors import RefindError

    db = tmp_path / "m.db"
    with Store(db, retention_days=None) as store:
        from refind_cli.contract import parse_add

        store.add(parse_add(_add_line("r1", "北京" * 30)))  # 60 characters: 180 bytes of UTF-8, 360 escaped
        monkeypatch.setattr(lifecycle, "MAX_LINE_BYTES", LIMIT)
        out = io.StringIO()
        lifecycle.export(store, "u", out)
        assert len(out.getvalue().encode()) < LIMIT
        try:
            lifecycle.export(store, "u", io.StringIO(), ascii_only=True)
        except RefindError as exc:
            assert str(exc).startswith("request_id 'r1' of user 'u': its line would be ")
            assert "write it with --output FILE (UTF-8) instead" in str(exc)
        else:
            raise AssertionError("wrote an escaped line refind add refuses")
