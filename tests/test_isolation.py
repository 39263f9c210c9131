"""Nothing of one user reaches another's search: not as a hit, not as a neighbour — even sharing a session id.

Checked by hand once: with the ``user_id = ?`` predicate removed from ``Store.user_messages`` these tests fail.
"""

from __future__ import annotations

import pytest
from helpers import MIN, T0, add

from refind_cli import search as S


def _two_users(store):
    # the same session id and the same words for both users, interleaved in time
    add(store, "alice", "shared", ("user", "alice likes the red kayak", T0), ("user", "alice filler", T0 + 2 * MIN))
    add(
        store,
        "mallory",
        "shared",
        ("user", "mallory SECRET red kayak", T0 + MIN),
        ("user", "mallory SECRET kayak notes", T0 + 3 * MIN),
    )


@pytest.mark.parametrize("unit", ["message", "pair"])
def test_another_users_turn_is_never_returned_nor_a_neighbour(store, unit):
    _two_users(store)
    cfg = S.SearchConfig(turn_unit=unit, neighbours=3)
    for query in ["red kayak", "SECRET kayak mallory", "kayak notes"]:
        blocks = S.search(store, "alice", query, top_k=10, config=cfg)
        text = "\n".join(b.content for b in blocks)
        assert "mallory" not in text.lower()
        mine = {m.id for m in store.user_messages("alice")}
        assert all(set(b.message_ids) <= mine for b in blocks)
    assert "alice" not in "\n".join(b.content for b in S.search(store, "mallory", "alice kayak", top_k=10))


def test_warm_caches_of_two_users_do_not_mix(store):
    _two_users(store)
    for _ in range(2):  # second round from the cache
        assert all("mallory" not in b.content for b in S.search(store, "alice", "kayak", top_k=10))
        assert all("alice" not in b.content for b in S.search(store, "mallory", "kayak", top_k=10))
