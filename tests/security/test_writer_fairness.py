"""Item 4 (writes): one huge Add does not carry the small Adds queued behind it into its own long transaction —
the group writer caps a batch's messages, so a 5-byte Add of another user commits in the next, short batch."""

from __future__ import annotations

from refind_cli.contract import parse_add
from refind_cli.server import dbpool
from refind_cli.server.dbpool import GroupWriter, SerialStore


def request(user: str, rid: str, n: int):
    messages = [{"role": "user", "content": f"m{i}"} for i in range(n)]
    return parse_add({"request_id": rid, "user_id": user, "session_id": "s", "messages": messages})


def test_a_small_add_is_not_batched_behind_a_huge_one(db_path) -> None:
    writer = GroupWriter(lambda: SerialStore(db_path))
    lock = dbpool._write_lock(db_path)  # the process's write lock: holding it parks the writer on its first batch
    try:
        with lock:
            first = writer.submit_add(request("carol", "warm-up", 1))
            huge = writer.submit_add(request("mallory", "huge", dbpool.MAX_BATCH_MESSAGES))
            small = writer.submit_add(request("alice", "tiny", 1))
        assert first.result(30).status == "added"
        assert huge.result(30).status == "added" and small.result(30).status == "added"
        # warm-up, then the huge Add alone, then the small one: never the small one inside the huge transaction
        assert writer.batches == 3
    finally:
        writer.close()
