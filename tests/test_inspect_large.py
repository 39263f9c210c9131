"""`refind inspect session/turn` on a big session: plain text past TABLE_MAX_CHARS (rich draws a table of ~2 MB in
~11 s), every message whole; the table on request, and as before for a normal session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.cells import cell_len

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


def test_the_table_of_a_session_past_its_limits_is_drawn_in_pages_as_it_is_read(
    cli, db_path: Path, monkeypatch
) -> None:
    """`--table` of a session of 50,000 messages printed nothing for ~26 s and held 430 MB (round 29's note): rich
    measured every cell of the whole transcript before drawing its first line. Past the table's limits it is drawn as
    tables of up to PAGE_MESSAGES messages, fixed column widths (the pages line up), each printed when full."""
    monkeypatch.setattr(render, "TABLE_MAX_MESSAGES", 10)
    monkeypatch.setattr(render, "PAGE_MESSAGES", 5)
    with Store(db_path, retention_days=None) as store:
        store.add(
            parse_add(
                {
                    "request_id": "r1",
                    "user_id": "alice",
                    "session_id": "long",
                    "messages": [
                        {"role": "user", "content": f"message number {i} " * (1 + i % 3), "timestamp": T0 + i * 60_000}
                        for i in range(12)
                    ],
                }
            )
        )
    result = cli("inspect", "session", "alice", "long", "--table")
    assert result.exit_code == 0, result.output
    out = result.output
    chars = sum(len(f"message number {i} " * (1 + i % 3)) for i in range(12))
    assert out.startswith(
        f"session long of user alice: 12 turn(s), {chars:,} characters, as tables of up to 5 messages (over 10 "
        "messages)\n┏"
    )
    assert out.count("┃ turn id") == 3  # 5 + 5 + 2 messages
    widths = {len(line) for line in out.splitlines() if line[:1] in "┏┃┡│├└"}
    assert widths == {80}  # (CliRunner's console: 80 columns) every page's lines alike
    turns = json.loads(cli("inspect", "session", "alice", "long", "--json").output)["turns"]
    assert len(turns) == 12  # (the loop below checks each one)
    for t in turns:
        assert f"│ {t['id']} │" in out
    # a session within a page is still drawn whole, as before
    monkeypatch.setattr(render, "PAGE_MESSAGES", 500)
    whole = cli("inspect", "session", "alice", "long", "--table").output
    assert whole.startswith("session long of user alice: 12 turn(s)  ") and whole.count("┃ turn id") == 1


def test_each_page_is_printed_before_the_next_turns_are_read(capsys, monkeypatch) -> None:
    monkeypatch.setattr(render, "PAGE_MESSAGES", 2)
    printed_when_read: list[str] = []

    def turns():
        for i in range(5):
            printed_when_read.append(capsys.readouterr().out)  # what reached stdout before turn i was read
            yield {"id": f"{i:024x}", "messages": [{"role": "user", "content": f"text {i}", "said_at": T0}]}

    render.print_paged_transcript("session s of user u: 5 turn(s)", turns(), size=(5, 30))
    last = capsys.readouterr().out
    assert [out.count("┃ turn id") for out in printed_when_read] == [0, 0, 1, 0, 1]
    assert last.count("┃ turn id") == 1 and f"{4:024x}" in last


@pytest.mark.parametrize("columns", [60, 70])
def test_a_narrow_console_s_pages_keep_each_turn_id_and_time_whole(
    cli, db_path: Path, monkeypatch, columns: int
) -> None:
    """A page's columns had fixed widths 24 + 9 + 20 + 8 (+ 13 of frame): below 72 columns rich cut every column
    evenly, the turn id too ("004787eabe5d41b408c…", which `inspect turn` cannot take) and the time
    ("2023-06-01 08:0…"); the whole table keeps them down to 59 columns. Now the role and the content give way."""
    monkeypatch.setattr(render, "TABLE_MAX_MESSAGES", 3)
    monkeypatch.setattr(render, "PAGE_MESSAGES", 2)
    monkeypatch.setenv("COLUMNS", str(columns))
    with Store(db_path, retention_days=None) as store:
        store.add(
            parse_add(
                {
                    "request_id": "r1",
                    "user_id": "alice",
                    "session_id": "long",
                    "messages": [
                        {"role": "assistant", "content": f"reply {i} 你好世界", "timestamp": T0 + i * 60_000}
                        for i in range(5)
                    ],
                }
            )
        )
    out = cli("inspect", "session", "alice", "long", "--table").output
    assert out.count("┃ turn id") == 3  # 2 + 2 + 1 messages
    assert {cell_len(line) for line in out.splitlines() if line[:1] in "┏┃┡│├└"} == {columns}  # (你: 2 cells)
    turns = json.loads(cli("inspect", "session", "alice", "long", "--json").output)["turns"]
    assert len(turns) == 5  # (the loop below checks each one)
    for i, t in enumerate(turns):
        assert f"│ {t['id']} │" in out
        assert f"│ 2023-06-01 08:{i:02d}:00Z │" in out
