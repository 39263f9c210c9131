"""Planner trace events, and the ``searches`` table that keeps every agent search for ``refind inspect search ID``.

An event is plain data (kind, step, milliseconds since the search began, a JSON-safe dict), so the trace stored in
the database re-renders exactly as it rendered live. Kinds, in the order a search emits them:

``start``       question, options, user, model, budget, hits per search, skip mode, top_k, and the dates every
                search is bounded by: said (its caller's; None when unbounded), stored by (as_of)
``model_call``  the messages added since the previous call, the reply, tokens, cost (None when unknown), latency,
                and the provider's native tool calls when it sent any
``action``      the parsed action: name, thought, arguments, fields the planner may not set (ignored), and the
                form the reply was parsed from (json | react | tool_call; older traces have none: json)
``search``      keywords, the dates searched (the planner's, or the caller's bound that replaced or narrowed them;
                ``asked_from``/``asked_to``: the planner's own, when narrowed — older traces hold the planner's
                dates alone), how many ids were skipped, the hits (number, id, session, said-at, content);
                ``fallback_skip: turn`` and ``fallback_skipped`` when every hit was in a session shown before and
                the turns shown before were skipped instead (skip mode session; only where it found nothing)
``note``        the result numbers kept, their ids, how many are kept in all
``correction``  why the reply was refused, and the message sent back to the planner (with the reply's form when
                it was recognised as one)
``budget``      the action budget ran out before ``finish_search``
``deadline``    the search's deadline (seconds) passed: between actions, or during a model call (its message); or
                a provider asked to wait past it before a retry (``retry_after_s``: its Retry-After, seconds); the
                planner stopped and the evidence is what it had by then. The deadline counts from the question:
                ``ready_ms`` (when 100 ms or more) says how much of it passed before the planner began (loading
                the model — litellm's import takes seconds in a new process — and reading the index)
``interrupted`` the process running the search was ending (an MCP client that quit, SIGTERM, Ctrl-C): its reason,
                the model calls made, and the message of the call it abandoned (when it was waiting on one); the
                planner stopped and the evidence is what it had by then
``refused``     the model refused to answer (OpenAI's ``message.refusal``, its content empty): the refusal as it
                said it, and the model calls made; the planner stopped and the evidence is what it had by then
``finish``      the planner said it is done
``fallback``    why the evidence does not come from kept notes, and where it comes from instead
``withheld``    messages left out of a search's hits before the planner saw them (``at: search``) or of the evidence
                (``at: evidence``): no longer stored (forgotten or expired while the search ran) or past retention —
                how many, of how many blocks, and why
``evidence``    the path taken (notes | last_search | direct_bm25), the limit, the returned ids, and the kept notes
                the limit left out (``left_out``, ids; only when any were)
``error``       the failure that ended the search (the search raised it after recording)
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import CorruptDatabase, NotFound
from .redact import redact, redact_data

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from .blocks import Block
    from .store import Store

    Seqs = Mapping[str, Collection[int]]  # message id → the seqs a search showed under it

KINDS = (
    "start",
    "model_call",
    "action",
    "search",
    "note",
    "correction",
    "budget",
    "deadline",
    "interrupted",
    "refused",
    "forgotten",
    "finish",
    "fallback",
    "withheld",
    "evidence",
    "error",
)


@dataclass(frozen=True)
class Event:
    kind: str
    step: int  # the action number it belongs to (0 before the first model call)
    t_ms: float  # milliseconds since the search began
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Event:
        return cls(kind=raw["kind"], step=int(raw["step"]), t_ms=float(raw["t_ms"]), data=dict(raw.get("data") or {}))


@dataclass(frozen=True)
class StoredSearch:
    id: str
    user_id: str
    at: int  # Unix ms when it started
    query: str
    mode: str
    model: str | None
    duration_ms: float
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    returned_ids: list[str]
    events: list[Event]

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        del d["events"]
        d["returned"] = len(self.returned_ids)
        del d["returned_ids"]
        return d

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["events"] = [e.as_dict() for e in self.events]
        return d


def new_search_id(at_ms: int) -> str:
    """Sortable by time, unique without coordination: 11 hex digits of ms, then 6 random hex digits."""
    return f"{at_ms:011x}{secrets.token_hex(3)}"


def quoted_ids(search: StoredSearch) -> set[str]:
    """Every message id the trace shows: the ids of each hit the planner saw and of the evidence returned."""
    ids = set(search.returned_ids)
    for event in search.events:
        if event.kind == "search":
            for hit in event.data.get("hits") or ():
                if hit.get("id") is not None:
                    ids.add(str(hit["id"]))
                ids.update(str(i) for i in hit.get("message_ids") or ())
    return ids


def note_seqs(into: dict[str, set[int]], blocks: Iterable[Block]) -> None:
    """Add the seq of each message these blocks show to ``into`` (message id → the seqs shown under it). A message id
    is derived from its user, request and place, so a request expired while a search ran and stored again with other
    text (a log replayed under the same request ids) reuses its ids; a seq is never given twice (blocks made
    elsewhere may carry none)."""
    for b in blocks:
        for i, seq in zip(b.message_ids, b.message_seqs, strict=False):
            into.setdefault(i, set()).add(seq)


def stored_again(seqs: Seqs, message_id: str, seq: int) -> bool:
    """Whether the stored message ``message_id`` (its ``seq``) is not the one a search showed under that id."""
    return any(s != seq for s in seqs.get(message_id, ()))


def _outdated(store: Store, search: StoredSearch, seqs: Seqs) -> bool:
    """True when a forget or expire that completed while the search ran removed what the trace quotes: a message it
    shows is gone (or stored again under its id since it was shown: :func:`stored_again`), or
    the whole user was forgotten since the search began. Runs inside the insert transaction, so no forget can commit
    between this check and the insert."""
    ids = sorted(quoted_ids(search))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = store.conn.execute(
            f"SELECT id, seq FROM messages WHERE user_id = ? AND id IN ({marks})", (search.user_id, *chunk)
        ).fetchall()
        if len(rows) < len(chunk) or any(stored_again(seqs, mid, seq) for mid, seq in rows):
            return True
    forgotten = store.conn.execute(
        "SELECT 1 FROM tombstones WHERE user_id = ? AND scope = 'user' AND at >= ? LIMIT 1",
        (search.user_id, search.at),
    ).fetchone()
    return forgotten is not None


def save(store: Store, search: StoredSearch, *, seqs: Seqs | None = None) -> bool:
    """Store a search's trace; False (nothing stored) when a forget or expire removed what it quotes meanwhile
    (``seqs``: message id → the seqs the search showed under it)."""
    with store.write():
        if _outdated(store, search, seqs or {}):
            return False
        store.conn.execute(
            "INSERT INTO searches (id, user_id, at, query, mode, model, duration_ms, llm_calls, prompt_tokens, "
            "completion_tokens, cost, returned_ids, trace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                search.id,
                search.user_id,
                search.at,
                redact(search.query),  # as the trace's events are: a key pasted into a query is stored nowhere
                search.mode,
                redact(search.model) if search.model is not None else None,
                search.duration_ms,
                search.llm_calls,
                search.prompt_tokens,
                search.completion_tokens,
                search.cost,
                json.dumps(search.returned_ids),
                json.dumps([redact_data(e.as_dict()) for e in search.events], ensure_ascii=False),
            ),
        )
    return True


_COLUMNS = (
    "id, user_id, at, query, mode, model, duration_ms, llm_calls, prompt_tokens, completion_tokens, cost, "
    "returned_ids, trace"
)


def _row(row: tuple[Any, ...]) -> StoredSearch:
    *head, returned, trace = row
    fields = dict(zip(_COLUMNS.replace(" ", "").split(",")[:-2], head, strict=True))
    returned_ids, events = decode(fields["id"], returned, trace)
    return StoredSearch(**fields, returned_ids=returned_ids, events=events)


def decode(search_id: str, returned: str, trace: str) -> tuple[list[str], list[Event]]:
    """A stored search's returned ids and trace events from their columns' JSON; CorruptDatabase naming the search
    when a row damaged on disk cannot be read (``inspect --check`` reports it too)."""
    try:
        return json.loads(returned), [Event.from_dict(e) for e in json.loads(trace)]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise CorruptDatabase(
            f"stored search {search_id!r} is damaged: its trace cannot be read ({type(exc).__name__}: "
            f"{str(exc)[:200]}); restore a copy made by `refind backup`"
        ) from None


class _Retention:
    """The read-time retention predicate for stored searches, as ``refind expire`` applies it: a search is hidden
    when it ran before the cutoff, or when it quotes a message of its user that is past the cutoff (not yet swept)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cutoff = store.retention_cutoff()
        self._expired: dict[str, Quotes] = {}  # user → what quotes the user's expired, unswept messages

    def sql(self) -> tuple[str, list[int]]:
        return ("at >= ?", [self.cutoff]) if self.cutoff is not None else ("1", [])

    def visible(self, row: tuple[Any, ...]) -> bool:
        if self.cutoff is None:
            return True
        user_id, returned, trace = row[1], row[-2], row[-1]
        if user_id not in self._expired:
            rows = self.store.conn.execute(
                "SELECT id, content FROM messages WHERE user_id = ? AND recorded_at < ?", (user_id, self.cutoff)
            )
            self._expired[user_id] = Quotes(rows)
        return not self._expired[user_id].found_in(f"{returned}\n{trace}")


# ---- which stored searches quote a message (forget and expire delete them; reads past retention hide them) -------

QUOTE_PREFIX_CHARS = 32  # a stored trace quoting this much of a message's text counts as quoting the message
# A text shorter than this ("ok", "yes", "thanks") lies inside every trace's JSON ("prompt_tokens" holds "ok"):
# such a message counts as quoted by its id alone — every hit a planner was shown carries its message ids.
QUOTE_MIN_CHARS = 8


def needles(message_id: str, content: str) -> set[str]:
    """What a stored trace would contain if it quoted this message: its id, or the start of its text as JSON."""
    head = content.strip()[:QUOTE_PREFIX_CHARS]
    out = {message_id}
    if len(head) >= QUOTE_MIN_CHARS:
        out.add(json.dumps(head, ensure_ascii=False)[1:-1])
        out.add(json.dumps(head, ensure_ascii=True)[1:-1])
    return out


def quoting_searches(conn: sqlite3.Connection, user_id: str, messages: list[tuple[str, str]]) -> list[str]:
    """Ids of this user's stored planner searches that quote any of ``messages`` (id, content)."""
    if not messages:
        return []
    quotes = Quotes(messages)
    rows = conn.execute("SELECT id, returned_ids, trace FROM searches WHERE user_id = ?", (user_id,))
    return [sid for sid, returned, trace in rows if quotes.found_in(f"{returned}\n{trace}")]


class Quotes:
    """Whether a stored trace quotes any of many messages (id, content), in one pass over the trace.

    Testing each needle with ``in`` costs needles × trace length: an expire of 16,000 messages against 400 stored
    traces of 13 KB took 45–205 s inside the write lock. Every needle is at least ``QUOTE_MIN_CHARS`` long (an id is 24
    hex digits), so each is filed under one of its substrings of that length, its key — one few other needles share
    (messages of a chat begin alike: "Caroline: …") — and a trace's substrings of that length are read once and met
    with the keys; only the needles of a key the trace holds are looked for whole, each once. A few needles are cheaper
    tested one by one."""

    _WIDTH = QUOTE_MIN_CHARS
    # up to this many needles, ``in`` for each is about as quick as reading a trace's substrings (~1.3 ms each for a
    # trace of 13 KB of chat lines at 256 needles; 2.9 against 1.2 at 512: bench/quoting.py --crossover)
    _FEW = 256
    _CHUNK = 1 << 16  # substrings read per piece of a long trace

    def __init__(self, messages: Iterable[tuple[str, str]]) -> None:
        wanted: set[str] = set()
        for mid, content in messages:
            wanted |= needles(mid, content)
        w = self._WIDTH
        self._short = [n for n in wanted if len(n) < w]
        self._long = sorted(n for n in wanted if len(n) >= w)  # (sorted: the keys chosen do not depend on hashing)
        self._by_key: dict[str, list[str]] = {}
        for n in self._long:
            self._by_key.setdefault(self._key(n), []).append(n)
        self._keys = frozenset(self._by_key)

    def _key(self, needle: str) -> str:
        """The needle's substring of ``_WIDTH`` characters that the fewest needles filed so far are under, from its
        end back (a message's start is most alike its neighbours': "Caroline: …"); the first under none at once."""
        w, best, fewest = self._WIDTH, "", -1
        for at in range(len(needle) - w, -1, -1):
            key = needle[at : at + w]
            filed = len(self._by_key.get(key, ()))
            if filed == 0:
                return key
            if fewest < 0 or filed < fewest:
                best, fewest = key, filed
        return best

    def found_in(self, text: str) -> bool:
        if any(n in text for n in self._short):
            return True
        if len(self._long) <= self._FEW:
            return any(n in text for n in self._long)
        w = self._WIDTH
        held: set[str] = set()
        for start in range(0, max(len(text) - w + 1, 0), self._CHUNK):
            piece = text[start : start + self._CHUNK + w - 1]
            held.update(self._keys.intersection(piece[i : i + w] for i in range(len(piece) - w + 1)))
        return any(n in text for key in held for n in self._by_key[key])


def load(store: Store, search_id: str) -> StoredSearch:
    """One stored search by id; NotFound when there is none, or when it is past retention (as for every read)."""
    retention = _Retention(store)
    predicate, params = retention.sql()
    row = store.conn.execute(
        f"SELECT {_COLUMNS} FROM searches WHERE id = ? AND {predicate}", (search_id, *params)
    ).fetchone()
    if row is None or not retention.visible(row):
        raise NotFound(f"no stored search {search_id!r}: `refind inspect searches` lists them")
    return _row(row)


def recent(store: Store, *, user_id: str | None = None, limit: int = 50) -> list[StoredSearch]:
    """The latest stored searches within retention, newest first, of one user or of all."""
    retention = _Retention(store)
    predicate, params = retention.sql()
    where, extra = ("AND user_id = ?", [user_id]) if user_id is not None else ("", [])
    rows = store.conn.execute(
        f"SELECT {_COLUMNS} FROM searches WHERE {predicate} {where} ORDER BY at DESC, id DESC", [*params, *extra]
    )
    out: list[StoredSearch] = []
    for r in rows:
        if len(out) >= limit:
            break
        if retention.visible(r):
            out.append(_row(r))
    rows.close()
    return out
