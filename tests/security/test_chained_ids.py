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
