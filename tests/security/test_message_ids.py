"""Item 12: message ids derived from an unambiguous encoding of (user, request, index), and databases written with
the first derivation keep working (ids are never re-derived on read)."""

from __future__ import annotations

import pytest

from refind_cli.contract import parse_add
from refind_cli.errors import Forgotten
from refind_cli.lifecycle import forget
from refind_cli.store import Store, legacy_message_id, message_id


def req(request_id: str, user_id: str, text: str, session_id: str = "s"):
    return parse_add(
        {
            "request_id": request_id,
            "user_id": user_id,
            "session_id": session_id,
            "messages": [{"role": "user", "content": text}],
        }
    )


def test_one_user_cannot_block_another_through_the_separator(store: Store) -> None:
    assert store.add(req("b\x1fc", "mallory", "mallory's own")).status == "added"
    victim = store.add(req("c", "mallory\x1fb", "the victim's message"))  # was a 409 naming the collision
    assert victim.status == "added"
    assert [m.content for m in store.user_messages("mallory\x1fb")] == ["the victim's message"]
    assert [m.content for m in store.user_messages("mallory")] == ["mallory's own"]
    assert message_id("mallory", "b\x1fc", 0) != message_id("mallory\x1fb", "c", 0)


def _make_legacy(store: Store, user_id: str) -> None:
    """Rewrite a user's stored ids as the first derivation wrote them: a database from before the change."""
    rows = store.conn.execute("SELECT seq, request_id, idx FROM messages WHERE user_id = ?", (user_id,)).fetchall()
    with store.write():
        for seq, request_id, idx in rows:
            store.conn.execute(
                "UPDATE messages SET id = ? WHERE seq = ?", (legacy_message_id(user_id, request_id, idx), seq)
            )


def test_a_replay_into_an_old_database_is_still_a_duplicate(db_path) -> None:
    with Store(db_path) as store:
        store.add(req("r1", "alice", "Caroline: I adopted a cat"))
        _make_legacy(store, "alice")
        legacy = [m.id for m in store.user_messages("alice")]
        assert legacy == [legacy_message_id("alice", "r1", 0)]
    with Store(db_path) as reopened:
        assert reopened.add(req("r1", "alice", "Caroline: I adopted a cat")).status == "duplicate"
        assert [m.id for m in reopened.user_messages("alice")] == legacy  # stored ids are kept, never re-derived


def test_a_request_forgotten_in_an_old_database_stays_forgotten(db_path) -> None:
    with Store(db_path) as store:
        store.add(req("r1", "alice", "Caroline: my PIN is 4417", session_id="s1"))
        _make_legacy(store, "alice")
        forget(store, "alice", session_id="s1")  # a session tombstone lists the (legacy) ids, not the request id
        with pytest.raises(Forgotten):
            store.add(req("r1", "alice", "Caroline: my PIN is 4417", session_id="s1"))
