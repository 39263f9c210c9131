"""Forget: the text leaves the files (database and WAL), tombstones keep no text, replays of it are refused."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest
from helpers import add_request as _add

from refind_cli import lifecycle, sealed
from refind_cli.contract import parse_add
from refind_cli.errors import Forgotten, InvalidInput, NotFound
from refind_cli.store import Store

# Long enough to spill into overflow pages, non-ASCII included, unique so that no window of it occurs elsewhere.
SECRET_A = "Alice: my locker code is 58-13-77 and the spare key hides under the blue heron statue. " * 40
SECRET_B = "Alice: 我的银行密码藏在书架第三层的红色字典里，别告诉任何人。" * 30
KEEP_S1 = "Alice: the Lisbon trip is booked for the second week of June with Maya."
BOB = "Bob: the garage opener battery died again on Tuesday evening, so I parked on the street."


def _trace(store: Store, search_id: str, user: str, quoted: str) -> None:
    """A stored planner run quoting some text (the planner stores its traces as JSON)."""
    with store.write():
        store.conn.execute(
            "INSERT INTO searches (id, user_id, at, query, mode, duration_ms, returned_ids, trace) "
            "VALUES (?, ?, ?, 'where is the key', 'planner', 12.5, '[]', ?)",
            (search_id, user, store.clock(), json.dumps({"hits": [{"content": f"[2023-06-01] USER: {quoted}"}]})),
        )


@pytest.fixture
def filled(db_path: Path) -> Store:
    s = Store(db_path, retention_days=None)
    # Some SQLite builds (Debian's) default to secure_delete=ON, others (python.org, macOS) to OFF: the store must
    # turn it on itself, for every write — stale copies left by page splits at add time cannot be scrubbed later.
    assert s.conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
    _add(s, "a-keep", "alice", "s1", KEEP_S1, "Lovely, enjoy the pastéis de nata.", ts=1685606400000)
    _add(s, "a-secret-1", "alice", "s2", SECRET_A, "Noted.", ts=1688198400000)
    _add(s, "a-secret-2", "alice", "s2", SECRET_B, ts=1688198500000)
    _add(s, "a-secret-1", "bob", "s2", BOB, ts=1688198400000)  # same request and session ids, another user
    _trace(s, "t-secret", "alice", SECRET_A[:200])
    _trace(s, "t-keep", "alice", KEEP_S1)
    _trace(s, "t-bob", "bob", BOB)
    yield s
    s.close()


def _files(db_path: Path) -> bytes:
    return b"".join(
        Path(f"{db_path}{sfx}").read_bytes() for sfx in ("", "-wal", "-shm") if Path(f"{db_path}{sfx}").exists()
    )


def _windows(text: str, width: int = 16) -> set[bytes]:
    raw = text.encode("utf-8")
    return {raw[i : i + width] for i in range(max(1, len(raw) - width + 1))}


def _leaks(db_path: Path, *texts: str) -> list[bytes]:
    data = _files(db_path)
    return sorted({w for t in texts for w in _windows(t) if w in data})


def _token_leaks(db_path: Path, gone: list[str], kept: list[str]) -> list[bytes]:
    """Index terms (as the segments store them: JSON strings) found only in the forgotten texts, still in the files."""
    from refind_cli.tokenize import analyze

    only = {t for x in gone for t in analyze(x)} - {t for x in kept for t in analyze(x)}
    data = _files(db_path)
    needles = {json.dumps(t, ensure_ascii=False).encode() for t in only if len(t.encode()) >= 4}
    return sorted(n for n in needles if n in data)


@pytest.mark.parametrize("scope", ["request", "session", "user"])
def test_forget_leaves_no_byte_of_the_text_in_database_or_wal(filled: Store, db_path: Path, scope: str) -> None:
    gone = {"request": [SECRET_A, "Noted."], "session": [SECRET_A, SECRET_B], "user": [SECRET_A, SECRET_B, KEEP_S1]}
    assert _leaks(db_path, *gone[scope]), "the text must be in the files before forget, or the scan proves nothing"
    kept = [t for t in (KEEP_S1, "Lovely, enjoy the pastéis de nata.", SECRET_B, "Noted.", BOB) if t not in gone[scope]]
    assert _token_leaks(db_path, gone[scope], kept), "the index holds the text's terms before forget"
    kwargs = {"request": {"request_id": "a-secret-1"}, "session": {"session_id": "s2"}, "user": {}}[scope]

    result = lifecycle.forget(filled, "alice", **kwargs)

    assert result.checkpointed
    # Scanned while the connection is still open, as in a running server (closing would checkpoint by itself).
    assert _leaks(db_path, *gone[scope]) == []
    assert _token_leaks(db_path, gone[scope], kept) == []  # nor a term of it in the maintained index
    assert Path(f"{db_path}-wal").stat().st_size == 0
    # Other users untouched, byte for byte and through the scoped read.
    assert BOB.encode() in _files(db_path)
    assert [m.content for m in filled.user_messages("bob")] == [BOB]
    searches = {r[0] for r in filled.conn.execute("SELECT id FROM searches")}
    expected = {"request": {"t-keep", "t-bob"}, "session": {"t-keep", "t-bob"}, "user": {"t-bob"}}[scope]
    assert searches == expected


def test_forget_counts_and_what_remains(filled: Store) -> None:
    result = lifecycle.forget(filled, "alice", session_id="s2")
    assert (result.scope, result.messages, result.requests, result.searches) == ("session", 3, 2, 1)
    assert [m.content for m in filled.user_messages("alice")] == [KEEP_S1, "Lovely, enjoy the pastéis de nata."]
    assert filled.conn.execute("SELECT count(*) FROM requests WHERE user_id = 'alice'").fetchone()[0] == 1
    assert filled.conn.execute("SELECT count(*) FROM requests WHERE user_id = 'bob'").fetchone()[0] == 1


def test_tombstone_keeps_ids_counts_and_hashes_never_text(filled: Store) -> None:
    ids = [m.id for m in filled.user_messages("alice") if m.request_id == "a-secret-1"]
    version = filled.user_version("alice")
    result = lifecycle.forget(filled, "alice", request_id="a-secret-1")
    [stone] = lifecycle.tombstones(filled, user_id="alice")
    assert stone["id"] == result.tombstone_id
    assert (stone["scope"], stone["session_id"], stone["request_id"], stone["rows"]) == (
        "request",
        "s2",
        "a-secret-1",
        2,
    )
    key = lifecycle.tombstone_key(filled)  # keyed (tests/security/test_tombstone_hash.py)
    assert stone["message_ids"] == [sealed.seal(key, i) for i in ids]  # sealed (sealed.py)
    assert stone["content_hashes"] == [
        hmac.new(key, t.encode(), hashlib.sha256).hexdigest() for t in (SECRET_A, "Noted.")
    ]
    row = " ".join(str(v) for v in filled.conn.execute("SELECT * FROM tombstones").fetchone())
    assert "locker" not in row and "Noted" not in row
    assert filled.user_version("alice") > version  # caches keyed on the version go stale
    [event] = list(
        filled.conn.execute("SELECT kind, user_id, request_id, rows, detail FROM events WHERE kind = 'forget'")
    )
    assert event[:4] == ("forget", "alice", "a-secret-1", 2)
    assert json.loads(event[4])["tombstone"] == result.tombstone_id


def test_replaying_a_forgotten_request_is_refused_naming_the_tombstone(filled: Store) -> None:
    body = {
        "request_id": "a-secret-1",
        "user_id": "alice",
        "session_id": "s2",
        "messages": [{"role": "user", "content": SECRET_A, "timestamp": 1688198400000}],
    }
    result = lifecycle.forget(filled, "alice", session_id="s2")
    with pytest.raises(Forgotten, match=f"tombstone {result.tombstone_id}"):
        filled.add(parse_add(body))
    with pytest.raises(Forgotten):  # every request of the forgotten session, also with another payload
        filled.add(parse_add({**body, "request_id": "a-secret-2", "messages": [{"role": "user", "content": "x"}]}))
    assert "locker" not in " ".join(m.content for m in filled.user_messages("alice"))
    # A deliberate new Add (a new request id) is stored; another user's same request id was never blocked.
    assert filled.add(parse_add({**body, "request_id": "a-again"})).status == "added"
    assert filled.add(parse_add({**body, "user_id": "bob", "request_id": "a-secret-2"})).status == "added"


def test_forget_nothing_is_not_found_and_scopes_are_exclusive(filled: Store) -> None:
    with pytest.raises(NotFound):
        lifecycle.forget(filled, "nobody")
    with pytest.raises(NotFound):
        lifecycle.forget(filled, "alice", session_id="no-such-session")
    lifecycle.forget(filled, "alice", request_id="a-secret-1")
    with pytest.raises(NotFound, match="already forgotten"):
        lifecycle.forget(filled, "alice", request_id="a-secret-1")
    with pytest.raises(InvalidInput):
        lifecycle.forget(filled, "alice", session_id="s1", request_id="a-keep")


def test_forget_cli_needs_yes_off_a_terminal_and_reports(cli, filled: Store) -> None:
    refused = cli("forget", "--user", "alice", "--session", "s2")
    assert refused.exit_code == 2 and "--yes" in refused.output
    assert len(filled.user_messages("alice")) == 5
    done = cli("forget", "--user", "alice", "--session", "s2", "--yes", "--json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert (data["scope"], data["messages"], data["requests"], data["checkpointed"]) == ("session", 3, 2, True)
    assert len(filled.user_messages("alice")) == 2
    missing = cli("forget", "--user", "alice", "--session", "s2", "--yes")
    assert missing.exit_code == 4
    # without --yes too: what is not there is said before any confirmation is asked (it asked to delete it, then
    # said it was not there)
    unasked = cli("forget", "--user", "alice", "--session", "s2")
    assert unasked.exit_code == 4 and "--yes" not in unasked.output
    assert unasked.output == missing.output
    for scope in (("--session", "nope"), ("--request-id", "nope"), ()):
        absent = cli("forget", "--user", "nobody", *scope)
        assert absent.exit_code == 4 and "nothing stored" in absent.output, absent.output
    stones = json.loads(cli("inspect", "tombstones", "--user", "alice", "--json").output)
    assert [(t["id"], t["scope"], t["session_id"], t["rows"]) for t in stones] == [
        (data["tombstone_id"], "session", "s2", 3)
    ]
    assert "s2" in cli("inspect", "tombstones").output


def test_replay_file_of_forgotten_request_reports_it(cli, filled: Store, tmp_path: Path) -> None:
    lifecycle.forget(filled, "alice", request_id="a-secret-2")
    line = {
        "request_id": "a-secret-2",
        "user_id": "alice",
        "session_id": "s2",
        "messages": [{"role": "user", "content": SECRET_B, "timestamp": 1688198500000}],
    }
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    out = cli("add", "--file", str(path), "--json")
    assert out.exit_code == 6  # Forgotten's exit code, as for one `refind add`: not a conflict (3)
    summary = json.loads(out.output)
    assert summary["requests_added"] == 0 and "was forgotten (tombstone" in summary["problems"][0]
    assert (summary["forgotten"], summary["conflicts"]) == (1, 0)


def test_a_reader_in_the_way_is_reported_and_the_next_sweep_finishes_the_scrub(
    filled: Store, db_path: Path, monkeypatch
) -> None:
    import sqlite3

    monkeypatch.setattr(lifecycle, "CHECKPOINT_TIMEOUT_S", 0.05)
    reader = sqlite3.connect(db_path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchone()  # a read snapshot from before the forget
    result = lifecycle.forget(filled, "alice", session_id="s2")
    assert result.checkpointed is False  # said, not hidden
    assert _leaks(db_path, SECRET_A)  # the reader's snapshot still needs the old pages
    reader.execute("COMMIT")
    reader.close()
    sweep = lifecycle.expire(filled)  # retention is off here: nothing expires, but the WAL is truncated
    assert (sweep.messages, sweep.checkpointed) == (0, True)
    assert _leaks(db_path, SECRET_A, SECRET_B) == []


@pytest.mark.parametrize("answer, gone", [("y", True), ("n", False)])
def test_forget_asks_on_a_terminal(filled: Store, db_path: Path, answer: str, gone: bool) -> None:
    """Through a real pseudo-terminal: the question is asked, and only 'y' deletes."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    primary, secondary = pty.openpty()
    env = {**os.environ, "REFIND_DB": str(db_path), "COLUMNS": "120"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "refind_cli", "forget", "--user", "alice", "--session", "s2"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        close_fds=True,
    )
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + 30
    while b"Permanently delete" not in seen and time.monotonic() < deadline and proc.poll() is None:
        if select.select([primary], [], [], 0.5)[0]:
            seen += os.read(primary, 1024)
    os.write(primary, answer.encode() + b"\n")
    proc.wait(timeout=30)
    while select.select([primary], [], [], 0.2)[0]:
        try:
            chunk = os.read(primary, 1024)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    assert b"Permanently delete session 's2' of user 'alice'?" in seen
    assert (proc.returncode == 0) == gone
    assert len(filled.user_messages("alice")) == (2 if gone else 5)


def test_forgetting_a_short_message_keeps_the_traces_that_never_showed_it(db_path) -> None:
    """A message "ok" is a substring of every stored trace ("prompt_tokens"): forgetting (or expiring) it removes
    the traces that showed it — found by its id — and no others."""
    from refind_cli import lifecycle, trace
    from refind_cli.contract import parse_add
    from refind_cli.store import Store, message_id

    def stored(sid: str, ids: list[str]) -> trace.StoredSearch:
        events = [
            trace.Event("model_call", 1, 1.0, {"prompt_tokens": 10, "completion_tokens": 5}),
            trace.Event("search", 1, 2.0, {"hits": [{"n": 1, "message_ids": ids}]}),
        ]
        return trace.StoredSearch(sid, "u", 1, "a question", "agent", "m", 1.0, 1, 10, 5, None, ids, events)

    with Store(db_path, retention_days=None) as store:
        for rid, session, text in [("r1", "chat", "ok"), ("r2", "trip", "Lisbon trip with my sister")]:
            store.add(
                parse_add(
                    {
                        "request_id": rid,
                        "user_id": "u",
                        "session_id": session,
                        "messages": [{"role": "user", "content": text}],
                    }
                )
            )
        trace.save(store, stored("showed-ok", [message_id("u", "r1", 0)]))
        trace.save(store, stored("unrelated", [message_id("u", "r2", 0)]))
        assert lifecycle.forget(store, "u", session_id="chat").searches == 1
        assert [s.id for s in trace.recent(store)] == ["unrelated"]


def test_another_process_forgetting_the_newest_message_never_shows_it_under_the_next(db_path) -> None:
    # a process holds the user's index, with the text it showed (the server); another process forgets the newest
    # message (`refind forget`, the CLI); then an Add: its message must take a seq no message ever had, else the
    # first process took it for the message it held under that seq and showed the forgotten text in its place
    import subprocess
    import sys

    from helpers import DAY, T0, add

    from refind_cli import search as S

    with Store(db_path, retention_days=None) as store:
        add(store, "u", "s1", ("user", "Bob: any ski plans?"), at=T0)
        add(store, "u", "s2", ("user", "Kate: ski chalet, door code 4411"), at=T0 + DAY)
        assert "4411" in " ".join(b.content for b in S.search(store, "u", "ski", top_k=5))  # held: text and all
        forget = (
            "import sys; from refind_cli.store import Store; from refind_cli import lifecycle; "
            "s = Store(sys.argv[1], retention_days=None); lifecycle.forget(s, 'u', session_id='s2'); s.close()"
        )
        subprocess.run([sys.executable, "-c", forget, str(db_path)], check=True, timeout=120)
        add(store, "u", "s3", ("user", "Zed: ski lessons on Sunday"), at=T0 + 2 * DAY)
        shown = " ".join(b.content for b in S.search(store, "u", "ski", top_k=5))
        assert "Zed: ski lessons on Sunday" in shown
        assert "4411" not in shown
        assert [m.seq for m in store.user_messages("u")] == [1, 3]  # 2 is never given again


def test_a_user_emptied_by_another_process_leaves_no_text_in_this_ones_memory(db_path) -> None:
    import gc
    import subprocess
    import sys
    import weakref

    from helpers import T0, add

    from refind_cli import index_cache
    from refind_cli import search as S

    def held() -> list[object]:  # this process's cached states of user u
        return [k for k in index_cache.CACHE._items if isinstance(k, tuple) and k[2:3] == ("u",)]

    scratch = S.SearchConfig(index_dates=False)  # an index of another shape: built from the rows, cached apart
    with Store(db_path, retention_days=None) as store:
        add(store, "u", "s1", ("user", "Kate: door code 4411"), at=T0)
        assert S.search(store, "u", "door", top_k=3) and S.search(store, "u", "door", top_k=3, config=scratch)
        assert sorted(k[0] for k in held()) == ["live", "scratch"]
        (state,) = (v for k, (v, _) in index_cache.CACHE._items.items() if k in held() and k[0] == "live")
        freed = weakref.ref(state)
        del state
        forget = (
            "import sys; from refind_cli.store import Store; from refind_cli import lifecycle; "
            "s = Store(sys.argv[1], retention_days=None); lifecycle.forget(s, 'u'); s.close()"
        )
        subprocess.run([sys.executable, "-c", forget, str(db_path)], check=True, timeout=120)
        gc.disable()  # what holds the text must go when dropped, not at the collector's next run
        try:
            assert S.search(store, "u", "door", top_k=3) == []
            assert S.search(store, "u", "door", top_k=3, config=scratch) == []
            assert held() == []  # neither index that held "4411" is left for the cache to push out some day
            assert freed() is None
        finally:
            gc.enable()


def test_after_the_newest_message_is_forgotten_and_the_index_rebuilt_adds_still_index_themselves(db_path) -> None:
    # an analyzer change re-indexes up to the newest message stored, below the highest seq ever given when the
    # newest was forgotten: an Add must still see the index as up to date (else every later search read the rows)
    from helpers import T0, add

    from refind_cli import index_store

    with Store(db_path, retention_days=None) as store:
        add(store, "u", "s1", ("user", "Bob: one"), at=T0)
        add(store, "u", "s2", ("user", "Kate: two"), at=T0)
        lifecycle.forget(store, "u", session_id="s2")
        store.conn.execute("UPDATE index_meta SET value = '5' WHERE key = 'analyzer'")  # another analyzer's index
    with Store(db_path, retention_days=None) as store:  # indexed again on open
        assert (index_store.watermark(store.conn), index_store.last_seq(store.conn)) == (1, 2)
        add(store, "u", "s3", ("user", "Zed: three"), at=T0)
        assert not index_store.pending(store.conn)  # the Add indexed itself
        assert [m.seq for m in store.user_messages("u")] == [1, 3]
        assert index_store.verify(store.conn) == []


def test_a_server_without_sweeps_finishes_a_blocked_scrub_once_the_reader_is_gone(
    filled: Store, db_path: Path, make_client, monkeypatch
) -> None:
    # a probe of round 18: `serve --expire-interval 0` — a forget whose truncate met a reader left the text in the
    # -wal until the server stopped (no sweep ever came)
    import sqlite3
    import time

    from refind_cli.server import app

    monkeypatch.setattr(lifecycle, "CHECKPOINT_TIMEOUT_S", 0.05)
    monkeypatch.setattr(app, "SCRUB_RETRY_S", 0.05)
    client = make_client(expire_interval_s=0)
    reader = sqlite3.connect(db_path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchone()  # a read snapshot from before the forget
    response = client.delete("/v1/memories?user_id=alice&session_id=s2")
    assert response.status_code == 200 and response.json()["checkpointed"] is False
    time.sleep(0.3)
    assert _leaks(db_path, SECRET_A)  # retried meanwhile: the reader still needs the old pages
    reader.execute("COMMIT")
    reader.close()
    deadline = time.monotonic() + 10
    while _leaks(db_path, SECRET_A, SECRET_B) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _leaks(db_path, SECRET_A, SECRET_B) == []
