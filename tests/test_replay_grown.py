"""A log of message lines without request ids that grows between replays (an agent appends to it; a cron replays
it): only the new messages are stored, and what was forgotten does not come back (refind_cli/auto_ids.py)."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from helpers import DAY, Clock, add_request
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refind_cli.auto_ids import Repeats, auto_request_id, group_id, prefix_candidates, prefix_ids, split_grown
from refind_cli.lifecycle import expire, forget
from refind_cli.replay import GROUP_SIZE, replay
from refind_cli.store import Store


def _line(i: int, session: str = "s1", user: str = "u1") -> str:
    role = "user" if i % 2 == 0 else "assistant"
    return json.dumps({"user_id": user, "session_id": session, "role": role, "content": f"message {i} ok"})


def _append(path, *lines: str) -> str:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return str(path)


def _contents(db_path, user: str = "u1") -> list[str]:
    conn = sqlite3.connect(db_path)
    try:
        return [r[0] for r in conn.execute("SELECT content FROM messages WHERE user_id = ? ORDER BY seq", (user,))]
    finally:
        conn.close()


def _old_auto_id(user: str, session: str, said: list[tuple[str, str, int | None]]) -> str:
    """The derivation every stored auto id was computed by: one json.dumps of the whole group."""
    body = json.dumps([user, session, [list(m) for m in said]], ensure_ascii=False, separators=(",", ":"))
    return "auto-" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:20]


_TEXT = st.text(alphabet=st.sampled_from(list('ab "\\\x00\x1f\n\x7fé北\u2028🙂')), max_size=6)
_SAID = st.tuples(st.sampled_from(["user", "assistant", "system"]), _TEXT, st.one_of(st.none(), st.integers()))


@settings(max_examples=200, deadline=None)
@given(_TEXT, _TEXT, st.lists(_SAID, min_size=1, max_size=8))
def test_every_prefix_id_is_the_id_that_group_was_given(user: str, session: str, said: list) -> None:
    ids = prefix_ids(user, session, said)
    assert ids == [_old_auto_id(user, session, said[:k]) for k in range(1, len(said) + 1)]
    assert auto_request_id(user, session, said) == ids[-1]


def test_a_prefix_id_carries_the_repeat_suffix_an_earlier_replay_gave_it() -> None:
    ok, more = ("user", "ok", None), ("assistant", "more", None)
    repeats = Repeats()
    first = group_id("u", "s", [ok], repeats)
    # had the next group ended after "ok", it would have been the second [ok] of the file: "-2"
    assert prefix_candidates("u", "s", [ok, more], repeats) == (f"{first}-2",)
    assert group_id("u", "s", [ok, more], repeats) == _old_auto_id("u", "s", [ok, more])
    assert group_id("u", "s", [ok], repeats) == f"{first}-2"


def _lookup(table: dict[str, tuple[int, int] | None]):
    return lambda user, ids: {rid: table[rid] for rid in ids if rid in table}


def test_the_longest_known_prefix_is_skipped_and_what_follows_chains_on_it() -> None:
    said = [("user", f"m{i}", None) for i in range(6)]
    ids = prefix_ids("u", "s", said)
    stored: dict[str, tuple[int, int] | None] = {ids[1]: None, ids[3]: None}  # replays after 2, then 4 messages
    split = split_grown("u", "s", said, ids[-1], ids[:-1], stored, _lookup(stored))
    assert split is not None
    assert [(p.start, p.stop, p.request_id) for p in split.known] == [(0, 4, ids[3])]
    assert split.start == 4
    assert split.request_id == prefix_ids("u", "s", said[4:], after=ids[3])[-1]
    # known: the group as a whole, or none of its prefixes — stored as it is
    assert split_grown("u", "s", said, ids[-1], ids[:-1], {ids[-1]: None}, _lookup({})) is None
    assert split_grown("u", "s", said, ids[-1], ids[:-1], {}, _lookup({})) is None


def test_a_chained_request_is_split_again_when_the_log_grows_further() -> None:
    said = [("user", f"m{i}", None) for i in range(7)]
    ids = prefix_ids("u", "s", said)
    chained = prefix_ids("u", "s", said[3:5], after=ids[2])[-1]  # replays after 3, then 5 messages
    table: dict[str, tuple[int, int] | None] = {ids[2]: None, chained: (7, 1_700_000_000_000)}  # then forgotten
    split = split_grown("u", "s", said, ids[-1], ids[:-1], {ids[2]: None}, _lookup(table))
    assert split is not None
    assert [(p.start, p.stop, p.request_id, p.stone) for p in split.known] == [
        (0, 3, ids[2], None),
        (3, 5, chained, (7, 1_700_000_000_000)),
    ]
    assert split.start == 5 and split.request_id == prefix_ids("u", "s", said[5:], after=chained)[-1]


def test_a_grown_log_stores_only_its_new_messages(cli, db_path, tmp_path) -> None:
    log = tmp_path / "agent.jsonl"
    _append(log, *(_line(i) for i in range(3)))
    assert cli("add", "--file", str(log)).exit_code == 0
    _append(log, *(_line(i) for i in range(3, 5)))
    result = cli("add", "--file", str(log), "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["requests_added"], out["messages_added"], out["duplicates"], out["grown"]) == (1, 2, 1, 1)
    again = json.loads(cli("add", "--file", str(log), "--json").output)
    assert (again["messages_added"], again["grown"]) == (0, 0)
    assert _contents(db_path) == [f"message {i} ok" for i in range(5)]
    assert "grown groups (new messages added)" in cli("add", "--file", _append(log, _line(5))).output


@pytest.mark.parametrize("parallel", [False, True])
def test_a_log_growing_past_the_group_size_is_stored_once(db_path, tmp_path, parallel: bool) -> None:
    log = tmp_path / "agent.jsonl"
    other = [_line(i, session="s2") for i in range(3)]
    _append(log, *other)
    sizes = [7, GROUP_SIZE - 1, GROUP_SIZE + 3, 2 * GROUP_SIZE + 5, 2 * GROUP_SIZE + 6]
    written = 0
    with Store(db_path) as store:
        for size in sizes:  # replayed after each growth, in batches smaller than the file
            _append(log, *(_line(i) for i in range(written, size)))
            written = size
            replay(store, str(log), batch_size=2, parallel=parallel)
        assert replay(store, str(log), batch_size=2, parallel=parallel).messages_added == 0
    assert _contents(db_path) == [f"message {i} ok" for i in range(3)] + [f"message {i} ok" for i in range(written)]


def test_a_later_group_that_begins_like_an_earlier_one_is_not_taken_for_it(db_path, tmp_path) -> None:
    """ "ok" said in two places of one session: the second group starts with what the first group was, and is new."""
    ok = json.dumps({"user_id": "u1", "session_id": "s1", "role": "user", "content": "ok"})
    more = json.dumps({"user_id": "u1", "session_id": "s1", "role": "assistant", "content": "more"})
    log = _append(tmp_path / "agent.jsonl", ok, _line(0, session="s2"), ok, more)
    with Store(db_path) as store:
        add_request(store, "earlier", "u1", "s1", "hello")  # s1 holds a message: its groups are looked up
        # one request per batch: the first [ok] is stored when [ok, more] is looked up
        assert replay(store, log, batch_size=1).messages_added == 4
    assert _contents(db_path) == ["hello", "ok", "message 0 ok", "ok", "more"]


@pytest.mark.parametrize("scope", ["request", "session", "user"])
def test_forgotten_messages_do_not_come_back_when_the_log_grows(cli, db_path, tmp_path, scope: str) -> None:
    log = tmp_path / "agent.jsonl"
    _append(log, *(_line(i) for i in range(3)))
    assert cli("add", "--file", str(log)).exit_code == 0
    with Store(db_path) as store:
        (rid,) = [r[0] for r in store.conn.execute("SELECT request_id FROM requests")]
    target = {"request": ["--request-id", rid], "session": ["--session", "s1"], "user": []}[scope]
    assert cli("forget", "--user", "u1", *target, "--yes").exit_code == 0
    _append(log, _line(3), _line(4))
    result = cli("add", "--file", str(log), "--json")
    assert result.exit_code == 6, result.output
    out = json.loads(result.output)
    assert (out["forgotten"], out["messages_added"], out["grown"]) == (1, 2, 1)
    assert out["problems"][0].startswith(
        f"{log}:1-3: these messages were stored as request_id '{rid}' of user 'u1', which was forgotten (tombstone 1, "
    )
    assert out["problems"][0].endswith("): not stored again (their group of lines has grown since it was stored)")
    assert _contents(db_path) == ["message 3 ok", "message 4 ok"]


def test_strict_refuses_a_grown_log_whose_known_part_was_forgotten(cli, db_path, tmp_path) -> None:
    log = tmp_path / "agent.jsonl"
    _append(log, *(_line(i) for i in range(3)))
    assert cli("add", "--file", str(log)).exit_code == 0
    assert cli("forget", "--user", "u1", "--session", "s1", "--yes").exit_code == 0
    _append(log, _line(3))
    result = cli("add", "--file", str(log), "--strict", "--json")
    assert result.exit_code == 6, result.output
    assert json.loads(result.output)["problems"][-1] == (
        f"{log}: --strict: nothing stored because 1 request(s) would be refused"
    )
    assert _contents(db_path) == []


def test_strict_stores_a_grown_log_once(cli, db_path, tmp_path) -> None:
    log = tmp_path / "agent.jsonl"
    _append(log, *(_line(i) for i in range(3)))
    assert cli("add", "--file", str(log), "--strict").exit_code == 0
    _append(log, _line(3))
    result = cli("add", "--file", str(log), "--strict", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["messages_added"] == 1
    assert _contents(db_path) == [f"message {i} ok" for i in range(4)]


def test_a_known_part_past_retention_is_stored_again_with_its_group(db_path, tmp_path) -> None:
    """As a request stored past retention: the sweep removes it, so the grown group is stored whole, once."""
    clock = Clock()
    log = tmp_path / "agent.jsonl"
    _append(log, *(_line(i) for i in range(3)))
    with Store(db_path, clock=clock, retention_days=30) as store:
        replay(store, str(log))
        clock.now += 31 * DAY
        summary = replay(store, _append(log, _line(3)))
        assert (summary.messages_added, summary.grown, summary.duplicates) == (4, 0, 0)
        visible = store.user_messages("u1")
    assert [m.content for m in visible] == [f"message {i} ok" for i in range(4)]


_LOG = st.lists(st.tuples(st.sampled_from(["s1", "s2"]), st.sampled_from(["ok", "yes", "no"])), min_size=1, max_size=48)


@settings(max_examples=120, deadline=None)
# found by this test: a later "yes" took the id of the earlier group a grown one began with (so it was lost) ...
@example([("s1", "yes"), ("s1", "no"), ("s2", "ok"), ("s1", "yes")], [1, 3], 2, 0)
# ... and a group grown once, replayed again, was matched to a later group equal to one of its prefixes
@example(
    [("s1", "ok"), ("s1", "no"), ("s1", "ok"), ("s2", "no"), ("s2", "no"), ("s1", "ok"), ("s1", "no"), ("s2", "no")],
    [1, 7],
    2,
    0,
)
@given(
    _LOG,
    st.lists(st.integers(1, 48), max_size=4),
    st.integers(1, 4),
    st.one_of(st.none(), st.integers(0, 100)),
)
def test_every_line_of_a_growing_log_is_stored_once_unless_forgotten(
    tmp_path_factory, lines: list[tuple[str, str]], cuts: list[int], batch_size: int, forget_at: int | None
) -> None:
    """Replayed after each growth (short messages said again and again, groups past 20, two sessions interleaved),
    with one stored request forgotten on the way: what is stored is the log's lines, each once, less the forgotten
    ones."""
    tmp = tmp_path_factory.mktemp("log")
    db, log = tmp / "m.db", tmp / "agent.jsonl"
    text = [json.dumps({"user_id": "u1", "session_id": s, "role": "user", "content": c}) for s, c in lines]
    forgotten: list[tuple[str, str]] = []
    written = 0
    with Store(db) as store:
        for cut in [*sorted(c for c in cuts if c < len(lines)), len(lines)]:
            _append(log, *text[written:cut])
            written = cut
            replay(store, str(log), batch_size=batch_size, parallel=False)
            requests = [r[0] for r in store.conn.execute("SELECT request_id FROM requests ORDER BY request_id")]
            if forget_at is not None and requests and not forgotten:
                rid = requests[forget_at % len(requests)]
                forgotten = list(
                    store.conn.execute("SELECT session_id, content FROM messages WHERE request_id = ?", (rid,))
                )
                forget(store, "u1", request_id=rid)
        stored = list(store.conn.execute("SELECT session_id, content FROM messages"))
    expected = list(lines)
    for message in forgotten:
        expected.remove(message)
    assert sorted(stored) == sorted(expected)


def _said(content: str, session: str = "s1") -> str:
    return json.dumps({"user_id": "u1", "session_id": session, "role": "user", "content": content})


@pytest.mark.parametrize("batch_size", [1, 500])
@pytest.mark.parametrize(("first", "later"), [("ab", "abd"), ("ab", "ab"), ("a", "a")])
def test_the_grown_groups_messages_said_again_later_are_new(
    db_path, tmp_path, batch_size: int, first: str, later: str
) -> None:
    """[a b] replayed, then grown to [a b c]: a later group of the session that begins with a b (or is a b) is new —
    not the [a b] stored before, which the grown group took (a repeat of it now: -2)."""
    log = _append(tmp_path / "agent.jsonl", *map(_said, first))
    with Store(db_path) as store:
        replay(store, log, batch_size=batch_size)
        _append(log, _said("c"), _said("x", session="s2"), *map(_said, later), _said("y", session="s2"))
        summary = replay(store, log, batch_size=batch_size)
        assert (summary.messages_added, summary.grown) == (3 + len(later), 1)
        assert replay(store, log, batch_size=batch_size).messages_added == 0
        summary = replay(store, _append(log, _said("z", session="s2")), batch_size=batch_size)  # grows in turn
        assert (summary.messages_added, summary.grown) == (1, 1)
    assert _contents(db_path) == [*first, "c", "x", *later, "y", "z"]


def test_strict_gives_the_repeat_of_a_grown_group_the_id_a_replay_gives_it(cli, db_path, tmp_path) -> None:
    log = _append(tmp_path / "agent.jsonl", _said("a"), _said("b"))
    assert cli("add", "--file", log, "--strict").exit_code == 0
    _append(log, _said("c"), _said("x", session="s2"), _said("a"), _said("b"))
    result = cli("add", "--file", log, "--strict", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["messages_added"] == 4
    assert cli("forget", "--user", "u1", "--session", "s2", "--yes").exit_code == 0
    result = cli("add", "--file", log, "--strict", "--json")  # refused for s2 alone, not for the repeat of a b
    assert result.exit_code == 6, result.output
    assert [p.split(": ", 1)[0] for p in json.loads(result.output)["problems"][:-1]] == [f"{log}:4"]
    assert _contents(db_path) == ["a", "b", "c", "a", "b"]


@pytest.mark.parametrize("swept", [False, True])
def test_what_was_chained_on_an_expired_part_is_not_stored_twice(db_path, tmp_path, swept: bool) -> None:
    """[m0 m1 m2] replayed, grown to five messages 20 days later (m3 m4 chained on the first three), to six 15 days
    after that: the first three expired (30 days) and are stored again; m3 m4, kept, are not stored a second time."""
    clock = Clock()
    log = _append(tmp_path / "agent.jsonl", *(_line(i) for i in range(3)))
    with Store(db_path, clock=clock, retention_days=30) as store:
        replay(store, log)
        clock.now += 20 * DAY
        assert replay(store, _append(log, _line(3), _line(4))).grown == 1
        clock.now += 15 * DAY
        if swept:
            assert expire(store).messages == 3
        summary = replay(store, _append(log, _line(5)))
        assert (summary.messages_added, summary.grown, summary.duplicates) == (4, 1, 1)
        assert replay(store, log).messages_added == 0
        visible = sorted(m.content for m in store.user_messages("u1"))
    assert visible == [f"message {i} ok" for i in range(6)]


def test_the_prefixes_of_a_batch_are_looked_up_together(db_path, tmp_path) -> None:
    """A user with a tombstone is never 'fresh': every group of a replay is looked up. The user's tombstones are read
    a few times per batch, not once per group (a replay of new lines took 2-3x as long after a large forget)."""
    with Store(db_path) as store:
        replay(store, _append(tmp_path / "old.jsonl", _said("gone", session="s0")))
        forget(store, "u1", session_id="s0")
        new = _append(tmp_path / "new.jsonl", *(_said(f"m{i}", session=f"s{i // 2 % 7 + 1}") for i in range(200)))
        statements: list[str] = []
        store.conn.set_trace_callback(statements.append)
        summary = replay(store, new, parallel=False)
        store.conn.set_trace_callback(None)
    assert summary.messages_added == 200
    assert sum("message_ids FROM tombstones" in s for s in statements) <= 3


def test_what_was_chained_on_an_expired_part_and_forgotten_does_not_come_back(cli, db_path, tmp_path) -> None:
    """As above, with m3 m4 forgotten before the first three expire: the grown group is not stored whole (forgotten
    text included); m3 m4 are reported as forgotten, m5 is stored."""
    clock = Clock()
    log = _append(tmp_path / "agent.jsonl", *(_line(i) for i in range(3)))
    with Store(db_path, clock=clock, retention_days=30) as store:
        replay(store, log)
        clock.now += 20 * DAY
        replay(store, _append(log, _line(3), _line(4)))
        (chained,) = [r[0] for r in store.conn.execute("SELECT request_id FROM requests WHERE message_count = 2")]
        forget(store, "u1", request_id=chained)
        clock.now += 15 * DAY
        summary = replay(store, _append(log, _line(5)))
        assert (summary.forgotten, summary.messages_added) == (1, 4)
        assert summary.problems[0].startswith(f"{log}:4-5: these messages were stored as request_id '{chained}'")
        visible = sorted(m.content for m in store.user_messages("u1"))
    assert visible == [f"message {i} ok" for i in (0, 1, 2, 5)]


def test_two_grown_groups_of_the_same_messages_keep_their_own_earlier_groups(db_path, tmp_path) -> None:
    """Found by a fuzz: two groups [ok ok ok] of one session both grew between replays, with groups equal to their
    prefixes after them. Unless a grown group counts as each of its shorter prefixes too, a later group takes one of
    its prefixes' ids, and a replay after a forget takes that for the grown group's earlier group: messages stored
    again."""
    sessions = [1, 1, 2, 2, 2, 1, 2, 1, 1, 2, 1, 2, 1, 1, 2, 2, 2, 1, 2]  # the session of each "ok", in file order
    text = [json.dumps({"user_id": "u1", "session_id": f"s{s}", "role": "user", "content": "ok"}) for s in sessions]
    log = tmp_path / "agent.jsonl"
    written = 0
    with Store(db_path) as store:
        for step, cut in enumerate([1, 3, 4, 16, 19]):
            _append(log, *text[written:cut])
            written = cut
            replay(store, str(log), batch_size=2, parallel=False, strict=step % 2 == 0)
        requests = sorted(r[0] for r in store.conn.execute("SELECT request_id FROM requests"))
        gone = store.conn.execute("SELECT count(*) FROM messages WHERE request_id = ?", (requests[7],)).fetchone()[0]
        forget(store, "u1", request_id=requests[7])
        replay(store, str(log), batch_size=2, parallel=False)
        stored = store.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert stored == len(sessions) - gone


def _timed(i: int, session: str = "s1") -> str:
    return json.dumps(
        {"user_id": "u1", "session_id": session, "role": "user", "content": f"line {i}", "timestamp": T0 + i * 1000}
    )


T0 = 1_683_554_160_000


def test_an_older_shorter_copy_of_a_log_replayed_after_it_stores_nothing(cli, db_path, tmp_path) -> None:
    # found by a probe: 17 lines replayed, then a 7-line snapshot of the same log, then 13 — the snapshots' groups
    # were stored again beside the group they begin (37 messages for 17), exit 0 and no word of it
    copies = {n: tmp_path / f"log{n}.jsonl" for n in (7, 13, 17)}
    for n, path in copies.items():
        _append(path, *(_timed(i) for i in range(n)))
    assert json.loads(cli("add", "--file", str(copies[17]), "--json").output)["messages_added"] == 17
    for n in (7, 13, 17, 7):
        out = cli("add", "--file", str(copies[n]), "--json")
        assert out.exit_code == 0, out.output
        summary = json.loads(out.output)
        assert (summary["messages_added"], summary["duplicates"]) == (0, 1), (n, summary)
    assert _contents(db_path) == [f"line {i}" for i in range(17)]


def test_an_older_copy_that_ends_inside_what_a_grown_group_chained_stores_nothing(db_path, tmp_path) -> None:
    # 7 lines, grown to 45 (the first group is now the 7 and a chained request of 13; then 20 and 5), then a copy of
    # 12 lines (the 7 known, the 5 after it the start of the chained request) and one of 30 (ends inside the second
    # group of 20)
    with Store(db_path) as store:
        for n in (7, 45, 12, 30, 44):
            log = _append(tmp_path / f"log{n}.jsonl", *(_timed(i) for i in range(n)))
            summary = replay(store, log, batch_size=3)
            assert summary.messages_added == (7 if n == 7 else 38 if n == 45 else 0), (n, summary)
    assert _contents(db_path) == [f"line {i}" for i in range(45)]


@pytest.mark.parametrize("stamp", [None, "day"])
def test_a_new_group_is_never_taken_for_the_start_of_a_stored_one_when_times_do_not_tell_them_apart(
    db_path, tmp_path, stamp: str | None
) -> None:
    """Without timestamps, or with a day's date on every line, a new day's log begun like the last one ("hi", then
    "ok") is the old one word for word: its "ok" is stored — a duplicate at worst, never a message lost (a review
    found both lost: after a group taken for the old one, and first in the file with coarse times)."""

    def said(content: str, session: str, role: str = "user") -> str:
        line = {"user_id": "u1", "session_id": session, "role": role, "content": content}
        return json.dumps(line | ({"timestamp": T0} if stamp else {}))

    day1 = [said("hi", "S"), said("x", "T"), said("ok", "S"), said("fine", "S", "assistant"), said("good", "U")]
    with Store(db_path) as store:
        replay(store, _append(tmp_path / "day1.jsonl", *day1, said("morning", "U", "assistant")))
        day2 = [said("hi", "S"), said("y", "T"), said("ok", "S"), said("z", "T")]
        summary = replay(store, _append(tmp_path / "day2.jsonl", *day2))
        assert summary.messages_added == 3  # y, ok, z ("hi" repeats day 1's group word for word: the known limit)
        day3 = [said("good", "U"), said("w", "T")]  # "good" first of its session in the file
        assert replay(store, _append(tmp_path / "day3.jsonl", *day3)).messages_added == 2
    stored = _contents(db_path)
    assert (stored.count("ok"), stored.count("good")) == (2, 2)


def test_an_older_copy_replayed_past_retention_is_stored_again(db_path, tmp_path) -> None:
    # what a sweep removes (or will) is not stored: a copy of it is stored again, as a whole group would be
    clock = Clock(T0 + GROUP_SIZE * 1000)
    full = _append(tmp_path / "full.jsonl", *(_timed(i) for i in range(GROUP_SIZE + 5)))
    copy = _append(tmp_path / "copy.jsonl", *(_timed(i) for i in range(GROUP_SIZE + 3)))
    with Store(db_path, clock=clock, retention_days=30) as store:
        assert replay(store, full).messages_added == GROUP_SIZE + 5
        assert replay(store, copy).messages_added == 0  # within retention: known
        clock.now += 40 * DAY
        summary = replay(store, copy)
        assert (summary.messages_added, summary.duplicates) == (GROUP_SIZE + 3, 0)


@pytest.mark.parametrize("round_", range(3))
def test_replays_of_a_log_and_its_older_copies_at_once_store_each_line_once(db_path, tmp_path, round_: int) -> None:
    import subprocess
    import sys

    paths = []
    for n in (7, 13, 17):
        paths.append(_append(tmp_path / f"log{n}.jsonl", *(_timed(i) for i in range(n))))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "refind_cli", "add", "--file", p, "--db", str(db_path), "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for p in (paths if round_ % 2 else reversed(paths))
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    assert _contents(db_path) == [f"line {i}" for i in range(17)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["s1", "s2"]), st.sampled_from(["ok", "yes"])), min_size=1, max_size=45),
    st.lists(st.integers(1, 45), min_size=1, max_size=4),
    st.integers(1, 4),
)
def test_every_line_is_stored_once_whatever_older_copies_are_replayed_after_it(
    tmp_path_factory, lines: list[tuple[str, str]], cuts: list[int], batch_size: int
) -> None:
    """The whole log, then copies of it cut anywhere, in any order (lines with timestamps): each line stored once."""
    tmp = tmp_path_factory.mktemp("log")
    text = [
        json.dumps({"user_id": "u1", "session_id": s, "role": "user", "content": c, "timestamp": T0 + i * 1000})
        for i, (s, c) in enumerate(lines)
    ]
    with Store(tmp / "m.db") as store:
        replay(store, _append(tmp / "full.jsonl", *text), batch_size=batch_size, parallel=False)
        for k, cut in enumerate(cuts):
            copy = _append(tmp / f"copy{k}.jsonl", *text[:cut])
            assert replay(store, copy, batch_size=batch_size, parallel=False).messages_added == 0, cut
        stored = sorted(store.conn.execute("SELECT session_id, content, said_at FROM messages"))
    assert stored == sorted((s, c, T0 + i * 1000) for i, (s, c) in enumerate(lines))


def test_an_older_copy_whose_session_another_replay_stored_between_its_batches_stores_nothing(
    db_path, tmp_path
) -> None:
    # the copy's replay met s1 empty in its first batch and kept it "fresh" (never looked up) for the rest of the
    # file; the full log's replay, in another process, stored s1 before the copy's second batch: its last group (the
    # start of one the full replay stored) was stored again. Another writer's commit now ends "fresh".
    full = _append(tmp_path / "full.jsonl", *(_timed(i) for i in range(2 * GROUP_SIZE + 5)))
    copy = _append(tmp_path / "copy.jsonl", *(_timed(i) for i in range(GROUP_SIZE + 7)))
    other = Store(db_path)
    raced: list[int] = []

    def the_other_replay(done: int, total: int | None) -> None:
        if not raced and len(_contents(db_path)) == GROUP_SIZE:  # the copy's first group is stored, not its last
            raced.append(replay(other, full, parallel=False).messages_added)

    with Store(db_path) as store:
        summary = replay(store, copy, batch_size=1, on_progress=the_other_replay, parallel=False)
    other.close()
    assert raced == [GROUP_SIZE + 5]
    assert (summary.messages_added, summary.duplicates) == (GROUP_SIZE, 1)
    assert _contents(db_path) == [f"line {i}" for i in range(2 * GROUP_SIZE + 5)]


def test_an_older_copy_cut_after_a_forgotten_first_piece_stores_nothing_twice(cli, db_path, tmp_path) -> None:
    # a review of round 25: a log replayed (3 lines), grown (7: a chained request of 4), its first piece forgotten;
    # then a copy cut after line 5 stored lines 4 and 5 a second time — the chained request was looked for as "the
    # request after" the forgotten piece, which holds no message any more
    short = _append(tmp_path / "short.jsonl", *(_timed(i) for i in range(3)))
    full = _append(tmp_path / "full.jsonl", *(_timed(i) for i in range(7)))
    assert cli("add", "--file", short).exit_code == 0
    assert cli("add", "--file", full).exit_code == 0
    with Store(db_path) as store:
        (first,) = store.conn.execute("SELECT request_id FROM requests WHERE request_id LIKE 'auto-%'").fetchone()
    assert cli("forget", "--user", "u1", "--request-id", first, "--yes").exit_code == 0
    copy = _append(tmp_path / "copy.jsonl", *(_timed(i) for i in range(5)))
    result = cli("add", "--file", copy, "--json")
    assert result.exit_code == 6, result.output  # lines 1-3 forgotten: refused, as before
    summary = json.loads(result.output)
    assert (summary["messages_added"], summary["duplicates"], summary["forgotten"]) == (0, 1, 1)
    assert _contents(db_path) == [f"line {i}" for i in range(3, 7)]  # (was: lines 3 and 4 twice)


def test_an_older_copy_of_a_second_log_of_a_session_stores_nothing(cli, db_path, tmp_path) -> None:
    # a review of round 25: log1 holds lines 1-3 of session s1, log2 goes on with 4-6; a copy of log2 cut after line
    # 5 was stored again — only the session's first request was looked at. The same for the copy's lines in any order.
    log1 = _append(tmp_path / "log1.jsonl", *(_timed(i) for i in range(3)))
    log2 = _append(tmp_path / "log2.jsonl", *(_timed(i) for i in range(3, 6)))
    for log in (log1, log2):
        assert cli("add", "--file", log).exit_code == 0
    for name, lines in (("cut", [3, 4]), ("reordered", [4, 3]), ("inside", [4])):
        copy = _append(tmp_path / f"{name}.jsonl", *(_timed(i) for i in lines))
        result = cli("add", "--file", copy, "--json")
        assert result.exit_code == 0, result.output
        assert (json.loads(result.output)["messages_added"], json.loads(result.output)["duplicates"]) == (0, 1), name
    assert _contents(db_path) == [f"line {i}" for i in range(6)]
    # a line said at a time no stored message was: new, stored — alone: the line stored already in its group is not
    # stored again (round 31; it was, with the group it came in: a copy that grew a line of its own stored twice)
    new = _append(tmp_path / "new.jsonl", _timed(4), _timed(9))
    assert json.loads(cli("add", "--file", new, "--json").output)["messages_added"] == 1
    assert _contents(db_path) == [*(f"line {i}" for i in range(6)), "line 9"]


def test_an_older_copy_cut_after_a_forgotten_full_group_stores_nothing_twice(cli, db_path, tmp_path) -> None:
    # the same without a chain: a full group of 20 (forgotten) and the group of 5 after it; a copy cut after line 22
    full = _append(tmp_path / "full.jsonl", *(_timed(i) for i in range(GROUP_SIZE + 5)))
    assert cli("add", "--file", full).exit_code == 0
    with Store(db_path) as store:
        (first,) = store.conn.execute("SELECT request_id FROM messages ORDER BY seq LIMIT 1").fetchone()
    assert cli("forget", "--user", "u1", "--request-id", first, "--yes").exit_code == 0
    copy = _append(tmp_path / "copy.jsonl", *(_timed(i) for i in range(GROUP_SIZE + 2)))
    result = cli("add", "--file", copy, "--json")
    assert result.exit_code == 6, result.output
    assert (json.loads(result.output)["messages_added"], json.loads(result.output)["duplicates"]) == (0, 1)
    assert _contents(db_path) == [f"line {i}" for i in range(GROUP_SIZE, GROUP_SIZE + 5)]


def test_a_growing_log_looks_no_message_up_by_its_time(db_path, tmp_path, monkeypatch) -> None:
    # what looks through a session's messages (Store.said_at_rows) is asked only where nothing stored precedes a group
    # in the file: never for the new groups of a log that grew, whatever the batches
    calls: list[int | None] = []
    said_at_rows = Store.said_at_rows

    def counted(self, user_id, session_id, times):
        calls.append(None if times is None else len(times))
        return said_at_rows(self, user_id, session_id, times)

    monkeypatch.setattr(Store, "said_at_rows", counted)
    with Store(db_path) as store:
        for n in (3, 5 * GROUP_SIZE + 3, 7 * GROUP_SIZE):
            log = _append(tmp_path / f"log{n}.jsonl", *(_timed(i) for i in range(n)))
            replay(store, log, batch_size=2, parallel=False)
    assert calls == []
    assert _contents(db_path) == [f"line {i}" for i in range(7 * GROUP_SIZE)]
