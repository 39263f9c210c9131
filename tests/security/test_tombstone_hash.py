"""Item 6: tombstone hashes are keyed with a per-database secret, so a short forgotten text cannot be recovered by
guessing from `refind inspect tombstones`; tombstones written before (unkeyed) lose their hashes on migration."""

from __future__ import annotations

import hashlib
import json
import sqlite3

from helpers import CLOCK_T0, Clock

from refind_cli import lifecycle, migrations, sealed
from refind_cli.auto_ids import auto_request_id
from refind_cli.contract import parse_add
from refind_cli.store import DAY_MS, Store, message_id

GUESSES = ["yes", "no", "ok", "My PIN is 4417", "thanks"] + [f"My PIN is {n:04d}" for n in range(10_000)]


def _add(store: Store, rid: str, text: str) -> None:
    body = {"request_id": rid, "user_id": "alice", "session_id": "s", "messages": [{"role": "user", "content": text}]}
    store.add(parse_add(body))


def test_a_short_forgotten_text_cannot_be_found_by_guessing(db_path, cli) -> None:
    with Store(db_path) as store:
        _add(store, "r1", "My PIN is 4417")
        _add(store, "r2", "yes")
        lifecycle.forget(store, "alice")
    listing = cli("inspect", "tombstones", "--user", "alice", "--json").stdout
    hashes = set(json.loads(listing)[0]["content_hashes"])
    assert len(hashes) == 2
    unkeyed = {hashlib.sha256(g.encode()).hexdigest() for g in GUESSES}
    assert not hashes & unkeyed


def test_each_database_has_its_own_key(tmp_path) -> None:
    keys = []
    for name in ("a.db", "b.db"):
        with Store(tmp_path / name) as store:
            keys.append(lifecycle.tombstone_key(store))
    assert len(keys[0]) == 32 and keys[0] != keys[1]


def _before(db_path, migration: str) -> sqlite3.Connection:
    """A database as a refind that knew every migration before ``migration`` left it, in an open transaction."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    conn.execute("BEGIN")
    for name, fn in migrations.MIGRATIONS:
        if name == migration:
            break
        fn(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    return conn


def test_unkeyed_hashes_of_an_older_database_are_dropped(db_path) -> None:
    conn = _before(db_path, "m003_security_tombstone_key")
    old = json.dumps([hashlib.sha256(b"yes").hexdigest()])
    conn.execute(
        "INSERT INTO tombstones (at, scope, user_id, rows, message_ids, content_hashes) "
        "VALUES (0, 'user', 'alice', 1, '[\"x\"]', ?)",
        (old,),
    )
    conn.execute("COMMIT")
    conn.close()
    with Store(db_path) as store:
        [stone] = lifecycle.tombstones(store)
        assert stone["content_hashes"] == []
        assert stone["message_ids"] == [sealed.seal(lifecycle.tombstone_key(store), "x")]  # m010 sealed it


# ---- ids derived from the text (sealed.py; a probe of round 24) -------------------------------------------------

PIN = "Tess: my bank pin is 4417 quokka"


def _cli_id(text: str) -> str:  # what `refind add TEXT --user tess --session s1` names its request
    return "cli-" + auto_request_id("tess", "s1", [("user", text, None)])[len("auto-") :]


def _guessable(cli, db_path) -> set[str]:
    """Every id a guess of the PIN derives (request and first message), and those the listings show."""
    guesses = {_cli_id(f"Tess: my bank pin is {n:04d} quokka") for n in range(10_000)}
    guesses |= {message_id("tess", rid, 0) for rid in list(guesses)}
    shown = cli("inspect", "events", "--user", "tess", "--json").stdout
    shown += cli("inspect", "tombstones", "--user", "tess", "--json").stdout
    return {g for g in guesses if g in shown or g.encode() in db_path.read_bytes()}


def test_a_forgotten_text_cannot_be_checked_against_the_ids_it_left(cli, db_path) -> None:
    # `refind inspect events` kept the forgotten request's id, cli-<sha256 of the text>: the PIN was found among
    # 10,000 guesses in milliseconds; the tombstone kept its message ids, hashes of that id
    assert cli("add", PIN, "--user", "tess", "--session", "s1").exit_code == 0
    assert _guessable(cli, db_path) == {_cli_id(PIN), message_id("tess", _cli_id(PIN), 0)}  # stored: its own ids
    assert cli("forget", "--user", "tess", "--session", "s1", "--yes").exit_code == 0
    assert _guessable(cli, db_path) == set()
    events = json.loads(cli("inspect", "events", "--user", "tess", "--json").stdout)
    assert {e["request_id"] for e in events if e["kind"] in ("add", "forget")} <= {None} | {
        f"cli-sealed:{sealed.seal(_key(db_path), _cli_id(PIN))}"
    }
    again = cli("add", PIN, "--user", "tess", "--session", "s1")  # a replay is still refused
    assert again.exit_code == 6 and "was forgotten (tombstone 1," in again.output


def test_a_forgotten_request_of_its_own_id_is_still_named_and_refused(cli, db_path) -> None:
    # an id the caller gave tells nothing of the text: kept as it is — also one that merely begins as refind's do
    # (a review: "api-order-17" was sealed) — and a replay of it refused
    assert cli("add", PIN, "--user", "tess", "--session", "s1", "--request-id", "api-order-17").exit_code == 0
    assert cli("forget", "--user", "tess", "--request-id", "api-order-17", "--yes").exit_code == 0
    [stone] = json.loads(cli("inspect", "tombstones", "--user", "tess", "--json").stdout)
    assert stone["request_id"] == "api-order-17"
    again = cli("add", PIN, "--user", "tess", "--session", "s1", "--request-id", "api-order-17")
    assert again.exit_code == 6 and "request_id 'api-order-17' of user 'tess' was forgotten" in again.output


def test_expire_seals_the_ids_of_what_it_removed(db_path) -> None:
    clock = Clock(CLOCK_T0)
    with Store(db_path, clock=clock, retention_days=30) as store:
        rid = "cli-" + "0123456789abcdef0123"
        store.add(parse_add(_body(rid, "Tess: the alarm code is 9911")))
        store.add(parse_add(_body("r-kept", "Tess: nothing secret")))
        clock.now = CLOCK_T0 + 40 * DAY_MS
        lifecycle.expire(store)
        ids = [r[0] for r in store.conn.execute("SELECT request_id FROM events WHERE kind = 'add' ORDER BY id")]
        assert ids == [f"cli-sealed:{sealed.seal(lifecycle.tombstone_key(store), rid)}", "r-kept"]


def test_an_older_databases_tombstones_and_events_are_sealed_and_still_refuse(db_path) -> None:
    rid = _cli_id(PIN)
    conn = _before(db_path, "m010_sealed_ids")
    conn.execute("INSERT INTO write_grant (id) VALUES (1)")  # the grant as m009 made it
    first = message_id("tess", rid, 0)
    conn.execute(
        "INSERT INTO tombstones (at, scope, user_id, session_id, rows, message_ids, content_hashes) "
        "VALUES (0, 'session', 'tess', 's1', 1, ?, '[]')",
        (json.dumps([first]),),
    )
    conn.execute("INSERT INTO events (at, kind, user_id, request_id, rows) VALUES (0, 'add', 'tess', ?, 1)", (rid,))
    conn.execute("DELETE FROM write_grant")
    conn.execute("COMMIT")
    conn.close()
    with Store(db_path) as store:
        key = lifecycle.tombstone_key(store)
        [stone] = lifecycle.tombstones(store)
        assert stone["message_ids"] == [sealed.seal(key, first)]
        [event] = store.conn.execute("SELECT request_id FROM events WHERE kind = 'add'").fetchall()
        assert event[0] == f"cli-sealed:{sealed.seal(key, rid)}"
        assert store.tombstone_for("tess", rid) is not None  # a replay of it is still refused
        assert store.known_requests("tess", [rid, "other"]) == {rid: (stone["id"], 0)}
    assert rid.encode() not in db_path.read_bytes() and first.encode() not in db_path.read_bytes()


def _body(rid: str, text: str) -> dict:
    return {"request_id": rid, "user_id": "tess", "session_id": "s1", "messages": [{"role": "user", "content": text}]}


def _key(db_path) -> bytes:
    with Store(db_path) as store:
        return lifecycle.tombstone_key(store)
