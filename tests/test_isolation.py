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


def test_two_copies_of_one_database_in_one_process_do_not_share_an_index(tmp_path):
    # a copy (cp, or `refind backup`) keeps the file's index id; each copy then changes on its own, to the same
    # user version — a search of one must never be answered from the other's cached index or text
    import shutil

    from refind_cli import Memory

    first, second = tmp_path / "first.db", tmp_path / "copy.db"
    with Memory(first, retention_days=None) as memory:
        memory.add("the shared base message", user="u", session="s")
    shutil.copy(first, second)
    with Memory(first, retention_days=None) as one, Memory(second, retention_days=None) as two:
        one.add("in the first file the password is swordfish", user="u", session="s")
        two.add("in the copy the password is marlin", user="u", session="s")
        for memory, own, other in ((one, "swordfish", "marlin"), (two, "marlin", "swordfish")):
            shown = " ".join(hit.content for hit in memory.search("password swordfish marlin", user="u"))
            assert own in shown and other not in shown
