"""`refind search` through the CLI on a real database."""

from __future__ import annotations

import io
import json

import pytest
from conftest import FIXTURES


@pytest.fixture
def filled(cli):
    assert (
        cli("add", "--file", str(FIXTURES / "conversations.jsonl"), "--quiet", "--retention-days", "off").exit_code == 0
    )
    return cli


def test_json_is_exactly_the_contract_response(filled):
    r = filled(
        "search",
        "Lisbon trip sister",
        "--user",
        "alice",
        "--mode",
        "bm25",
        "--json",
        "--top-k",
        "2",
        "--retention-days",
        "off",
    )
    assert r.exit_code == 0, r.output
    body = json.loads(r.output)
    assert set(body) == {"data"}
    assert 1 <= len(body["data"]) <= 2
    for item in body["data"]:
        assert set(item) == {"id", "content", "score", "created_at"}
        assert "Lisbon" in body["data"][0]["content"]


def test_rich_output_shows_a_panel_per_block(filled):
    r = filled("search", "Lisbon", "--user", "alice", "--mode", "bm25", "--retention-days", "off")
    assert r.exit_code == 0
    assert "#1" in r.output and "score" in r.output and "Lisbon" in r.output


def test_a_narrow_terminal_shows_each_blocks_whole_id(filled, monkeypatch):
    # the id is what `refind inspect turn` looks up: cut at the terminal's width, it finds nothing
    monkeypatch.setenv("COLUMNS", "80")
    args = ("search", "Lisbon hotel", "--user", "alice", "--mode", "bm25", "--top-k", "3", "--retention-days", "off")
    ids = [item["id"] for item in json.loads(filled(*args, "--json").output)["data"]]
    shown = filled(*args).output
    assert ids and all(len(i) > 12 for i in ids)
    folded = "".join(line.strip("│ ") for line in shown.splitlines())  # (a panel wraps a long line at its width)
    for turn_id in ids:
        assert f"id{turn_id}" in folded.replace(" ", "")
        assert filled("inspect", "turn", turn_id, "--retention-days", "off").exit_code == 0


def test_no_match_and_unknown_user_print_empty_data(filled):
    for user, query in [("alice", "zeppelin"), ("nobody", "Lisbon")]:
        r = filled("search", query, "--user", user, "--mode", "bm25", "--json", "--retention-days", "off")
        assert r.exit_code == 0
        assert json.loads(r.output) == {"data": []}


def test_no_match_says_when_the_user_has_nothing_to_match(filled, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    args = ("--mode", "bm25", "--retention-days", "off")
    miss = filled("search", "zeppelin", "--user", "alice", *args)
    assert miss.exit_code == 0 and miss.output.strip() == "no match for 'zeppelin'"  # alice exists: a plain miss
    typo = filled("search", "Lisbon", "--user", "Alice", *args)  # the user is "alice"
    assert typo.exit_code == 0
    assert typo.output.strip() == (
        "no match for 'Lisbon': user 'Alice' has no stored message (a user id is matched exactly, case and all; "
        "`refind inspect users` lists them)"
    )
    before = filled("search", "Lisbon", "--user", "alice", "--as-of", "2000-01-01", *args)  # nothing stored by then
    assert before.output.strip() == (
        "no match for 'Lisbon': user 'alice' has no message this search may see (each was stored after --as-of, or is "
        "older than the retention window)"
    )


def test_no_match_says_when_the_query_has_no_word_or_the_dates_left_out_undated_turns(cli, store, monkeypatch):
    from helpers import T0, add

    monkeypatch.setenv("COLUMNS", "200")
    add(store, "alice", "dated", ("user", "Caroline: the Lisbon hotel was lovely", T0))
    add(store, "alice", "undated", ("user", "Caroline: my zeppelin ride over Lake Constance"), ("user", "zeppelin!"))
    args = ("--user", "alice", "--mode", "bm25", "--retention-days", "off")
    words = cli("search", "the and of", *args)
    assert words.exit_code == 0 and words.output.strip() == (
        "no match for 'the and of': it has no word a search matches (words as common as 'the' or 'of' are not searched)"
    )
    dates = cli("search", "zeppelin", *args, "--date-from", "2023/01/01")
    assert dates.exit_code == 0 and dates.output.strip() == (
        "no match for 'zeppelin': 2 turns matching it have no said-at, and --date-from/--date-to leave out every "
        "turn without one"
    )
    plain = cli("search", "Constance", *args, "--date-to", "2020/01/01")  # one undated turn matches
    assert "1 turn matching it has no said-at" in plain.output
    miss = cli("search", "Lisbon", *args, "--date-to", "2020/01/01")  # the match is dated: a plain miss
    assert miss.output.strip() == "no match for 'Lisbon'"
    for query, extra in (("the and of", ()), ("zeppelin", ("--date-from", "2023/01/01"))):
        assert json.loads(cli("search", query, *args, *extra, "--json").output) == {"data": []}  # the contract


def test_mode_from_environment(filled, monkeypatch):
    monkeypatch.setenv("REFIND_MODE", "bm25")
    r = filled("search", "Lisbon", "--user", "alice", "--json", "--retention-days", "off")
    assert r.exit_code == 0 and json.loads(r.output)["data"]


def test_bad_date_is_an_error_not_an_unfiltered_search(filled):
    r = filled("search", "Lisbon", "--user", "alice", "--mode", "bm25", "--date-from", "2023/02/30")
    assert r.exit_code == 2
    assert "not a date" in r.output


def test_unknown_mode_is_refused(filled, monkeypatch):
    flag = filled("search", "Lisbon", "--user", "alice", "--mode", "vector")
    assert flag.exit_code == 2 and "--mode: must be agent or bm25, got 'vector'" in flag.output
    monkeypatch.setenv("REFIND_MODE", "vector")  # said as what set it: the variable, not a flag never given
    variable = filled("search", "Lisbon", "--user", "alice")
    assert variable.exit_code == 2 and "REFIND_MODE: must be agent or bm25, got 'vector'" in variable.output


def test_a_missing_database_is_an_error_and_is_not_created(runner, tmp_path):
    from refind_cli.cli import app

    missing = tmp_path / "typo.db"
    for args in (
        ["search", "Lisbon", "--user", "alice", "--mode", "bm25", "--json", "--db", str(missing)],
        [
            "search",
            "Lisbon",
            "--user",
            "alice",
            "--mode",
            "agent",
            "--model",
            "openai/x",
            "--api-base",
            "http://127.0.0.1:9/v1",
            "--db",
            str(missing),
        ],
        ["inspect", "searches", "--db", str(missing)],
        ["inspect", "search", "f00", "--db", str(missing)],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 4, (args, r.output)
        assert "no database at" in r.output and "Traceback" not in r.output
    assert not missing.exists()


def test_as_of_beyond_any_time_is_an_error_not_a_traceback(filled):
    r = filled("search", "Lisbon", "--user", "alice", "--mode", "bm25", "--as-of", "9" * 23)
    assert r.exit_code == 2, r.output
    assert "--as-of" in r.output and "at most" in r.output


def test_ids_that_look_like_rich_markup_are_shown_literally(cli):
    r = cli("add", "zebra crossing", "--user", "[/u]", "--session", "[/bold]")
    assert r.exit_code == 0 and "[/u]" in r.output and "[/bold]" in r.output
    r = cli("search", "zebra", "--user", "[/u]", "--mode", "bm25")
    assert r.exit_code == 0 and "session [/bold]" in r.output


@pytest.mark.parametrize("days", ["inf", "1e12", "nan", "0"])
def test_retention_out_of_range_is_an_error_not_a_traceback(filled, days):
    for args in (["search", "Lisbon", "--user", "alice", "--mode", "bm25"], ["expire", "--dry-run"]):
        r = filled(*args, "--retention-days", days)
        assert r.exit_code == 2, (args, r.output)  # invalid input
        assert "error: --retention-days:" in r.output and "day" in r.output


def _views_of_one_message(cli, user: str, session: str, request: str) -> list[list[str]]:
    """One message stored under these ids (through a replay line, as the server's callers choose them), and the
    commands that show the ids back."""
    add = {
        "request_id": request,
        "user_id": user,
        "session_id": session,
        "messages": [{"role": "user", "content": "zebra"}],
    }
    assert cli("add", "--file", "-", input=json.dumps(add) + "\n").exit_code == 0
    return [
        ["search", "zebra", "--user", user, "--mode", "bm25"],
        ["inspect", "users"],
        ["inspect", "user", user],
        ["inspect", "session", user, session],
        ["inspect", "events", "--user", user],
    ]


def test_terminal_control_sequences_in_ids_are_shown_escaped(cli):
    # user, session and request ids are the server's callers' to choose: every table and title shows them escaped
    user, session, request = "u\x1b]0;pwned\x07", "s\x1b[2J", "r\x9b31m"
    for args in (
        *_views_of_one_message(cli, user, session, request),
        ["forget", "--user", user, "--request-id", request, "--yes"],
        ["inspect", "tombstones"],
        ["add", "quagga", "--user", user, "--session", session, "--request-id", request + "2"],
    ):
        r = cli(*args)
        assert r.exit_code == 0, (args, r.output)
        assert "\x1b" not in r.output and "\x9b" not in r.output and "\x07" not in r.output, args
        assert "\\x1b" in r.output or "\\x9b" in r.output, args
    # and an error that quotes one (here --output's suggested file name)
    r = cli("export", "--user", user, "--output", ".")
    assert r.exit_code == 2 and "is a folder" in r.output
    assert "\x1b" not in r.output and "\x07" not in r.output and "\\x1b]0;pwned\\x07" in r.output


def test_a_line_break_in_an_id_never_draws_a_line_of_its_own(cli):
    # a session "a\nb" (stored through MCP's remember) showed as two rows, "a" and an empty "b", and broke the
    # header of `inspect session` across lines (found by a probe)
    user, session = "u\nv", "a\nb\tc"
    for args in _views_of_one_message(cli, user, session, "r\n1"):
        r = cli(*args)
        assert r.exit_code == 0, (args, r.output)
        assert "a\\x0ab\\x09c" in r.output or "u\\x0av" in r.output, (args, r.output)
        lines = r.output.splitlines()
        assert not any(line.strip(" │┃") in ("b", "v", "b\\x09c") for line in lines), (args, r.output)


def test_terminal_control_sequences_in_stored_text_are_shown_escaped(cli):
    from rich.console import Console

    from refind_cli.cli import render_trace
    from refind_cli.trace import Event

    evil = "zebra \x1b]0;pwned\x07 and \x1b[31mred\x1b[0m \x9b2J end"
    assert cli("add", evil, "--user", "u", "--session", "s").exit_code == 0
    for args in (["search", "zebra", "--user", "u", "--mode", "bm25"], ["inspect", "session", "u", "s"]):
        r = cli(*args)
        assert r.exit_code == 0
        assert "\x1b" not in r.output and "\x9b" not in r.output and "\x07" not in r.output, args
        assert "\\x1b]0;pwned\\x07" in r.output
    r = cli("search", "zebra", "--user", "u", "--mode", "bm25", "--json")
    assert evil in json.loads(r.output)["data"][0]["content"]  # the data itself is untouched
    out = Console(width=200, record=True, file=io.StringIO())
    for ev in (
        Event("start", 0, 0.0, {"question": evil}),
        Event("action", 1, 0.0, {"thought": evil, "name": "x", "ignored": ["x\x1b[2J\x1b[31m"]}),  # (the model's keys)
        Event("search", 1, 0.0, {"keywords": "zebra", "hits": [{"n": 1, "content": evil, "session_id": "s"}]}),
        Event("correction", 1, 0.0, {"reason": "bad", "reply": evil}),
    ):
        out.print(render_trace.event(ev))
    shown = out.export_text()
    assert "\x1b" not in shown and "\\x1b[31mred" in shown


def test_characters_that_reorder_text_on_screen_and_a_lone_carriage_return_are_shown_escaped(cli):
    # a probe of round 17: U+202E (right-to-left override) and the isolates reached the terminal raw, in ids too, and a
    # table dropped a stored lone "\r"; Persian's zero-width non-joiner and an emoji's joiner spell words: kept
    text = "zebra invoice \u202eFDP.exe\u202c \u2066x\u2069 A\rB \u2028 نامه\u200cها 👩\u200d💻"
    assert cli("add", text, "--user", "u", "--session", "s\u202e1").exit_code == 0
    for args in (["search", "zebra", "--user", "u", "--mode", "bm25"], ["inspect", "session", "u", "s\u202e1"]):
        r = cli(*args)
        assert r.exit_code == 0, (args, r.output)
        for raw in ("\u202e", "\u2066", "\u2069", "\u2028", "\r"):
            assert raw not in r.output, (args, raw)
        assert "\\u202eFDP.exe" in r.output and "A\\x0dB" in r.output, args
        assert "\u200c" in r.output and "\u200d" in r.output, args
    r = cli("inspect", "events", "--user", "u")
    assert "\u202e" not in r.output and "s\\u202e1" in r.output


def test_ids_that_differ_by_white_space_at_an_end_are_shown_apart(cli):
    # "alice " and "alice" are two users (ids are exact): a table showed both rows alike (a probe)
    for user in ("bob", "bob ", "\u3000bob"):
        assert cli("add", "quagga", "--user", user, "--session", "s").exit_code == 0
    r = cli("inspect", "users")
    assert r.exit_code == 0, r.output
    rows = [line.split("│")[1].strip() for line in r.output.splitlines() if "quagga" not in line and "│" in line]
    assert {"bob", "bob\\x20", "\\u3000bob"} <= set(rows), rows
    r = cli("inspect", "searches", "--user", "a\nb")  # (the one line that showed an id unescaped)
    assert r.exit_code == 0 and r.output == "no stored agent searches for user a\\x0ab\n", r.output
