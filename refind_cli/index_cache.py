"""The maintained index in memory: one user's segments and turns, kept up to date by reading only what changed.

Per search, :func:`live_index` reads the user's ``users.version`` (one indexed lookup). Unchanged → the user's state
is reused. Changed (an Add, forget or expire here or in another process) → in one read transaction it lists the
user's segment ids, decodes only the segments it does not hold (segments are immutable, ids never reused) and reads
only the messages it lacks; a message gone from the segments is gone from the state. Nothing is rebuilt from all of
a user's rows.

A *view* is the state as one search may see it — retention cutoff and ``as_of`` applied **before** scoring, so the
document count, the average length and every document frequency are those of the visible turns, as a from-scratch
bm25s build over ``store.user_messages(user, as_of=…)`` would have them — laid out as a :class:`~.index.TurnIndex`
(turns session by session, chronological within each, as ``turns.build_turns`` orders them) whose ``postings``
score a query at query time (:class:`LivePostings`): bm25s's Lucene formula with its float32/float64 steps, so the
scores are bm25s's bit for bit.

Memory is bounded in bytes: one LRU (:data:`CACHE`) holds every user's state (its segments, its messages' text) and
any index built from scratch (other turn units), sized by ``REFIND_INDEX_CACHE_MB``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import index_store, settings
from .index import TurnIndex
from .store import MESSAGE_COLUMNS, StoredMessage
from .turns import Turn

if TYPE_CHECKING:
    import numpy as np

    from .index_store import Segment
    from .store import Store

MESSAGE_OVERHEAD = 400  # bytes a StoredMessage, its Turn and their entries cost besides the text


class ByteLRU:
    """A thread-safe LRU bounded by the summed ``nbytes`` of its values (an entry bigger than the budget is not
    kept)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.used -= old[1]
            if nbytes > self.budget:
                return
            self._items[key] = (value, nbytes)
            self.used += nbytes
            while self.used > self.budget:
                _, (_, n) = self._items.popitem(last=False)
                self.used -= n

    def drop(self, match: Any) -> None:
        """Drop every entry whose key satisfies ``match(key)``."""
        with self._lock:
            for key in [k for k in self._items if match(k)]:
                self.used -= self._items.pop(key)[1]

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._items)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.keys())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.used = 0


CACHE = ByteLRU(settings.index_cache_bytes_from_env())


def evict(user_id: str) -> None:
    """Drop every in-memory index of ``user_id`` (all databases): forget/expire call this to free the text now."""
    CACHE.drop(lambda k: isinstance(k, tuple) and len(k) > 2 and k[2] == user_id)


def clear() -> None:
    CACHE.clear()


# ---- the per-user state -------------------------------------------------------------------------------------------


@dataclass
class UserState:
    """One user's maintained index in memory at one version. Never changed once built (views are memoised)."""

    version: int
    segments: dict[int, Segment]
    seg_rows: dict[int, np.ndarray]  # segment id → the state row of each of its documents
    seqs: np.ndarray  # int64, ascending: one row per indexed message
    turns: np.ndarray  # object: the one-message Turn of each row
    session: np.ndarray  # int32 session code of each row
    session_names: list[str]  # session code → session id
    said: np.ndarray  # float64 said-at (NaN: unknown)
    recorded: np.ndarray  # int64 recorded-at
    idx: np.ndarray  # int32 index inside the Add request
    lengths: np.ndarray  # int64 length in tokens
    text: np.ndarray  # int64 length of each row's text (for sizing the cache)
    nbytes: int
    views: dict[tuple[Any, ...], TurnIndex] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def view(self, cutoff: int | None, as_of: int | None, k1: float, b: float) -> TurnIndex:
        import numpy as np

        vis = np.ones(len(self.seqs), dtype=bool)
        if cutoff is not None:
            vis &= self.recorded >= cutoff
        if as_of is not None:
            vis &= self.recorded <= as_of
        key = (hash(vis.tobytes()), int(vis.sum()), k1, b)
        with self.lock:
            hit = self.views.get(key)
        if hit is not None:
            return hit
        built = self._build_view(np.flatnonzero(vis), k1, b)
        with self.lock:
            if len(self.views) >= 4:
                self.views.pop(next(iter(self.views)))
            self.views[key] = built
        return built

    def _build_view(self, rows: np.ndarray, k1: float, b: float) -> TurnIndex:
        """The visible rows laid out as build_turns lays out turns (see turns.session_order)."""
        import numpy as np

        codes = self.session[rows]
        uniq, first = np.unique(codes, return_index=True)
        rank_of = np.zeros(int(uniq.max()) + 1 if uniq.size else 0, dtype=np.int64)
        rank_of[uniq[np.argsort(first, kind="stable")]] = np.arange(uniq.size)  # sessions by first arrival
        srank = rank_of[codes]
        o1 = np.argsort(srank, kind="stable")  # session by session, arrival order inside
        s1 = srank[o1]
        vals = self.said[rows][o1].copy()
        start = np.ones(len(s1), dtype=bool)
        start[1:] = s1[1:] != s1[:-1]
        vals[start & np.isnan(vals)] = -np.inf  # an undated message before any dated one sorts first
        known = ~np.isnan(vals)
        last = np.where(known, np.arange(len(vals)), 0)
        np.maximum.accumulate(last, out=last)
        filled = vals[last]  # an undated message takes the said-at of the one that arrived just before it
        r1 = rows[o1]
        o2 = np.lexsort((self.idx[r1], self.seqs[r1], filled, s1))
        order = r1[o2]
        session_ix = s1[o2].astype(np.int32)
        n_sessions = uniq.size
        session_start = np.searchsorted(session_ix, np.arange(n_sessions), side="left").astype(np.int64)
        session_end = np.append(session_start[1:], len(order)).astype(np.int64)
        names = [self.session_names[c] for c in uniq[np.argsort(first, kind="stable")].tolist()]
        pos = np.full(len(self.seqs), -1, dtype=np.int64)
        pos[order] = np.arange(len(order))
        postings = LivePostings(
            segments=self.segments,
            seg_pos={i: pos[r] for i, r in self.seg_rows.items()},
            lengths=self.lengths[order],
            k1=k1,
            b=b,
        )
        return TurnIndex(
            turns=self.turns[order].tolist(),
            vocab={},
            data=np.zeros(0, dtype=np.float32),
            indices=np.zeros(0, dtype=np.int32),
            indptr=np.zeros(1, dtype=np.int64),
            session_ix=session_ix,
            session_ids=names,
            session_start=session_start,
            session_end=session_end,
            said_at=self.said[order],
            min_recorded_at=int(self.recorded[order].min()) if len(order) else None,
            postings=postings,
        )


@dataclass
class LivePostings:
    """Query-time BM25 over the stored term frequencies of one view's turns (positions as in the view)."""

    segments: dict[int, Segment]
    seg_pos: dict[int, np.ndarray]  # segment id → view position of each of its documents (-1: not visible)
    lengths: np.ndarray  # int64 token length of each visible turn, by view position
    k1: float
    b: float

    def _hits(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        import numpy as np

        pos_parts, tf_parts = [], []
        for seg_id, seg in self.segments.items():
            found = seg.postings(token)
            if found is None:
                continue
            docs, tf = found
            pos = self.seg_pos[seg_id][docs]
            keep = pos >= 0
            pos_parts.append(pos[keep])
            tf_parts.append(tf[keep])
        if not pos_parts:
            return None
        pos = np.concatenate(pos_parts)
        return (pos, np.concatenate(tf_parts)) if pos.size else None

    def df(self, token: str) -> int:
        hits = self._hits(token) if token else None
        return 0 if hits is None else int(hits[0].size)

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """Every visible turn's score, exactly as bm25s (method "lucene") would index and score these turns."""
        import numpy as np

        n = len(self.lengths)
        scores = np.zeros(n, dtype=np.float32)
        if not n:
            return scores
        # bm25s: avg_doc_len = np.array([len(doc) ...]).mean() — an exact float64 sum of ints, divided by N
        avgdl = np.float64(int(self.lengths.sum())) / np.float64(n)
        k1, b = self.k1, self.b
        for token in tokens:  # a repeated query token counts again, as in bm25s
            hits = self._hits(token) if token else None
            if hits is None:
                continue
            pos, tf = hits
            df = pos.size
            idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))  # bm25s's float32 idf array
            tf64 = tf.astype(np.float64)
            tfc = tf64 / (k1 * ((1 - b) + b * self.lengths[pos] / avgdl) + tf64)
            np.add.at(scores, pos, (idf * tfc).astype(np.float32))
        return scores

    def vocabulary(self) -> dict[str, int]:
        """Every term of the visible turns with its document frequency (for query expansion and the like)."""
        import numpy as np

        out: dict[str, int] = {}
        for seg_id, seg in self.segments.items():
            visible = (self.seg_pos[seg_id] >= 0)[seg.docs]
            if not len(seg.docs):
                continue
            counts = np.add.reduceat(visible.astype(np.int64), seg.indptr[:-1])
            for term, c in zip(seg.terms, counts.tolist(), strict=True):
                if c:
                    out[term] = out.get(term, 0) + c
        return out


# ---- refreshing ---------------------------------------------------------------------------------------------------


def _db_key(store: Store) -> str:
    if store.index_db_id is None:  # a constant of the file: read once per Store
        store.index_db_id = index_store.db_id(store.conn) or str(store.path)
    return store.index_db_id


def live_index(store: Store, user_id: str, *, as_of: int | None, k1: float, b: float) -> TurnIndex | None:
    """The user's maintained index as a search at ``as_of`` may see it; None while the index is being built."""
    key = ("live", _db_key(store), user_id)
    version = store.user_version(user_id)
    state: UserState | None = CACHE.get(key)
    if state is None or state.version != version:
        state = _refresh(store, user_id, state)
        if state is None:
            return None
        if len(state.seqs):  # an unknown user must not push real users out of the cache
            CACHE.put(key, state, state.nbytes)
    return state.view(store.retention_cutoff(), as_of, k1, b)


def _refresh(store: Store, user_id: str, old: UserState | None) -> UserState | None:
    conn = store.conn
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")  # one snapshot: the version, the segments and the messages agree
    try:
        if index_store.pending(conn):
            return None
        version = store.user_version(user_id)
        ids = index_store.segment_ids(conn, user_id)
        held = old.segments if old is not None else {}
        segments = {i: held[i] for i in ids if i in held}
        segments.update(index_store.load_segments(conn, [i for i in ids if i not in held]))
        return _assemble(conn, user_id, version, segments, old)
    except sqlite3.OperationalError:
        return None
    finally:
        if own and conn.in_transaction:
            conn.execute("COMMIT")


def _assemble(
    conn: sqlite3.Connection, user_id: str, version: int, segments: dict[int, Segment], old: UserState | None
) -> UserState:
    import numpy as np

    parts = [s.seqs for s in segments.values()]
    seqs = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    n = len(seqs)
    turns = np.empty(n, dtype=object)
    session = np.empty(n, dtype=np.int32)
    said = np.empty(n, dtype=np.float64)
    recorded = np.empty(n, dtype=np.int64)
    idx = np.empty(n, dtype=np.int32)
    text = np.zeros(n, dtype=np.int64)
    names = list(old.session_names) if old is not None else []
    code_of = {name: i for i, name in enumerate(names)}
    missing = np.ones(n, dtype=bool)
    if old is not None and len(old.seqs):
        at = np.minimum(np.searchsorted(old.seqs, seqs), len(old.seqs) - 1)
        have = old.seqs[at] == seqs
        src = at[have]
        turns[have], session[have], said[have] = old.turns[src], old.session[src], old.said[src]
        recorded[have], idx[have], text[have] = old.recorded[src], old.idx[src], old.text[src]
        missing = ~have
    want = seqs[missing]
    if want.size:
        fetched = sorted(_read(conn, user_id, want), key=lambda m: m.seq)
        for row, m in zip(np.flatnonzero(missing).tolist(), fetched, strict=True):
            code = code_of.get(m.session_id)
            if code is None:
                code = code_of[m.session_id] = len(names)
                names.append(m.session_id)
            turns[row] = Turn(m.id, m.session_id, (m,))
            session[row] = code
            said[row] = np.nan if m.said_at is None else float(m.said_at)
            recorded[row] = m.recorded_at
            idx[row] = m.idx
            text[row] = len(m.content)
    lengths = np.zeros(n, dtype=np.int64)
    seg_rows = {}
    for seg_id, seg in segments.items():
        rows = np.searchsorted(seqs, seg.seqs)
        seg_rows[seg_id] = rows
        lengths[rows] = seg.lengths
    nbytes = sum(s.nbytes for s in segments.values()) + int(text.sum()) + n * (MESSAGE_OVERHEAD + 48)
    return UserState(
        version, segments, seg_rows, seqs, turns, session, names, said, recorded, idx, lengths, text, nbytes
    )


def _read(conn: sqlite3.Connection, user_id: str, seqs: np.ndarray) -> list[StoredMessage]:
    """The user's messages with these seqs (one range read when they are the newest, as after an Add)."""
    lo = int(seqs[0])
    count = conn.execute("SELECT count(*) FROM messages WHERE user_id = ? AND seq >= ?", (user_id, lo)).fetchone()[0]
    if count == len(seqs):
        rows = conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE user_id = ? AND seq >= ? ORDER BY seq", (user_id, lo)
        ).fetchall()
    else:
        rows = []
        listed = seqs.tolist()
        for i in range(0, len(listed), 500):
            chunk = listed[i : i + 500]
            rows += conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
    return [StoredMessage(*r) for r in rows]


def vocabulary(store: Store, user_id: str, *, as_of: int | None = None) -> dict[str, int]:
    """The user's indexed terms (analyzer output: lower-cased, stemmed) with their document frequencies over the
    turns a search may see now — from the maintained index, without reading any message. Empty while it is built."""
    view = live_index(store, user_id, as_of=as_of, k1=1.2, b=0.75)
    if view is None or not isinstance(view.postings, LivePostings):
        return {}
    return view.postings.vocabulary()
