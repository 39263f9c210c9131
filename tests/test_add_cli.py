"""`refind add` through the real CLI (CliRunner) on a real SQLite file: one message, replays, bad input."""

from __future__ import annotations

import gzip
import json
import sqlite3

import pytest
from conftest import FIXTURES

from refind_cli import replay
from refind_cli.store import Store


def rows(db_path, sql="SELECT user_id, session_id, role, content FROM messages ORDER BY seq"):
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def jsonl(path, *objs_or_lines) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for item in objs_or_lines:
            f.write((item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)) + "\n")
    return str(path)


def add_line(rid, user="u1", session="s1", content="hello", **extra):
    return {
        "request_id": rid,
        "user_id": user,
        "session_id": session,
        "messages": [{"role": "user", "content": content, "timestamp": 1_700_000_000_000}],
        **extra,
    }


def test_help_explains_both_line_shapes(cli) -> None:
    for args in (["--help"], ["add", "--help"]):
        out = cli(*args).output
        assert '"messages": [{"role": "user"' in out
        assert '{"user_id": "alice", "session_id": "s1", "role": "user", "content": "hi"' in out


def test_one_message_from_the_shell(cli, db_path) -> None:
    result = cli(
        "add",
        "Alice: I adopted a cat named Biscuit",
        "--user",
        "alice",
        "--session",
        "s1",
        "--at",
        "2023-05-08T13:56",
        "--json",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["success"] is True and out["status"] == "added" and out["request_id"].startswith("cli-")
    said = rows(db_path, "SELECT said_at FROM messages")[0][0]
    assert said == 1_683_554_160_000  # 2023-05-08T13:56Z
    again = cli(
        "add",
        "Alice: I adopted a cat named Biscuit",
        "--user",
        "alice",
        "--session",
        "s1",
        "--at",
        "2023-05-08T13:56",
        "--json",
    )
    assert json.loads(again.output)["status"] == "duplicate"
    assert len(rows(db_path)) == 1


def test_one_message_with_explicit_request_id_conflicts_on_other_text(cli, db_path) -> None:
    assert cli("add", "first", "-u", "u", "-s", "s", "--request-id", "r1").exit_code == 0
    result = cli("add", "second", "-u", "u", "-s", "s", "--request-id", "r1")
    assert result.exit_code == 3
    assert "request_id 'r1' of user 'u' is already stored with a different payload" in result.output
    assert rows(db_path) == [("u", "s", "user", "first")]


def test_at_takes_unix_ms_as_digits_as_the_python_api_and_mcp_do(cli, db_path) -> None:
    # a probe of round 24: `--at 1700000000000` was "not an ISO 8601 time", where Memory.add(at=) and MCP take it
    assert cli("add", "a", "-u", "u", "-s", "s", "--at", "1700000000000").exit_code == 0
    seconds = cli("add", "b", "-u", "u", "-s", "s", "--at", "1700000001")
    assert seconds.exit_code == 0 and "--at: 1700000001 read as Unix seconds" in seconds.output
    assert cli("add", "c", "-u", "u", "-s", "s", "--at", "20230508").exit_code == 0  # a compact ISO date first
    said = rows(db_path, "SELECT said_at FROM messages ORDER BY seq")
    assert said == [(1_700_000_000_000,), (1_700_000_001_000,), (1_683_504_000_000,)]
    assert "is neither Unix milliseconds" in cli("add", "d", "-u", "u", "-s", "s", "--at", "17").output


def test_one_message_faults(cli) -> None:
    assert "one message needs --user and --session" in cli("add", "x", "--user", "u").output
    bad_role = cli("add", "x", "-u", "u", "-s", "s", "--role", "robot")
    assert bad_role.exit_code == 2
    assert "error: --role: must be one of user, assistant, system; got 'robot'" in bad_role.output
    assert "is not an ISO 8601 time" in cli("add", "x", "-u", "u", "-s", "s", "--at", "yesterday").output
    too_early = cli("add", "x", "-u", "u", "-s", "s", "--at", "1969-12-31")
    assert too_early.exit_code == 2
    assert (
        "--at: '1969-12-31' is outside the dates refind stores, 1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z"
        in " ".join(too_early.output.split())
    )
    # the range's first day is not all inside it: the message says from when exactly
    first_day = cli("add", "x", "-u", "u", "-s", "s", "--at", "1973-03-03")
    assert first_day.exit_code == 2
    assert "outside the dates refind stores, 1973-03-03T09:46:40Z to" in " ".join(first_day.output.split())
    assert cli("add", "x", "-u", "u", "-s", "s", "--at", "1973-03-03T09:46:40Z").exit_code == 0
    assert "give either the message TEXT or --file PATH" in cli("add", "x", "--file", "f.jsonl").output


def test_an_empty_at_or_request_id_is_refused_not_read_as_absent(cli) -> None:
    # `--at "$WHEN"` with WHEN unset stored the message without its date; `--request-id ""` under a hash id
    empty_at = cli("add", "x", "-u", "u", "-s", "s", "--at", "")
    assert empty_at.exit_code == 2
    assert (
        "error: --at: '' is not an ISO 8601 time such as 2023-05-08T13:56 or 2023-05-08, nor Unix ms" in empty_at.output
    )
    empty_id = cli("add", "x", "-u", "u", "-s", "s", "--request-id", "")
    assert empty_id.exit_code == 2
    assert "error: --request-id: must be a non-empty string" in empty_id.output
    assert cli("export", "--user", "u").exit_code == 4  # nothing was stored


def test_an_in_memory_database_is_refused_not_acknowledged_and_lost(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("add", "remember the capybara", "-u", "u", "-s", "s", "--db", ":memory:")
    assert result.exit_code == 2  # it printed "stored", and the message was gone with the process
    assert "error: --db: ':memory:' would be gone when this command ends, with all it stored; give a file" in (
        " ".join(result.output.split())
    )
    mcp = cli("mcp", "--user", "u", "--db", ":memory:")  # remember answered "stored" for what no launch kept
    assert mcp.exit_code == 2 and "error: --db: ':memory:' would be gone" in mcp.output
    assert list(tmp_path.iterdir()) == []


def test_arguments_that_are_not_utf8_are_one_error_line_not_a_traceback(cli) -> None:
    assert cli("add", "kept", "-u", "u", "-s", "s").exit_code == 0
    # Python hands argv bytes that are not UTF-8 over as lone surrogates ('\xff' -> '\udcff')
    for args in (
        ("add", "bad \udcff byte", "-u", "u", "-s", "s"),
        ("add", "ok", "-u", "u\udcff", "-s", "s"),
        ("export", "--user", "u\udcff"),
        ("forget", "--user", "u\udcff", "--yes"),
        ("inspect", "user", "u\udcff"),
    ):
        result = cli(*args)
        assert result.exit_code == 2, args
        assert "error: an argument holds bytes that are not UTF-8 text ('\\udcff'); ids and text are stored" in (
            " ".join(result.output.split())
        )
    assert "kept" in cli("export", "--user", "u").output


def test_a_byte_order_mark_opening_any_line_is_read_past(cli, tmp_path) -> None:
    # files that each open with a BOM (Windows tools write one), joined with cat: line 2 was refused as not JSON
    bom = "\ufeff"
    lines = [
        bom
        + json.dumps(
            {
                "request_id": f"r{i}",
                "user_id": "u",
                "session_id": "s",
                "messages": [{"role": "user", "content": f"{bom}part {i}"}],
            }
        )
        for i in (1, 2)
    ]
    path = tmp_path / "joined.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = cli("add", "--file", str(path), "--quiet", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["requests_added"] == 2
    exported = [json.loads(line) for line in cli("export", "--user", "u").stdout.splitlines()]
    assert [r["messages"][0]["content"] for r in exported] == [f"{bom}part 1", f"{bom}part 2"]  # content verbatim


def test_replay_fixtures_in_both_shapes(cli, db_path) -> None:
    first = cli("add", "--file", str(FIXTURES / "conversations.jsonl"), "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["messages_added"] == 13
    second = cli("add", "--file", str(FIXTURES / "messages.jsonl"), "--json")
    summary = json.loads(second.output)
    assert (summary["requests_added"], summary["messages_added"], summary["invalid_lines"]) == (4, 9, 0)
    stored = rows(db_path)
    assert len(stored) == 22
    # A session opening with an assistant message, multi-line and non-ASCII text, verbatim whitespace.
    assert ("alice", "s3", "assistant", "Welcome back! Last time you mentioned planning a garden.") in stored
    assert ("bob", "s1", "user", "Bob: 我上周去了杭州，西湖的风景真美。") in stored
    assert (
        "alice",
        "s2",
        "assistant",
        "  Poor Biscuit. A grain-free salmon formula often helps with allergies.  ",
    ) in stored
    # Message lines carrying a request_id are grouped under it.
    assert rows(db_path, "SELECT count(*) FROM messages WHERE request_id = 'carol-recital'")[0][0] == 2
    # Replaying both again adds nothing.
    for name in ("conversations.jsonl", "messages.jsonl"):
        again = json.loads(cli("add", "--file", str(FIXTURES / name), "--json").output)
        assert again["messages_added"] == 0 and again["duplicates"] > 0
    assert len(rows(db_path)) == 22


def test_two_users_sharing_a_session_id_stay_apart(cli, db_path) -> None:
    cli("add", "--file", str(FIXTURES / "messages.jsonl"))
    store = Store(db_path)
    assert {m.user_id for m in store.user_messages("carol")} == {"carol"}
    assert [m.session_id for m in store.user_messages("dave")] == ["s1", "s1"]
    store.close()


def test_bad_line_7_is_reported_and_everything_valid_is_stored(cli, db_path, tmp_path) -> None:
    lines = [add_line(f"r{i}", content=f"message {i}") for i in range(1, 7)]
    lines.append('{"request_id": "r7", "user_id": "u1", "session_id": "s1", "messages": [')  # line 7: broken JSON
    lines += [add_line(f"r{i}", content=f"message {i}") for i in range(8, 11)]
    path = jsonl(tmp_path / "replay.jsonl", *lines)
    result = cli("add", "--file", path)
    assert result.exit_code == 2
    assert f"{path}:7: not valid JSON" in result.output
    assert sorted(r[3] for r in rows(db_path)) == sorted(f"message {i}" for i in range(1, 11) if i != 7)


def test_every_kind_of_bad_line_names_file_and_line(cli, db_path, tmp_path) -> None:
    path = jsonl(
        tmp_path / "bad.jsonl",
        add_line("ok1"),
        '"just a string"',
        {"foo": 1},
        add_line("r", content=""),
        {"user_id": "u1", "session_id": "s1", "role": "user"},
        {"user_id": "u1", "role": "user", "content": "no session"},
        {"user_id": "u1", "session_id": "s1", "role": "user", "content": "ok", "timestamp": "noon"},
        add_line("ok2"),
    )
    with open(path, "ab") as f:
        f.write(b'{"user_id": "u1", "session_id": "s1", "role": "user", "content": "\xff\xfe"}\n')
    result = cli("add", "--file", path, "--json")
    summary = json.loads(result.output)
    assert result.exit_code == 2
    assert summary["problems"] == [
        f"{path}:2: neither an Add request (an object with messages) nor a message (an object with role and content)",
        f"{path}:3: neither an Add request (an object with messages) nor a message (an object with role and content)",
        f"{path}:4: messages[0].content: must be a non-empty string",
        f"{path}:5: content: required",
        f"{path}:6: session_id: required",
        f"{path}:7: timestamp: must be Unix milliseconds (an integer) or null, got string (read too: a number as a string, an ISO 8601 time that names its zone such as 2024-03-10T10:00:00Z)",
        f"{path}:9: not valid UTF-8",
    ]
    assert summary["requests_added"] == 2 and summary["invalid_lines"] == 7


def test_conflict_in_a_replay_is_reported_with_its_line(cli, db_path, tmp_path) -> None:
    path = jsonl(
        tmp_path / "c.jsonl",
        add_line("r1", content="one"),
        add_line("r1", content="two"),
        add_line("r1", user="u2", content="two"),
    )
    result = cli("add", "--file", path, "--json")
    summary = json.loads(result.output)
    assert result.exit_code == 3
    assert summary["conflicts"] == 1 and summary["requests_added"] == 2
    assert summary["problems"] == [
        f"{path}:2: request_id 'r1' of user 'u1' is already stored with a different payload; "
        "an identical replay is accepted, a changed one is not"
    ]


def test_strict_checks_the_whole_file_first_and_stores_nothing(cli, db_path, tmp_path) -> None:
    path = jsonl(tmp_path / "s.jsonl", add_line("r1"), add_line("r2", metadata={"x": 1}), add_line("r3"))
    result = cli("add", "--file", path, "--strict")
    assert result.exit_code == 2
    assert f"{path}:2: unknown field (refused by --strict): metadata" in result.output
    assert f"{path}: --strict: nothing stored because 1 line(s) are invalid" in result.output  # why 0 were added
    assert not db_path.exists()  # nothing stored: no database either
    lenient = cli("add", "--file", path)
    assert lenient.exit_code == 0
    assert f"warning: {path}:2: ignored unknown field: metadata" in lenient.output
    assert len(rows(db_path)) == 3


def test_stdin_and_gzip(cli, db_path, tmp_path) -> None:
    payload = "\n".join(json.dumps(add_line(f"r{i}", content=f"gz {i}")) for i in range(5)) + "\n"
    gz = tmp_path / "r.jsonl.gz"
    gz.write_bytes(gzip.compress(payload.encode()))
    assert cli("add", "--file", str(gz)).exit_code == 0
    assert len(rows(db_path)) == 5
    result = cli("add", "--file", "-", "--json", input=json.dumps(add_line("stdin-1", content="from stdin")) + "\n")
    assert json.loads(result.output)["messages_added"] == 1
    assert len(rows(db_path)) == 6


def test_an_unreadable_or_corrupt_file_is_one_line_not_a_traceback(cli, tmp_path, monkeypatch):
    import gzip
    import pathlib

    corrupt = tmp_path / "corrupt.jsonl.gz"
    corrupt.write_bytes(gzip.compress(b'{"x": 1}\n' * 50)[:12] + bytes(range(256)) * 2)
    r = cli("add", "--file", str(corrupt))
    assert r.exit_code == 1 and "corrupt.jsonl.gz: damaged .gz file: the compressed data" in r.output, r.output
    assert "a folder, not a file" in cli("add", "--file", str(tmp_path)).output

    locked = tmp_path / "locked.jsonl"
    locked.write_text('{"user_id": "u", "session_id": "s", "role": "user", "content": "hi"}\n')
    real_open = pathlib.Path.open

    def refuse(self, *args, **kwargs):
        if self == locked:
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", refuse)
    r = cli("add", "--file", str(locked))
    assert r.exit_code == 1 and "cannot read: Permission denied" in r.output, r.output


def test_message_lines_group_by_session_in_runs_of_twenty(cli, db_path, tmp_path) -> None:
    lines = [{"user_id": "u", "session_id": "s1", "role": "user", "content": f"m{i}"} for i in range(45)]
    lines.append({"user_id": "u", "session_id": "s2", "role": "user", "content": "other session"})
    path = jsonl(tmp_path / "m.jsonl", *lines)
    summary = json.loads(cli("add", "--file", path, "--json").output)
    assert (summary["requests_added"], summary["messages_added"]) == (4, 46)
    sizes = rows(db_path, "SELECT message_count FROM requests")
    assert sorted(s[0] for s in sizes) == [1, 5, 20, 20]


def test_half_an_emoji_in_a_message_is_stored_as_a_replacement_character_and_noted(cli, db_path, tmp_path) -> None:
    """A sender cutting long messages by UTF-16 units leaves half an emoji at the cut, which JSON escapes: the line
    was refused, and every message of its request lost with it. Message text is mended (U+FFFD, as a WHATWG encoder
    writes one) and warned about; an id holding one is still refused (mending could make two ids one)."""
    path = jsonl(
        tmp_path / "u.jsonl",
        add_line("ok"),
        '{"request_id": "r2", "user_id": "u1", "session_id": "s1", "messages": [{"role": "user", "content": '
        '"I live in Lisbon"}, {"role": "assistant", "content": "cut here \\ud83d"}]}',
        '{"user_id": "u1", "session_id": "s2", "role": "assistant", "content": "\\ude00 and on \\udc80 \\udc81"}',
        '{"request_id": "r3", "user_id": "u\\ud800", "session_id": "s1", "messages": [{"role": "user", "content": "x"}]}',
        '{"request_id": "r4", "user_id": "u1", "session_id": "s1", '
        '"messages": [{"role": "user", "content": "paired \\ud83d\\ude00 emoji"}]}',
    )
    result = cli("add", "--file", path, "--json")
    summary = json.loads(result.output)
    assert result.exit_code == 2
    assert summary["problems"] == [
        f"{path}:4: user_id: contains an unpaired UTF-16 surrogate (\\ud800), which is not Unicode text"
    ]
    assert summary["warnings"] == [
        f"{path}:2: messages[1].content: 1 unpaired UTF-16 surrogate (\\ud83d: half a character) stored as U+FFFD",
        f"{path}:3: content: 3 unpaired UTF-16 surrogates (\\ude00, \\udc80, \\udc81: half a character each) stored "
        "as U+FFFD",
    ]
    assert summary["normalized"] == 2
    assert sorted(r[3] for r in rows(db_path)) == [
        "I live in Lisbon",
        "cut here \ufffd",
        "hello",
        "paired 😀 emoji",
        "\ufffd and on \ufffd \ufffd",
    ]
    again = json.loads(cli("add", "--file", path, "--json").output)  # the same line again: an identical replay
    assert (again["requests_added"], again["duplicates"]) == (0, 4)


def test_a_message_said_again_in_a_later_group_is_stored_again_and_a_rerun_stores_nothing(
    cli, db_path, tmp_path
) -> None:
    """Two sessions interleaved line by line: s1's "yes" said twice makes two groups with the same payload. The
    second is a new message, not a replay of the first; re-running the file (or after a kill) still adds nothing."""
    lines = [
        {"user_id": "u", "session_id": s, "role": "user", "content": c}
        for s, c in [("s1", "yes"), ("s2", "no"), ("s1", "yes"), ("s2", "no"), ("s1", "yes")]
    ]
    path = jsonl(tmp_path / "i.jsonl", *lines)
    first = json.loads(cli("add", "--file", path, "--json").output)
    assert (first["messages_added"], first["duplicates"]) == (5, 0)
    assert [r[1:] for r in rows(db_path)] == [(s["session_id"], "user", s["content"]) for s in lines]
    again = json.loads(cli("add", "--file", path, "--json").output)
    assert (again["messages_added"], again["duplicates"]) == (0, 5)
    assert len(rows(db_path)) == 5


def test_a_line_nested_too_deeply_is_a_line_error_and_the_rest_is_stored(cli, db_path, tmp_path) -> None:
    path = jsonl(
        tmp_path / "deep.jsonl",
        add_line("r1", content="before"),
        "[" * 100_000 + "]" * 100_000,
        '{"x": ' * 5_000 + '"\\ud800"' + "}" * 5_000,
        add_line("r2", content="after"),
    )
    result = cli("add", "--file", path, "--json")
    summary = json.loads(result.output)
    assert result.exit_code == 2
    assert summary["problems"] == [f"{path}:{n}: not valid JSON here (nested too deeply)" for n in (2, 3)]
    assert sorted(r[3] for r in rows(db_path)) == ["after", "before"]


def test_strict_stores_nothing_when_a_request_would_be_refused(cli, db_path, tmp_path) -> None:
    """--strict checks the whole file first: a request id given two payloads in the file, one stored with
    another payload, and a forgotten one are all found before anything is stored."""
    from refind_cli import lifecycle

    assert (
        cli(
            "add",
            "--file",
            jsonl(
                tmp_path / "pre.jsonl", add_line("stored", content="as stored"), add_line("gone", content="forget me")
            ),
        ).exit_code
        == 0
    )
    with Store(db_path) as store:
        lifecycle.forget(store, "u1", request_id="gone")
    path = jsonl(
        tmp_path / "s.jsonl",
        add_line("r1", content="one"),
        add_line("r1", content="one"),
        add_line("r1", content="two"),
        add_line("stored", content="changed"),
        add_line("gone", content="forget me"),
        add_line("stored", content="as stored"),
    )
    result = cli("add", "--file", path, "--strict", "--json")
    summary = json.loads(result.output)
    assert result.exit_code == 3
    assert (summary["conflicts"], summary["forgotten"], summary["invalid_lines"], summary["requests_added"]) == (
        2,
        1,
        0,
        0,
    )
    assert [p.split(": ")[0] for p in summary["problems"][:3]] == [f"{path}:3", f"{path}:4", f"{path}:5"]
    assert "another payload than at line 1" in summary["problems"][0]
    assert "was forgotten" in summary["problems"][2]
    assert [r[3] for r in rows(db_path)] == ["as stored"]  # nothing of the file was stored
    lenient = json.loads(cli("add", "--file", path, "--json").output)  # without --strict: the good lines go in
    assert (lenient["requests_added"], lenient["conflicts"], lenient["forgotten"]) == (1, 2, 1)


def test_at_with_milliseconds_is_stored_exactly(cli, db_path) -> None:
    """--at and --as-of/--date-* with milliseconds: exact, not float-rounded a millisecond short."""
    from refind_cli.contract import parse_date

    at = "2038-06-17T21:10:49.957"  # float arithmetic made this …956
    assert cli("add", "hello", "--user", "u", "--session", "s", "--at", at).exit_code == 0
    assert rows(db_path, "SELECT said_at FROM messages") == [(2_160_421_849_957,)]
    assert parse_date(at) == parse_date(at + "Z") == 2_160_421_849_957
    assert parse_date("2038-06-17T23:10:49.957+02:00") == 2_160_421_849_957


def test_json_python_cannot_hold_is_a_line_error_not_a_crash(cli, db_path, tmp_path) -> None:
    path = jsonl(
        tmp_path / "n.jsonl",
        add_line("ok"),
        '{"request_id": "r2", "user_id": "u1", "session_id": "s1", '
        '"messages": [{"role": "user", "content": "x", "timestamp": ' + "9" * 5_000 + "}]}",
        "[" * 100_000 + "]" * 100_000,
        add_line("ok2", content="still stored"),
    )
    result = cli("add", "--file", path, "--json")
    summary = json.loads(result.output)
    assert result.exit_code == 2
    assert [p.split(": ", 1)[0] for p in summary["problems"]] == [f"{path}:2", f"{path}:3"]
    assert sorted(r[3] for r in rows(db_path)) == ["hello", "still stored"]


def test_seconds_and_digit_strings_are_stored_as_milliseconds_and_said(cli, db_path, tmp_path) -> None:
    """A 422 would lose these messages; their meaning is clear, so they are stored, and the summary says so."""
    seconds = add_line("r1", content="in seconds")
    seconds["messages"][0]["timestamp"] = 1_700_000_000
    digits = {"user_id": "u1", "session_id": "s2", "role": "user", "content": "digits", "timestamp": "1700000000123"}
    ambiguous = add_line("r3", content="ambiguous")
    ambiguous["messages"][0]["timestamp"] = 50_000_000_000
    path = jsonl(tmp_path / "t.jsonl", seconds, digits, ambiguous)
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 2  # the ambiguous line alone is refused
    summary = json.loads(result.output)
    assert (summary["requests_added"], summary["normalized"], summary["invalid_lines"]) == (2, 2, 1)
    assert summary["warnings"] == [
        f"{path}:1: messages[0].timestamp: 1700000000 read as Unix seconds (×1000 = 1700000000000 ms)",
        f"{path}:2: timestamp: a string of digits read as a number",
    ]
    assert summary["problems"] == [
        f"{path}:3: messages[0].timestamp: 50000000000 is neither Unix milliseconds in [100000000000, "
        "10000000000000) nor Unix seconds in [100000000, 10000000000) (1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z)"
    ]
    said = rows(db_path, "SELECT content, said_at FROM messages ORDER BY seq")
    assert said == [("in seconds", 1_700_000_000_000), ("digits", 1_700_000_000_123)]
    one = cli("add", "shell", "--user", "u1", "--session", "s3", "--timestamp", "1700000000")
    assert one.exit_code == 0
    assert "warning: --timestamp: 1700000000 read as Unix seconds (×1000 = 1700000000000 ms)" in one.output


def test_a_warning_of_a_message_line_names_that_line_not_its_groups_first(cli, db_path, tmp_path) -> None:
    # three message lines of one session are one group (one Add); only the third has an unknown field and seconds
    lines = [
        {"user_id": "u", "session_id": "s", "role": "user", "content": "one", "timestamp": 1_700_000_000_000},
        {"user_id": "u", "session_id": "s", "role": "user", "content": "two", "timestamp": 1_700_000_001_000},
        {"user_id": "u", "session_id": "s", "role": "user", "content": "three", "timestamp": 1_700_000_002, "mood": 1},
    ]
    path = jsonl(tmp_path / "w.jsonl", *lines)
    summary = json.loads(cli("add", "--file", path, "--json").output)
    assert summary["messages_added"] == 3
    assert summary["warnings"] == [
        f"{path}:3: ignored unknown field: mood",
        f"{path}:3: timestamp: 1700000002 read as Unix seconds (×1000 = 1700000002000 ms)",
    ]


def test_after_invalid_lines_the_summary_says_to_replay_only_the_fixed_ones(cli, db_path, tmp_path) -> None:
    # message lines are grouped by their content: line 2 fixed and the whole file replayed would be another group,
    # storing lines 1 and 3 a second time; replaying the fixed line alone stores each message exactly once
    def line(text: str, ts: int | None = None) -> dict:
        return {"user_id": "u", "session_id": "s", "role": "user", "content": text, "timestamp": ts}

    source = jsonl(tmp_path / "log.jsonl", line("first"), line("second", 5), line("third"))
    result = cli("add", "--file", source)
    assert result.exit_code == 2
    assert f"{source}:2: timestamp: 5 is neither Unix milliseconds" in result.output
    assert "hint: once fixed, replay a file of the invalid lines only" in result.output
    fixed = jsonl(tmp_path / "fixed.jsonl", line("second", 1_700_000_000_000))
    assert cli("add", "--file", fixed).exit_code == 0
    assert [r[3] for r in rows(db_path)] == ["first", "third", "second"]
    assert "hint:" not in cli("add", "--file", fixed).output  # nothing invalid: no hint


def test_what_a_replay_quotes_of_its_file_is_shown_escaped(cli, tmp_path) -> None:
    # an untrusted file's unknown field names are quoted in warnings, and in --strict's refusals: never raw ESC
    line = {"user_id": "u", "session_id": "s", "role": "user", "content": "x", "\x1b]0;pwned\x07": 1}
    source = jsonl(tmp_path / "untrusted.jsonl", line)
    for strict in ([], ["--strict"]):
        result = cli("add", "--file", source, *strict)
        assert "ignored unknown field" in result.output or "refused by --strict" in result.output, result.output
        assert "\x1b" not in result.output and "\\x1b]0;pwned\\x07" in result.output


def test_the_summary_counts_digit_strings_as_read_leniently_not_as_seconds(cli, tmp_path) -> None:
    line = {"user_id": "u", "session_id": "s", "role": "user", "content": "x", "timestamp": "1700000000000"}
    result = cli("add", "--file", jsonl(tmp_path / "digits.jsonl", line))
    assert result.exit_code == 0
    assert ":1: timestamp: a string of digits read as a number" in result.output
    assert "values read leniently" in result.output and "read as seconds" not in result.output


def test_the_success_line_escapes_line_breaks_in_ids(cli) -> None:
    """An id holding "\\n" or "\\r" (the server's callers choose them) cannot draw a fake line on the terminal."""
    result = cli("add", "hello", "--user", "alice\nstored: request evil", "--session", "s\r1", "--request-id", "r\n1")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "stored: request r\\x0a1 · user alice\\x0astored: request evil · session s\\x0d1"
    ]


def test_ctrl_c_during_a_replay_prints_what_was_stored_and_exits_130(cli, db_path, tmp_path, monkeypatch) -> None:
    from refind_cli import replay

    chunks, store_batch = replay._chunks, replay._store_batch
    monkeypatch.setattr(replay, "_chunks", lambda lines, done, strict, _, hint: chunks(lines, done, strict, 2, hint))
    calls: list[int] = []

    def ctrl_c_at_the_third_batch(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return store_batch(*args, **kwargs)

    monkeypatch.setattr(replay, "_store_batch", ctrl_c_at_the_third_batch)
    path = jsonl(tmp_path / "ten.jsonl", *(add_line(f"r{i}", content=f"message {i}") for i in range(10)))
    result = cli("add", "--file", path)
    assert result.exit_code == 130
    out = " ".join(result.output.split())
    assert "requests added │ 4" in out
    assert "interrupted: 4 requests (4 messages) were stored before Ctrl-C; the same command stores the rest" in out
    assert len(rows(db_path)) == 4

    monkeypatch.setattr(replay, "_store_batch", store_batch)
    data = json.loads(cli("add", "--file", path, "--json").output)
    assert (data["requests_added"], data["duplicates"], data["interrupted"]) == (6, 4, False)
    assert len(rows(db_path)) == 10


def test_a_ctrl_c_as_a_batch_commits_waits_for_its_counts(cli, db_path, tmp_path, monkeypatch) -> None:
    # a probe of round 24: in 6 of 17 runs the summary was one batch short of what the database held — the Ctrl-C
    # came between the batch's COMMIT and its counts; it is held back now until both are done
    import os
    import signal
    from contextlib import contextmanager

    chunks, write, add_prepared = replay._chunks, Store.write, Store.add_prepared
    monkeypatch.setattr(replay, "_chunks", lambda lines, done, strict, _, hint: chunks(lines, done, strict, 2, hint))
    batches: list[int] = []

    def counted(self, *args, **kwargs):
        batches.append(1)
        return add_prepared(self, *args, **kwargs)

    @contextmanager
    def ctrl_c_as_the_second_batch_commits(self):
        outer = not self.conn.in_transaction  # (add_prepared nests one)
        with write(self) as db:
            yield db
        if outer and len(batches) == 2:  # the second batch just committed: the signal comes before its counts
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Store, "add_prepared", counted)
    monkeypatch.setattr(Store, "write", ctrl_c_as_the_second_batch_commits)
    path = jsonl(tmp_path / "ten.jsonl", *(add_line(f"r{i}", content=f"message {i}") for i in range(10)))
    result = cli("add", "--file", path)
    assert result.exit_code == 130, result.output
    assert len(rows(db_path)) == 4  # two batches committed …
    # … and counted (was: "2 requests (2 messages) were stored")
    assert "interrupted: 4 requests (4 messages) were stored before Ctrl-C" in " ".join(result.output.split())


def test_one_request_id_s_lines_past_one_add_are_refused_and_its_export_reads_back(
    cli, db_path, tmp_path, monkeypatch
) -> None:
    # Message lines sharing a request_id make one request; past what one Add may hold (10,000 messages, or an Add
    # line's 64 MiB) `refind export` wrote a line `refind add` refused: a backup that could not be restored
    from refind_cli import contract

    monkeypatch.setattr(replay, "MAX_MESSAGES_PER_ADD", 5)
    monkeypatch.setattr(contract, "MAX_MESSAGES_PER_ADD", 5)
    line = {"request_id": "big", "user_id": "u", "session_id": "s", "role": "user"}
    path = jsonl(tmp_path / "big.jsonl", *({**line, "content": f"m{i}"} for i in range(7)))
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.output)["problems"] == [
        f"{path}:{n}: message {n:,} of request_id 'big', over the limit of 5 for one Add (refind export could not "
        "write it as a line refind add reads back); give the rest another request_id"
        for n in (6, 7)
    ]
    assert [r[3] for r in rows(db_path)] == [f"m{i}" for i in range(5)]
    exported = tmp_path / "export.jsonl"
    assert cli("export", "--user", "u", "--output", str(exported)).exit_code == 0
    copy = tmp_path / "copy.db"
    restored = cli("add", "--file", str(exported), "--db", str(copy))
    assert restored.exit_code == 0, restored.output
    assert rows(copy) == rows(db_path)


def test_lines_past_an_add_line_s_bytes_are_refused_or_start_another_group(cli, db_path, tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "MAX_LINE_BYTES", 400)
    named = {"request_id": "r", "user_id": "u", "session_id": "s", "role": "user"}
    auto = {"user_id": "u", "session_id": "t", "role": "user"}
    path = jsonl(
        tmp_path / "bytes.jsonl",
        *({**named, "content": "x" * 100 + str(i)} for i in range(3)),  # ~180 bytes a line: the third is past 400
        *({**auto, "content": "y" * 100 + str(i)} for i in range(3)),  # no request_id: a new group, silently
    )
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 2, result.output
    (problem,) = json.loads(result.output)["problems"]
    assert problem.startswith(f"{path}:3: request_id 'r': its lines come to ") and "over the limit of 400" in problem
    assert sorted(r[0] for r in rows(db_path, "SELECT message_count FROM requests")) == [1, 2, 2]


def test_a_json_error_names_its_column_once(cli, tmp_path) -> None:
    path = jsonl(tmp_path / "j.jsonl", '{"request_id": "r1", "user_id": "u", "content": "open')
    result = cli("add", "--file", path)
    assert result.exit_code == 2
    assert f"{path}:1: not valid JSON (Unterminated string starting at column 49)" in result.output, result.output


def test_a_request_id_s_lines_apart_are_refused_as_apart_and_the_same_lines_again_are_duplicates(
    cli, db_path, tmp_path
) -> None:
    # two sessions' lines interleaved, each carrying its request_id: before, line 3 was "already stored with a
    # different payload" — a change the user never made; the same lines again later (a log concatenated twice) stay
    # duplicates
    def line(rid, session, role, content):
        return {"request_id": rid, "user_id": "a", "session_id": session, "role": role, "content": content}

    first = [line("r1", "s1", "user", "hi"), line("r2", "s2", "user", "yo")]
    path = jsonl(
        tmp_path / "apart.jsonl",
        *first,
        line("r1", "s1", "assistant", "hello"),
        line("r2", "s2", "assistant", "hey"),
        *first,
    )
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 2, result.output
    summary = json.loads(result.output)
    assert summary["problems"] == [
        f"{path}:{n}: request_id '{rid}' of user 'a': line {n} is not next to its line {m}, which alone made that "
        "request (message lines make one request only while consecutive), so these are not stored: only another "
        "request_id stores them (moved next to the first lines, they would be another payload under an id already "
        "taken: a conflict)"
        for n, m, rid in ((3, 1, "r1"), (4, 2, "r2"))
    ]
    assert (summary["requests_added"], summary["duplicates"], summary["conflicts"]) == (2, 2, 0)
    assert [r[3] for r in rows(db_path)] == ["hi", "yo"]
    # as the message says: the lines put together are a conflict now (the old advice), another request_id stores them
    together = jsonl(tmp_path / "together.jsonl", first[0], line("r1", "s1", "assistant", "hello"))
    assert cli("add", "--file", together).exit_code == 3
    renamed = jsonl(tmp_path / "renamed.jsonl", line("r1b", "s1", "assistant", "hello"))
    assert cli("add", "--file", renamed).exit_code == 0


def test_a_request_id_s_next_line_in_another_session_is_refused_naming_both_sessions(cli, db_path, tmp_path) -> None:
    # a probe of round 17: adjacent lines were refused as "line 2 is not next to its line 1"
    def line(session, content):
        return {"request_id": "R1", "user_id": "a", "session_id": session, "role": "user", "content": content}

    path = jsonl(tmp_path / "sessions.jsonl", line("sA", "one"), line("sB", "two"))
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.output)["problems"] == [
        f"{path}:2: request_id 'R1' of user 'a': line 2 names session 'sB', line 1 session 'sA'; one request's "
        "messages are of one session, so give these another request_id"
    ]
    assert [r[3] for r in rows(db_path)] == ["one"]


def test_a_utf16_file_is_refused_as_such_and_nothing_of_it_read(cli, db_path, tmp_path) -> None:
    # PowerShell's `>` writes UTF-16: each line was reported "not valid UTF-8" or "not valid JSON", and a line past
    # the last (its final newline's second byte) — nothing said what was wrong with the file (a data-safety review)
    path = tmp_path / "ps.jsonl"
    lines = [json.dumps(add_line(f"r{i}", content=f"m{i}")) for i in range(3)]
    path.write_bytes("\r\n".join(lines).encode("utf-16"))
    result = cli("add", "--file", str(path), "--json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.output)["problems"] == [f"{path}:1: {replay.not_utf8('UTF-16')}"]
    assert not db_path.exists()  # nothing of it stored: no database either


def test_lines_of_a_request_id_further_apart_than_the_window_are_a_conflict_as_before(
    cli, db_path, tmp_path, monkeypatch
) -> None:
    # a replay remembers the last APART_WINDOW request ids, not every one of a file of a million lines
    monkeypatch.setattr(replay, "APART_WINDOW", 1)

    def line(rid, content):
        return {"request_id": rid, "user_id": "a", "session_id": "s", "role": "user", "content": content}

    path = jsonl(tmp_path / "far.jsonl", line("r1", "hi"), line("r2", "yo"), line("r1", "again"))
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 3, result.output
    (problem,) = json.loads(result.output)["problems"]
    assert "request_id 'r1' of user 'a' is already stored with a different payload" in problem


def test_after_a_line_refused_for_size_the_request_s_later_lines_are_refused_too(cli, db_path, tmp_path, monkeypatch):
    # a big line refused, then a small one that fits: stored, it left a hole inside the request (review)
    monkeypatch.setattr(replay, "MAX_LINE_BYTES", 400)
    named = {"request_id": "r", "user_id": "u", "session_id": "s", "role": "user"}
    path = jsonl(
        tmp_path / "hole.jsonl",
        {**named, "content": "a"},
        {**named, "content": "b" * 280},
        {**named, "content": "c"},
    )
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 2, result.output
    problems = json.loads(result.output)["problems"]
    assert problems[0].startswith(f"{path}:2: request_id 'r': its lines come to ")
    assert problems[1] == f"{path}:3: {replay._after('r')}"
    assert [r[3] for r in rows(db_path)] == ["a"]


def test_a_utf32_file_is_named_as_such(cli, tmp_path) -> None:
    path = tmp_path / "wide.jsonl"
    path.write_bytes(json.dumps(add_line("r1")).encode("utf-32"))
    result = cli("add", "--file", str(path), "--json")
    assert result.exit_code == 2
    (problem,) = json.loads(result.output)["problems"]
    assert "the file is UTF-32" in problem and "iconv -f UTF-32" in problem


def test_a_file_of_lines_ending_in_a_carriage_return_alone_is_refused_saying_so(cli, db_path, tmp_path) -> None:
    # a classic Mac editor's "\r" line ends: one line to refind, refused as "Extra data at column 64" (round 30)
    line = json.dumps({"user_id": "u", "session_id": "s", "role": "user", "content": "one"}, separators=(",", ":"))
    path = tmp_path / "mac.jsonl"
    path.write_bytes((line + "\r" + line.replace("one", "two") + "\r").encode())
    accented = tmp_path / "accents.jsonl"  # (characters of several bytes before the "\r": counted as characters)
    accented.write_bytes((line.replace("one", "été ☕") + "\r" + line + "\r").encode())
    result = cli("add", "--file", str(path), "--json", "--quiet")
    assert result.exit_code == 2, result.output
    assert json.loads(result.output)["problems"] == [
        f"{path}:1: not valid JSON (Extra data at column 64); its lines end in a carriage return alone (\\r), and "
        "refind reads lines that end in \\n or \\r\\n: convert the file (tr '\\r' '\\n' < FILE), nothing of this "
        "line was stored"
    ]
    (problem,) = json.loads(cli("add", "--file", str(accented), "--json", "--quiet").output)["problems"]
    assert problem.startswith(f"{accented}:1: not valid JSON (Extra data at column 66); its lines end in a carriage")
    # two values on one line without a carriage return: the plain refusal, as before
    other = jsonl(tmp_path / "two.jsonl", line + " " + line)
    problems = json.loads(cli("add", "--file", other, "--json", "--quiet").output)["problems"]
    assert problems == [f"{other}:1: not valid JSON (Extra data at column 64)"]
    assert not db_path.exists() or rows(db_path) == []


def test_a_line_that_is_an_array_of_messages_is_refused_saying_so(cli, db_path, tmp_path) -> None:
    # a whole file written as one JSON array: "neither an Add request … nor a message" said nothing of why (round 30)
    message = {"user_id": "u", "session_id": "s", "role": "user", "content": "one"}
    path = jsonl(tmp_path / "array.json", json.dumps([message, {**message, "content": "two"}]), json.dumps([1, 2]))
    result = cli("add", "--file", path, "--json", "--quiet")
    assert result.exit_code == 2, result.output
    shape = "neither an Add request (an object with messages) nor a message (an object with role and content)"
    assert json.loads(result.output)["problems"] == [
        f"{path}:1: {shape}; it is a JSON array of 2 objects: write one object per line (jq -c '.[]' < FILE), "
        "nothing of this line was stored",
        f"{path}:2: {shape}",  # (an array of no objects: no such advice)
    ]


def test_a_file_of_carriage_return_lines_past_the_line_limit_is_refused_saying_so(
    cli, db_path, tmp_path, monkeypatch
) -> None:
    # such a file is one line: past MAX_LINE_BYTES it was refused as "split its messages", which said nothing of why
    # (a review of round 30; under the limit it says so since round 30)
    monkeypatch.setattr(replay, "MAX_LINE_BYTES", 400)
    line = json.dumps({"user_id": "u", "session_id": "s", "role": "user", "content": "one"}, separators=(",", ":"))
    mac = tmp_path / "mac.jsonl"
    mac.write_bytes(("\r".join([line] * 12) + "\r").encode())
    result = cli("add", "--file", str(mac), "--json", "--quiet")
    assert result.exit_code == 2, result.output
    assert json.loads(result.output)["problems"] == [
        f"{mac}:1: line of {mac.stat().st_size:,} bytes, over the limit of 400 bytes; its lines end in a carriage "
        "return alone (\\r), and refind reads lines that end in \\n or \\r\\n: convert the file (tr '\\r' '\\n' < "
        "FILE), nothing of this line was stored"
    ]
    # a long line of a CRLF file (its "\r" the line's last byte) is refused as any long line
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes((line.replace("one", "x" * 500) + "\r\n" + line + "\r\n").encode())
    problems = json.loads(cli("add", "--file", str(crlf), "--json", "--quiet").output)["problems"]
    assert problems == [f"{crlf}:1: line of {len(line) + 498:,} bytes, over the limit of 400 bytes; split its messages"]
    assert [r[3] for r in rows(db_path)] == ["one"]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_a_carriage_return_inside_a_line_past_the_limit_is_found_in_any_chunk(monkeypatch, chunk) -> None:
    import io

    monkeypatch.setattr(replay, "MAX_LINE_BYTES", 40)
    data = b"\n".join(
        [
            b"a" * 30 + b"\r" + b"b" * 30,  # a carriage return before the line passes the limit
            b"c" * 50 + b"\r" + b"d",  # after
            b"e" * 50 + b"\r",  # a CRLF line's end
            b"f" * 50,
            b"short\r",
            b"g" * 45 + b"\r",  # the file's last line, its end a carriage return
        ]
    )
    lines = list(replay._iter_lines(io.BytesIO(data), chunk=chunk))
    assert [(type(x).__name__, getattr(x, "returns", None)) for x in lines] == [
        ("Overlong", True),
        ("Overlong", True),
        ("Overlong", False),
        ("Overlong", False),
        ("bytes", None),
        ("Overlong", False),
    ]
    assert [x.size for x in lines if isinstance(x, replay.Overlong)] == [61, 52, 51, 50, 46]
    assert lines[4] == b"short\r"
