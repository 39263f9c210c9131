"""The index maintained on write scores exactly as a from-scratch bm25s build over the same visible turns.

A hypothesis state machine of Adds (single and batched), forgets, expiries, retention changes and ``as_of``
searches; after every step the maintained index's scores equal a fresh bm25s build's to 1e-5 with the same top-k
ids, the maintained index agrees with the messages (``index_store.verify``), and nothing is rebuilt from all rows.
"""

from __future__ import annotations

import re

import bm25s
import numpy as np
import pytest
from helpers import T0
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from refind_cli import index_cache, index_store, lifecycle
from refind_cli import search as S
from refind_cli.contract import parse_add
from refind_cli.errors import NotFound
from refind_cli.index import bm25_scores, holders
from refind_cli.store import DAY_MS, Store
from refind_cli.turns import build_turns

WORDS = ["kayak", "lake", "tahoe", "biscuit", "dog", "salmon", "Lisbon", "trip", "Maya", "marathon", "running", "新年"]
text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(lambda w: " ".join(w) or "?!")
said = st.one_of(st.none(), st.integers(0, 40).map(lambda d: T0 + d * DAY_MS))


def scratch_scores(store: Store, user: str, tokens: list[str], as_of: int | None, k1: float, b: float):
    """bm25s built from scratch over the turns a search may see: the reference."""
    turns = build_turns(store.user_messages(user, as_of=as_of), "message")
    corpus = [S.turn_tokenizer(S.SearchConfig())(t) for t in turns]
    scores = np.zeros(len(turns), dtype=np.float32)
    if any(corpus):
        bm = bm25s.BM25(k1=k1, b=b)
        bm.index(corpus, show_progress=False)
        ids = [bm.vocab_dict[t] for t in tokens if t in bm.vocab_dict]
        if ids:
            scores = bm.get_scores(ids).astype(np.float32)
    return [t.id for t in turns], scores, corpus


class Maintained(RuleBasedStateMachine):
    @initialize()
    def open(self) -> None:
        import tempfile
        from pathlib import Path

        S.clear()
        self.part_postings = index_store.PART_POSTINGS
        index_store.PART_POSTINGS = 4  # segments of both kinds: whole in their row, and head + parts
        self.sort_all_past = index_cache.SORT_ALL_PAST
        index_cache.SORT_ALL_PAST = 0  # a layout sorts only its sessions out of order, however many
        self.dir = tempfile.TemporaryDirectory()
        self.clock = [T0 + 50 * DAY_MS]
        self.retention: float | None = None
        self.path = Path(self.dir.name) / "p.db"
        self.store = Store(self.path, clock=lambda: self.clock[0], retention_days=None)
        self.n = 0

    def teardown(self) -> None:
        self.store.close()
        self.dir.cleanup()
        index_store.PART_POSTINGS = self.part_postings
        index_cache.SORT_ALL_PAST = self.sort_all_past

    def _request(self, user: str, session: str, contents: list[tuple[str, int | None]]):
        self.n += 1
        msgs = [{"role": "user", "content": c, "timestamp": t} for c, t in contents]
        return parse_add({"request_id": f"r{self.n}", "user_id": user, "session_id": session, "messages": msgs})

    @rule(
        user=st.sampled_from(["alice", "bob"]),
        session=st.sampled_from(["s1", "s2", "s3"]),
        contents=st.lists(st.tuples(text, said), min_size=1, max_size=4),
    )
    def add(self, user, session, contents) -> None:
        self.store.add(self._request(user, session, contents))
        self.clock[0] += 3_600_000

    @rule(batch=st.lists(st.tuples(st.sampled_from(["alice", "bob"]), st.tuples(text, said)), min_size=1, max_size=6))
    def add_batch(self, batch) -> None:  # a replay batch: one transaction, one segment per user
        self.store.add_many([self._request(u, "s1", [c]) for u, c in batch])
        self.clock[0] += 3_600_000

    @rule(user=st.sampled_from(["alice", "bob"]), scope=st.sampled_from(["user", "session", "request"]))
    def forget(self, user, scope) -> None:
        rows = self.store.conn.execute("SELECT session_id, request_id FROM messages WHERE user_id = ?", (user,))
        rows = rows.fetchall()
        if not rows:
            return
        try:
            if scope == "user":
                lifecycle.forget(self.store, user)
            elif scope == "session":
                lifecycle.forget(self.store, user, session_id=rows[0][0])
            else:
                lifecycle.forget(self.store, user, request_id=rows[-1][1])
        except NotFound:
            pass

    @rule(past=st.sampled_from([0, 64]))
    def sort_policy(self, past) -> None:  # the layouts built from now on sort only out-of-order sessions, or all
        index_cache.SORT_ALL_PAST = past

    @rule(days=st.sampled_from([None, 0.1, 0.5, 2.0]))
    def set_retention(self, days) -> None:
        self.store.retention_days = days

    @rule(hours=st.integers(1, 30))
    def time_passes(self, hours) -> None:
        self.clock[0] += hours * 3_600_000

    @rule()
    def expire(self) -> None:
        lifecycle.expire(self.store)

    @rule(
        user=st.sampled_from(["alice", "bob", "carol"]),
        query=st.lists(st.sampled_from([*WORDS, "june", "2023", "nothing"]), min_size=1, max_size=4),
        back=st.one_of(st.none(), st.integers(0, 40)),
        k1=st.sampled_from([1.2, 0.9]),
        b=st.sampled_from([0.75, 0.4]),
    )
    def search_equals_bm25s(self, user, query, back, k1, b) -> None:
        as_of = None if back is None else self.clock[0] - back * 3_600_000
        tokens = S.analyze(" ".join(query))
        ids, want, corpus = scratch_scores(self.store, user, tokens, as_of, k1, b)
        live = index_cache.live_index(self.store, user, as_of=as_of, k1=k1, b=b)
        assert live is not None and live.postings is not None
        assert [t.id for t in live.turns] == ids  # the same turns in the same order
        assert live.turn_pos == {tid: i for i, tid in enumerate(ids)}  # listed without reading any text
        for token in {*tokens, "zzz"}:  # from the heads when every document of a segment is visible
            assert live.postings.df(token) == sum(token in doc for doc in corpus)
            # the turns holding it, read from the postings without scoring: where its BM25 score is positive
            assert holders(live, token).tolist() == [i for i, doc in enumerate(corpus) if token in doc]
        got = bm25_scores(live, tokens)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        top = 5
        assert list(np.argsort(-got, kind="stable")[:top]) == list(np.argsort(-want, kind="stable")[:top])
        config = S.SearchConfig(k1=k1, b=b)
        maintained = S.search(self.store, user, " ".join(query), top_k=10, as_of=as_of, config=config)
        naive = S.UserIndex(self.store.user_messages(user, as_of=as_of), config).search(" ".join(query), top_k=10)
        assert maintained == naive

    @rule(
        user=st.sampled_from(["alice", "bob"]),
        session=st.sampled_from(["s1", "s2", "s4"]),
        contents=st.lists(st.tuples(text, said), min_size=1, max_size=3),
        query=st.lists(st.sampled_from([*WORDS, "june"]), min_size=1, max_size=3),
        k1=st.sampled_from([1.2, 0.9]),
    )
    def search_add_search(self, user, session, contents, query, k1) -> None:
        """The agent pattern: a search, an Add, the same search — the state and its views grow in place (or are laid
        out again when a new message sorts before its session's last turn)."""
        self.search_equals_bm25s(user, query, None, k1, 0.75)
        self.add(user, session, contents)
        self.search_equals_bm25s(user, query, None, k1, 0.75)

    @invariant()
    def index_agrees_with_messages(self) -> None:
        if hasattr(self, "store"):
            assert index_store.verify(self.store.conn) == []


Maintained.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=list(HealthCheck)
)
TestMaintainedIndex = Maintained.TestCase


def test_an_existing_database_is_indexed_once_on_open_with_progress(tmp_path, monkeypatch) -> None:
    import sqlite3

    from refind_cli import migrations

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:2])  # the schema before the index
    migrations.apply(conn, T0)
    monkeypatch.undo()
    conn.execute("BEGIN")
    for i in range(30):
        rid = f"r{i}"
        conn.execute("INSERT INTO requests VALUES ('alice', ?, 's1', 'h', 1, ?)", (rid, T0 + i))
        conn.execute(
            "INSERT INTO messages (id, user_id, session_id, request_id, idx, role, content, said_at, recorded_at) "
            "VALUES (?, 'alice', ?, ?, 0, 'user', ?, ?, ?)",
            (f"m{i}", f"s{i % 4}", rid, f"kayak trip number {i} with biscuit" if i % 3 else "lake tahoe", T0, T0 + i),
        )
    conn.execute("COMMIT")
    conn.close()
    monkeypatch.setattr(index_store, "CATCH_UP_CHUNK", 7)  # several transactions, as for a big database
    seen: list[tuple[int, int]] = []
    batches: list[int] = []  # len(seen) when each batch began to be indexed
    index_rows = index_store._index_rows
    monkeypatch.setattr(index_store, "_index_rows", lambda c, rows: (batches.append(len(seen)), index_rows(c, rows)))
    with Store(db, retention_days=None, index_progress=lambda done, total: seen.append((done, total))) as store:
        assert seen[-1] == (30, 30) and len(seen) >= 5  # one report per chunk
        assert seen[0] == (0, 30) and batches[0] == 1  # "indexing starts" comes before the first batch is indexed
        assert seen == [(0, 30), (7, 30), (14, 30), (21, 30), (28, 30), (30, 30)]  # once each, none for the last pass
        assert index_store.stats(store.conn)["state"] == "ready"
        assert index_store.verify(store.conn) == []
        ui = S.user_index(store, "alice")
        assert ui.maintained
        naive = S.UserIndex(store.user_messages("alice"))
        assert ui.search("kayak biscuit tahoe", top_k=10) == naive.search("kayak biscuit tahoe", top_k=10)
    seen.clear()
    Store(db, retention_days=None, index_progress=lambda done, total: seen.append((done, total))).close()
    assert seen == []  # indexed once: the next open has nothing to do


def test_verify_names_what_disagrees(store) -> None:
    store.add(
        parse_add(
            {
                "request_id": "r1",
                "user_id": "alice",
                "session_id": "s",
                "messages": [{"role": "user", "content": "kayak"}],
            }
        )
    )
    assert index_store.verify(store.conn) == []
    with store.write():  # a message changed behind the index's back
        store.conn.execute("UPDATE messages SET content = 'canoe'")
    assert index_store.verify(store.conn) == ["segment 1: message seq 1's tokens differ from its text's"]
    with store.write():
        store.conn.execute("DELETE FROM index_segments")
    assert index_store.verify(store.conn) == ["1 stored message(s) missing from the index (first seq 1)"]


def test_vocabulary_is_the_visible_terms_with_their_document_frequencies(db_path) -> None:
    clock = [T0]
    store = Store(db_path, clock=lambda: clock[0], retention_days=1)
    for i, text in enumerate(["kayak on the lake", "kayak trip", "biscuit the dog"]):
        store.add(
            parse_add(
                {
                    "request_id": f"r{i}",
                    "user_id": "alice",
                    "session_id": "s",
                    "messages": [{"role": "user", "content": text}],
                }
            )
        )
        clock[0] += DAY_MS // 2
    want: dict[str, int] = {}
    for m in store.user_messages("alice"):  # the first message is past retention by now
        for t in set(index_store.message_tokens(m.content, m.said_at)):
            want[t] = want.get(t, 0) + 1
    assert index_cache.vocabulary(store, "alice") == want
    assert want == {"kayak": 1, "trip": 1, "biscuit": 1, "dog": 1}
    store.close()


def _add(store: Store, rid: str, session: str, content: str, said_at: int | None) -> None:
    msg = {"role": "user", "content": content, "timestamp": said_at}
    store.add(parse_add({"request_id": rid, "user_id": "alice", "session_id": session, "messages": [msg]}))


def test_an_add_in_order_grows_the_views_instead_of_laying_them_out_again(store, monkeypatch) -> None:
    for i in range(6):
        _add(store, f"r{i}", f"s{i % 2}", f"kayak trip {i}", T0 + i * DAY_MS)
    S.search(store, "alice", "kayak", top_k=5)  # the view is laid out once
    builds: list[int] = []
    full = index_cache.Layout.build.__func__

    def counted(cls, *args):
        builds.append(1)
        return full(cls, *args)

    monkeypatch.setattr(index_cache.Layout, "build", classmethod(counted))
    _add(store, "r6", "s1", "kayak lake", T0 + 9 * DAY_MS)  # later than its session's last turn
    _add(store, "r7", "s9", "kayak biscuit", None)  # a new session
    for query in ["kayak", "lake", "biscuit trip"]:
        naive = S.UserIndex(store.user_messages("alice")).search(query, top_k=10)
        assert S.search(store, "alice", query, top_k=10) == naive
    assert builds == []
    _add(store, "r8", "s0", "kayak before", T0 - DAY_MS)  # earlier than its session's turns: laid out again
    naive = S.UserIndex(store.user_messages("alice")).search("kayak before", top_k=10)
    assert S.search(store, "alice", "kayak before", top_k=10) == naive
    assert builds == [1]


def test_a_message_forgotten_while_a_search_renders_is_an_error_not_a_gap(db_path) -> None:
    from refind_cli.errors import Conflict

    store = Store(db_path, retention_days=None)
    for i in range(3):
        _add(store, f"r{i}", "s", f"kayak number {i}", T0 + i)
    ui = S.user_index(store, "alice")
    other = Store(db_path, retention_days=None)  # another process forgets: this one's index is not evicted
    lifecycle.forget(other, "alice", request_id="r1")
    other.close()
    try:
        ui.search("kayak", top_k=3)
        raise AssertionError("a forgotten message was rendered")
    except Conflict as exc:
        assert "search again" in exc.message
    naive = S.UserIndex(store.user_messages("alice")).search("kayak", top_k=3)
    assert S.search(store, "alice", "kayak", top_k=3) == naive  # the next search sees the forget
    store.close()


@pytest.mark.parametrize(("turns", "chars"), [(25, 10**6), (10**6, 1200)])
def test_the_text_a_process_keeps_per_user_is_bounded(store, monkeypatch, turns, chars) -> None:
    monkeypatch.setattr(index_cache, "TURN_CACHE", turns)
    monkeypatch.setattr(index_cache, "TURN_TEXT", chars)
    for i in range(60):  # ~2,400 characters in all, more than either bound
        _add(store, f"r{i}", f"s{i % 3}", f"kayak trip number {i} " + "x" * (20 + i % 7), T0 + i)
    for query in [f"number {i}" for i in range(0, 60, 5)]:
        naive = S.UserIndex(store.user_messages("alice")).search(query, top_k=2)
        assert S.search(store, "alice", query, top_k=2) == naive
        state = index_cache.CACHE.get(("live", index_cache._db_key(store), "alice"))
        assert 0 < len(state.turn_cache) <= turns
        assert state.turn_text == sum(len(t.messages[0].content) for t in state.turn_cache.values()) <= chars
        handed = S.user_index(store, "alice").index.turns._at  # the view's own memo lives across searches too
        assert 0 < len(handed) <= turns
        assert sum(len(t.messages[0].content) for t in handed.values()) <= chars


def _strip_meta(store: Store) -> None:
    """Rewrite every segment as one written before m005 (no sessions or dates)."""
    with store.write():
        for seg_id, blob in store.conn.execute("SELECT id, blob FROM index_segments").fetchall():
            seg = index_store._whole(store.conn, seg_id, blob)
            bare = index_store.Segment(seg.seqs, seg.lengths, seg.terms, seg.indptr, seg.docs, seg.tf)
            store.conn.execute(
                "UPDATE index_segments SET blob = ? WHERE id = ?", (index_store.encode_row(bare)[0], seg_id)
            )


def test_segments_carry_sessions_and_dates_and_verify_checks_them(store) -> None:
    _add(store, "r0", "s1", "kayak", T0)
    _add(store, "r1", "s2", "lake", None)
    assert index_store.verify(store.conn) == []
    segs = [index_store.decode_head(i, b) for i, b in store.conn.execute("SELECT id, blob FROM index_segments")]
    metas = [index_store._info(s.meta, d) for s in segs for d in range(len(s.seqs)) if s.meta is not None]
    assert sorted(metas, key=str) == sorted(
        [
            (sid, said, rec, idx)
            for sid, said, rec, idx in store.conn.execute("SELECT session_id, said_at, recorded_at, idx FROM messages")
        ],
        key=str,
    )
    with store.write():  # a message's session changed behind the index's back
        store.conn.execute("UPDATE messages SET session_id = 's9' WHERE request_id = 'r1'")
    assert index_store.verify(store.conn) == ["segment 3: message seq 2's session or dates differ from the message's"]


def test_segments_without_sessions_and_dates_are_read_from_the_rows_then_rewritten_on_upgrade(db_path) -> None:
    from refind_cli import migrations

    store = Store(db_path, retention_days=None)
    for i in range(5):
        _add(store, f"r{i}", f"s{i % 2}", f"kayak trip {i}", T0 + i * DAY_MS if i != 2 else None)
    _strip_meta(store)
    assert "lacks its messages' sessions and dates" in " ".join(index_store.verify(store.conn))
    index_cache.clear()
    for query in ["kayak", "trip 3"]:  # the state is laid out from the rows (without their text)
        assert S.search(store, "alice", query, top_k=3) == S.UserIndex(store.user_messages("alice")).search(
            query, top_k=3
        )
    with store.write():  # back to the schema before m005: the next open applies it
        store.conn.execute("DELETE FROM _migrations WHERE name = 'm005_index_segment_metadata'")
    store.close()
    store = Store(db_path, retention_days=None)
    assert migrations.schema_version(store.conn) == len(migrations.MIGRATIONS)
    assert index_store.verify(store.conn) == []  # re-indexed once, with the sessions and dates
    store.close()


@pytest.mark.parametrize("part_postings", [4096, 2])  # segments whole in their rows; head and parts
def test_an_index_read_before_a_forget_is_not_cached_after_it(db_path, monkeypatch, part_postings) -> None:
    """A forget that lands (and evicts) while a search is loading the user's index must not find that index —
    terms and session names of the forgotten text — put back in the process's cache after it. The search itself
    answers from its snapshot, taken before the forget committed (its parts and text too); the next one sees the
    forget."""
    monkeypatch.setattr(index_store, "PART_POSTINGS", part_postings)
    monkeypatch.setattr(lifecycle, "CHECKPOINT_TIMEOUT_S", 0.01)  # (the search's snapshot holds the WAL meanwhile)
    store = Store(db_path, retention_days=None)
    for i in range(3):
        _add(store, f"r{i}", "s", f"kayak secret {i}", T0 + i)
    before = S.UserIndex(store.user_messages("alice")).search("kayak", top_k=3)
    index_cache.clear()
    refresh = index_cache._refresh
    forgot = []

    def forget_meanwhile(st: Store, user: str, old: object) -> object:
        state = refresh(st, user, old)  # read before the forget below
        if not forgot:
            other = Store(db_path, retention_days=None)
            lifecycle.forget(other, "alice")  # in this process: it evicts
            other.close()
            forgot.append(state)
        return state

    monkeypatch.setattr(index_cache, "_refresh", forget_meanwhile)
    assert S.search(store, "alice", "kayak", top_k=3) == before
    assert index_cache.CACHE.get(("live", index_cache._db_key(store), "alice")) is None
    assert S.search(store, "alice", "kayak", top_k=3) == []
    store.close()


def test_a_view_grown_by_an_add_still_hides_what_it_hid(db_path) -> None:
    """A search as of an earlier time sees only what was recorded by then, also in a segment that a merge made of an
    earlier and a later Add; an Add to the end grows that view from its arrays (``LivePostings.appended``), and what it
    learnt of the segments it sees whole is kept only where it still holds."""
    clock = [T0]
    store = Store(db_path, clock=lambda: clock[0], retention_days=None)

    def add(rid: str, session: str, *texts: str) -> None:
        messages = [{"role": "user", "content": t} for t in texts]
        store.add(parse_add({"request_id": rid, "user_id": "u", "session_id": session, "messages": messages}))

    def found(query: str, as_of: int | None) -> list[str]:
        blocks = S.search(store, "u", query, top_k=5, as_of=as_of, config=S.SearchConfig(backfill=False))
        return sorted(re.sub(r"^(\[[^\]]*\] )?(user: )?", "", line) for b in blocks for line in b.content.split("\n"))

    add("a", "s1", "kayak on the lake", "a quiet morning")
    clock[0] += 3_600_000
    add("b", "s1", "kayak down the river")  # merged with the first: one segment, recorded at two times
    earlier = T0 + 60_000
    assert found("river", earlier) == [] and found("kayak", earlier) == ["kayak on the lake"]
    clock[0] += 3_600_000
    add("c", "s2", "kayak at sea")  # a new session at the end: every view grows by appending
    assert found("river", earlier) == [] and found("sea", earlier) == []
    assert found("kayak", earlier) == ["kayak on the lake"]
    assert found("kayak", None) == ["kayak at sea", "kayak down the river", "kayak on the lake"]
    store.close()


def test_an_index_a_writer_did_not_keep_is_rebuilt_once_not_searched_again_forever(db_path, caplog) -> None:
    # an upgrade probe of round 18: an older refind (before the maintained index) forgot a request in a database this
    # one had upgraded — its rows went, its words stayed in the segments; every search of the user failed "search
    # again" (409 in the server) for good, and a later forget, expire or add did not mend it
    store = Store(db_path, retention_days=None)
    for i in range(3):
        _add(store, f"r{i}", "s", f"kayak number {i}", T0 + i)
    with store.write():  # what that older writer did: the rows, not the index
        store.conn.execute("DELETE FROM messages WHERE request_id = 'r1'")
        store.conn.execute("DELETE FROM requests WHERE request_id = 'r1'")
    assert index_store.verify(store.conn)  # the index names a message the database no longer holds
    hits = S.search(store, "alice", "kayak", top_k=3)
    shown = " ".join(b.content for b in hits)
    assert "kayak number 0" in shown and "kayak number 2" in shown and "kayak number 1" not in shown
    assert index_store.verify(store.conn) == []
    assert "rebuilt from its 2 stored messages" in caplog.text
    assert S.search(store, "alice", "kayak", top_k=3) == hits  # once
    store.close()
