"""A new user's first hour, mistakes included: each message says what is wrong and what to do, through the real CLI
(Typer's CliRunner) on real SQLite files."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def error_lines(output: str) -> list[str]:
    assert "Traceback" not in output
    return [line for line in output.splitlines() if line.startswith(("error:", "warning:", "Error:"))]


def test_the_root_helps_example_finds_what_it_asks(runner, db_path, monkeypatch):
    """`refind --help` replays the fixture and searches it: the search must be about that fixture (it asked "where
    did Caroline go hiking" of user alice, who never mentions Caroline or hiking there; the top hit was a Lisbon
    hotel)."""
    from refind_cli.cli import app

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("REFIND_DB", str(db_path))
    lines = [line.strip() for line in runner.invoke(app, ["--help"]).output.splitlines()]
    add = next(shlex.split(line) for line in lines if line.startswith("refind add "))
    search = next(shlex.split(line) for line in lines if line.startswith("refind search "))
    assert runner.invoke(app, [*add[1:], "--quiet"]).exit_code == 0
    result = runner.invoke(app, [*search[1:], "--json", "--top-k", "1"])
    assert result.exit_code == 0, result.output
    top = json.loads(result.output)["data"][0]["content"].lower()
    asked = {word.strip("?").lower() for word in search[2].split()} - {"where", "was", "did", "the", "go"}
    assert asked and all(word in top for word in asked), (asked, top)


def test_a_replay_log_given_as_db_is_named_as_such_and_left_alone(cli, tmp_path):
    log = tmp_path / "chat.jsonl"
    log.write_text('{"user_id": "u", "session_id": "s", "role": "user", "content": "hi"}\n')
    before = log.read_bytes()
    said = (
        f"error: cannot open database {log}: damaged or not a SQLite database (file is not a database); it holds JSON "
        f"text, not a database: a JSONL log is replayed with `refind add --file {log}`, and --db names the database "
        "to store it in"
    )
    for args in (("search", "hi", "--user", "u", "--mode", "bm25"), ("add", "hi", "--user", "u", "--session", "s")):
        result = cli(*args, "--db", str(log))
        assert result.exit_code == 10, result.output
        assert error_lines(result.output) == [said]
    assert log.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.jsonl"]  # no -wal, -shm, nor a database made


def test_text_that_is_not_json_keeps_the_damaged_database_advice(cli, tmp_path):
    notes = tmp_path / "notes.db"
    notes.write_text("these are not the bytes of a database\n")
    result = cli("search", "hi", "--user", "u", "--mode", "bm25", "--db", str(notes))
    assert result.exit_code == 10
    assert "restore a copy made by `refind backup`" in error_lines(result.output)[0]


def test_a_file_name_given_as_the_message_points_at_the_file_flag(cli, db_path, tmp_path):
    log = tmp_path / "chat.jsonl"
    log.write_text('{"user_id": "u", "session_id": "s", "role": "user", "content": "hi"}\n')
    refused = cli("add", str(log))
    assert refused.exit_code == 2
    assert error_lines(refused.output) == [
        f"error: one message needs --user and --session; {log} is a file: to replay its lines give --file {log}"
    ]
    assert not db_path.exists()
    stored = cli("add", str(log), "--user", "u", "--session", "s")  # a message may be a file's name: stored, said
    assert stored.exit_code == 0, stored.output
    rid = stored.output.split("request ")[1].split(" ")[0]
    assert error_lines(stored.output) == [
        f"warning: the message stored is the name of a file ({log}), not its lines; to replay the file give --file "
        f"{log} (`refind forget --user u --request-id {rid} --yes` removes this message)"
    ]
    plain = cli("add", "no file has this name", "--user", "u", "--session", "s")
    assert plain.exit_code == 0 and error_lines(plain.output) == []


@pytest.mark.parametrize(
    ("args", "name", "start"),
    [
        (("search", "-5 degrees", "--user", "u", "--mode", "bm25"), "QUERY", "-5"),
        (("add", "-1 for that", "--user", "u", "--session", "s"), "TEXT", "-1"),
    ],
)
def test_a_text_that_begins_with_a_dash_is_told_to_follow_double_dash(cli, db_path, args, name, start):
    assert cli("add", "--user", "u", "--session", "s0", "--", "-5 degrees and -1 for that").exit_code == 0
    result = cli(*args)
    assert result.exit_code == 2
    assert error_lines(result.output) == [
        f"Error: No such option: {start} (if it begins the {name}, put the {name} after '--', which ends the options: "
        f"refind {args[0]} [OPTIONS] -- '{start}…')"
    ]
    done = cli(args[0], *args[2:], "--", args[1])  # as the hint says
    assert done.exit_code == 0, done.output
    assert args[1] in cli("export", "--user", "u").output


def test_an_option_typo_keeps_clicks_suggestion_alone(cli):
    result = cli("search", "hi", "--usr", "u")
    assert result.exit_code == 2
    assert error_lines(result.output) == ["Error: No such option: --usr (Possible options: --user)"]


def test_a_misspelt_db_names_the_database_beside_it(runner, tmp_path, monkeypatch):
    from refind_cli.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REFIND_DB", raising=False)
    assert runner.invoke(app, ["add", "hi", "--user", "u", "--session", "s", "--db", "demo.db"]).exit_code == 0
    (tmp_path / "demo.jsonl").write_text("{}\n")  # not a database: never suggested
    typo = runner.invoke(app, ["search", "hi", "--user", "u", "--mode", "bm25", "--db", "demo.bd"])
    assert typo.exit_code == 4
    assert error_lines(typo.output) == [
        "error: no database at demo.bd (give --db PATH or set REFIND_DB); did you mean demo.db?"
    ]
    left_out = runner.invoke(app, ["search", "hi", "--user", "u", "--mode", "bm25"])
    assert left_out.exit_code == 4
    assert error_lines(left_out.output) == [
        "error: no database at refind.db (give --db PATH or set REFIND_DB); SQLite databases in this folder: demo.db"
    ]
    other = runner.invoke(app, ["search", "hi", "--user", "u", "--mode", "bm25", "--db", "work.db"])
    assert error_lines(other.output) == ["error: no database at work.db (give --db PATH or set REFIND_DB)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.db", "demo.jsonl"]


def test_a_missing_database_that_refind_db_named_says_so(runner, tmp_path, monkeypatch):
    # "no database at X (give --db PATH …)" read as if the user had typed X, when a shell profile's REFIND_DB had
    from refind_cli.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REFIND_DB", "old.db")
    for argv in (["search", "hi", "--user", "u", "--mode", "bm25"], ["inspect", "users"], ["export", "--user", "u"]):
        r = runner.invoke(app, argv)
        assert r.exit_code == 4, argv
        assert error_lines(r.output) == [
            "error: no database at old.db (REFIND_DB names it: give --db PATH or set REFIND_DB to another)"
        ], argv
    # the flag named it (the variable set but overridden, or unset) — in the same process, after those
    flagged = runner.invoke(app, ["inspect", "--db", "old2.db", "users"])
    assert error_lines(flagged.output) == ["error: no database at old2.db (give --db PATH or set REFIND_DB)"]
    monkeypatch.delenv("REFIND_DB")
    same = runner.invoke(app, ["search", "hi", "--user", "u", "--mode", "bm25", "--db", "old.db"])
    assert error_lines(same.output) == ["error: no database at old.db (give --db PATH or set REFIND_DB)"]
    assert list(tmp_path.iterdir()) == []


def test_a_missing_session_or_user_says_where_they_are_listed(cli):
    assert cli("add", "hi", "--user", "alice smith", "--session", "s1").exit_code == 0
    cases = {
        ("inspect", "session", "alice smith", "s2"): "error: no visible messages in session 's2' of user 'alice smith' "
        "(`refind inspect user 'alice smith'` lists its sessions)",
        ("export", "--user", "alice smith", "--session", "s2"): "error: nothing to export: no visible messages for "
        "session 's2' of user 'alice smith' (`refind inspect user 'alice smith'` lists its sessions)",
        ("export", "--user", "bob"): "error: nothing to export: no visible messages for user 'bob' (`refind inspect "
        "users` lists the users)",
    }
    for args, said in cases.items():
        result = cli(*args)
        assert result.exit_code == 4, args
        assert error_lines(result.output) == [said]


def test_a_backup_into_a_folder_names_a_file_in_it(cli, tmp_path):
    assert cli("add", "hi", "--user", "u", "--session", "s").exit_code == 0
    folder = tmp_path / "backups"
    folder.mkdir()
    result = cli("backup", str(folder))
    assert result.exit_code == 1
    assert error_lines(result.output) == [
        f"error: {folder} is a folder; give the path of a new file in it, e.g. {folder}/backup-refind.db (a backup "
        "never overwrites)"
    ]
    assert list(folder.iterdir()) == []
    done = cli("backup", str(folder / "backup-refind.db"))  # as it says
    assert done.exit_code == 0, done.output


EXPECTED = "expected YYYY/MM/DD, YYYY-MM-DD, YYYYMMDD, an ISO 8601 time such as 2023-05-08T13:56, or Unix ms"


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("2023-13-01", " (there is no month 13)"),
        ("2023/02/30", " (February 2023 has 28 days)"),
        ("20230229", " (February 2023 has 28 days)"),
        ("2023-04-31T10:00", " (April 2023 has 30 days)"),
        ("08/05/2023", " (day and month in either order; write the year first: 2023-08-05 or 2023-05-08)"),
        ("May 8 2023", ""),  # (no shape refind reads: the shapes listed are the answer)
    ],
)
def test_a_date_that_does_not_exist_says_why(cli, given, why):
    assert cli("add", "hi", "--user", "u", "--session", "s", "--at", "2023-05-08").exit_code == 0
    result = cli("search", "hi", "--user", "u", "--mode", "bm25", "--date-from", given)
    assert result.exit_code == 2
    assert error_lines(result.output) == [f"error: --date-from: date {given!r} is not a date{why}: {EXPECTED}"]


def test_a_said_at_that_does_not_exist_says_why(cli, db_path):
    result = cli("add", "hi", "--user", "u", "--session", "s", "--at", "2023-02-30")
    assert result.exit_code == 2
    assert error_lines(result.output) == [
        "error: --at: '2023-02-30' is not an ISO 8601 time (February 2023 has 28 days) such as 2023-05-08T13:56 or "
        "2023-05-08, nor Unix ms"
    ]
    assert not db_path.exists()


def test_a_named_pipe_beside_a_missing_database_is_not_opened(tmp_path):
    """The typo hint reads the first bytes of the files beside the path: a named pipe there must be passed by (its
    open waits for a writer: the command hung). A real process, so that a regression fails instead of hanging the
    suite."""
    import os
    import subprocess
    import sys

    os.mkfifo(tmp_path / "demo.db")  # the very name the typo is close to
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    done = subprocess.run(
        [sys.executable, "-m", "refind_cli", "search", "hi", "--user", "u", "--mode", "bm25", "--db", "demo.bd"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,  # (a guard against a hang, not a measurement)
    )
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip() == "error: no database at demo.bd (give --db PATH or set REFIND_DB)"
