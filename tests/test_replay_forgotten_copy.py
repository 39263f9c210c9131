"""A shorter, older copy of a log (a backup restored) replayed after a forget: its last group is the start of a group
forgotten since, under an id no tombstone names. It is recognised by the tombstone's keyed hashes of the messages
(role, text and said-at; text alone in a tombstone written before m012) and not stored (replay._copy_of_forgotten)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from refind_cli import migrations
from refind_cli.store import Store

SECRET = "my secret pineapple code is 4417"
T0 = 1_700_000_000_000


def _line(content: str, at: int | None, role: str = "user", session: str = "s1", **extra: object) -> str:
    line = {"user_id": "alice", "session_id": session, "role": role, "content": content, **extra}
    if at is not None:
        line["timestamp"] = at
    return json.dumps(line)


def _write(path: Path, *lines: str) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


FULL = [_line("hello there", T0), _line(SECRET, T0 + 1000, "assistant"), _line("thanks, noted", T0 + 2000)]


def _contents(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT content FROM messages ORDER BY seq")]
    finally:
        conn.close()


@pytest.mark.parametrize("scope", [["--user", "alice"], ["--user", "alice", "--session", "s1"]])
def test_an_older_copy_of_a_forgotten_log_brings_nothing_back(cli, db_path, tmp_path, scope) -> None:
    full = _write(tmp_path / "full.jsonl", *FULL)
    older = _write(tmp_path / "older.jsonl", *FULL[:2])
    assert cli("add", "--file", full).exit_code == 0
    assert cli("forget", *scope, "--yes").exit_code == 0
    result = cli("add", "--file", older, "--json")
    assert result.exit_code == 6, result.output  # (was 0: both messages stored again, the secret searchable)
    summary = json.loads(result.output)
    with Store(db_path) as store:
        (stone,) = store.conn.execute("SELECT id, at FROM tombstones").fetchall()
    from refind_cli.store import iso_time

    assert summary["problems"] == [
        f"{older}:1-2: these messages are a copy of messages of user 'alice' that were forgotten (tombstone "
        f"{stone[0]}, {iso_time(stone[1])}): not stored again (an older copy of the log, cut inside what was "
        "forgotten); to store them as new messages said again, give their lines a request_id"
    ]
    assert (summary["requests_added"], summary["forgotten"]) == (0, 1)
    assert _contents(db_path) == []
    assert SECRET not in cli("search", "pineapple code", "--user", "alice", "--mode", "bm25").output
    # --strict says the same before storing anything
    strict = cli("add", "--file", older, "--strict", "--json")
    assert strict.exit_code == 6, strict.output
    assert json.loads(strict.output)["problems"][0] == summary["problems"][0]


def test_one_line_cut_from_the_middle_is_a_copy_too_and_a_request_id_stores_it(cli, db_path, tmp_path) -> None:
    assert cli("add", "--file", _write(tmp_path / "full.jsonl", *FULL)).exit_code == 0
    assert cli("forget", "--user", "alice", "--yes").exit_code == 0
    middle = _write(tmp_path / "middle.jsonl", FULL[1])  # said hashes: one message is matched with its said-at
    result = cli("add", "--file", middle, "--json")
    assert result.exit_code == 6, result.output
    assert json.loads(result.output)["problems"][0].startswith(f"{middle}:1: these messages are a copy of messages")
    named = _write(tmp_path / "named.jsonl", _line(SECRET, T0 + 1000, "assistant", request_id="again"))
    assert cli("add", "--file", named).exit_code == 0  # deliberately, under a request id
    assert _contents(db_path) == [SECRET]


def test_the_same_words_said_again_are_new_messages(cli, db_path, tmp_path) -> None:
    assert cli("add", "--file", _write(tmp_path / "full.jsonl", *FULL)).exit_code == 0
    # a session the tombstone does not cover (a session's forget): stored
    assert cli("forget", "--user", "alice", "--session", "s1", "--yes").exit_code == 0
    other = [_line("hello there", T0, session="s2"), _line(SECRET, T0 + 1000, "assistant", session="s2")]
    later = [_line(line["content"], line["timestamp"] + 86_400_000, line["role"]) for line in map(json.loads, FULL)]
    untimed = [_line("hello there", None), _line(SECRET, None, "assistant")]  # no said-at to tell them apart
    for name, lines in (("other", other), ("later", later[:2]), ("untimed", untimed)):
        result = cli("add", "--file", _write(tmp_path / f"{name}.jsonl", *lines), "--json")
        assert result.exit_code == 0, (name, result.output)
        assert json.loads(result.output)["messages_added"] == 2


def _as_written_before_m012(db: Path) -> None:
    conn = sqlite3.connect(db)
    with conn:
        migrations.grant(conn)
        conn.execute("UPDATE tombstones SET said_hashes = '[]'")
        migrations.revoke(conn)
    conn.close()


def test_a_tombstone_written_before_m012_matches_two_messages_or_more_by_text(cli, db_path, tmp_path) -> None:
    assert cli("add", "--file", _write(tmp_path / "full.jsonl", *FULL)).exit_code == 0
    assert cli("forget", "--user", "alice", "--yes").exit_code == 0
    _as_written_before_m012(db_path)
    older = cli("add", "--file", _write(tmp_path / "older.jsonl", *FULL[:2]), "--json")
    assert older.exit_code == 6, older.output
    assert "are a copy of messages of user 'alice'" in json.loads(older.output)["problems"][0]
    # one message alone is not matched by its text (an "ok" is said again): stored
    one = cli("add", "--file", _write(tmp_path / "one.jsonl", FULL[2]), "--json")
    assert one.exit_code == 0, one.output
    assert _contents(db_path) == ["thanks, noted"]


def test_m012_adds_said_hashes_to_the_tombstones_of_a_database_written_before(db_path, monkeypatch) -> None:
    with monkeypatch.context() as old:
        old.setattr(migrations, "MIGRATIONS", [m for m in migrations.MIGRATIONS if m[0] < "m012"])
        with Store(db_path, retention_days=None) as store:
            assert "said_hashes" not in {r[1] for r in store.conn.execute("PRAGMA table_info(tombstones)")}
    with Store(db_path, retention_days=None) as store:
        from refind_cli import lifecycle

        assert "said_hashes" in {r[1] for r in store.conn.execute("PRAGMA table_info(tombstones)")}
        assert lifecycle.tombstones(store) == []


def test_an_older_copy_cut_inside_a_forgotten_chained_request_brings_nothing_back(cli, db_path, tmp_path) -> None:
    # the log grew twice (its second part stored as a chained request), then the session was forgotten; a copy cut
    # inside the chained part: its first group is the forgotten prefix (known by its id), what follows it — the start
    # of the forgotten chained request, under an id no tombstone names — was stored again (the last probe's gap)
    lines = [_line(f"line {i} of the plan", T0 + i * 1000) for i in range(2)]
    lines += [_line(SECRET, T0 + 2000, "assistant"), _line("one more", T0 + 3000), _line("and the last", T0 + 4000)]
    assert cli("add", "--file", _write(tmp_path / "a.jsonl", *lines[:2])).exit_code == 0
    assert cli("add", "--file", _write(tmp_path / "b.jsonl", *lines)).exit_code == 0
    assert len(_contents(db_path)) == 5
    assert cli("forget", "--user", "alice", "--session", "s1", "--yes").exit_code == 0
    result = cli("add", "--file", _write(tmp_path / "c.jsonl", *lines[:4]), "--json")
    assert result.exit_code == 6, result.output
    assert _contents(db_path) == []  # (was: the secret and "one more" stored again)
    new = [_line(SECRET, T0 + 2500, "assistant")]  # the same words said at another time: new, stored
    assert cli("add", "--file", _write(tmp_path / "d.jsonl", *lines[:2], *new)).exit_code == 6
    assert _contents(db_path) == [SECRET]


def test_a_users_tombstone_refuses_a_copy_only_in_the_session_it_was_forgotten_from(cli, db_path, tmp_path) -> None:
    # a review of round 25: after `forget --user`, a new "ok" said at the same millisecond in another session was
    # refused (exit 6) — the said hashes named no session. m013 keeps each forgotten message's session, sealed.
    ok = {"content": "ok", "at": T0}
    assert cli("add", "--file", _write(tmp_path / "s1.jsonl", _line(session="s1", **ok))).exit_code == 0
    assert cli("forget", "--user", "alice", "--yes").exit_code == 0
    other = cli("add", "--file", _write(tmp_path / "s2.jsonl", _line(session="s2", **ok)), "--json")
    assert other.exit_code == 0, other.output  # (was 6: "these messages are a copy of messages … forgotten")
    assert (json.loads(other.output)["messages_added"], _contents(db_path)) == (1, ["ok"])
    same = cli("add", "--file", _write(tmp_path / "again.jsonl", _line(session="s1", **ok)), "--json")
    assert same.exit_code == 6, same.output  # its own session: a copy of what was forgotten, as before
    assert json.loads(same.output)["forgotten"] == 1
    with Store(db_path) as store:
        (sessions,) = store.conn.execute("SELECT said_sessions FROM tombstones").fetchone()
        from refind_cli import sealed

        assert json.loads(sessions) == [sealed.seal(sealed.key(store.conn), "s1")]  # never the id itself


def test_a_users_tombstone_written_before_m013_still_refuses_a_copy_in_any_session(cli, db_path, tmp_path) -> None:
    ok = {"content": "ok", "at": T0}
    assert cli("add", "--file", _write(tmp_path / "s1.jsonl", _line(session="s1", **ok))).exit_code == 0
    assert cli("forget", "--user", "alice", "--yes").exit_code == 0
    conn = sqlite3.connect(db_path)
    with conn:
        migrations.grant(conn)
        conn.execute("UPDATE tombstones SET said_sessions = '[]'")  # as a refind before m013 writes it
        migrations.revoke(conn)
    conn.close()
    result = cli("add", "--file", _write(tmp_path / "s2.jsonl", _line(session="s2", **ok)))
    assert result.exit_code == 6, result.output  # no session kept: every session the tombstone covers, as before
    assert _contents(db_path) == []


def test_a_reordered_copy_of_forgotten_lines_brings_nothing_back(cli, db_path, tmp_path) -> None:
    # a review of round 25: lines b, a of a forgotten a, b, c were stored (matched as a run, not as messages)
    assert cli("add", "--file", _write(tmp_path / "full.jsonl", *FULL)).exit_code == 0
    assert cli("forget", "--user", "alice", "--yes").exit_code == 0
    reordered = _write(tmp_path / "reordered.jsonl", FULL[2], FULL[0], FULL[1])
    result = cli("add", "--file", reordered, "--json")
    assert result.exit_code == 6, result.output
    assert json.loads(result.output)["problems"][0].startswith(f"{reordered}:1-3: these messages are a copy of")
    assert _contents(db_path) == []
    # one of them said at another time is new: stored, the forgotten one beside it not (round 27: it was stored
    # with it, the group stored whole)
    moved = _line("thanks, noted", T0 + 5000)
    assert cli("add", "--file", _write(tmp_path / "moved.jsonl", FULL[1], moved)).exit_code == 6
    assert _contents(db_path) == ["thanks, noted"]


def test_a_copy_of_messages_forgotten_by_two_requests_is_refused(cli, db_path, tmp_path) -> None:
    lines = [_line(SECRET, T0, request_id="r1"), _line("and the pin", T0 + 1000, request_id="r2")]
    assert cli("add", "--file", _write(tmp_path / "full.jsonl", *lines)).exit_code == 0
    for rid in ("r1", "r2"):
        assert cli("forget", "--user", "alice", "--request-id", rid, "--yes").exit_code == 0
    copy = _write(tmp_path / "copy.jsonl", _line("and the pin", T0 + 1000), _line(SECRET, T0))
    result = cli("add", "--file", copy, "--json")
    assert result.exit_code == 6, result.output
    assert "(tombstone 2, " in json.loads(result.output)["problems"][0]  # the newest that holds one of them
    assert _contents(db_path) == []


def test_m013_adds_said_sessions_to_the_tombstones_of_a_database_written_before(db_path, monkeypatch) -> None:
    with monkeypatch.context() as old:
        old.setattr(migrations, "MIGRATIONS", [m for m in migrations.MIGRATIONS if m[0] < "m013"])
        with Store(db_path, retention_days=None) as store:
            assert "said_sessions" not in {r[1] for r in store.conn.execute("PRAGMA table_info(tombstones)")}
    with Store(db_path, retention_days=None) as store:
        assert "said_sessions" in {r[1] for r in store.conn.execute("PRAGMA table_info(tombstones)")}


def test_a_group_mixing_forgotten_messages_with_new_ones_stores_only_the_new(cli, db_path, tmp_path) -> None:
    # round 27's fuzz: a group of lines without request_id that holds forgotten messages beside new ones was stored
    # whole (only a group the tombstones held all of was refused), so the forgotten text came back, exit 0
    assert cli("add", "--file", _write(tmp_path / "full.jsonl", *FULL)).exit_code == 0
    assert cli("forget", "--user", "alice", "--yes").exit_code == 0
    new = [_line("a new question", T0 + 5000), _line("a new answer", T0 + 6000, "assistant")]
    mixed = _write(tmp_path / "mixed.jsonl", new[0], FULL[1], new[1], FULL[2])
    result = cli("add", "--file", mixed, "--json")
    assert result.exit_code == 6, result.output  # (was 0: the secret stored again)
    summary = json.loads(result.output)
    with Store(db_path) as store:
        (stone,) = store.conn.execute("SELECT id, at FROM tombstones").fetchall()
    from refind_cli.store import iso_time

    copy = (
        f"these messages are a copy of messages of user 'alice' that were forgotten (tombstone {stone[0]}, "
        f"{iso_time(stone[1])}): not stored again (an older copy of the log, cut inside what was forgotten); to store "
        "them as new messages said again, give their lines a request_id"
    )
    assert summary["problems"] == [f"{mixed}:2: {copy}", f"{mixed}:4: {copy}"]
    assert (summary["requests_added"], summary["messages_added"], summary["forgotten"]) == (1, 2, 2)
    assert _contents(db_path) == ["a new question", "a new answer"]
    assert SECRET not in cli("search", "pineapple code", "--user", "alice", "--mode", "bm25").output
    # the same file again: nothing stored twice, the same refusals
    again = cli("add", "--file", mixed, "--json")
    assert again.exit_code == 6, again.output
    assert (json.loads(again.output)["problems"], json.loads(again.output)["duplicates"]) == (summary["problems"], 1)
    assert _contents(db_path) == ["a new question", "a new answer"]
    # --strict says the same before storing anything
    strict = cli("add", "--file", mixed, "--strict", "--json")
    assert strict.exit_code == 6, strict.output
    assert json.loads(strict.output)["problems"][:2] == summary["problems"]
    # the forgotten words said again at another time are a new message: stored with the group
    later = _line(SECRET, T0 + 7000, "assistant")
    result = cli("add", "--file", _write(tmp_path / "later.jsonl", new[0], FULL[1], new[1], later), "--json")
    assert result.exit_code == 6, result.output
    assert _contents(db_path)[-3:] == ["a new question", "a new answer", SECRET]


def test_what_follows_a_grown_groups_known_part_leaves_forgotten_messages_out(cli, db_path, tmp_path) -> None:
    # the grown-log path: the group's first two lines are stored (its earlier group); what follows them mixes a
    # message forgotten from the session (stored under a request_id, then forgotten) with a new one
    head = [_line("line 0 of the plan", T0), _line("line 1 of the plan", T0 + 1000)]
    assert cli("add", "--file", _write(tmp_path / "a.jsonl", *head)).exit_code == 0
    secret = _line(SECRET, T0 + 2000, "assistant", request_id="r1")
    assert cli("add", "--file", _write(tmp_path / "r1.jsonl", secret)).exit_code == 0
    assert cli("forget", "--user", "alice", "--request-id", "r1", "--yes").exit_code == 0
    grown = _write(tmp_path / "b.jsonl", *head, _line(SECRET, T0 + 2000, "assistant"), _line("one more", T0 + 3000))
    result = cli("add", "--file", grown, "--json")
    assert result.exit_code == 6, result.output  # (was 0: the secret stored again with "one more")
    summary = json.loads(result.output)
    assert summary["problems"][0].startswith(f"{grown}:3: these messages are a copy of messages of user 'alice'")
    assert (summary["messages_added"], summary["grown"], summary["forgotten"]) == (1, 1, 1)
    assert _contents(db_path) == ["line 0 of the plan", "line 1 of the plan", "one more"]
    again = cli("add", "--file", grown, "--json")
    assert again.exit_code == 6, again.output
    assert json.loads(again.output)["messages_added"] == 0
    assert _contents(db_path) == ["line 0 of the plan", "line 1 of the plan", "one more"]


def test_an_older_copy_of_a_group_stored_without_its_forgotten_messages_stores_nothing(cli, db_path, tmp_path) -> None:
    # the fuzz's shape: a log's group stored without its forgotten message; an older copy of the log, cut before its
    # last line, is the rest of that group with the forgotten message — none of its other messages is new
    lines = [_line("a", T0), _line("b", T0 + 1000), _line(SECRET, T0 + 2000, "assistant"), _line("c", T0 + 3000)]
    secret = _line(SECRET, T0 + 2000, "assistant", request_id="r1")
    assert cli("add", "--file", _write(tmp_path / "r1.jsonl", secret)).exit_code == 0
    assert cli("forget", "--user", "alice", "--session", "s1", "--yes").exit_code == 0
    assert cli("add", "--file", _write(tmp_path / "log.jsonl", *lines)).exit_code == 6
    assert _contents(db_path) == ["a", "b", "c"]
    result = cli("add", "--file", _write(tmp_path / "older.jsonl", *lines[:3]), "--json")
    assert result.exit_code == 6, result.output  # (stored "a" and "b" again, as a group of their own)
    summary = json.loads(result.output)
    assert (summary["messages_added"], summary["duplicates"], summary["forgotten"]) == (0, 1, 1)
    assert _contents(db_path) == ["a", "b", "c"]


def test_a_tombstone_written_before_m012_leaves_no_message_of_a_mixed_group_out(cli, db_path, tmp_path) -> None:
    # text hashes alone match a whole group of two messages or more, never some of a group's messages: stored whole
    assert cli("add", "--file", _write(tmp_path / "full.jsonl", *FULL)).exit_code == 0
    assert cli("forget", "--user", "alice", "--yes").exit_code == 0
    _as_written_before_m012(db_path)
    mixed = _write(tmp_path / "mixed.jsonl", *FULL[:2], _line("a new question", T0 + 5000))
    result = cli("add", "--file", mixed, "--json")
    assert result.exit_code == 0, result.output
    assert _contents(db_path) == ["hello there", SECRET, "a new question"]
