"""Logs of one session replayed one by one, then concatenated into one file and replayed (auto_ids._chain): the lines
where the first log ends and the next begins form one group of the concatenation, whose first piece is the first
log's last group and whose rest is the second log's first group — stored under its own id, chained on nothing. The
concatenation stores nothing new; a log that goes on after them stores only its new lines, once."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

T0 = 1_700_000_000_000


def _line(content: str, at: int | None, role: str = "user", session: str = "s") -> str:
    line = {"user_id": "u", "session_id": session, "role": role, "content": content}
    if at is not None:
        line["timestamp"] = at
    return json.dumps(line)


L1 = [_line("a", T0 + 1000), _line("b", T0 + 2000, "assistant")]
L2 = [_line("c", T0 + 4000), _line("d", T0 + 5000, "assistant")]
L3 = [_line("e", T0 + 7000), _line("f", T0 + 8000, "assistant")]


def _write(path: Path, *lines: str) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _stored(db: Path) -> Counter[tuple[str, str, int | None]]:
    conn = sqlite3.connect(db)
    try:
        return Counter(conn.execute("SELECT role, content, said_at FROM messages"))
    finally:
        conn.close()


def _said(*lines: str) -> Counter[tuple[str, str, int | None]]:
    return Counter((m["role"], m["content"], m.get("timestamp")) for m in map(json.loads, lines))


def _add(cli, path: str) -> dict:
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_two_logs_replayed_then_concatenated_store_nothing_again(cli, db_path, tmp_path) -> None:
    _add(cli, _write(tmp_path / "l1.jsonl", *L1))
    _add(cli, _write(tmp_path / "l2.jsonl", *L2))
    summary = _add(cli, _write(tmp_path / "l12.jsonl", *L1, *L2))
    assert summary["messages_added"] == 0  # (was 2: c and d stored a second time, as a grown group's new messages)
    assert summary["grown"] == 0
    assert _stored(db_path) == _said(*L1, *L2)


def test_a_third_log_after_the_concatenated_two_stores_only_its_lines(cli, db_path, tmp_path) -> None:
    _add(cli, _write(tmp_path / "l1.jsonl", *L1))
    _add(cli, _write(tmp_path / "l2.jsonl", *L2))
    l123 = _write(tmp_path / "l123.jsonl", *L1, *L2, *L3)
    summary = _add(cli, l123)
    assert (summary["messages_added"], summary["grown"]) == (2, 1)  # e and f, once (was 4: c and d again)
    assert _add(cli, l123)["messages_added"] == 0
    assert _add(cli, _write(tmp_path / "l3.jsonl", *L3))["messages_added"] == 0
    assert _stored(db_path) == _said(*L1, *L2, *L3)


def test_three_logs_replayed_one_by_one_then_concatenated_store_nothing_again(cli, db_path, tmp_path) -> None:
    for name, lines in (("l3", L3), ("l1", L1), ("l2", L2)):  # in any order
        _add(cli, _write(tmp_path / f"{name}.jsonl", *lines))
    assert _add(cli, _write(tmp_path / "l123.jsonl", *L1, *L2, *L3))["messages_added"] == 0
    assert _stored(db_path) == _said(*L1, *L2, *L3)


def test_a_long_second_log_cut_into_other_groups_of_20_stores_nothing_again(cli, db_path, tmp_path) -> None:
    # 5 + 30 lines: the concatenation's groups of 20 end elsewhere than the second log's did (5-25 and 25-35 there,
    # 0-20 and 20-35 here), so its second group follows a group stored already (a copy) and is looked up by its
    # messages' said-ats
    l1 = [_line(f"first {i}", T0 + i * 1000) for i in range(5)]
    l2 = [_line(f"second {i}", T0 + (10 + i) * 1000, ("user", "assistant")[i % 2]) for i in range(30)]
    _add(cli, _write(tmp_path / "l1.jsonl", *l1))
    _add(cli, _write(tmp_path / "l2.jsonl", *l2))
    summary = _add(cli, _write(tmp_path / "l12.jsonl", *l1, *l2))
    assert summary["messages_added"] == 0  # (was 15: lines 20-34 stored again)
    assert _stored(db_path) == _said(*l1, *l2)


def test_without_timestamps_the_second_log_is_stored_again(cli, db_path, tmp_path) -> None:
    # the ids of lines without a said-at hash their text alone: a new day's "c" would be taken for the old one, so the
    # second log's group is not looked up as a group of its own (a duplicate at worst, never a message lost)
    l1 = [_line("a", None), _line("b", None, "assistant")]
    l2 = [_line("c", None), _line("d", None, "assistant")]
    _add(cli, _write(tmp_path / "l1.jsonl", *l1))
    _add(cli, _write(tmp_path / "l2.jsonl", *l2))
    assert _add(cli, _write(tmp_path / "l12.jsonl", *l1, *l2))["messages_added"] == 2


@pytest.mark.parametrize("between", [[], [_line("x", T0 + 3000, session="other")]])
def test_a_log_concatenated_after_its_own_copy_is_stored_again(cli, db_path, tmp_path, between) -> None:
    # README: a group without request_id that comes again in the file is another group, stored again — also when the
    # stored second log is what it repeats
    _add(cli, _write(tmp_path / "l1.jsonl", *L1))
    _add(cli, _write(tmp_path / "l2.jsonl", *L2))
    fresh = tmp_path / "fresh.db"
    twice = _write(tmp_path / "twice.jsonl", *L1, *L2, *between, *L2)
    result = cli("add", "--file", twice, "--db", str(fresh), "--json")
    assert result.exit_code == 0, result.output
    _add(cli, twice)
    assert _stored(db_path) == _stored(fresh)  # what one replay of the file into a new database stores
    assert _add(cli, twice)["messages_added"] == 0


def test_the_second_log_forgotten_is_not_brought_back_by_the_concatenation(cli, db_path, tmp_path) -> None:
    _add(cli, _write(tmp_path / "l1.jsonl", *L1))
    _add(cli, _write(tmp_path / "l2.jsonl", *L2))
    conn = sqlite3.connect(db_path)
    (l2_id,) = conn.execute("SELECT DISTINCT request_id FROM messages WHERE content = 'c'").fetchone()
    conn.close()
    assert cli("forget", "--user", "u", "--request-id", l2_id, "--yes").exit_code == 0
    result = cli("add", "--file", _write(tmp_path / "l12.jsonl", *L1, *L2), "--json")
    assert result.exit_code == 6, result.output
    assert json.loads(result.output)["forgotten"] == 1
    assert _stored(db_path) == _said(*L1)


def test_a_long_concatenation_reads_the_session_once(db_path, tmp_path, monkeypatch) -> None:
    # each group after a copy is looked up by its said-ats: the session's messages are read once, not once per group
    # (a session of 50,000 messages: 12.7 s, then 0.7 s)
    from refind_cli.replay import replay
    from refind_cli.store import Store

    calls: list[object] = []
    said_at_rows = Store.said_at_rows

    def counted(self, user_id, session_id, times):
        calls.append(None if times is None else len(times))
        return said_at_rows(self, user_id, session_id, times)

    l1 = [_line(f"first {i}", T0 + i * 1000) for i in range(5)]
    l2 = [_line(f"second {i}", T0 + (10 + i) * 1000, ("user", "assistant")[i % 2]) for i in range(400)]
    with Store(db_path) as store:
        replay(store, _write(tmp_path / "l1.jsonl", *l1), parallel=False)
        replay(store, _write(tmp_path / "l2.jsonl", *l2), parallel=False)
        monkeypatch.setattr(Store, "said_at_rows", counted)
        summary = replay(store, _write(tmp_path / "l12.jsonl", *l1, *l2), batch_size=3, parallel=False)
    assert summary.messages_added == 0
    assert calls == [15, None]  # the rest of the first group (after l1's lines), then the whole session once
    assert _stored(db_path) == _said(*l1, *l2)


def _tiled(i: int, stop: int, earlier: list[tuple[int, int]]) -> bool:
    """Whether logs i..stop-1 are earlier replays' files end to end."""
    return i == stop or any(a == i and b < stop and _tiled(b + 1, stop, earlier) for a, b in earlier)


def test_logs_and_their_concatenations_in_random_orders_store_each_line_once(db_path, tmp_path) -> None:
    # a scratch fuzz of round 27, kept small: a timeline of one or two sessions (timestamped lines, "ok" and "yes" said
    # again and again) cut into 2-4 logs; logs and concatenations of consecutive logs replayed in random orders and
    # batch sizes. Where each replay's logs stored already come first and were files of earlier replays end to end
    # (README: logs put in front of stored ones are stored again), the database holds each line once — what one
    # replay of them all stores. (Main before round 27: 156 of 1,055 such cases of 3,000 stored lines twice.)
    import random

    from refind_cli.replay import replay
    from refind_cli.store import Store

    checked = 0
    for seed in range(120):
        rnd = random.Random(seed)
        n, sessions, at = rnd.randint(2, 18), rnd.choice([1, 2]), T0
        session, lines = "s0", []
        for i in range(n):
            if sessions == 2 and rnd.random() < 0.3:
                session = "s1" if session == "s0" else "s0"
            at += rnd.randint(1, 3) * 1000
            content = rnd.choice(["ok", "yes", f"m{i}"])
            lines.append(_line(content, at, rnd.choice(["user", "assistant"]), session))
        k = rnd.randint(2, min(4, n))
        bounds = [0, *sorted(rnd.sample(range(1, n), k - 1)), n]
        runs = [rnd.choice([(i, j) for i in range(k) for j in range(i, k)]) for _ in range(rnd.randint(2, 5))]
        done: set[int] = set()
        promised = True
        for r, (i, j) in enumerate(runs):
            state = [m in done for m in range(i, j + 1)]
            promised &= state == sorted(state, reverse=True) and _tiled(i, i + sum(state), runs[:r])
            done.update(range(i, j + 1))
        if not promised:
            continue
        db = tmp_path / f"{seed}.db"
        with Store(db) as store:
            for r, (i, j) in enumerate(runs):
                path = _write(tmp_path / f"{seed}-{r}.jsonl", *lines[bounds[i] : bounds[j + 1]])
                replay(store, path, batch_size=rnd.choice([1, 2, 500]), parallel=False)
        covered = [line for m in sorted(done) for line in lines[bounds[m] : bounds[m + 1]]]
        assert _stored(db) == _said(*covered), (seed, bounds, runs)
        checked += 1
    assert checked > 30


def test_a_later_message_said_at_a_coarse_time_is_not_taken_for_an_earlier_one(cli, db_path, tmp_path) -> None:
    # a review of round 27: with a session's date on every line, a new "ok" said after "b" matched the group an
    # earlier "ok" was stored as on its own (its id hashes role, text and said-at: the same), and was lost; a group
    # whose said-ats do not tell its messages apart is never matched against groups of their own
    day = T0
    _add(
        cli,
        _write(tmp_path / "a.jsonl", _line("ok", day), _line("foo", day, session="x"), _line("b", day, "assistant")),
    )
    summary = _add(cli, _write(tmp_path / "b.jsonl", _line("b", day, "assistant"), _line("ok", day)))
    assert summary["messages_added"] == 1
    assert _stored(db_path)[("user", "ok", day)] == 2  # the earlier "ok" and the later one


def test_a_log_of_several_users_concatenated_twice_stores_every_group_twice(cli, db_path, tmp_path) -> None:
    # a review of round 27: replayed once, then concatenated with itself, a one-message group of another user was
    # found stored already (by its said-at, after the copy before it) the second time too, and stored once, not twice
    log = [
        _line("ok", T0 + 6000),
        _line("ok", T0 + 7000, "assistant"),
        json.dumps({"user_id": "u2", "session_id": "s2", "role": "user", "content": "m5", "timestamp": T0 + 8000}),
        json.dumps({"user_id": "u1", "session_id": "s", "role": "user", "content": "yes", "timestamp": T0 + 9000}),
    ]
    _add(cli, _write(tmp_path / "l.jsonl", *log))
    twice = _write(tmp_path / "ll.jsonl", *log, *log)
    fresh = tmp_path / "fresh.db"
    assert cli("add", "--file", twice, "--db", str(fresh), "--json").exit_code == 0
    _add(cli, twice)
    assert _stored(db_path) == _stored(fresh)  # what one replay of the file into a new database stores
