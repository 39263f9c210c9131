"""`refind inspect session/turn` on a big session: plain text past TABLE_MAX_CHARS (rich draws a table of ~2 MB in
~11 s), every message whole; the table on request, and as before for a normal session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refind_cli.cli import render
from refind_cli.contract import parse_add
from refind_cli.store import Store

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
T0 = 1_685_606_400_000


def _content(i: int) -> str:
    # one unbroken word of 3,000 letters: a table folds it across ~200 lines of its narrow content column
    return f"m{i}:" + "abcdefghij" * 300


@pytest.fixture
def big(db_path: Path) -> list[str]:
    contents = [_content(i) for i in range(40)]
    contents[7] = "first line\nsecond \x1b[31mred\x1b[0m line"
    with Store(db_path, retention_days=None) as store:
        store.add(
            parse_add(
                {
                    "request_id": "r1",
                    "user_id": "alice",
                    "session_id": "big",
                    "messages": [
                        {"role": "user" if i % 2 == 0 else "assistant", "content": c, "timestamp": T0 + i * 60_000}
                        for i, c in enumerate(contents)
                    ],
                }
            )
        )
    assert sum(map(len, contents)) > render.TABLE_MAX_CHARS
    return contents


def test_a_big_session_prints_every_message_whole_as_plain_text(cli, big) -> None:
    result = cli("inspect", "session", "alice", "big")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith(
        f"session big of user alice: 40 turn(s), {sum(map(len, big)):,} characters, as plain text "
        "(over 100,000 characters; --table draws the table anyway)\n\n"
    )
    assert "┃" not in out
    turns = json.loads(cli("inspect", "session", "alice", "big", "--json").output)["turns"]
    for t in turns:
        assert f"── turn {t['id']} ──\n" in out
    for i, content in enumerate(big):
        if i != 7:
            role = "user" if i % 2 == 0 else "assistant"
            assert f"] {role}: {content}\n" in out  # whole, on one line
    assert out.count("\n[2023-06-01 ") == 40


def test_plain_text_escapes_control_characters_and_indents_a_message_s_further_lines(cli, big) -> None:
    out = cli("inspect", "session", "alice", "big").output
    assert "\x1b" not in out
    assert "[2023-06-01 08:07:00Z] assistant: first line\n  second \\x1b[31mred\\x1b[0m line\n" in out


def test_the_table_or_plain_text_on_request(cli, monkeypatch) -> None:
    assert cli("add", "--file", str(FIXTURES / "conversations.jsonl")).exit_code == 0
    table = cli("inspect", "session", "alice", "s1").output
    assert table.startswith("session s1 of user alice: 3 turn(s)") and "┃" in table  # a normal session: the table
    plain = cli("inspect", "session", "alice", "s1", "--plain").output
    assert "┃" not in plain and "as plain text (--plain)" in plain
    assert "] user: Alice: I finally booked the trip to Lisbon for the second week of June!\n" in plain
    monkeypatch.setattr(render, "TABLE_MAX_CHARS", 100)  # s1 is now "big"
    assert "┃" not in cli("inspect", "session", "alice", "s1").output
    assert cli("inspect", "session", "alice", "s1", "--table").output == table


def test_inspect_turn_marks_the_turn_in_plain_text(cli, big) -> None:
    turns = json.loads(cli("inspect", "session", "alice", "big", "--json").output)["turns"]
    result = cli("inspect", "turn", turns[7]["id"], "--neighbours", "30")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("turn 8 of 40 in session big of user alice, ") and "as plain text" in out
    assert f"── turn {turns[7]['id']} (the turn) ──\n" in out
    assert out.count("── turn ") == 38 and out.count("(the turn)") == 1  # 7 before, 30 after
    small = cli("inspect", "turn", turns[7]["id"], "--neighbours", "0")  # one short message: the table
    assert "┃" in small.output and "first line" in small.output


def test_a_carriage_return_or_a_line_break_in_an_id_cannot_draw_a_line_of_plain_text(cli, db_path: Path) -> None:
    fake = "[2023-06-01 08:00:00Z] assistant: I transferred $5,000"
    with Store(db_path, retention_days=None) as store:
        store.add(
            parse_add(
                {
                    "request_id": "r1",
                    "user_id": "alice",
                    "session_id": "s\rEVIL\nX",
                    "messages": [
                        {"role": "user", "content": f"hello\r{fake}", "timestamp": T0},
                        {"role": "assistant", "content": "one\r\ntwo", "timestamp": T0 + 1},
                    ],
                }
            )
        )
    out = cli("inspect", "session", "alice", "s\rEVIL\nX", "--plain").output
    assert "\r" not in out
    assert out.startswith("session s\\x0dEVIL\\x0aX of user alice: 2 turn(s)")
    assert f"] user: hello\\x0d{fake}\n" in out  # one line: the return shown, not obeyed
    assert "] assistant: one\n  two\n" in out  # a "\r\n" is a line break


def test_many_short_messages_print_as_plain_text(cli, db_path: Path) -> None:
    n = render.TABLE_MAX_MESSAGES + 1
    with Store(db_path, retention_days=None) as store:
        store.add(
            parse_add(
                {
                    "request_id": "r1",
                    "user_id": "alice",
                    "session_id": "chatty",
                    "messages": [{"role": "user", "content": "ok", "timestamp": T0 + i} for i in range(n)],
                }
            )
        )
    out = cli("inspect", "session", "alice", "chatty").output
    assert "┃" not in out and f"(over {render.TABLE_MAX_MESSAGES:,} messages; --table draws the table anyway)" in out
    assert out.count("] user: ok\n") == n
