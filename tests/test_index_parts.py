"""Postings stored by part (m006): a search reads the parts of its query's terms, not every posting of the user; a
segment replaced between reading its head and its parts is read again; the layout sorts only what is out of order."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import T0

from refind_cli import index_cache, index_store
from refind_cli import search as S
from refind_cli.contract import parse_add
from refind_cli.errors import CorruptDatabase
from refind_cli.index import bm25_scores
from refind_cli.index_store import SegmentGone
from refind_cli.store import DAY_MS, Store
from refind_cli.turns import build_turns

WORDS = [f"w{i}" for i in range(60)]


def _requests(start: int, n: int, *, user: str = "alice", sessions: int = 5, said=None, block: int = 0):
    """Requests of one message each, in sessions round robin (or, with ``block``, ``block`` messages per session)."""
    out = []
    for i in range(start, start + n):
        words = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 7, 13))
        at = T0 + i * 60_000 if said is None else said(i)
        msg = {"role": "user", "content": f"kayak {words} number{i}" + " filler" * (i % 7), "timestamp": at}
        out.append(
            parse_add(
                {
                    "request_id": f"r{i}",
                    "user_id": user,
                    "session_id": f"s{i // block if block else i % sessions}",
                    "messages": [msg],
                }
            )
        )
    return out


def _naive(store: Store, query: str, top_k: int = 5):
    return S.UserIndex(store.user_messages("alice")).search(query, top_k=top_k)


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(index_store, "PART_POSTINGS", 16)  # many parts per segment, as a big user has


@pytest.fixture
def reads(monkeypatch):
    """Every part read, as (segment id, part)."""
    seen: list[tuple[int, int]] = []
    real = index_store.read_parts

    def counting(conn, seg_id, parts):
        seen.extend((seg_id, p) for p in parts)
        return real(conn, seg_id, parts)

    monkeypatch.setattr(index_store, "read_parts", counting)
    return seen


def test_a_search_reads_only_the_parts_of_its_query_terms(db_path, small_parts, reads) -> None:
    store = Store(db_path, retention_days=None)
    for i in range(0, 300, 50):
        store.add_many(_requests(i, 50))
    total = store.conn.execute("SELECT count(*) FROM index_parts").fetchone()[0]
    assert total > 40
    index_cache.clear()
    reads.clear()  # (the merges read parts too)
    got = S.search(store, "alice", "w7 number42", top_k=5)
    assert got == _naive(store, "w7 number42")
    assert 0 < len(reads) <= total // 4  # the query's terms' parts, each once
    assert len(reads) == len(set(reads))
    first = set(reads)
    reads.clear()
    S.user_index(store, "alice")  # the planner's index: every other part, once (the state holds them all now)
    assert len(reads) == len(set(reads)) and first.isdisjoint(reads)
    assert first | set(reads) == set(store.conn.execute("SELECT segment_id, part FROM index_parts").fetchall())
    reads.clear()
    assert S.search(store, "alice", "w11", top_k=5) == _naive(store, "w11")
    assert reads == []
    store.close()


def test_a_search_reads_the_parts_of_its_own_snapshot(db_path, small_parts, monkeypatch) -> None:
    """Heads read, then another process's Add merges those segments away: outside a snapshot their parts are gone
    (SegmentGone); a search reads heads and parts in one snapshot, so it answers from what it read."""
    store = Store(db_path, retention_days=None)
    store.add_many(_requests(0, 60))
    index_cache.clear()
    live = index_cache.live_index(store, "alice", as_of=None, k1=1.2, b=0.75, lazy=True)  # heads only
    assert live is not None
    other = Store(db_path, retention_days=None)
    other.add_many(_requests(60, 60))  # merged with the segment read above: that segment is gone
    with pytest.raises(SegmentGone):
        bm25_scores(live, S.analyze("w7"))

    index_cache.clear()
    real = index_cache.live_index
    added = []

    def add_meanwhile(*args, **kwargs):  # another process's Add lands between the heads and the parts
        got = real(*args, **kwargs)
        if not added:
            added.append(other.add_many(_requests(120, 60)))  # merges: the segments just read are deleted
        return got

    monkeypatch.setattr(index_cache, "live_index", add_meanwhile)
    before = _naive(store, "w7 number150")  # a search reads one snapshot: the parts of the segments it read
    assert S.search(store, "alice", "w7 number150", top_k=5) == before
    assert added
    assert S.search(store, "alice", "w7 number150", top_k=5) == _naive(store, "w7 number150") != before
    other.close()
    store.close()


def test_the_migration_rewrites_segments_of_the_old_format(db_path, small_parts) -> None:
    store = Store(db_path, retention_days=None)
    store.add_many(_requests(0, 80))
    store.add_many(_requests(80, 40))
    want = _naive(store, "w7 number90")
    with store.write():  # back to before m006: every posting inline in index_segments
        conn = store.conn
        for seg_id, blob in conn.execute("SELECT id, blob FROM index_segments").fetchall():
            conn.execute(
                "UPDATE index_segments SET blob = ? WHERE id = ?",
                (index_store.encode(index_store._whole(conn, seg_id, blob)), seg_id),
            )
        conn.execute("DROP TRIGGER index_parts_follow_segment")
        conn.execute("DROP TABLE index_parts")
        conn.execute("DELETE FROM _migrations WHERE name = 'm006_index_parts'")
    store.close()
    index_cache.clear()
    from refind_cli import health

    report = health.check(db_path)  # `refind inspect --check` reads it as it is, without migrating it
    assert report["ok"], report

    store = Store(db_path, retention_days=None)
    heads = [index_store.decode_head(i, b) for i, b in store.conn.execute("SELECT id, blob FROM index_segments")]
    big = [h for h in heads if int(h.indptr[-1]) > index_store.PART_POSTINGS]
    assert big and all(isinstance(h, index_store.LazySegment) for h in big)  # head and parts
    assert all(isinstance(h, index_store.Segment) for h in heads if h not in big)  # small: whole in their rows
    assert index_store.verify(store.conn) == []
    assert S.search(store, "alice", "w7 number90", top_k=5) == want
    store.close()


def test_verify_names_missing_and_orphaned_parts(store, small_parts) -> None:
    store.add_many(_requests(0, 30))
    assert index_store.verify(store.conn) == []
    seg_id, part = store.conn.execute("SELECT segment_id, part FROM index_parts LIMIT 1").fetchone()
    with store.write():
        blob = store.conn.execute(
            "SELECT blob FROM index_parts WHERE segment_id = ? AND part = ?", (seg_id, part)
        ).fetchone()[0]
        store.conn.execute("DELETE FROM index_parts WHERE segment_id = ? AND part = ?", (seg_id, part))
    assert index_store.verify(store.conn) == [
        f"segment {seg_id}: some of its postings are missing",
        "30 stored message(s) missing from the index (first seq 1)",  # (the one segment holds them all)
    ]
    with store.write():
        store.conn.execute("INSERT INTO index_parts (segment_id, part, blob) VALUES (?, ?, ?)", (seg_id, part, blob))
        store.conn.execute("INSERT INTO index_parts (segment_id, part, blob) VALUES (999, 0, x'00')")
    assert index_store.verify(store.conn) == ["1 part(s) of postings belong to no segment"]
    with store.write():  # a part one posting short: never read as postings
        store.conn.execute("DELETE FROM index_parts WHERE segment_id = 999")
        store.conn.execute(
            "UPDATE index_parts SET blob = ? WHERE segment_id = ? AND part = ?", (blob[4:-4], seg_id, part)
        )
    assert index_store.verify(store.conn)[0] == f"segment {seg_id}: a part of its postings disagrees with its head"
    index_cache.clear()
    with pytest.raises(CorruptDatabase, match=f"part {part} of index segment {seg_id} disagrees"):
        S.user_index(store, "alice")


def test_parts_go_with_their_segments(store, small_parts) -> None:
    from refind_cli import lifecycle

    store.add_many(_requests(0, 30))
    store.add_many(_requests(0, 30, user="bob"))
    lifecycle.forget(store, "alice", session_id="s1")
    lifecycle.forget(store, "bob")
    assert index_store.verify(store.conn) == []  # no part of a replaced or deleted segment is left
    users = store.conn.execute(
        "SELECT DISTINCT s.user_id FROM index_parts p JOIN index_segments s ON s.id = p.segment_id"
    ).fetchall()
    assert users == [("alice",)]


def test_a_segment_of_one_part_stays_whole_in_its_row(store) -> None:
    """What every Add writes and merges is small: one row to write and to read, no parts."""
    store.add_many(_requests(0, 30))
    for i in range(30, 40):
        store.add_many(_requests(i, 1))
    assert store.conn.execute("SELECT count(*) FROM index_parts").fetchone()[0] == 0
    heads = [index_store.decode_head(i, b) for i, b in store.conn.execute("SELECT id, blob FROM index_segments")]
    assert heads and all(isinstance(h, index_store.Segment) for h in heads)
    assert index_store.verify(store.conn) == []


@pytest.mark.parametrize("sessions", [1, 12])  # 1: one session after another, 50 turns each
def test_the_layout_sorts_only_the_sessions_said_out_of_order(store, monkeypatch, sessions) -> None:
    """Turns added session by session (or interleaved), a few said before the turn added just before them: the
    maintained layout equals build_turns', and only those sessions are sorted."""
    late = {57, 58, 203}

    def said(i: int) -> int:
        return T0 + (i - 30 if i in late else i) * DAY_MS // 24

    store.add_many(_requests(0, 300, sessions=sessions, said=said, block=50 if sessions == 1 else 0))
    index_cache.clear()
    sizes: list[int] = []
    real = np.lexsort
    monkeypatch.setattr(np, "lexsort", lambda keys: sizes.append(len(keys[0])) or real(keys))
    live = index_cache.live_index(store, "alice", as_of=None, k1=1.2, b=0.75)
    assert [t.id for t in live.turns] == [t.id for t in build_turns(store.user_messages("alice"), "message")]
    assert sizes and max(sizes) < 300  # only the sessions out of order
    monkeypatch.setattr(np, "lexsort", real)
    scratch = S.UserIndex(store.user_messages("alice")).index
    for query in ("w7 kayak", "number57 w13"):  # and it scores as a from-scratch build does
        tokens = S.analyze(query)
        np.testing.assert_allclose(bm25_scores(live, tokens), bm25_scores(scratch, tokens), rtol=0, atol=1e-5)
        assert S.search(store, "alice", query, top_k=5) == _naive(store, query)


def test_a_state_that_outlived_its_segments_is_read_again(db_path, small_parts) -> None:
    """An analyzer change re-indexes every message without bumping a user's version: a process holding the old
    state meets its segments gone (SegmentGone), drops the state and searches again."""
    store = Store(db_path, retention_days=None)
    store.add_many(_requests(0, 120))
    S.search(store, "alice", "w7", top_k=5)  # the state is held; w7's parts are read
    with store.write():  # what another process's re-index leaves: the same postings under new segment ids
        store.conn.execute("UPDATE index_meta SET value = '' WHERE key = 'analyzer'")
    Store(db_path, retention_days=None).close()  # opening it re-indexes (catch_up)
    assert S.search(store, "alice", "w11 number60", top_k=5) == _naive(store, "w11 number60")
    store.close()


def test_searches_while_another_connection_adds_and_merges_never_fail(db_path, small_parts) -> None:
    import threading
    import time

    store = Store(db_path, retention_days=None)
    store.add_many(_requests(0, 600))
    stop = time.monotonic() + 1.5
    errors: list[BaseException] = []
    done: list[int] = []

    def write() -> None:
        writer = Store(db_path, retention_days=None)
        i = 600
        while time.monotonic() < stop:
            writer.add_many(_requests(i, 7))  # a segment per batch, merged with the newest ones
            i += 7
        writer.close()

    def search(n: int) -> None:
        reader = Store(db_path, retention_days=None)
        while time.monotonic() < stop:
            try:
                assert S.search(reader, "alice", f"w{n} w{n + 20} kayak", top_k=5)
                done.append(n)
            except BaseException as exc:
                errors.append(exc)
        reader.close()

    threads = [threading.Thread(target=write)] + [threading.Thread(target=search, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    assert errors == [] and len(done) > 10


def test_fuzzy_buckets_are_built_once_per_segment_whichever_connection_searches(db_path) -> None:
    """Each connection gets the view's postings bound to it; the fuzzy-expansion buckets (a misspelt word's
    candidates) are still built once per segment, not once per pooled connection."""
    from refind_cli import term_groups

    first, second = Store(db_path, retention_days=None), Store(db_path, retention_days=None)
    first.add_many(_requests(0, 40))
    index_cache.clear()  # (the term groups too)
    assert S.search(first, "alice", "kayac", top_k=3)  # "kayak", misspelt: expanded to it
    built = {id(v) for v in term_groups.GROUPS.values()}
    # a word the vocabulary lacks is looked for in three groups of each segment: by first letters and length (fuzzy
    # matching), by last letters (compounds ending in it) and by first letters (its Turkish inflections)
    assert built and len(built) == 3 * len(index_store.segment_ids(first.conn, "alice"))
    assert S.search(second, "alice", "kayac", top_k=3) == S.search(first, "alice", "kayac", top_k=3)
    assert {id(v) for v in term_groups.GROUPS.values()} == built
    first.close()
    second.close()


def test_a_decoded_head_does_not_keep_its_rows_header_alive(store) -> None:
    # the header (JSON: the terms, the sessions) is decoded into lists; arrays that were views of the whole row would
    # keep the header's bytes — the terms a second time, megabytes for one base64 "word" — in memory, uncounted by
    # the index cache's budget (a server grew past it by ~8 MB per Add of one 8 MB word)
    store.add_many(_requests(0, 3))
    rows = store.conn.execute("SELECT id, blob FROM index_segments").fetchall()
    assert rows
    for seg_id, blob in rows:
        head = index_store.decode_head(seg_id, blob)
        header = 8 + int.from_bytes(blob[:8], "little")
        for array in (head.seqs, head.lengths, head.indptr):
            assert isinstance(array.base, bytes) and len(array.base) == len(blob) - header
