"""A line an earlier replay refused inside a group of message lines without request_id — a timestamp an older refind
could not read (read now), or a line fixed since it was reported: that replay stored the group without it, so the
whole log replayed again forms a bigger group whose id (and its prefixes') no store knows. Its other messages are
stored already; only the lines the earlier replay lacked are stored, and a third replay stores nothing
(refind_cli/replay.py, _stored_apart). Round 30 found the hole: exit 0, every other line of the group stored twice.

"The older refind" is emulated by replaying the log without the line (what it stored), or by a line refused today
and fixed."""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers import DAY, Clock

from refind_cli.lifecycle import forget
from refind_cli.replay import GROUP_SIZE, replay
from refind_cli.store import Store

T0 = 1_699_999_999_000


def _line(i: int, *, session: str = "s1", at: int | str | None = "auto", content: str | None = None) -> dict:
    line = {"user_id": "u1", "session_id": session, "role": ("user", "assistant")[i % 2]}
    line["content"] = content if content is not None else f"line {i}"
    if at == "auto":
        line["timestamp"] = T0 + i * 1000
    elif at is not None:
        line["timestamp"] = at
    return line


def _write(path, lines: list[dict]) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _stored(db_path) -> list[str]:
    conn = sqlite3.connect(db_path)
    try:
        return sorted(r[0] for r in conn.execute("SELECT content FROM messages"))
    finally:
        conn.close()


def _counts(result) -> tuple[int, int, int]:
    summary = json.loads(result.output)
    return summary["requests_added"], summary["messages_added"], summary["duplicates"]


def test_a_line_an_older_refind_refused_inside_a_group_is_stored_alone(cli, db_path, tmp_path) -> None:
    # the round-30 reproduction: 3 lines, the middle one's timestamp written as PostgreSQL does (refused before)
    full = [_line(0), _line(1, at="2023-11-15 06:13:20.5+08"), _line(2)]
    old = _write(tmp_path / "old.jsonl", [full[0], full[2]])  # what the older refind stored of it
    log = _write(tmp_path / "log.jsonl", full)
    assert _counts(cli("add", "--file", old, "--json")) == (1, 2, 0)
    result = cli("add", "--file", log, "--json")
    assert result.exit_code == 0, result.output
    assert _counts(result) == (1, 1, 2)  # the new line alone; lines 1 and 3 known (two runs of stored lines)
    assert _stored(db_path) == ["line 0", "line 1", "line 2"]  # (main: 5 messages, lines 0 and 2 twice)
    again = cli("add", "--file", log, "--json")
    assert again.exit_code == 0, again.output
    assert _counts(again)[:2] == (0, 0)
    assert _stored(db_path) == ["line 0", "line 1", "line 2"]


def test_a_line_fixed_after_it_was_reported_is_stored_alone(cli, db_path, tmp_path) -> None:
    # the same without emulation: a line refused today (an unknown role), fixed, the whole file replayed again
    bad = [_line(0), _line(1) | {"role": "bot"}, _line(2), _line(3)]
    first = cli("add", "--file", _write(tmp_path / "log.jsonl", bad), "--json")
    assert first.exit_code == 2, first.output
    fixed = _write(tmp_path / "log.jsonl", [_line(i) for i in range(4)])
    result = cli("add", "--file", fixed, "--json")
    assert result.exit_code == 0, result.output
    assert _counts(result)[:2] == (1, 1)
    assert _stored(db_path) == [f"line {i}" for i in range(4)]
    assert _counts(cli("add", "--file", fixed, "--json"))[:2] == (0, 0)


@pytest.mark.parametrize("refused", [0, 4, GROUP_SIZE - 1, GROUP_SIZE, 2 * GROUP_SIZE + 3])
def test_the_groups_a_refused_line_shifted_store_nothing_twice(db_path, tmp_path, refused: int) -> None:
    # a session of 47 lines: the line the older refind refused moved every later group of 20 by one line
    n = 2 * GROUP_SIZE + 7
    full = [_line(i) for i in range(n)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", full[:refused] + full[refused + 1 :]), parallel=False)
        log = _write(tmp_path / "log.jsonl", full)
        summary = replay(store, log, batch_size=2, parallel=False)
        assert summary.messages_added == 1, summary
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == sorted(f"line {i}" for i in range(n))


def test_a_refused_line_in_what_a_grown_log_appended_is_stored_alone(db_path, tmp_path) -> None:
    # the log grew by 3 lines after its first replay; the older refind refused the middle one, and stored the other
    # two as a request chained on the first group: the grown group's chain does not name the bigger tail
    full = [_line(i) for i in range(5)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "a.jsonl", full[:2]), parallel=False)
        replay(store, _write(tmp_path / "b.jsonl", [*full[:3], full[4]]), parallel=False)
        assert len(_stored(db_path)) == 4
        log = _write(tmp_path / "log.jsonl", full)
        summary = replay(store, log, parallel=False)
        assert (summary.messages_added, summary.grown) == (1, 1), summary
        assert replay(store, log, parallel=False).messages_added == 0
        grown = _write(tmp_path / "grown.jsonl", [*full, _line(5), _line(6)])
        assert replay(store, grown, parallel=False).messages_added == 2  # and it grows on
        assert replay(store, grown, parallel=False).messages_added == 0
    assert _stored(db_path) == [f"line {i}" for i in range(7)]


def test_a_group_stored_without_a_line_then_forgotten_does_not_come_back(cli, db_path, tmp_path) -> None:
    full = [_line(i) for i in range(3)]
    cli("add", "--file", _write(tmp_path / "old.jsonl", [full[0], full[2]]))
    with Store(db_path) as store:
        (rid,) = store.conn.execute("SELECT DISTINCT request_id FROM messages").fetchone()
        forget(store, user_id="u1", request_id=rid)
    result = cli("add", "--file", _write(tmp_path / "log.jsonl", full), "--json")
    assert result.exit_code == 6, result.output  # reported as forgotten, as before
    assert json.loads(result.output)["forgotten"] == 2
    assert _stored(db_path) == ["line 1"]


def test_a_line_said_twice_at_one_time_and_stored_once_is_stored_once_more(db_path, tmp_path) -> None:
    twice = _line(0)
    full = [twice, _line(1), twice]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", full[:2]), parallel=False)
        log = _write(tmp_path / "log.jsonl", full)
        assert replay(store, log, parallel=False).messages_added == 1
        assert replay(store, log, parallel=False).messages_added == 0  # both copies found stored now
    assert _stored(db_path) == ["line 0", "line 0", "line 1"]


def test_a_log_concatenated_twice_stores_each_copy_once(db_path, tmp_path) -> None:
    # the older refind stored both copies (the second as -2) without the line; each copy's new line is stored once
    full = [_line(i) for i in range(3)]
    with Store(db_path) as store:
        old = [full[0], full[2]]
        replay(store, _write(tmp_path / "old.jsonl", old + old), parallel=False)
        log = _write(tmp_path / "log.jsonl", full + full)
        assert replay(store, log, parallel=False).messages_added == 2
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == sorted(2 * [f"line {i}" for i in range(3)])


@pytest.mark.parametrize("stamp", ["none", "day"])
def test_lines_whose_times_tell_no_message_apart_are_stored_whole_as_before(db_path, tmp_path, stamp: str) -> None:
    # without timestamps, or a day's date on every line, a stored "ok" may be a new one word for word: the group is
    # stored whole again (README's known limit: a duplicate at worst, never a message lost)
    at = None if stamp == "none" else T0
    full = [_line(i, at=at) for i in range(3)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", [full[0], full[2]]), parallel=False)
        assert replay(store, _write(tmp_path / "log.jsonl", full), parallel=False).messages_added == 3
    assert len(_stored(db_path)) == 5


def test_a_new_ok_said_again_at_a_stored_ones_time_among_other_messages_is_stored(db_path, tmp_path) -> None:
    # a day's date on every line, the session's only stored message that day "ok": a new group of that day saying
    # "ok" again among other messages is not told apart by its times, and stored whole
    ok = _line(0, at=T0, content="ok")
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "a.jsonl", [_line(5, at=T0 - DAY), ok]), parallel=False)
        later = [ok, _line(1, at=T0, content="fine")]
        assert replay(store, _write(tmp_path / "b.jsonl", later), parallel=False).messages_added == 2
    assert _stored(db_path).count("ok") == 2


def test_what_is_stored_past_retention_is_stored_again(db_path, tmp_path) -> None:
    # a message whose request the sweep removes (or will) counts as not stored: stored again, as a whole group would be
    clock = Clock(T0)
    full = [_line(i) for i in range(3)]
    with Store(db_path, clock=clock, retention_days=30) as store:
        replay(store, _write(tmp_path / "old.jsonl", [full[0], full[2]]), parallel=False)
        clock.now += 40 * DAY
        summary = replay(store, _write(tmp_path / "log.jsonl", full), parallel=False)
        assert (summary.messages_added, summary.duplicates) == (3, 0)


def test_strict_stores_the_refused_line_alone_too(cli, db_path, tmp_path) -> None:
    full = [_line(i) for i in range(3)]
    cli("add", "--file", _write(tmp_path / "old.jsonl", [full[0], full[2]]))
    result = cli("add", "--file", _write(tmp_path / "log.jsonl", full), "--strict", "--json")
    assert result.exit_code == 0, result.output
    assert _counts(result) == (1, 1, 2)
    assert _stored(db_path) == ["line 0", "line 1", "line 2"]


def test_a_growing_logs_new_groups_after_a_stored_group_are_stored(db_path, tmp_path) -> None:
    # what another request of the session stored after the log's last group (an Add of its own) makes the next new
    # group looked up by its times: nothing of it is stored, so it is stored whole
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "a.jsonl", [_line(i) for i in range(GROUP_SIZE)]), parallel=False)
        replay(store, _write(tmp_path / "other.jsonl", [_line(99) | {"request_id": "r1"}]), parallel=False)
        grown = [_line(i) for i in range(GROUP_SIZE + 5)]
        summary = replay(store, _write(tmp_path / "b.jsonl", grown), parallel=False)
        assert (summary.requests_added, summary.messages_added) == (1, 5)


def test_two_refused_lines_in_two_groups_store_nothing_twice(db_path, tmp_path) -> None:
    # lines 4 and 25 refused: the older refind's first group held lines 0-21 less 4, which the new groups 0-19 and
    # 20-39 share; its second 22-42 less 25
    n = 2 * GROUP_SIZE + 7
    full = [_line(i) for i in range(n)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", [m for i, m in enumerate(full) if i not in (4, 25)]))
        log = _write(tmp_path / "log.jsonl", full)
        assert replay(store, log, parallel=False).messages_added == 2
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == sorted(f"line {i}" for i in range(n))


def test_a_line_edited_inside_a_stored_group_is_stored_alone(db_path, tmp_path) -> None:
    # README: with timestamps that tell the lines apart, only the edited line is stored again (the old text stays)
    full = [_line(i) for i in range(4)]
    edited = [*full[:1], _line(1, content="line 1, edited"), *full[2:]]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "log.jsonl", full), parallel=False)
        log = _write(tmp_path / "log.jsonl", edited)
        assert replay(store, log, parallel=False).messages_added == 1
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == sorted([*(f"line {i}" for i in range(4)), "line 1, edited"])


@pytest.mark.parametrize("old", [[1, 2], [0, 2]])
def test_a_line_said_twice_in_the_group_is_matched_as_a_multiset(db_path, tmp_path, old: list[int]) -> None:
    # a line said twice at one time inside the group: stored twice before (the line between them refused) — neither
    # copy stored again; stored once (its first copy refused) — stored once more
    twice = _line(0)
    full = [twice, _line(1), twice]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", [full[i] for i in old]), parallel=False)
        log = _write(tmp_path / "log.jsonl", full)
        assert replay(store, log, parallel=False).messages_added == 1
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == ["line 0", "line 0", "line 1"]


def test_copies_taken_by_an_earlier_group_of_the_file_are_not_taken_again(db_path, tmp_path) -> None:
    # "yes" said twice at one time and stored twice; the file says it a third time in a later group of the session
    # (after another session's line). The first group takes both stored copies; the later group must not take one of
    # them again (round 31's review: the file's third "yes" was counted a duplicate and never stored — a message lost)
    yes = _line(2, content="yes")
    old = [yes, yes, _line(3)]
    full = [_line(0), yes, yes, _line(3), _line(50, session="s2"), yes]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", old), parallel=False)
        log = _write(tmp_path / "log.jsonl", full)
        summary = replay(store, log, parallel=False)
        assert (summary.messages_added, summary.duplicates) == (3, 1)  # line 0, line 50, the third "yes"; one run known
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == ["line 0", "line 3", "line 50", "yes", "yes", "yes"]


def test_a_later_group_of_the_same_lines_as_what_was_left_out_is_stored_too(db_path, tmp_path) -> None:
    # line 2 stored by an earlier replay: the group [1, 2, 3] stores lines 1 and 3 alone. A later group of the file
    # made of lines 1 and 3 (after another session's line) is another group, stored again as a replay into a new
    # database stores it — round 31's review: it got the very id of the left-out lines, auto-<hash of 1 and 3>, and
    # was counted a duplicate of them (two messages lost, exit 0)
    full = [_line(1), _line(2), _line(3), _line(50, session="s2"), _line(1), _line(3)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", [_line(0), _line(2)]), parallel=False)
        log = _write(tmp_path / "log.jsonl", full)
        assert replay(store, log, parallel=False).messages_added == 5  # lines 1, 3, 50, 1, 3
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == ["line 0", "line 1", "line 1", "line 2", "line 3", "line 3", "line 50"]


def test_a_line_edited_before_a_new_line_is_stored_once(db_path, tmp_path) -> None:
    # line 1 edited and a line appended: the edit and the new line are stored together. Replayed again, the edited
    # line shares its millisecond with the old text (two messages then, told apart by neither), but it is stored in
    # the very request that holds the group's new line: found there, not stored a second time (round 31's review: the
    # second replay stored it again, as a request of its own)
    edited = [_line(0), _line(1, content="line 1, edited"), _line(2)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", [_line(0), _line(1)]), parallel=False)
        log = _write(tmp_path / "log.jsonl", edited)
        assert replay(store, log, parallel=False).messages_added == 2
        assert replay(store, log, parallel=False).messages_added == 0
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == ["line 0", "line 1", "line 1, edited", "line 2"]


@pytest.mark.parametrize(("first", "later"), [([2, 7], [0, 1, 2]), ([1, 2], [2])])
def test_copies_held_by_a_later_group_of_the_file_itself_are_not_taken(
    db_path, tmp_path, first: list[int], later: list[int]
) -> None:
    # the stored request is itself a later group of the file (known by its id: a duplicate); an earlier group of the
    # file saying line 2 again at the same time must not take that request's copy of it — the file says line 2
    # twice, and a replay into a new database stores it twice (round 31's review: stored once, exit 0)
    stored = [_line(i) for i in later]
    full = [*(_line(i) for i in first), _line(50, session="s2"), *stored]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", [*stored, _line(51, session="s3"), _line(22)]), parallel=False)
        log = _write(tmp_path / "log.jsonl", full)
        assert replay(store, log, parallel=False).messages_added == 3  # the first group and line 50
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path).count("line 2") == 2


def test_a_line_of_a_grown_group_said_again_after_a_left_out_line_is_stored(db_path, tmp_path) -> None:
    # the file's first group grew from a stored one ([0, 1, 2] known) and its new part holds line 22, stored already
    # (left out: the session is then "after a copy"); line 2 said again in a later group of the file is not an older
    # copy of the known part — that part is the file's own — and is stored, as a replay into a new database stores it
    # (round 31's review: taken for an older copy of the stored request, stored once)
    old = [_line(0), _line(1), _line(2), _line(51, session="s3"), _line(22)]
    full = [_line(0), _line(1), _line(2), _line(21), _line(22), _line(50, session="s2"), _line(2)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", old), parallel=False)
        log = _write(tmp_path / "log.jsonl", full)
        assert replay(store, log, parallel=False).messages_added == 3  # lines 21, 50 and 2 again
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path).count("line 2") == 2


def test_a_group_stored_apart_and_forgotten_is_not_stored_again(db_path, tmp_path) -> None:
    # lines 0 and 2 stored; the whole log (line 1 said twice at one time, a line logged twice) stores line 1's two
    # copies apart, under an id of their own. The session forgotten, the same log replayed again is a copy of what
    # was forgotten — its group's own id named by no tombstone, its messages by their said hashes (an identical line
    # at one time is one message said twice) — and stores nothing (round 31's review: stored whole again, exit 0)
    full = [_line(0), _line(1), _line(1), _line(2)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", [_line(0), _line(2)]), parallel=False)
        log = _write(tmp_path / "log.jsonl", full)
        assert replay(store, log, parallel=False).messages_added == 2
        forget(store, "u1", session_id="s1")
        summary = replay(store, log, parallel=False)
        assert (summary.messages_added, summary.forgotten) == (0, 1)
    assert _stored(db_path) == []


def test_what_a_group_keeps_beside_forgotten_lines_is_not_a_later_group_of_the_file(db_path, tmp_path) -> None:
    # lines 18 and 19 stored and forgotten; the file's first group of 20 is lines 0-17 and those two (a copy of what
    # was forgotten: left out, lines 0-17 stored as a request of their own), its second group lines 0-17 again. That
    # second group is another group, stored as a replay into a new database stores it — round 31's review: it got the
    # very id of the kept lines (auto-<hash of lines 0-17>), a duplicate: 18 messages missing until the next replay
    first = [_line(i) for i in range(GROUP_SIZE)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "old.jsonl", first[18:]), parallel=False)
        forget(store, "u1", session_id="s1")
        log = _write(tmp_path / "log.jsonl", [*first, *first[:18]])
        summary = replay(store, log, parallel=False)
        assert (summary.messages_added, summary.forgotten) == (36, 1)
        assert replay(store, log, parallel=False).messages_added == 0
    assert _stored(db_path) == sorted(2 * [f"line {i}" for i in range(18)])
