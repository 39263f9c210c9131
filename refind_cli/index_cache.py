"""The maintained index in memory: one user's segments and per-turn arrays, kept up to date by reading only what
changed.

Per search, :func:`live_index` reads the user's ``users.version`` (one indexed lookup). Unchanged → the user's state
is reused. Changed (an Add, forget or expire here or in another process) → in one read transaction it lists the
user's segment ids and decodes only the segments it does not hold (segments are immutable, ids never reused); a
message gone from the segments is gone from the state. Nothing is rebuilt from all of a user's rows, and no text is
read to lay turns out: each segment carries its messages' session, said-at, recorded-at and index
(:class:`~.index_store.DocMeta`). When every new message comes after every message held (an Add), the state's arrays
are extended and each memoised view grows by the new turns at the end of their sessions — work in proportion to the
new messages, plus a few array copies — unless a new message sorts before its session's last turn.

A *view* is the state as one search may see it — retention cutoff and ``as_of`` applied **before** scoring, so the
document count, the average length and every document frequency are those of the visible turns, as a from-scratch
bm25s build over ``store.user_messages(user, as_of=…)`` would have them — laid out as a :class:`~.index.TurnIndex`
(turns session by session, chronological within each, as ``turns.build_turns`` orders them) whose ``postings``
score a query at query time (:class:`LivePostings`): bm25s's Lucene formula with its float32/float64 steps, so the
scores are bm25s's bit for bit. Its turns (:class:`LazyTurns`) are read by ``seq`` when a search renders them.

Memory is bounded in bytes: one LRU (:data:`CACHE`) holds every user's state (its segments, its arrays, the text of
at most :data:`TURN_CACHE` rendered turns) and any index built from scratch (other turn units), sized by
``REFIND_INDEX_CACHE_MB``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, overload

from . import index_store, settings, term_groups
from .errors import RefindError
from .index import TurnIndex
from .store import MESSAGE_COLUMNS, StoredMessage
from .turns import LABEL_MAX, Turn, speaker_label

if TYPE_CHECKING:
    import numpy as np

    from .index_store import AnySegment, Reader
    from .store import Store

MESSAGE_OVERHEAD = 400  # bytes a StoredMessage, its Turn and their entries cost besides the text


class ByteLRU:
    """A thread-safe LRU bounded by the summed ``nbytes`` of its values (an entry bigger than the budget is not
    kept)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.generation = 0  # bumped by every drop: a value read before a drop must not be put back after it
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any, nbytes: int, *, generation: int | None = None) -> bool:
        """Keep ``value``; with ``generation`` (read before the value was built), only if nothing was dropped
        since — so a value built from data a forget has just deleted is not cached after that forget evicted.
        Whether it was kept."""
        with self._lock:
            if generation is not None and generation != self.generation:
                return False
            old = self._items.pop(key, None)
            if old is not None:
                self.used -= old[1]
            if nbytes > self.budget:
                return False
            self._items[key] = (value, nbytes)
            self.used += nbytes
            while self.used > self.budget:
                _, (_, n) = self._items.popitem(last=False)
                self.used -= n
            return True

    def drop(self, match: Any) -> list[Any]:
        """Drop every entry whose key satisfies ``match(key)``; their values."""
        with self._lock:
            self.generation += 1
            dropped = []
            for key in [k for k in self._items if match(k)]:
                value, n = self._items.pop(key)
                self.used -= n
                dropped.append(value)
            return dropped

    def values(self) -> list[Any]:
        with self._lock:
            return [v for v, _ in self._items.values()]

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
    """Drop every in-memory index of ``user_id`` (all databases): forget/expire call this to free the text now —
    and the query expansion's groups of their words (term_groups), which are never kept for them again."""
    evict_many([user_id])


def evict_many(user_ids: Iterable[str]) -> None:
    """:func:`evict` for many users in one pass over the cache (an expiry that reaches thousands of users would
    otherwise walk every cached index once per user)."""
    users = set(user_ids)
    if users:
        drop(lambda k: isinstance(k, tuple) and len(k) > 2 and k[2] in users)


def drop(match: Callable[[Any], bool]) -> None:
    """Drop the cached indexes whose keys ``match``, with what holds their text and words: the query expansion's
    groups of their words (term_groups), and a state's memos (:func:`_release`), so it goes when the last search
    holding it ends."""
    dropped = CACHE.drop(match)
    if not dropped:
        return
    term_groups.GROUPS.discard(source for value in dropped for source in _term_sources(value))
    term_groups.GROUPS.keep_only(source for value in CACHE.values() for source in _term_sources(value))
    for value in dropped:
        if isinstance(value, UserState):
            _release(value)


def _release(state: UserState) -> None:
    """Break the cycles a state's memos make — a view's last TurnIndex holds turns that hold the view and the state —
    so the state and its text go when the last search holding it ends, not at the garbage collector's next run (a
    search in flight keeps the TurnIndex it was given)."""
    with state.lock:
        for layout in state.views.values():
            layout.last = None
        state.views.clear()


def _term_sources(value: Any) -> list[object]:
    """What query expansion keeps groups of words by (``expand``, in term_groups) for one cached index: a state's
    segments and its views' postings, or an index built from scratch (a ``search.UserIndex``)."""
    if isinstance(value, UserState):
        with value.lock:
            views = list(value.views.values())
        return [*value.segments.values(), *(layout.postings for layout in views)]
    index = getattr(value, "index", None)
    return [index] if index is not None else []


def clear() -> None:
    CACHE.clear()
    term_groups.GROUPS.clear()


# ---- the per-user state -------------------------------------------------------------------------------------------


@dataclass
class UserState:
    """One user's maintained index in memory at one version: the segments and, per indexed message (one *row* each,
    ascending ``seq``), only what ranking needs — never the text. A turn's text is read when a search renders it
    (:class:`LazyTurns`) and kept in a small per-state cache. Never changed once built, except its memos (views,
    the text cache, the message ids, who said each message)."""

    version: int
    segments: dict[int, AnySegment]  # postings of a LazySegment are read when a search needs them
    seg_rows: dict[int, np.ndarray]  # segment id → the state row of each of its documents
    seqs: np.ndarray  # int64, ascending: one row per indexed message
    session: np.ndarray  # int32 session code of each row
    session_names: list[str]  # session code → session id
    code_of: dict[str, int]  # session id → session code
    said: np.ndarray  # float64 said-at (NaN: unknown)
    recorded: np.ndarray  # int64 recorded-at
    idx: np.ndarray  # int32 index inside the Add request
    lengths: np.ndarray  # int64 length in tokens
    nbytes: int
    views: dict[tuple[Any, ...], Layout] = field(default_factory=dict)
    turn_cache: dict[int, Turn] = field(default_factory=dict)  # seq → its one-message Turn (text read on demand)
    turn_text: int = 0  # characters of text in turn_cache
    text_overflows: bool = False  # the user's text is more than TURN_TEXT (LazyTurns.preload does not try again)
    ids: list[str] | None = None  # each row's message id, read on first need (turn_pos)
    # who said each row's message (a code into ``voice_list``; -1: not read yet) and its length in characters, read
    # by ``LazyTurns.voices_at`` as the answer lift pairs turns, and carried to the next state as the turn cache is
    # (an Add keeps every message): a first search after an Add, or on another connection, reads only the new
    # messages'. At most MAX_VOICES distinct voices are kept (labels are free text): past them a voice is read each time
    voice_codes: np.ndarray | None = None  # int32 per row
    voice_sizes: np.ndarray | None = None  # int32 per row
    voice_list: list[tuple[str, str | None]] = field(default_factory=list)  # code → voice
    voice_code_of: dict[tuple[str, str | None], int] = field(default_factory=dict)  # voice → code
    # the file's latest write when the state was read (descended): never moved on, so a search whose snapshot began
    # before a later write never meets a write it cannot see (it would drop a good state)
    read_at: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def visible(self, cutoff: int | None, as_of: int | None) -> np.ndarray | None:
        """The rows a search with this retention cutoff and ``as_of`` may see (None: every row)."""
        import numpy as np

        rec = self.recorded
        if not len(rec) or ((cutoff is None or rec.min() >= cutoff) and (as_of is None or rec.max() <= as_of)):
            return None
        vis = np.ones(len(rec), dtype=bool)
        if cutoff is not None:
            vis &= rec >= cutoff
        if as_of is not None:
            vis &= rec <= as_of
        return vis

    def read_all(self, read: Reader) -> None:
        """Read every part of every segment not read yet (what a search holding the index beyond one call needs:
        the planner, the server's warmer)."""
        for seg in self.segments.values():
            if isinstance(seg, index_store.LazySegment):
                seg.need_all(read)

    def view_key(self, vis: np.ndarray | None, k1: float, b: float) -> tuple[Any, ...]:
        return ("all", k1, b) if vis is None else (hash(vis.tobytes()), int(vis.sum()), k1, b)

    def view(self, cutoff: int | None, as_of: int | None, k1: float, b: float) -> Layout:
        import numpy as np

        vis = self.visible(cutoff, as_of)
        key = self.view_key(vis, k1, b)
        with self.lock:
            hit = self.views.get(key)
        if hit is not None:
            return hit
        rows = np.arange(len(self.seqs), dtype=np.int64) if vis is None else np.flatnonzero(vis)
        built = Layout.build(self, rows, cutoff, as_of, k1, b)
        self._keep(key, built)
        return built

    def _keep(self, key: tuple[Any, ...], layout: Layout) -> None:
        with self.lock:
            if len(self.views) >= MAX_VIEWS:
                self.views.pop(next(iter(self.views)))
            self.views[key] = layout


SORT_ALL_PAST = 64  # a layout sorts everything when more than 1 in this many turns' sessions are out of order
MAX_VIEWS = 4  # layouts memoised per state (as_of and retention make different views)
PREFETCH_AROUND = 64  # neighbours on each side whose text a search reads with its anchors' at most
TURN_CACHE = 16384  # rendered turns kept per state; the cache is emptied when it would hold more
TURN_TEXT = 4 << 20  # … or more than this many characters of text
# distinct (role, speaker label) pairs a state keeps codes for (UserState.voice_list): their tuples, ~200 bytes each
# and not counted in nbytes, stay under ~1 MB a state (a user's few speakers take a few hundred bytes)
MAX_VOICES = 4096
FETCH_WINDOW = 8  # a turn read on demand brings its ±8 neighbours in the view (blocks show neighbours)
ROW_BYTES = 72  # what one row of the state costs in its arrays (its voice's 8 bytes too) and its share of the layouts
SCORE_GROUP_HITS = 1 << 18  # a query's hits scored together at most (LivePostings.scores: memory stays bounded)


@dataclass
class Layout:
    """One view of a state: the visible rows laid out as build_turns lays out turns (sessions by first arrival,
    chronological within each; see turns.session_order), with what is needed to extend it by new rows."""

    cutoff: int | None
    as_of: int | None
    rows: np.ndarray  # int64: view position → state row
    session_ix: np.ndarray  # int32: view session of each position
    session_codes: np.ndarray  # int64: view session → state session code
    session_ids: list[str]  # view session → session id
    session_start: np.ndarray  # int64
    session_end: np.ndarray  # int64
    said: np.ndarray  # float64 said-at of each position
    min_recorded_at: int | None
    view_of_code: np.ndarray  # int64: state session code → view session (-1: none visible)
    tail: np.ndarray  # float64 per view session: the sort key (said-at, filled) of its last turn in the layout
    latest: np.ndarray  # float64 per view session: the filled said-at of its latest-arrived turn
    postings: LivePostings
    last: tuple[sqlite3.Connection, TurnIndex] | None = None  # the TurnIndex handed out last, and its connection
    whole: TurnIndex | None = None  # once every turn's text is held (LazyTurns.preload): over a plain list, any conn

    @classmethod
    def build(
        cls, state: UserState, rows: np.ndarray, cutoff: int | None, as_of: int | None, k1: float, b: float
    ) -> Layout:
        """The full layout of the visible ``rows`` (ascending): two sorts — none when the rows already come session
        by session (each session's messages after the last one's, as a replay or an agent adds them) and in said-at
        order inside each, as they usually do: checking that is linear."""
        import numpy as np

        codes = state.session[rows]
        n = len(codes)
        rank_of = np.full(len(state.session_names), -1, dtype=np.int64)
        grouped = n < 2 or bool((codes[1:] >= codes[:-1]).all())  # sessions contiguous, in arrival order
        if grouped:
            first = np.ones(n, dtype=bool)
            first[1:] = codes[1:] != codes[:-1]
            arrival = codes[first]
            rank_of[arrival] = np.arange(arrival.size)
            s1, r1 = np.cumsum(first) - 1, rows
        else:
            uniq, at = np.unique(codes, return_index=True)
            arrival = uniq[np.argsort(at, kind="stable")]  # session codes by first arrival
            rank_of[arrival] = np.arange(arrival.size)
            srank = rank_of[codes]
            o1 = np.argsort(srank, kind="stable")  # session by session, arrival order inside
            s1, r1 = srank[o1], rows[o1]
        vals = state.said[r1].copy()
        start = np.ones(len(s1), dtype=bool)
        start[1:] = s1[1:] != s1[:-1]
        vals[start & np.isnan(vals)] = -np.inf  # an undated message before any dated one sorts first
        known = ~np.isnan(vals)
        last = np.where(known, np.arange(len(vals)), 0)
        np.maximum.accumulate(last, out=last)
        filled = vals[last]  # an undated message takes the said-at of the one that arrived just before it
        o2 = np.arange(len(r1))  # into (session, said-at, seq, index) order: only the sessions out of it are sorted
        late = np.flatnonzero(~start[1:] & (filled[1:] < filled[:-1])) + 1  # said before the turn that came before
        unsorted = index_store.distinct(s1[late])
        if unsorted.size * SORT_ALL_PAST > len(r1):  # many: one sort of everything
            o2 = np.lexsort((state.idx[r1], state.seqs[r1], filled, s1))
        else:  # s1 ascends: each such session is one slice
            lo, hi = np.searchsorted(s1, unsorted, side="left"), np.searchsorted(s1, unsorted, side="right")
            for first_at, end_at in zip(lo.tolist(), hi.tolist(), strict=True):  # (not a, b: b is BM25's b)
                part = r1[first_at:end_at]
                o2[first_at:end_at] = first_at + np.lexsort(
                    (state.idx[part], state.seqs[part], filled[first_at:end_at])
                )
        order = r1[o2]
        session_ix = s1[o2].astype(np.int32)
        session_start = np.searchsorted(session_ix, np.arange(arrival.size), side="left").astype(np.int64)
        session_end = np.append(session_start[1:], len(order)) if arrival.size else session_start
        ends = session_end - 1
        return cls(
            cutoff=cutoff,
            as_of=as_of,
            rows=order,
            session_ix=session_ix,
            session_codes=arrival.astype(np.int64),
            session_ids=[state.session_names[c] for c in arrival.tolist()],
            session_start=session_start,
            session_end=session_end,
            said=state.said[order],
            min_recorded_at=int(state.recorded[order].min()) if len(order) else None,
            view_of_code=rank_of,
            tail=filled[o2][ends] if len(order) else np.zeros(0),
            latest=filled[ends] if len(order) else np.zeros(0),
            postings=LivePostings.of(state, order, k1, b),
        )

    def extended(self, state: UserState, fresh: np.ndarray) -> Layout | None:
        """This layout (of the state before) with the visible ``fresh`` rows of ``state`` (rows above every row
        before, ascending) added at the end of their sessions — None when one of them sorts before its session's
        last turn (a said-at earlier than the session's): the caller lays the view out in full then."""
        import numpy as np

        n_before = len(self.session_codes)
        view_of_code = np.full(len(state.session_names), -1, dtype=np.int64)
        view_of_code[: len(self.view_of_code)] = self.view_of_code
        # each session's last said-at so far (room for as many new sessions as rows; an Add brings a few rows, where
        # a session list, turned into Python floats, is as long as the history)
        room = np.full(len(fresh), -math.inf)
        tail, latest = np.concatenate([self.tail, room]), np.concatenate([self.latest, room])
        new_codes: list[int] = []
        at: list[int] = []
        sess: list[int] = []
        for row in fresh.tolist():
            code = int(state.session[row])
            v = int(view_of_code[code])
            if v < 0:  # a session first seen now: the last to arrive, so the last session
                v = view_of_code[code] = n_before + len(new_codes)
                new_codes.append(code)
            said = float(state.said[row])
            key = float(latest[v]) if math.isnan(said) else said
            if key < tail[v]:
                return None
            tail[v] = latest[v] = key
            at.append(int(self.session_end[v]) if v < n_before else len(self.rows))
            sess.append(v)
        sessions = n_before + len(new_codes)
        tail, latest = tail[:sessions], latest[:sessions]
        where = np.asarray(at, dtype=np.int64)
        vs = np.asarray(sess, dtype=np.int64)
        o = np.lexsort((np.arange(where.size), vs, where))  # new sessions in arrival order, each contiguous
        where, vs, added = where[o], vs[o], fresh[o]
        # every new row after every row before (an Add to the latest session, or a new one: the common case), where
        # a concatenation does what np.insert does at a fraction of its cost
        at_end = bool((where == len(self.rows)).all())

        def insert(values: np.ndarray, new: np.ndarray) -> np.ndarray:
            return (
                np.concatenate([values, new.astype(values.dtype, copy=False)])
                if at_end
                else np.insert(values, where, new)
            )

        rows = insert(self.rows, added)
        counts = np.zeros(n_before + len(new_codes), dtype=np.int64)
        counts[:n_before] = self.session_end - self.session_start
        counts += np.bincount(vs, minlength=counts.size)
        session_end = np.cumsum(counts)
        recorded = [self.min_recorded_at] if self.min_recorded_at is not None else []
        if added.size:
            recorded.append(int(state.recorded[added].min()))
        return Layout(
            cutoff=self.cutoff,
            as_of=self.as_of,
            rows=rows,
            session_ix=insert(self.session_ix, vs.astype(np.int32)),
            session_codes=np.append(self.session_codes, np.asarray(new_codes, dtype=np.int64)),
            session_ids=[*self.session_ids, *(state.session_names[c] for c in new_codes)],
            session_start=session_end - counts,
            session_end=session_end,
            said=insert(self.said, state.said[added]),
            min_recorded_at=min(recorded) if recorded else None,
            view_of_code=view_of_code,
            tail=tail,
            latest=latest,
            postings=self.postings.appended(state, added)
            if at_end
            else LivePostings.of(state, rows, self.postings.k1, self.postings.b),
        )

    def index(self, state: UserState, conn: sqlite3.Connection, user_id: str) -> TurnIndex:
        """This view as a TurnIndex whose turns read their text through ``conn`` when a search renders them (the
        same object again while the connection is the same) — or, once every turn's text is held (the server's
        warmer preloads it), one over a plain list of the turns for every connection: a top_k 100 search looks up
        ~500 turns, and a list index costs a fraction of ``LazyTurns.__getitem__``."""
        if self.whole is not None:
            return self.whole
        last = self.last
        if last is not None and last[0] is conn:
            return last[1]
        made = self._turn_index(LazyTurns(state, self, conn, user_id), reader(conn))
        self.last = (conn, made)
        return made

    def _turn_index(self, turns: Sequence[Turn], read: Reader | None) -> TurnIndex:
        import numpy as np

        return TurnIndex(
            turns=turns,
            vocab={},
            data=np.zeros(0, dtype=np.float32),
            indices=np.zeros(0, dtype=np.int32),
            indptr=np.zeros(1, dtype=np.int64),
            session_ix=self.session_ix,
            session_ids=self.session_ids,
            session_start=self.session_start,
            session_end=self.session_end,
            said_at=self.said,
            min_recorded_at=self.min_recorded_at,
            postings=self.postings.bound(read),
        )


class LazyTurns(Sequence[Turn]):
    """A view's turns, each built when first asked for: its message (text included) is read by ``seq`` with its
    neighbours in the view, and kept in the state's turn cache."""

    def __init__(self, state: UserState, layout: Layout, conn: sqlite3.Connection, user_id: str) -> None:
        self._state, self._layout, self._conn, self._user = state, layout, conn, user_id
        self._at: dict[int, Turn] = {}  # view position → turn, for the turns this object handed out already
        self._at_text = 0  # characters of text in _at: bounded as the state's turn cache is

    def __len__(self) -> int:
        return len(self._layout.rows)

    @overload
    def __getitem__(self, pos: int) -> Turn: ...

    @overload
    def __getitem__(self, pos: slice) -> list[Turn]: ...

    def __getitem__(self, pos: int | slice) -> Turn | list[Turn]:
        if isinstance(pos, slice):
            return [self[i] for i in range(*pos.indices(len(self)))]
        turn = self._at.get(pos)
        if turn is None:
            turn = self._turn(pos)
            text = len(turn.messages[0].content)
            if len(self._at) >= TURN_CACHE or self._at_text + text > TURN_TEXT:
                self._at.clear()  # this object lives as long as its view and connection: never more than the bounds
                self._at_text = 0
            self._at[pos] = turn
            self._at_text += text
        return turn

    def _turn(self, pos: int) -> Turn:
        n = len(self)
        if pos < 0:
            pos += n
        if not 0 <= pos < n:
            raise IndexError(pos)
        seq = int(self._state.seqs[self._layout.rows[pos]])
        turn = self._state.turn_cache.get(seq)
        if turn is None:
            turn = self._fetch(self._layout.rows[max(0, pos - FETCH_WINDOW) : pos + FETCH_WINDOW + 1])[seq]
        return turn

    def __iter__(self) -> Iterator[Turn]:
        found = self._fetch(self._layout.rows)
        return iter([found[s] for s in self._state.seqs[self._layout.rows].tolist()])

    def prefetch(self, positions: np.ndarray, around: int) -> None:
        """Read the text of the turns at these view positions and of their ±``around`` neighbours in one query (a
        search calls this with the anchors it is about to render)."""
        import numpy as np

        n = len(self)
        if not n or not len(positions):
            return
        # (a prefetch, not a bound: the turns further out are read when a block asks for them; neighbours=10**23
        # raised "Maximum allowed size exceeded" here, 10**8 asked 38.7 GiB)
        around = min(around, PREFETCH_AROUND)
        near = (np.asarray(positions, dtype=np.int64)[:, None] + np.arange(-around, around + 1)).ravel()
        np.maximum(np.minimum(near, n - 1, out=near), 0, out=near)  # (the ufuncs: clip's checks cost more here)
        self._fetch(self._layout.rows[index_store.distinct(near)])

    def preload(self) -> bool:
        """Read every turn's text into the state's turn cache when all of it fits the cache's bounds (the server's
        warmer calls this after an Add, so a first question renders without reading text); False when it does not
        fit, and then nothing is read."""
        state, layout = self._state, self._layout
        rows = layout.rows
        if not len(rows) or len(rows) > TURN_CACHE or state.text_overflows:
            return False
        found = self._fetch(rows)
        if len(state.turn_cache) < len(rows):  # more text than TURN_TEXT: not kept, and not tried again
            state.text_overflows = True
            return False
        if layout.whole is None:  # the same turns, held by the turn cache too: within the same bounds
            state.read_all(reader(self._conn))  # shared by every connection: it reads nothing more
            layout.whole = layout._turn_index([found[s] for s in state.seqs[rows].tolist()], None)
        return True

    def voices_at(self, positions: np.ndarray) -> list[tuple[tuple[str, str | None], int]]:
        """Who said each turn at these view positions (``Turn.voice``) and its length in characters, in order: from
        the state's voices (read by an earlier search of this state, or of a state before it: an Add carries them),
        else from the turns already held, else read in one query without the text (the role, the first 42
        characters, which hold any speaker label, and the length), so the turn cache keeps what rendering will need.
        SQLite's substr and length stop at a NUL character: a message holding one is read whole."""
        import numpy as np

        state = self._state
        rows = self._layout.rows[positions]
        with state.lock:
            if state.voice_codes is None or state.voice_sizes is None:
                state.voice_codes = np.full(len(state.seqs), -1, dtype=np.int32)
                state.voice_sizes = np.zeros(len(state.seqs), dtype=np.int32)
            codes, sizes, listed, code_of = state.voice_codes, state.voice_sizes, state.voice_list, state.voice_code_of
            missing = index_store.distinct(rows[codes[rows] < 0])
            if not missing.size:
                return [(listed[c], z) for c, z in zip(codes[rows].tolist(), sizes[rows].tolist(), strict=True)]
        cache = state.turn_cache
        found: dict[int, tuple[tuple[str, str | None], int]] = {}
        want = []
        missing_seqs = state.seqs[missing].tolist()
        for s in missing_seqs:
            turn = cache.get(s)
            if turn is None:
                want.append(s)
            else:
                found[s] = (turn.voice, len(turn.messages[0].content))
        columns = (
            f"seq, role, substr(content, 1, {LABEL_MAX + 2}), length(content), "
            "CASE WHEN instr(content, char(0)) THEN content END"
        )
        for seq, role, head, size, whole in self._rows(columns, want):
            if whole is not None:
                head, size = whole, len(whole)
            found[seq] = ((role, speaker_label(head)), size)
        if len(found) != missing.size:
            raise _changed()
        with state.lock:
            for row, seq in zip(missing.tolist(), missing_seqs, strict=True):
                voice, size = found[seq]
                code = code_of.get(voice)
                if code is None and len(listed) < MAX_VOICES:
                    code = code_of[voice] = len(listed)
                    listed.append(voice)
                if code is not None:
                    codes[row], sizes[row] = code, size
            by_row = dict(zip(missing.tolist(), missing_seqs, strict=True))
            return [
                (listed[c], z) if c >= 0 else found[by_row[r]]
                for r, c, z in zip(rows.tolist(), codes[rows].tolist(), sizes[rows].tolist(), strict=True)
            ]

    def ids(self) -> list[str]:
        """Every turn's id, in view order (without reading any text)."""
        state = self._state
        if state.ids is None:
            found = dict(self._conn.execute("SELECT seq, id FROM messages WHERE user_id = ?", (self._user,)))
            try:
                state.ids = [found[s] for s in state.seqs.tolist()]
            except KeyError:
                raise _changed() from None
        ids = state.ids
        return [ids[r] for r in self._layout.rows.tolist()]

    def _rows(self, columns: str, seqs: list[int]) -> Iterator[tuple[Any, ...]]:
        """``columns`` of the user's messages with these seqs, 500 seqs a query (in no particular order), in one
        snapshot. What is read goes into the state, which every search shares: outside a search's snapshot (the
        planner keeps its index through its model calls; the server's warmer preloads), only while the file still
        descends from the write the state was read at (else IndexChanged: the caller reads the index again)."""
        if not seqs:
            return
        conn = self._conn
        outside = not conn.in_transaction
        if outside:
            conn.execute("BEGIN")
        try:
            if outside and not descended(conn, self._state.read_at, index_store.last_write(conn)):
                raise _changed()
            for i in range(0, len(seqs), 500):
                chunk = seqs[i : i + 500]
                yield from conn.execute(
                    f"SELECT {columns} FROM messages WHERE user_id = ? AND seq IN ({','.join('?' * len(chunk))})",
                    [self._user, *chunk],
                )
        finally:
            if outside and conn.in_transaction:
                conn.execute("COMMIT")

    def _fetch(self, rows: np.ndarray) -> dict[int, Turn]:
        """The turns of these state rows by seq, read from the database when the state's cache lacks them."""
        cache = self._state.turn_cache
        found: dict[int, Turn] = {}
        want = []
        for s in self._state.seqs[rows].tolist():
            turn = cache.get(s)
            if turn is None:
                want.append(s)
            else:
                found[s] = turn
        for row in self._rows(MESSAGE_COLUMNS, want):
            m = StoredMessage(*row)
            found[m.seq] = Turn(m.id, m.session_id, (m,))
        if len(found) != len(rows):
            raise _changed()
        text = sum(len(found[s].messages[0].content) for s in want)
        state = self._state
        if len(cache) + len(want) > TURN_CACHE or state.turn_text + text > TURN_TEXT:
            cache.clear()  # bounded: at most TURN_CACHE turns and TURN_TEXT characters of text per user
            state.turn_text = 0
        if len(want) <= TURN_CACHE and text <= TURN_TEXT:
            cache.update((s, found[s]) for s in want)
            state.turn_text += text
        return found


def _changed() -> RefindError:
    return index_store.IndexChanged("the user's messages were forgotten or expired during this search: search again")


def _avgdl(lengths: np.ndarray) -> np.float64:
    """bm25s's average turn length: ``np.array([len(doc) ...]).mean()``, an exact float64 sum of ints divided by N."""
    import numpy as np

    return np.float64(int(lengths.sum())) / np.float64(max(len(lengths), 1))


def _idf(n: int, df: int) -> np.float32:
    """bm25s's idf (method "lucene") for a term in ``df`` of ``n`` turns, as its float32 idf array holds it."""
    import numpy as np

    return np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))


@dataclass
class LivePostings:
    """Query-time BM25 over the stored term frequencies of one view's turns (positions as in the view)."""

    segments: dict[int, AnySegment]
    seg_rows: dict[int, np.ndarray]  # segment id → the state row of each of its documents
    pos: np.ndarray  # int64: state row → view position (-1: not visible)
    lengths: np.ndarray  # int64 token length of each visible turn, by view position
    k1: float
    b: float
    read: Reader | None = None  # reads the parts of lazy segments through one connection (bound by Layout.index)
    shown: dict[int, bool] = field(default_factory=dict)  # segment id → every document of it visible (memo)
    origin: LivePostings | None = None  # the view's own postings, when these are them bound to a connection
    avgdl: np.float64 | None = None  # the visible turns' mean length, as bm25s computes it (of: once per view)

    @property
    def cache_identity(self) -> LivePostings:
        """The same object for every connection's binding of one view's postings (what caches key by)."""
        return self.origin or self

    def bound(self, read: Reader | None) -> LivePostings:
        return replace(self, read=read, origin=self.cache_identity)

    @classmethod
    def of(cls, state: UserState, rows: np.ndarray, k1: float, b: float) -> LivePostings:
        import numpy as np

        pos = np.full(len(state.seqs), -1, dtype=np.int64)
        pos[rows] = np.arange(len(rows))
        lengths = state.lengths[rows]
        return cls(state.segments, state.seg_rows, pos, lengths, k1, b, avgdl=_avgdl(lengths))

    def appended(self, state: UserState, added: np.ndarray) -> LivePostings:
        """What :meth:`of` gives for this view's rows followed by the rows ``added`` of ``state`` (the state this
        view's grew into: its rows keep their numbers), from this view's arrays — and what it learnt of which
        segments it sees whole, for the segments both hold (the turns it saw are all still seen): an Add to the latest
        session, or a new one, costs the new rows, not a pass over every turn."""
        import numpy as np

        n = len(self.lengths)
        pos = np.concatenate([self.pos, np.full(len(state.seqs) - len(self.pos), -1, dtype=np.int64)])
        pos[added] = np.arange(n, n + len(added))
        lengths = np.concatenate([self.lengths, state.lengths[added]])
        shown = {i: every for i, every in self.shown.items() if state.segments.get(i) is self.segments.get(i)}
        return LivePostings(
            state.segments, state.seg_rows, pos, lengths, self.k1, self.b, shown=shown, avgdl=_avgdl(lengths)
        )

    def _hits(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        import numpy as np

        pos_parts, tf_parts = [], []
        for seg_id, seg in self.segments.items():
            found = seg.postings(token, self.read)
            if found is None:
                continue
            docs, tf = found
            pos = self.pos[self.seg_rows[seg_id][docs]]
            if self._all_shown(seg_id):  # every document of the segment visible: no mask to apply
                pos_parts.append(pos)
                tf_parts.append(tf)
                continue
            keep = pos >= 0
            pos_parts.append(pos[keep])
            tf_parts.append(tf[keep])
        if not pos_parts:
            return None
        if len(pos_parts) == 1:  # one segment holds the token (read-only views: no caller writes into them)
            pos, tf = pos_parts[0], tf_parts[0]
        else:
            pos, tf = np.concatenate(pos_parts), np.concatenate(tf_parts)
        return (pos, tf) if pos.size else None

    def _all_shown(self, seg_id: int) -> bool:
        every = self.shown.get(seg_id)
        if every is None:
            every = self.shown[seg_id] = bool((self.pos[self.seg_rows[seg_id]] >= 0).all())
        return every

    def holders(self, token: str) -> np.ndarray:
        """The view positions of the visible turns holding the token, ascending."""
        import numpy as np

        hits = self._hits(token) if token else None
        return np.zeros(0, dtype=np.intp) if hits is None else np.sort(hits[0]).astype(np.intp)

    def df(self, token: str) -> int:
        """The token's document frequency among the visible turns: from a segment's head when every document of it
        is visible (no postings read: fuzzy expansion asks this of many candidate words)."""
        if not token:
            return 0
        count = 0
        for seg_id, seg in self.segments.items():
            if self._all_shown(seg_id):
                i = seg.vocab.get(token)
                count += 0 if i is None else int(seg.indptr[i + 1] - seg.indptr[i])
            elif (found := seg.postings(token, self.read)) is not None:
                count += int((self.pos[self.seg_rows[seg_id][found[0]]] >= 0).sum())
        return count

    def present(self, tokens: Mapping[str, int]) -> set[str]:
        """Which of ``tokens`` (its keys) some segment holds, visible or not: an intersection of dictionary keys per
        segment, so thousands of candidate words cost about as little as a few."""
        found: set[str] = set()
        for seg in self.segments.values():
            found |= tokens.keys() & seg.vocab.keys()
        return found

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """Every visible turn's score, exactly as bm25s (method "lucene") would index and score these turns."""
        import numpy as np

        n = len(self.lengths)
        scores = np.zeros(n, dtype=np.float32)
        if not n:
            return scores
        avgdl = self.avgdl if self.avgdl is not None else _avgdl(self.lengths)
        for seg in self.segments.values():  # every part the query needs, one read per segment
            if isinstance(seg, index_store.LazySegment):
                seg.need(seg.part_numbers(tokens), self.read)
        pos_parts: list[np.ndarray] = []
        tf_parts: list[np.ndarray] = []
        idfs: list[np.float32] = []
        held = 0

        def flush() -> None:
            # Tokens in groups: the same elementwise arithmetic as one token at a time, and one add.at over the
            # group's hits in query order adds each turn's terms in the same order, so the float32 sums are bit for
            # bit the same. A group holds at most about SCORE_GROUP_HITS hits: a long query repeating common words
            # would otherwise hold all of its hits at once (3 GB for "kayak blue" × 3,000 on 20,000 turns).
            if len(pos_parts) == 1:  # one token: its turns are distinct, so a fancy add adds what np.add.at would
                pos, tf64 = pos_parts[0], tf_parts[0].astype(np.float64)
                scores[pos] += (idfs[0] * self._saturation(tf64, pos, avgdl)).astype(np.float32)
            else:
                pos = np.concatenate(pos_parts)
                tf64 = np.concatenate(tf_parts).astype(np.float64)
                idf = np.repeat(np.asarray(idfs, dtype=np.float32), [p.size for p in pos_parts])
                np.add.at(scores, pos, (idf * self._saturation(tf64, pos, avgdl)).astype(np.float32))
            pos_parts.clear()
            tf_parts.clear()
            idfs.clear()

        # A token the query repeats has its contribution computed once and added at each occurrence (after the
        # group before it, so each turn's terms still add in query order): "2023" × 20,000 on 50,000 turns computed
        # it for every occurrence and held a search thread for ~50 s.
        left = Counter(tokens)  # occurrences still to add: a repeated token's arrays are let go after its last
        repeated: dict[str, tuple[np.ndarray | slice, np.ndarray] | None] = {}
        for token in tokens:  # a repeated query token counts again, as in bm25s
            left[token] -= 1
            if token in repeated or left[token]:
                entry = repeated.get(token) if token in repeated else self._contribution(token, n, avgdl)
                if left[token]:
                    repeated[token] = entry
                else:
                    repeated.pop(token, None)
                if entry is not None:
                    if pos_parts:
                        flush()
                        held = 0
                    pos, value = entry
                    scores[pos] += value  # the token's turns are distinct: what np.add.at would add
                continue
            hits = self._hits(token) if token else None
            if hits is None:
                continue
            pos, tf = hits
            df = pos.size
            pos_parts.append(pos)
            tf_parts.append(tf)
            idfs.append(_idf(n, df))
            held += df
            if held >= SCORE_GROUP_HITS:
                flush()
                held = 0
        if pos_parts:
            flush()
        return scores

    def _saturation(self, tf64: np.ndarray, pos: np.ndarray, avgdl: float) -> np.ndarray:
        """BM25's term-frequency part for these turns (float64, as bm25s computes it before its float32 matrix)."""
        part: np.ndarray = tf64 / (self.k1 * ((1 - self.b) + self.b * self.lengths[pos] / avgdl) + tf64)
        return part

    def _contribution(self, token: str, n: int, avgdl: float) -> tuple[np.ndarray | slice, np.ndarray] | None:
        """The turns holding ``token`` (in order; a run of them as a slice) and what it adds to each one's score
        (float32, as bm25s's score matrix): for a token the query adds more than once."""
        import numpy as np

        hits = self._hits(token) if token else None
        if hits is None:
            return None
        pos, tf = hits
        value = (_idf(n, pos.size) * self._saturation(tf.astype(np.float64), pos, avgdl)).astype(np.float32)
        order = np.argsort(pos, kind="stable")  # in order, the scores are read and written as memory lies
        pos, value = pos[order], value[order]
        if int(pos[-1]) - int(pos[0]) + 1 == pos.size:  # every turn of a run (a month or year word is in each one)
            return slice(int(pos[0]), int(pos[-1]) + 1), value
        return pos, value

    def vocabulary(self) -> dict[str, int]:
        """Every term of the visible turns with its document frequency (for query expansion and the like)."""
        import numpy as np

        out: dict[str, int] = {}
        for seg_id, seg in self.segments.items():
            if not len(seg.terms):
                continue
            if self._all_shown(seg_id):  # every document visible: the document frequencies are the segment's own
                counts = np.diff(seg.indptr)
            else:
                shown = self.pos[self.seg_rows[seg_id]] >= 0
                whole = seg.whole(self.read)
                counts = np.add.reduceat(shown[whole.docs].astype(np.int64), seg.indptr[:-1])
            for term, c in zip(seg.terms, counts.tolist(), strict=True):
                if c:
                    out[term] = out.get(term, 0) + c
        return out


# ---- refreshing ---------------------------------------------------------------------------------------------------


def reader(conn: sqlite3.Connection) -> Reader:
    """Reads parts of segments through ``conn``."""
    return partial(index_store.read_parts, conn)


_FILES: dict[str, str] = {}  # a database's id and path → the key of the file last opened there (_db_key)
_FILES_LOCK = threading.Lock()


def _db_key(store: Store) -> str:
    if store.index_db_id is None:  # a constant of the file: read once per Store
        # the file's id, where it is, and which file is there: a copy (cp, refind backup) keeps the id, so two copies
        # open in one process, or a copy restored over the path by a rename, would otherwise be served each other's
        # indexes and text (the same versions, seqs and segment ids name other messages in each)
        base = f"{index_store.db_id(store.conn)}:{store.path.resolve()}"
        dev, ino = store.identity or (0, 0)
        key = f"{base}:{dev}:{ino}"
        with _FILES_LOCK:
            before = _FILES.get(base)
            _FILES[base] = key
        if before is not None and before != key:  # the file there was replaced: what was read of the old one goes
            drop(lambda k: isinstance(k, tuple) and len(k) > 1 and k[1] == before)
        store.index_db_id = key
    return store.index_db_id


def descended(conn: sqlite3.Connection, read_at: int | None, now: int | None) -> bool:
    """Whether what was read of the file at write ``read_at`` still holds for its content at write ``now`` (both read
    in their snapshots: index_store.last_write): the same write, or one the file's write log remembers. A copy
    restored into the file (``cp backup.db``: the same id, path and inode) lacks the writes made after it was taken,
    and repeats the versions, seqs and segment ids of what it replaced for other messages."""
    return read_at == now or (read_at is not None and now is not None and index_store.descends(conn, read_at))


def live_index(
    store: Store, user_id: str, *, as_of: int | None, k1: float, b: float, lazy: bool = False
) -> TurnIndex | None:
    """The user's maintained index as a search at ``as_of`` may see it; None while the index is being built.

    ``lazy``: the postings of the query terms are read when the index is searched, through ``store.conn`` — for a
    caller that searches it at once, inside the same ``store.reading()`` snapshot (``search.search``), so the parts
    it reads belong to the segments it read. Otherwise every posting is read now, in this call's snapshot (the
    planner keeps the index through its model calls; the server's warmer keeps it for the questions to come)."""
    key = ("live", _db_key(store), user_id)
    with store.reading():  # the version, the segments and (unless lazy) their parts: one snapshot
        return _live_index(store, user_id, key, as_of=as_of, k1=k1, b=b, lazy=lazy)


def _live_index(
    store: Store, user_id: str, key: tuple[str, str, str], *, as_of: int | None, k1: float, b: float, lazy: bool
) -> TurnIndex | None:
    for attempt in range(2):
        version = store.user_version(user_id)
        now = index_store.last_write(store.conn)
        state: UserState | None = CACHE.get(key)
        kept = True
        if state is not None and not descended(store.conn, state.read_at, now):  # another file's content: never served
            drop_state(store, user_id)
            state = None
        if state is None or state.version != version:
            generation = CACHE.generation  # a forget that evicts while this refresh reads must win
            held = state is not None
            state = _refresh(store, user_id, state)
            if state is None:
                return None
            state.read_at = now
            # (an unknown user must not push real users out of the cache); a user emptied by another process (every
            # message forgotten or expired) leaves no state holding their text behind
            kept = bool(len(state.seqs)) and CACHE.put(key, state, state.nbytes, generation=generation)
            if held and not len(state.seqs):
                drop_state(store, user_id)
        try:
            if not lazy:
                state.read_all(reader(store.conn))
            index = state.view(store.retention_cutoff(), as_of, k1, b).index(state, store.conn, user_id)
            if not kept:  # this search's alone: no memo may keep it (and a forgotten user's text) past the search
                _release(state)
            return index
        except index_store.SegmentGone:  # the held state outlived its segments (an analyzer change's re-index)
            drop_state(store, user_id)
            if attempt == 1:
                raise
    raise AssertionError("unreachable")


def drop_state(store: Store, user_id: str) -> None:
    """Forget this process's state of the user in this database (the next search reads the segments again)."""
    key = ("live", _db_key(store), user_id)
    drop(lambda k: k == key)


def _refresh(store: Store, user_id: str, old: UserState | None) -> UserState | None:
    conn = store.conn
    try:
        with store.reading():  # one snapshot: the version, the segments and the messages agree (live_index's)
            if index_store.pending(conn):
                return None
            version = store.user_version(user_id)
            ids = index_store.segment_ids(conn, user_id)
            held = old.segments if old is not None else {}
            segments = {i: held[i] for i in ids if i in held}
            segments.update(index_store.load_segments(conn, [i for i in ids if i not in held]))
            grown = _grow(conn, user_id, version, segments, old) if old is not None else None
            return grown or _assemble(conn, user_id, version, segments)
    except sqlite3.OperationalError:
        return None


def _grow(
    conn: sqlite3.Connection, user_id: str, version: int, segments: dict[int, AnySegment], old: UserState
) -> UserState | None:
    """The common case — messages added after every message ``old`` holds (an Add; a merge may have folded some
    held segments together with them) — in time proportional to the new messages: the arrays are extended, held
    segments keep their rows, and every view ``old`` memoised is extended by the new rows at the end of their
    sessions. None when anything else changed (a forget or an expiry removed messages): the caller assembles."""
    import numpy as np

    added = [s for i, s in segments.items() if i not in old.segments]
    removed = [s for i, s in old.segments.items() if i not in segments]
    empty = np.zeros(0, dtype=np.int64)
    new_seqs = np.sort(np.concatenate([s.seqs for s in added])) if added else empty
    last = int(old.seqs[-1]) if len(old.seqs) else -1
    split = int(np.searchsorted(new_seqs, last, side="right"))
    refolded = np.sort(np.concatenate([s.seqs for s in removed])) if removed else empty
    if not np.array_equal(new_seqs[:split], refolded):
        return None  # a held message is gone (forgotten, expired), or an older one appeared
    fresh = new_seqs[split:]
    names, code_of = list(old.session_names), dict(old.code_of)
    meta = _segment_meta(added, fresh, code_of) or _read_meta(conn, user_id, fresh, code_of)
    codes = meta.session
    names.extend(list(code_of)[len(names) :])
    n_old = len(old.seqs)
    seqs = np.concatenate([old.seqs, fresh])
    lengths = np.concatenate([old.lengths, np.zeros(len(fresh), dtype=np.int64)])
    seg_rows = {i: old.seg_rows[i] for i in segments if i in old.segments}
    for i, seg in segments.items():
        if i not in seg_rows:
            rows = np.searchsorted(seqs, seg.seqs)
            seg_rows[i] = rows
            lengths[rows] = seg.lengths
    state = UserState(
        version,
        segments,
        seg_rows,
        seqs,
        np.concatenate([old.session, codes]),
        names,
        code_of,
        np.concatenate([old.said, meta.said]),
        np.concatenate([old.recorded, meta.recorded]),
        np.concatenate([old.idx, meta.idx]),
        lengths,
        _nbytes(segments, len(seqs)),
    )
    if old.ids is not None and not len(fresh):
        state.ids = old.ids
    # every message old held is still here, unchanged: so is the text old read of them, and who said each
    state.turn_cache, state.turn_text, state.text_overflows = dict(old.turn_cache), old.turn_text, old.text_overflows
    new_rows = np.arange(n_old, len(seqs), dtype=np.int64)
    with old.lock:
        if old.voice_codes is not None and old.voice_sizes is not None:
            state.voice_codes = np.concatenate([old.voice_codes, np.full(len(fresh), -1, dtype=np.int32)])
            state.voice_sizes = np.concatenate([old.voice_sizes, np.zeros(len(fresh), dtype=np.int32)])
            state.voice_list, state.voice_code_of = list(old.voice_list), dict(old.voice_code_of)
        views = list(old.views.values())
    for layout in views:
        vis = state.visible(layout.cutoff, layout.as_of)  # the new rows are the state's last ones
        grown = layout.extended(state, new_rows if vis is None else new_rows[vis[n_old:]])
        if grown is not None:
            state._keep(state.view_key(vis, layout.postings.k1, layout.postings.b), grown)
    return state


@dataclass
class _Meta:
    session: np.ndarray  # int32 session codes (code_of)
    said: np.ndarray  # float64, NaN when unknown
    recorded: np.ndarray
    idx: np.ndarray


def _segment_meta(segments: list[AnySegment], seqs: np.ndarray, code_of: dict[str, int]) -> _Meta | None:
    """What ranking needs of the messages ``seqs`` (ascending; every one in some segment), from the segments'
    DocMeta: no row read. None when a segment lacks it. New sessions are numbered into ``code_of``."""
    import numpy as np

    if any(s.meta is None for s in segments):
        return None
    n = len(seqs)
    session = np.zeros(n, dtype=np.int32)
    said = np.zeros(n, dtype=np.int64)
    recorded = np.zeros(n, dtype=np.int64)
    idx = np.zeros(n, dtype=np.int32)
    found = 0
    for seg in segments:
        meta = seg.meta
        assert meta is not None
        at = np.searchsorted(seqs, seg.seqs)
        inside = at < n
        inside[inside] = seqs[at[inside]] == seg.seqs[inside]
        if not inside.any():
            continue
        rows = at[inside]
        codes = np.asarray([code_of.setdefault(name, len(code_of)) for name in meta.sessions], dtype=np.int32)
        session[rows] = codes[meta.session[inside]]
        said[rows] = meta.said[inside]
        recorded[rows] = meta.recorded[inside]
        idx[rows] = meta.idx[inside]
        found += int(rows.size)
    if found != n:
        raise _changed()
    unknown = said == index_store.NO_DATE
    said_f = said.astype(np.float64)
    said_f[unknown] = np.nan
    return _Meta(session, said_f, recorded, idx)


def _assemble(conn: sqlite3.Connection, user_id: str, version: int, segments: dict[int, AnySegment]) -> UserState:
    return _assemble_in_order(version, segments) or _assemble_sorting(conn, user_id, version, segments)


def _assemble_in_order(version: int, segments: dict[int, AnySegment]) -> UserState | None:
    """``_assemble`` of segments whose seq ranges follow one another (the usual case: written and merged in seq
    order; forgets and expiries keep the ranges apart): the rows are the segments' documents one after the other, so
    no sort or search places them. None when the ranges interleave or a segment lacks its DocMeta."""
    import numpy as np

    ordered = sorted(((i, s) for i, s in segments.items() if len(s.seqs)), key=lambda item: int(item[1].seqs[0]))
    metas = [s.meta for _, s in ordered]
    if any(m is None for m in metas) or any(
        int(a.seqs[-1]) >= int(b.seqs[0]) for (_, a), (_, b) in zip(ordered, ordered[1:], strict=False)
    ):
        return None
    if not ordered:
        return None
    code_of: dict[str, int] = {}
    seg_rows, session = {}, []
    at = 0
    for (seg_id, seg), meta in zip(ordered, metas, strict=True):
        assert meta is not None
        seg_rows[seg_id] = np.arange(at, at + len(seg.seqs), dtype=np.int64)
        at += len(seg.seqs)
        if not code_of:  # the first segment's sessions are distinct: numbered as they are
            code_of = dict(zip(meta.sessions, range(len(meta.sessions)), strict=True))
            session.append(meta.session.astype(np.int32))
        else:
            remap = [code_of.setdefault(name, len(code_of)) for name in meta.sessions]
            session.append(np.asarray(remap, dtype=np.int32)[meta.session])
    said = np.concatenate([m.said for m in metas if m is not None])
    said_f = said.astype(np.float64)
    said_f[said == index_store.NO_DATE] = np.nan
    return UserState(
        version,
        segments,
        seg_rows,
        np.concatenate([s.seqs for _, s in ordered]).astype(np.int64),
        np.concatenate(session).astype(np.int32),
        list(code_of),
        code_of,
        said_f,
        np.concatenate([m.recorded for m in metas if m is not None]).astype(np.int64),
        np.concatenate([m.idx for m in metas if m is not None]).astype(np.int32),
        np.concatenate([s.lengths for _, s in ordered]).astype(np.int64),
        _nbytes(segments, at),
    )


def _assemble_sorting(
    conn: sqlite3.Connection, user_id: str, version: int, segments: dict[int, AnySegment]
) -> UserState:
    import numpy as np

    parts = [s.seqs for s in segments.values()]
    seqs = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    code_of: dict[str, int] = {}
    meta = _segment_meta(list(segments.values()), seqs, code_of)
    if meta is None:  # segments written before m005 (until their catch-up): from the rows, without their text
        meta = _read_meta(conn, user_id, seqs, code_of)
    lengths = np.zeros(len(seqs), dtype=np.int64)
    seg_rows = {}
    for seg_id, seg in segments.items():
        rows = np.searchsorted(seqs, seg.seqs)
        seg_rows[seg_id] = rows
        lengths[rows] = seg.lengths
    return UserState(
        version,
        segments,
        seg_rows,
        seqs,
        meta.session,
        list(code_of),
        code_of,
        meta.said,
        meta.recorded,
        meta.idx,
        lengths,
        _nbytes(segments, len(seqs)),
    )


def _nbytes(segments: dict[int, AnySegment], rows: int) -> int:
    cached = min(rows, TURN_CACHE) * MESSAGE_OVERHEAD + min(rows * MESSAGE_OVERHEAD, TURN_TEXT)  # turns, their text
    return sum(s.nbytes for s in segments.values()) + rows * ROW_BYTES + cached


def _read_meta(conn: sqlite3.Connection, user_id: str, seqs: np.ndarray, code_of: dict[str, int]) -> _Meta:
    """What ranking needs of the user's messages with these seqs (ascending), without their text: one range read
    when they are all the user's messages from the first of them on (a cold start, or the newest after an Add)."""
    import numpy as np

    rows: list[tuple[int, str, int | None, int, int]] = []
    if len(seqs):
        lo = int(seqs[0])
        cols = "seq, session_id, said_at, recorded_at, idx"
        count = conn.execute("SELECT count(*) FROM messages WHERE user_id = ? AND seq >= ?", (user_id, lo)).fetchone()[
            0
        ]
        if count == len(seqs):
            rows = conn.execute(
                f"SELECT {cols} FROM messages WHERE user_id = ? AND seq >= ? ORDER BY seq", (user_id, lo)
            ).fetchall()
        else:
            listed = seqs.tolist()
            for i in range(0, len(listed), 500):
                chunk = listed[i : i + 500]
                rows += conn.execute(
                    f"SELECT {cols} FROM messages WHERE seq IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
            rows.sort()
    if len(rows) != len(seqs):
        raise _changed()
    if not rows:
        return _Meta(np.zeros(0, np.int32), np.zeros(0, np.float64), np.zeros(0, np.int64), np.zeros(0, np.int32))
    got, sessions, said, recorded, idx = zip(*rows, strict=True)
    if not np.array_equal(np.asarray(got, dtype=np.int64), seqs):
        raise _changed()
    return _Meta(
        np.fromiter((code_of.setdefault(s, len(code_of)) for s in sessions), dtype=np.int32, count=len(sessions)),
        np.asarray(said, dtype=np.float64),  # None → NaN
        np.asarray(recorded, dtype=np.int64),
        np.asarray(idx, dtype=np.int32),
    )


def vocabulary(store: Store, user_id: str, *, as_of: int | None = None) -> dict[str, int]:
    """The user's indexed terms (analyzer output: lower-cased, stemmed) with their document frequencies over the
    turns a search may see now — from the maintained index, without reading any message. Empty while it is built."""
    view = live_index(store, user_id, as_of=as_of, k1=1.2, b=0.75)
    if view is None or not isinstance(view.postings, LivePostings):
        return {}
    return view.postings.vocabulary()
