"""A kept chained request (``auto+``: what a grown log's replay stores after a group it knows, auto_ids.py) confirms
no guess of a removed piece it is chained on.

A chained id is computed from the id of the piece before it, itself a hash of that piece's text. Stored as computed,
the kept request's id — and its messages' ids, which search results, ``inspect events`` and export show — let anyone
check a guess of the forgotten text ("my bank pin is 4417" among 10,000) offline in a tenth of a second (a probe of
round 24). A chained request is stored keyed under the database's secret now; the attacker's computation below is
the one refind makes (checked with the secret), so each test fails where the id is stored as computed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import DAY, Clock

from refind_cli import lifecycle, sealed
from refind_cli.auto_ids import auto_request_id, prefix_ids, stored_chained
from refind_cli.replay import replay
from refind_cli.store import Store, message_ids

USER, SESSION = "tess", "s1"
GUESSES = [f"my bank pin is {n:04d}" for n in range(10_000)]
PIN = GUESSES[4417]


def _line(role: str, content: str) -> str:
    return json.dumps({"user_id": USER, "session_id": SESSION, "role": role, "content": content})


def _append(log: Path, *lines: str) -> str:
    with log.open("a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return str(log)


def _exported(cli) -> list[dict]:
    result = cli("export", "--user", USER)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def _shown(cli) -> str:
    """Everything refind shows of the user: the audit log, the tombstones, the export, a search's results."""
    shown = [
        cli("inspect", "--json", "events", "--user", USER),
        cli("inspect", "--json", "tombstones", "--user", USER),
        cli("export", "--user", USER),
        cli("search", "--mode", "bm25", "--json", "--user", USER, "kayak"),
    ]
    assert all(r.exit_code == 0 for r in shown), [r.output for r in shown]
    return "\n".join(r.stdout for r in shown)


def _stored_ids(db_path: Path) -> set[str]:
    """Every request id and message id the file holds, wherever it holds one."""
    import sqlite3

    conn = sqlite3.connect(db_path)
    try:
        ids = {r for (r,) in conn.execute("SELECT request_id FROM requests")}
        ids |= {m for (m,) in conn.execute("SELECT id FROM messages")}
        ids |= {r for (r,) in conn.execute("SELECT request_id FROM events WHERE request_id IS NOT NULL")}
        for rid, mids in conn.execute("SELECT request_id, message_ids FROM tombstones"):
            ids |= {rid, *json.loads(mids)}
        return ids
    finally:
        conn.close()


def _said(request: dict) -> list[tuple[str, str, int | None]]:
    return [(m["role"], m["content"], m["timestamp"]) for m in request["messages"]]


def _chained_guesses(after_guess, kept: dict) -> dict[str, list[str]]:
    """What an attacker computes from each guess: the kept request's id, had it been chained on the guess, and its
    messages' ids."""
    said = _said(kept)
    out = {}
    for guess in GUESSES:
        rid = prefix_ids(USER, SESSION, said, after=after_guess(guess))[-1]
        out[guess] = [rid, *message_ids(USER, rid, 0, len(said))]
    return out


def _key(db_path: Path) -> bytes:
    with Store(db_path, retention_days=None) as store:
        return sealed.key(store.conn)


def _confirmed(guesses: dict[str, list[str]], shown: str, stored: set[str]) -> list[str]:
    return [g for g, ids in guesses.items() if any(i in shown or i in stored for i in ids)]


@pytest.mark.parametrize("removed", ["forget", "expire"])
def test_a_kept_chained_request_confirms_no_guess_of_the_forgotten_group_before_it(
    cli, db_path, tmp_path, removed: str
) -> None:
    log = tmp_path / "agent.jsonl"
    real_now = int(time.time() * 1000)
    clock = Clock(real_now - 35 * DAY)  # (the CLI reads with the real clock: the kept request is 15 days old)
    with Store(db_path, clock=clock, retention_days=30 if removed == "expire" else None) as store:
        replay(store, _append(log, _line("user", PIN)))
        clock.now += 20 * DAY
        grown = replay(store, _append(log, _line("assistant", "noted, kayak trip on friday"), _line("user", "ok")))
        assert (grown.messages_added, grown.grown) == (2, 1)
        first = auto_request_id(USER, SESSION, [("user", PIN, None)])
        if removed == "forget":
            lifecycle.forget(store, USER, request_id=first)
        else:
            clock.now = real_now
            assert lifecycle.expire(store).messages == 1
    [kept] = _exported(cli)
    guesses = _chained_guesses(lambda guess: auto_request_id(USER, SESSION, [("user", guess, None)]), kept)
    # the attacker computes what refind computes: with the database's secret, the pin's id is the kept one
    assert stored_chained(_key(db_path), guesses[PIN][0]) == kept["request_id"]
    assert _confirmed(guesses, _shown(cli), _stored_ids(db_path)) == []
    with Store(db_path, retention_days=30 if removed == "expire" else None) as store:  # replayed again: nothing new
        again = replay(store, str(log))
        assert again.messages_added == (1 if removed == "expire" else 0)  # (an expired group is stored again)
        assert again.forgotten == (1 if removed == "forget" else 0)


def test_a_kept_chained_request_confirms_no_guess_of_the_forgotten_one_it_follows(cli, db_path, tmp_path) -> None:
    # the other way: the group, a chained request (the pin), a chained request after it; the middle one forgotten
    log = tmp_path / "agent.jsonl"
    with Store(db_path, retention_days=None) as store:
        replay(store, _append(log, _line("user", "kayak plans for friday")))
        replay(store, _append(log, _line("assistant", PIN)))
        assert replay(store, _append(log, _line("user", "bring the kayak paddle"), _line("user", "ok"))).grown == 1
    head, middle, kept = _exported(cli)
    assert [len(r["messages"]) for r in (head, middle, kept)] == [1, 1, 2]
    assert cli("forget", "--user", USER, "--request-id", middle["request_id"], "--yes").exit_code == 0
    # the attacker sees the first group's id, and the kept request after the forgotten one
    assert [r["request_id"] for r in _exported(cli)] == [head["request_id"], kept["request_id"]]
    guesses = _chained_guesses(
        lambda guess: prefix_ids(USER, SESSION, [("assistant", guess, None)], after=head["request_id"])[-1], kept
    )
    assert stored_chained(_key(db_path), guesses[PIN][0]) == kept["request_id"]
    assert _confirmed(guesses, _shown(cli), _stored_ids(db_path)) == []
    with Store(db_path, retention_days=None) as store:  # replayed again: the forgotten pin does not come back
        again = replay(store, str(log))
        assert (again.messages_added, again.forgotten, again.duplicates) == (0, 1, 2)


def test_an_older_databases_chained_ids_are_renamed_keyed_and_a_replay_still_knows_them(cli, db_path, tmp_path) -> None:
    # a database as round 24 left it (every migration before m011; chained requests stored under their computed ids):
    # a grown log's chain, its middle piece forgotten, a stored planner run quoting the kept request's messages
    from refind_cli import migrations, trace
    from refind_cli import replay as replay_module
    from refind_cli.store import message_id

    with pytest.MonkeyPatch.context() as old:
        # (m012's column as well: the forget below is this version's, and writes it)
        old.setattr(migrations, "MIGRATIONS", [m for m in migrations.MIGRATIONS if m[0] != "m011_keyed_chains"])
        old.setattr(replay_module, "stored_chained", lambda secret, rid: rid)
        log = tmp_path / "agent.jsonl"
        with Store(db_path, retention_days=None) as store:
            replay(store, _append(log, _line("user", "kayak plans for friday")))
            replay(store, _append(log, _line("assistant", PIN)))
            replay(store, _append(log, _line("user", "bring the kayak paddle"), _line("user", "ok")))
            head, middle, kept = [
                r[0] for r in store.conn.execute("SELECT DISTINCT request_id FROM messages ORDER BY seq")
            ]
            lifecycle.forget(store, USER, request_id=middle)
            old_ids = message_ids(USER, kept, 0, 2)
            events = [trace.Event("search", 1, 2.0, {"hits": [{"n": 1, "id": old_ids[0], "message_ids": old_ids}]})]
            run = trace.StoredSearch(
                "s-1", USER, int(time.time() * 1000), "kayak?", "agent", "m", 1.0, 1, 10, 5, None, old_ids, events
            )
            assert trace.save(store, run)
        pin = prefix_ids(USER, SESSION, [("assistant", PIN, None)], after=head)[-1]
        assert (
            kept
            == prefix_ids(USER, SESSION, [("user", "bring the kayak paddle", None), ("user", "ok", None)], after=pin)[
                -1
            ]
        )

    started = time.perf_counter()
    with Store(db_path, retention_days=None) as store:  # this version's open: m011
        assert time.perf_counter() - started < 5
        key = sealed.key(store.conn)
        renamed = stored_chained(key, kept)
        requests = [r[0] for r in store.conn.execute("SELECT request_id FROM requests ORDER BY request_id")]
        assert requests == sorted([head, renamed])
        new_ids = [message_id(USER, renamed, i) for i in range(2)]
        rows = store.conn.execute("SELECT id FROM messages WHERE request_id = ? ORDER BY idx", (renamed,))
        assert [r[0] for r in rows] == new_ids
        adds = [r[0] for r in store.conn.execute("SELECT request_id FROM events WHERE kind = 'add' ORDER BY id")]
        assert adds == [head, f"auto+sealed:{sealed.seal(key, middle)}", renamed]  # (the forgotten one sealed: m010)
        assert store.conn.execute("PRAGMA foreign_key_check").fetchall() == []
    # the stored planner run quotes the renamed messages: its returned ids resolve
    result = cli("inspect", "--json", "search", "s-1")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["returned_ids"] == new_ids
    assert shown["events"][0]["data"]["hits"] == [{"n": 1, "id": new_ids[0], "message_ids": new_ids}]
    # the attack on the old file no longer confirms the pin; the old ids are nowhere in the file
    [_, kept_request] = _exported(cli)
    guesses = _chained_guesses(
        lambda guess: prefix_ids(USER, SESSION, [("assistant", guess, None)], after=head)[-1], kept_request
    )
    assert guesses[PIN][0] == kept  # (what round 24 stored)
    assert _confirmed(guesses, _shown(cli), _stored_ids(db_path)) == []
    held = db_path.read_bytes()
    assert not [i for i in (kept, *old_ids) if i.encode() in held]
    # the log replayed again, and grown again: nothing stored twice, the forgotten pin refused
    with Store(db_path, retention_days=None) as store:
        again = replay(store, str(log))
        assert (again.messages_added, again.forgotten, again.duplicates) == (0, 1, 2)
        grown = replay(store, _append(log, _line("assistant", "the tent too")))
        assert (grown.messages_added, grown.forgotten, grown.grown) == (1, 1, 1)
        contents = [r[0] for r in store.conn.execute("SELECT content FROM messages ORDER BY seq")]
    assert contents == ["kayak plans for friday", "bring the kayak paddle", "ok", "the tent too"]
