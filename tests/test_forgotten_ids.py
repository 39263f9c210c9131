"""A user's forgotten ids are read from their tombstones once, not at every request (round 28): a replay after a forget
of a session of 200,000 messages decoded (or searched with instr) that tombstone at each group of its lines — 218 s,
where the replay takes 3 s without the forget — and every later Add of that user paid the same. What is refused, and
by which tombstone, is unchanged; a forget by this connection or another is seen at once."""

from __future__ import annotations

import json
from pathlib import Path

from refind_cli.contract import parse_add
from refind_cli.lifecycle import forget
from refind_cli.replay import replay
from refind_cli.store import Store

T0 = 1_700_000_000_000


def _log(path: Path, session: str, n: int, word: str = "note") -> str:
    lines = [
        json.dumps(
            {
                "user_id": "alice",
                "session_id": session,
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"{word} {i}",
                "timestamp": T0 + i * 1000,
            }
        )
        for i in range(n)
    ]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _tombstone_reads(store: Store) -> list[str]:
    reads: list[str] = []
    store.conn.set_trace_callback(lambda sql: reads.append(sql) if "message_ids" in sql else None)
    return reads


def test_a_replay_after_a_forget_reads_the_tombstones_once(db_path, tmp_path) -> None:
    log = _log(tmp_path / "s1.jsonl", "s1", 1_200)  # 60 groups of 20 lines
    with Store(db_path, retention_days=None) as store:
        assert replay(store, log).messages_added == 1_200
        forget(store, "alice", session_id="s1")
        reads = _tombstone_reads(store)
        summary = replay(store, log)
        assert (summary.forgotten, summary.messages_added) == (60, 0)
        assert all("(tombstone 1, " in problem for problem in summary.problems)
        assert len(reads) <= 2, len(reads)  # once (and once more at most), not once or twice a group
        reads.clear()
        other = _log(tmp_path / "s2.jsonl", "s2", 1_200, "other")
        assert replay(store, other).messages_added == 1_200  # every Add of the user looked at the tombstone
        assert len(reads) <= 2, len(reads)


def test_a_forget_since_is_seen_by_this_connection_and_by_another(db_path) -> None:
    def add(store: Store, rid: str, session: str) -> None:
        request = {"request_id": rid, "user_id": "alice", "session_id": session}
        store.add(parse_add(request | {"messages": [{"role": "user", "content": f"hello {rid}"}]}))

    with Store(db_path, retention_days=None) as mine, Store(db_path, retention_days=None) as theirs:
        for rid, session in (("r1", "s1"), ("r2", "s2"), ("r3", "s3")):
            add(mine, rid, session)
        assert mine.known_requests("alice", ["r1", "r2", "r3", "r4"]) == {"r1": None, "r2": None, "r3": None}
        first = forget(mine, "alice", request_id="r1")
        assert mine.tombstone_for("alice", "r1") == (first.tombstone_id, first.at)
        assert mine.tombstone_for("alice", "r2") is None  # read now, kept until the tombstones change
        second = forget(theirs, "alice", session_id="s2")  # another connection's forget
        assert mine.tombstone_for("alice", "r2") == (second.tombstone_id, second.at)
        assert mine.known_requests("alice", ["r1", "r2", "r3"]) == {
            "r1": (first.tombstone_id, first.at),
            "r2": (second.tombstone_id, second.at),
            "r3": None,
        }
        third = forget(mine, "alice")  # the whole user: what was left (r3)
        assert mine.known_requests("alice", ["r1", "r2", "r3"]) == {
            "r1": (first.tombstone_id, first.at),
            "r2": (second.tombstone_id, second.at),
            "r3": (third.tombstone_id, third.at),
        }


def test_adds_of_users_in_turn_read_each_ones_tombstones_once(db_path) -> None:
    # the server's batches interleave users: keeping one user's ids read made two users who forgot something decode
    # their tombstones again at each other's Add
    with Store(db_path, retention_days=None) as store:
        for user in ("alice", "bob"):
            for rid in ("r1", "r2"):
                request = {"request_id": rid, "user_id": user, "session_id": rid}
                store.add(parse_add(request | {"messages": [{"role": "user", "content": f"hello {rid}"}]}))
            forget(store, user, request_id="r1")
        reads = _tombstone_reads(store)
        for i in range(10):
            for user in ("alice", "bob"):
                assert store.tombstone_for(user, "r1") is not None and store.tombstone_for(user, f"new{i}") is None
        assert len(reads) == 2, len(reads)  # once each
