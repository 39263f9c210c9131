"""`refind inspect`'s overview reads its counts in one read transaction: they agree while another process writes."""

from __future__ import annotations

from helpers import add_request

from refind_cli.store import Store


def test_inspect_reads_its_counts_in_one_read_transaction(db_path) -> None:
    """A writer committing between the overview's statements: the counts still agree (visible == stored)."""
    from refind_cli import review

    store = Store(db_path, retention_days=30)
    add_request(store, "r1", "alice", "s1", "first")
    other = Store(db_path, retention_days=30)
    wrote: list[str] = []

    def write_once(sql: str) -> None:  # (SQLite's trace callback: as each statement starts)
        if sql.startswith("SELECT count(*) FROM messages") and not wrote:
            wrote.append(sql)
            add_request(other, "r2", "alice", "s1", "written between the overview's statements")

    store.conn.set_trace_callback(write_once)
    try:
        info = review.overview(store)
    finally:
        store.conn.set_trace_callback(None)
        other.close()
        store.close()
    assert wrote  # the write did happen mid-overview
    assert (info["messages"], info["awaiting_expiry"]) == (1, 0)  # not 1 visible and 1 "awaiting expiry"
