"""Retention: an injected clock decides what is expired; reads hide it before the sweep; expire removes exactly it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import CLOCK_T0, Clock, sound
from helpers import add_request as _add

from refind_cli import lifecycle, review
from refind_cli.errors import InvalidInput
from refind_cli.store import DAY_MS, Store


@pytest.fixture
def aged(db_path: Path) -> tuple[Store, Clock]:
    """Requests recorded at day 0, day 10 and day 20 (and one exactly at the later cutoff), retention 30 days."""
    clock = Clock(CLOCK_T0)
    s = Store(db_path, clock=clock, retention_days=30)
    _add(s, "old-a", "alice", "s1", "day zero, first", "day zero, second")
    _add(s, "old-b", "bob", "s1", "bob on day zero")
    clock.now = CLOCK_T0 + 10 * DAY_MS
    _add(s, "mid-a", "alice", "s2", "day ten")
    clock.now = CLOCK_T0 + 20 * DAY_MS
    _add(s, "new-a", "alice", "s3", "day twenty")
    _add(s, "new-b", "bob", "s2", "bob on day twenty")
    yield s, clock
    s.close()


def _contents(store: Store, user: str) -> list[str]:
    return [m.content for m in store.user_messages(user)]


def test_reads_hide_expired_messages_before_any_sweep(aged) -> None:
    store, clock = aged
    clock.now = CLOCK_T0 + 35 * DAY_MS  # cutoff: day 5 → the day-0 requests are expired, the rest not
    assert _contents(store, "alice") == ["day ten", "day twenty"]
    assert _contents(store, "bob") == ["bob on day twenty"]
    assert store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 6  # still stored
    info = review.overview(store)
    assert (info["messages"], info["awaiting_expiry"]) == (3, 3)
    assert info["recorded_at"]["min"] == CLOCK_T0 + 10 * DAY_MS
    assert [u["messages"] for u in review.users(store)] == [2, 1]
    assert [s["session_id"] for s in review.user(store, "alice")["sessions"]] == ["s2", "s3"]
    exported = [r["request_id"] for r in lifecycle.export_requests(store, "alice")]
    assert exported == ["mid-a", "new-a"]


def test_a_dry_run_is_a_read_it_waits_for_no_writer_and_writes_nothing(aged, db_path) -> None:
    # a data-safety review of round 17: the dry run ran in a write transaction, so it logged a write and, while
    # another process held the write lock, waited out the busy timeout and failed
    import sqlite3

    store, clock = aged
    clock.now = CLOCK_T0 + 35 * DAY_MS
    writes = store.conn.execute("SELECT count(*) FROM write_log").fetchone()[0]
    holder = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")  # another process's write in progress
    store.conn.execute("PRAGMA busy_timeout = 0")
    try:
        dry = lifecycle.expire(store, dry_run=True)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (dry.messages, dry.requests) == (3, 2)
    assert store.conn.execute("SELECT count(*) FROM write_log").fetchone()[0] == writes


def test_expire_removes_exactly_the_expired_rows(aged) -> None:
    store, clock = aged
    clock.now = CLOCK_T0 + 35 * DAY_MS
    before = {
        r[0] for r in store.conn.execute("SELECT id FROM messages WHERE recorded_at >= ?", (CLOCK_T0 + 5 * DAY_MS,))
    }
    dry = lifecycle.expire(store, dry_run=True)
    assert (dry.messages, dry.requests) == (3, 2)
    assert store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 6  # dry run deletes nothing

    result = lifecycle.expire(store)
    assert result.cutoff == CLOCK_T0 + 5 * DAY_MS
    assert {u: (e.messages, e.requests) for u, e in result.users.items()} == {"alice": (2, 1), "bob": (1, 1)}
    assert {r[0] for r in store.conn.execute("SELECT id FROM messages")} == before
    assert {r[0] for r in store.conn.execute("SELECT request_id FROM requests")} == {"mid-a", "new-a", "new-b"}
    assert result.checkpointed
    events = review.events(store, kind="expire")
    assert sorted((e["user_id"], e["rows"]) for e in events) == [("alice", 2), ("bob", 1)]
    assert lifecycle.expire(store).messages == 0  # idempotent


def test_boundary_recorded_exactly_at_the_cutoff_stays(aged) -> None:
    store, clock = aged
    clock.now = CLOCK_T0 + 40 * DAY_MS  # cutoff is exactly day 10: "day ten" is still inside the window
    assert _contents(store, "alice") == ["day ten", "day twenty"]
    assert lifecycle.expire(store).messages == 3
    assert _contents(store, "alice") == ["day ten", "day twenty"]
    clock.now += 1
    assert _contents(store, "alice") == ["day twenty"]
    assert lifecycle.expire(store).users["alice"].messages == 1


def test_expire_one_user_and_retention_off(aged, db_path: Path) -> None:
    store, clock = aged
    clock.now = CLOCK_T0 + 35 * DAY_MS
    result = lifecycle.expire(store, user_id="bob")
    assert set(result.users) == {"bob"}
    assert store.conn.execute("SELECT count(*) FROM messages WHERE user_id = 'alice'").fetchone()[0] == 4
    with Store(db_path, clock=clock, retention_days=None) as keep_all:
        off = lifecycle.expire(keep_all)
        assert (off.retention_days, off.messages) == (None, 0)
        assert len(keep_all.user_messages("alice")) == 4


def test_expire_of_an_empty_user_is_refused_not_read_as_every_user(aged) -> None:
    store, clock = aged
    clock.now = CLOCK_T0 + 35 * DAY_MS  # alice's and bob's day-zero requests are past retention
    for blank in ("", " "):
        with pytest.raises(InvalidInput, match=r"^user: must be a non-empty string \(leave it out to expire"):
            lifecycle.expire(store, user_id=blank)
    assert store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 6  # nothing was deleted


def test_expire_removes_old_traces_and_traces_quoting_expired_text(aged) -> None:
    store, clock = aged
    rows = [
        ("t-old", "alice", CLOCK_T0 + 1, "day ten"),
        ("t-quotes", "alice", CLOCK_T0 + 20 * DAY_MS, "day zero, first"),
        ("t-keep", "alice", CLOCK_T0 + 20 * DAY_MS, "day twenty"),
    ]
    with store.write():
        for sid, user, at, quoted in rows:
            store.conn.execute(
                "INSERT INTO searches (id, user_id, at, query, mode, duration_ms, returned_ids, trace) "
                "VALUES (?, ?, ?, 'q', 'planner', 1.0, '[]', ?)",
                (sid, user, at, json.dumps({"hit": quoted})),
            )
    clock.now = CLOCK_T0 + 35 * DAY_MS
    result = lifecycle.expire(store)
    assert result.users["alice"].searches == 2
    assert [r[0] for r in store.conn.execute("SELECT id FROM searches")] == ["t-keep"]


def test_cli_expire_counts_per_user(cli, db_path: Path) -> None:
    old = Store(db_path, clock=lambda: 1_000_000_000_000, retention_days=None)  # recorded in 2001
    _add(old, "r1", "alice", "s1", "from long ago", "also old")
    old.close()
    cli("add", "fresh message", "--user", "alice", "--session", "s2")
    dry = json.loads(cli("expire", "--dry-run", "--json").output)
    assert (dry["dry_run"], dry["users"]) == (True, {"alice": {"messages": 2, "requests": 1, "searches": 0}})
    out = cli("expire", "--json")
    assert out.exit_code == 0
    assert json.loads(out.output)["messages"] == 2
    with Store(db_path, retention_days=None) as s:
        assert [m.content for m in s.user_messages("alice")] == ["fresh message"]
    assert "nothing to expire" in cli("expire").output
    assert cli("expire", "--retention-days", "0.5").exit_code != 0  # below one day is refused
    assert cli("expire", "--days", "0").exit_code != 0
    assert json.loads(cli("expire", "--days", "off", "--json").output)["retention_days"] is None


def test_an_empty_retention_on_the_command_line_is_refused_and_sweeps_nothing(cli, db_path: Path, monkeypatch) -> None:
    # `refind expire --days "$DAYS"` with DAYS unset read as no flag: a real sweep with the stored policy or 30 days
    # (found by a probe); an empty REFIND_RETENTION_DAYS still counts as unset, as every REFIND_* variable does
    old = Store(db_path, clock=lambda: 1_000_000_000_000, retention_days=None)  # recorded in 2001
    _add(old, "r1", "alice", "s1", "from long ago", "also old")
    old.close()
    for args in (("--days", ""), ("--retention-days", " "), ("--dry-run", "--days", "")):
        out = cli("expire", *args)
        assert out.exit_code == 2, (args, out.output)
        assert out.output.strip() == (
            "error: --retention-days / --days: an empty value is not a number of days (or 'off'); leave the flag "
            "out for the retention the database remembers, else 30 days"
        )
    out = cli("add", "new words", "--user", "alice", "--session", "s2", "--retention-days", "")
    assert out.exit_code == 2 and "error: --retention-days: an empty value is not a number of days" in out.output
    with Store(db_path, retention_days=None) as s:
        assert [m.content for m in s.user_messages("alice")] == ["from long ago", "also old"]  # nothing swept, added
    monkeypatch.setenv("REFIND_RETENTION_DAYS", "")
    dry = json.loads(cli("expire", "--dry-run", "--json").output)
    assert (dry["retention_days"], dry["messages"], dry["policy"]["source"]) == (30, 2, "default")


def _stored_search(store: Store, sid: str, user: str, at: int, quoted: list[str]) -> None:
    from refind_cli import trace

    events = [trace.Event("evidence", 1, 1.0, {"path": "notes", "ids": quoted})]
    trace.save(store, trace.StoredSearch(sid, user, at, "a question", "agent", "m", 1.0, 1, 0, 0, None, quoted, events))


def test_stored_planner_searches_past_retention_are_hidden_before_any_sweep(aged, cli, db_path) -> None:
    """`refind inspect searches` / `inspect search ID` apply the same read-time predicate as `expire`: a search
    that ran before the cutoff, or quotes a message past it, is hidden even before a sweep deletes it."""
    from refind_cli import trace
    from refind_cli.errors import NotFound

    store, clock = aged
    ids = {m.request_id: m.id for m in store.user_messages("alice")}
    _stored_search(store, "old-search", "alice", CLOCK_T0 + 1, [ids["old-a"]])
    _stored_search(store, "quotes-old", "alice", CLOCK_T0 + 20 * DAY_MS, [ids["old-a"]])
    _stored_search(store, "fresh", "alice", CLOCK_T0 + 20 * DAY_MS + 1, [ids["new-a"]])
    assert [s.id for s in trace.recent(store)] == ["fresh", "quotes-old", "old-search"]

    clock.now = CLOCK_T0 + 35 * DAY_MS  # cutoff day 5: old-a is expired, no sweep has run
    assert [s.id for s in trace.recent(store)] == ["fresh"]
    assert [s.id for s in trace.recent(store, user_id="alice", limit=1)] == ["fresh"]
    for hidden in ("old-search", "quotes-old"):
        with pytest.raises(NotFound):
            trace.load(store, hidden)
    assert trace.load(store, "fresh").returned_ids == [ids["new-a"]]

    assert store.conn.execute("SELECT count(*) FROM searches").fetchone()[0] == 3  # still stored
    # The CLI reads with the real clock: everything here is long past 30 days, so ask with retention off and on.
    listed = json.loads(cli("inspect", "searches", "--retention-days", "off", "--json").output)["searches"]
    assert len(listed) == 3
    assert json.loads(cli("inspect", "searches", "--json").output)["searches"] == []
    assert cli("inspect", "search", "fresh", "--json").exit_code != 0


def test_a_replay_of_an_expired_request_before_the_sweep_is_stored_again(aged, cli, db_path) -> None:
    """Past retention a request is gone for every read; replaying it must store it again (as after the sweep),
    not answer "identical replay, nothing written" and leave the data invisible until the sweep deletes it."""
    store, clock = aged
    clock.now = CLOCK_T0 + 35 * DAY_MS  # day-0 requests expired, not swept
    assert "day zero, first" not in _contents(store, "alice")
    outcome = _add(store, "old-a", "alice", "s1", "day zero, first", "day zero, second")
    assert (outcome.status, outcome.messages) == ("added", 2)
    assert _contents(store, "alice") == ["day ten", "day twenty", "day zero, first", "day zero, second"]
    changed = _add(store, "old-b", "bob", "s1", "bob, said otherwise")  # another payload: new data, no conflict
    assert changed.status == "added"
    assert _contents(store, "bob") == ["bob on day twenty", "bob, said otherwise"]
    assert _add(store, "new-a", "alice", "s3", "day twenty").status == "duplicate"  # within retention: a no-op
    assert store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 6  # the old copies are gone
    kinds = [e["kind"] for e in review.events(store, user_id="alice", limit=2)]
    assert kinds == ["add", "expire"]
    assert lifecycle.expire(store).messages == 0


def test_a_large_expiry_commits_in_steps_so_other_writers_get_in_between(db_path, monkeypatch) -> None:
    """One transaction for every user held the write lock for the whole sweep: 200,000 messages of 10,000 users took
    5.4 s, during which every Add of `refind serve` waited (and another process's writes ran into their busy timeout)
    — a probe of round 28. Now it commits whole users in steps of about EXPIRE_STEP_ROWS rows: a writer waiting for
    the lock gets in between two steps, and the result counts every step."""
    import sqlite3

    monkeypatch.setattr(
        lifecycle, "EXPIRE_STEP_ROWS", 10, raising=False
    )  # each user below has 6 rows: one user per step
    clock = Clock(CLOCK_T0)
    store = Store(db_path, clock=clock, retention_days=30)
    for u in range(6):
        _add(store, f"old-{u}", f"user{u}", "s1", "first", "second", "third")
        _add(store, f"old2-{u}", f"user{u}", "s1", "fourth", "fifth")
    clock.now = CLOCK_T0 + 40 * DAY_MS
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)  # another process: it never waits for the lock
    got_in = 0
    deleted = False

    def between(sql: str) -> None:  # each statement of the expiring connection, as it starts
        nonlocal deleted
        nonlocal got_in
        if sql.startswith("DELETE FROM messages"):
            deleted = True
        elif sql.startswith("BEGIN IMMEDIATE") and deleted:  # a later step begins: is the lock free meanwhile?
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
                got_in += 1
            except sqlite3.OperationalError:
                pass

    store.conn.set_trace_callback(between)
    result = lifecycle.expire(store)
    store.conn.set_trace_callback(None)
    other.close()
    assert got_in == 5  # after each user's step, before the next
    assert result.cutoff == CLOCK_T0 + 10 * DAY_MS
    assert (result.messages, result.requests, len(result.users)) == (30, 12, 6)
    assert store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    assert store.conn.execute("SELECT count(*) FROM events WHERE kind = 'expire'").fetchone()[0] == 6
    store.close()
    assert sound(db_path) == 0


def test_an_expiry_stopped_after_some_steps_says_what_it_removed_before(cli, db_path, monkeypatch) -> None:
    """A sweep in steps that fails at a later step (another process held the write lock past the busy timeout; a full
    disk) has committed its earlier steps. It said 'nothing was written — retry', while it had removed every message
    of the users of those steps (a probe of round 28's review); now it says how many it removed and what to do."""
    import sqlite3

    monkeypatch.setattr(lifecycle, "EXPIRE_STEP_ROWS", 10)  # each user below has 6 rows: one user per step
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    old = Store(db_path, clock=lambda: 1_000_000_000_000, retention_days=None)  # recorded in 2001
    for u in range(3):
        _add(old, f"old-{u}", f"user{u}", "s1", "first", "second", "third")
        _add(old, f"old2-{u}", f"user{u}", "s1", "fourth", "fifth")
    old.close()
    step = lifecycle._expire_step
    holder = sqlite3.connect(db_path, isolation_level=None)

    def one_step_then_locked(*args, **kwargs):
        done = step(*args, **kwargs)
        if not holder.in_transaction:
            holder.execute("BEGIN IMMEDIATE")  # another process takes the write lock after the first step
        return done

    monkeypatch.setattr(lifecycle, "_expire_step", one_step_then_locked)
    try:
        result = cli("expire")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        monkeypatch.setattr(lifecycle, "_expire_step", step)
    assert result.exit_code == 8, result.output
    assert result.output.strip().endswith(
        "; before it, 5 messages of 1 user were expired (committed, their events recorded) — expire again for the rest"
    ), result.output
    with Store(db_path, retention_days=None) as s:
        assert s.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 10
    assert json.loads(cli("expire", "--json").output)["messages"] == 10


@pytest.mark.parametrize("signal_name", ["Ctrl-C", "SIGTERM"])
def test_an_expiry_interrupted_after_some_steps_says_what_it_removed_before(cli, db_path, monkeypatch, signal_name):
    """Ctrl-C (or SIGTERM) after a sweep's first step committed exited 130 saying nothing, while every message of
    that step's users was gone (round 28's review): now it says how many, and what to do, as a stopped replay does."""
    from refind_cli.signals import Terminated

    monkeypatch.setattr(lifecycle, "EXPIRE_STEP_ROWS", 10)  # each user below has 6 rows: one user per step
    old = Store(db_path, clock=lambda: 1_000_000_000_000, retention_days=None)  # recorded in 2001
    for u in range(3):
        _add(old, f"old-{u}", f"user{u}", "s1", "first", "second", "third")
        _add(old, f"old2-{u}", f"user{u}", "s1", "fourth", "fifth")
    old.close()
    step = lifecycle._expire_step
    calls = []

    def one_step_then_stopped(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise Terminated if signal_name == "SIGTERM" else KeyboardInterrupt
        return step(*args, **kwargs)

    monkeypatch.setattr(lifecycle, "_expire_step", one_step_then_stopped)
    result = cli("expire")
    monkeypatch.setattr(lifecycle, "_expire_step", step)
    assert result.exit_code == (143 if signal_name == "SIGTERM" else 130), result.output
    assert " ".join(result.output.split()) == (
        f"stopped by {signal_name}; before it, 5 messages of 1 user were expired (committed, their events "
        "recorded) — expire again for the rest"
    )
    assert json.loads(cli("expire", "--json").output)["messages"] == 10


def test_a_user_met_again_by_a_later_step_is_counted_for_both_steps(db_path, monkeypatch) -> None:
    """A later step of the same run meets a user again when rows older than its cutoff were stored after that user's
    step (another process whose clock stepped back). The counts of the second step replaced the first's
    (``counts.update``): the result said 1 message expired of alice while 4 were, and their 2 events say so."""
    monkeypatch.setattr(lifecycle, "EXPIRE_STEP_ROWS", 5)  # each user below has 4 rows: one user per step
    old = Store(db_path, clock=lambda: CLOCK_T0, retention_days=None)
    _add(old, "old-a", "alice", "s1", "first", "second", "third")
    _add(old, "old-b", "bob", "s1", "first", "second", "third")
    clock = Clock(CLOCK_T0 + 40 * DAY_MS)
    store = Store(db_path, clock=clock, retention_days=30)
    step = lifecycle._expire_step
    steps = 0

    def then_an_old_row(*args, **kwargs):
        nonlocal steps
        done = step(*args, **kwargs)
        steps += 1
        if steps == 1:  # alice's step committed; another process stores a row for her with a clock stepped back
            _add(old, "late-a", "alice", "s1", "stored late, recorded long ago")
        return done

    monkeypatch.setattr(lifecycle, "_expire_step", then_an_old_row)
    result = lifecycle.expire(store)
    events = store.conn.execute("SELECT sum(rows) FROM events WHERE kind = 'expire' AND user_id = 'alice'").fetchone()
    store.close()
    old.close()
    assert events[0] == 4
    assert (result.users["alice"].messages, result.users["alice"].requests) == (4, 2)
