"""Search one user's memory: evidence blocks from BM25 over turns, with session fusion and neighbouring turns.

Library API (the CLI, the planner, the server and the evaluation all call these):

* :func:`search` — one call: the user's (cached) index, then :meth:`UserIndex.search`;
* :func:`user_index` — the per-user index, built from ONE ``store.user_messages(user_id, as_of=…)`` read and kept
  in an in-process LRU cache keyed by (database file, user, ``users.version``, as_of, index settings). Every
  mutation of a user bumps its version, so a changed user is re-read; an entry holding a message that has since
  fallen out of the retention window is rebuilt before it is used; :func:`evict` / :func:`clear` drop entries;
* :func:`parse_date` — the date bounds a search accepts.

Every variant the evaluation measures is a field of :class:`SearchConfig`.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import settings
from .blocks import Block, format_time, iso_utc, render_blocks, render_line  # noqa: F401 (re-exported)
from .contract import parse_date
from .errors import InvalidInput
from .index import TurnIndex, bm25_scores, build_index, drop_common, eligible, from_blob, fuse, to_blob
from .tokenize import analyze
from .turns import TURN_UNITS, Turn, build_turns

if TYPE_CHECKING:
    from .store import Store, StoredMessage

SKIP_MODES = ("session", "turn")
OVERLAP_POLICIES = ("repeat", "trim")
NEIGHBOUR_ROLES = ("all", "same")


@dataclass(frozen=True)
class SearchConfig:
    """Every retrieval variant, one field each. The defaults are the ones chosen by measurement (BENCHMARKS.md)."""

    # index (changing these builds another index)
    turn_unit: str = "message"  # "message" | "pair"
    index_labels: bool = True  # index a leading "Name: " speaker label (False strips it before tokenizing)
    index_dates: bool = True  # also index each turn's said-at month and year as words ("June 2023")
    k1: float = 1.2
    b: float = 0.75
    # ranking
    session_fusion: bool = True  # RRF of turn rank and session rank; False = plain BM25 order
    rrf_k: int = 60
    session_top: int | None = None  # session score = sum of its best N turn scores (None: of all its turns)
    options_in_query: bool = True  # append the multiple-choice options to the query
    strip_instructions: bool = True  # drop appended instruction sentences ("Answer in one word.") from the query
    common_df: float | None = None  # drop query words found in more than this share of turns (unless all are)
    # rendering
    neighbours: int = 2  # ±N turns of context within the session
    neighbours_before: int | None = None  # turns shown before the anchor (None: as neighbours)
    context_blocks: int | None = 6  # only the first N blocks get `neighbours`, later ones `late_neighbours`
    late_neighbours: int = 1
    neighbour_roles: str = "all"  # "all" | "same" (only neighbours whose role is the anchor's)
    neighbour_chars: int | None = None  # cut each neighbour message to this many characters (None: whole)
    neighbour_max_chars: int | None = 400  # leave out neighbour messages longer than this (None: keep all)
    anchor_chars: int | None = 800  # cut each anchor message to this many characters, "…" marks a cut (None: whole)
    full_anchors: int = 1  # the first N blocks show their anchor whole, whatever anchor_chars says
    block_chars: int | None = None  # add neighbours (nearest first) only while the block's text stays within this
    overlap: str = "trim"  # "repeat": every block shows its whole context; "trim": a message is shown once
    skip: str = "session"  # the default skip mode for planner rounds: "session" | "turn"

    def __post_init__(self) -> None:
        _check("turn_unit", self.turn_unit, TURN_UNITS)
        _check("neighbour_roles", self.neighbour_roles, NEIGHBOUR_ROLES)
        _check("overlap", self.overlap, OVERLAP_POLICIES)
        _check("skip", self.skip, SKIP_MODES)
        if self.neighbours < 0:
            raise InvalidInput(f"neighbours must be 0 or more, got {self.neighbours}")

    def index_key(self) -> tuple[Any, ...]:
        """The fields that shape the index (the rest only change how it is queried and rendered)."""
        return (self.turn_unit, self.index_labels, self.index_dates, self.k1, self.b)

    def with_(self, **changes: Any) -> SearchConfig:
        return replace(self, **changes)


def _check(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise InvalidInput(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


@dataclass(frozen=True)
class Skip:
    """What a later planner round leaves out: whole sessions (``mode="session"``, session ids) or single turns
    (``mode="turn"``, turn/block ids)."""

    mode: str = "session"
    ids: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        _check("skip mode", self.mode, SKIP_MODES)
        object.__setattr__(self, "ids", frozenset(self.ids))


# ---- dates: parse_date lives with the contract's other time parsing (re-exported above) ---------------------


def _bound(value: str | int | None, *, end: bool) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        if isinstance(value, bool):
            raise InvalidInput(f"a date must be ISO 8601 or Unix ms, got {value!r}")
        return value
    return parse_date(value, end=end)


@functools.cache
def _instruction_pattern() -> re.Pattern[str]:
    verbs = (
        r"answer|choose|select|pick|reply|respond|output|return|give|provide|use|format|write|keep|"
        r"do not|don't|only|please (?:answer|choose|select|reply|respond)|your answer|the answer should|"
        r"think step|explain"
    )
    return re.compile(rf"^\s*(?:{verbs})\b", re.IGNORECASE)


def strip_instructions(query: str) -> str:
    """The query without sentences that instruct the answerer rather than describe what to find — "Answer in one
    word.", "Choose the correct option and reply with its letter only." — when some other sentence remains."""
    instruction = _instruction_pattern()
    sentences = re.split(r"(?<=[.!?。！？])\s+|\n+", query.strip())
    kept = [x for x in sentences if x and not instruction.match(x)]
    return " ".join(kept) if kept else query


def _strip_label(content: str) -> str:
    """Content without a leading speaker label such as 'Caroline: ' (up to 40 characters, no newline)."""
    head, sep, rest = content.partition(": ")
    if sep and 0 < len(head) <= 40 and "\n" not in head:
        return rest
    return content


DATE_WORDS = "%B %Y"  # how index_dates writes a said-at: "June 2023"


def turn_tokenizer(config: SearchConfig) -> Callable[[Turn], list[str]]:
    def tokenize(turn: Turn) -> list[str]:
        parts = [m.content if config.index_labels else _strip_label(m.content) for m in turn.messages]
        if config.index_dates and turn.said_at is not None:
            parts.append(datetime.fromtimestamp(turn.said_at / 1000, tz=UTC).strftime(DATE_WORDS))
        return analyze("\n".join(parts))

    return tokenize


class UserIndex:
    """One user's turns, indexed. Built from one scoped read; searched many times (thread-safe: read-only)."""

    def __init__(
        self,
        messages: Sequence[StoredMessage],
        config: SearchConfig | None = None,
        *,
        stored: bytes | None = None,
    ) -> None:
        """Build from the user's messages; ``stored`` (a persisted index blob) is used when it fits these turns."""
        self.config = config or SearchConfig()
        turns = build_turns(messages, self.config.turn_unit)
        loaded = from_blob(stored, turns) if stored is not None else None
        self.loaded = loaded is not None
        self.index: TurnIndex = loaded or build_index(
            turns, tokenize=turn_tokenizer(self.config), k1=self.config.k1, b=self.config.b
        )
        self._message_session: dict[str, str] | None = None  # built on first use

    def __len__(self) -> int:
        return len(self.index)

    @property
    def turns(self) -> list[Turn]:
        return self.index.turns

    def session_of(self, block_or_turn_id: str) -> str | None:
        """The session of a block, turn or message id (None when unknown to this index)."""
        pos = self.index.turn_pos.get(block_or_turn_id)
        if pos is not None:
            return self.index.turns[pos].session_id
        if self._message_session is None:
            self._message_session = {m.id: m.session_id for t in self.turns for m in t.messages}
        return self._message_session.get(block_or_turn_id)

    def search(
        self,
        query: str,
        *,
        top_k: int,
        date_from: str | int | None = None,
        date_to: str | int | None = None,
        skip: Skip | None = None,
        options: Sequence[str] = (),
        config: SearchConfig | None = None,
    ) -> list[Block]:
        """The best ``top_k`` evidence blocks for ``query`` (fewer when fewer turns match; none for no match).

        ``config`` may override the query-time and rendering fields; the index fields must match this index.
        """
        cfg = config or self.config
        if cfg.index_key() != self.config.index_key():
            raise ValueError("config changes how the index is built: get another user_index for it")
        lo, hi = _bound(date_from, end=False), _bound(date_to, end=True)
        if top_k <= 0:
            return []
        text = strip_instructions(query) if cfg.strip_instructions else query
        if text != query and not analyze(text):
            text = query  # what looked like an instruction held every search word ("Only Al ... Who is it?")
        if cfg.options_in_query and options:
            text = "\n".join([text, *options])
        tokens = analyze(text)
        if not tokens or len(self.index) == 0:
            return []
        idx = self.index
        if cfg.common_df is not None:
            tokens = drop_common(idx, tokens, cfg.common_df)
        scores = bm25_scores(idx, tokens)
        mask = eligible(
            idx,
            date_from=lo,
            date_to=hi,
            skip_sessions=skip.ids if skip and skip.mode == "session" else (),
            skip_turns=skip.ids if skip and skip.mode == "turn" else (),
        )
        scores = scores * mask
        order, fused = fuse(
            scores, idx.session_ix, rrf_k=cfg.rrf_k, use_sessions=cfg.session_fusion, session_top=cfg.session_top
        )
        return render_blocks(idx, order, fused, top_k=top_k, cfg=cfg)


# ---- the cache ----------------------------------------------------------------------------------------------

_CACHE: OrderedDict[tuple[Any, ...], UserIndex] = OrderedDict()
_LOCK = threading.Lock()
CACHE_SIZE = settings.index_cache_from_env()


def _db_key(store: Store) -> str:
    try:
        return str(store.path.resolve())
    except OSError:
        return str(store.path)


def user_index(
    store: Store, user_id: str, *, as_of: int | None = None, config: SearchConfig | None = None
) -> UserIndex:
    """The user's index, from the cache when the user has not changed since it was built."""
    config = config or SearchConfig()
    version = store.user_version(user_id)  # read BEFORE the messages: a concurrent change can only make it stale
    # retention is part of the key: an index built under a shorter window lacks what a longer one shows
    key = (_db_key(store), user_id, version, as_of, config.index_key(), store.retention_days)
    cutoff = store.retention_cutoff()
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is not None:
            oldest = entry.index.min_recorded_at
            if cutoff is not None and oldest is not None and oldest < cutoff:
                del _CACHE[key]  # something in it has expired since it was built
                entry = None
            else:
                _CACHE.move_to_end(key)
    if entry is not None:
        return entry if entry.config == config else _with_config(entry, config)
    persist = as_of is None and version > 0
    stored = _load_persisted(store, user_id, version, config) if persist else None
    built = UserIndex(store.user_messages(user_id, as_of=as_of), config, stored=stored)
    if persist and not built.loaded and len(built):
        _save_persisted(store, user_id, version, config, built)
    if not len(built):
        return built  # nothing to keep: an unknown user must not push real users out of the cache
    with _LOCK:
        for old in [k for k in _CACHE if k[:2] == key[:2] and k[2] < version]:
            del _CACHE[old]  # older versions of this user are dead
        _CACHE[key] = built
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return built


def _config_key(config: SearchConfig) -> str:
    """What a persisted index was built with: the analyzer's version and the index-shaping settings."""
    import json

    from . import tokenize

    return json.dumps([tokenize.ANALYZER_VERSION, *config.index_key()])


def _load_persisted(store: Store, user_id: str, version: int, config: SearchConfig) -> bytes | None:
    import sqlite3

    try:
        row = store.conn.execute(
            "SELECT blob FROM search_index WHERE user_id = ? AND config = ? AND version = ?",
            (user_id, _config_key(config), version),
        ).fetchone()
    except sqlite3.Error:
        return None
    return bytes(row[0]) if row else None


def _save_persisted(store: Store, user_id: str, version: int, config: SearchConfig, built: UserIndex) -> None:
    """Keep the index in the database for the next process — only if the user is still at ``version`` (any change
    since the read bumped it, and the bump's trigger has cleared the table for this user)."""
    import sqlite3

    try:
        with store.write():
            store.conn.execute(
                "INSERT OR REPLACE INTO search_index (user_id, config, version, turns, built_at, blob) "
                "SELECT ?, ?, ?, ?, ?, ? WHERE (SELECT version FROM users WHERE user_id = ?) = ?",
                (
                    user_id,
                    _config_key(config),
                    version,
                    len(built),
                    store.clock(),
                    to_blob(built.index),
                    user_id,
                    version,
                ),
            )
    except sqlite3.Error:
        pass  # a cache: a read-only or busy database just means the next process rebuilds


def _with_config(entry: UserIndex, config: SearchConfig) -> UserIndex:
    view = object.__new__(UserIndex)
    view.__dict__.update(entry.__dict__)
    view.config = config
    return view


def evict(user_id: str) -> None:
    """Drop every cached index of ``user_id`` (all databases): forget/expire call this."""
    with _LOCK:
        for key in [k for k in _CACHE if k[1] == user_id]:
            del _CACHE[key]


def clear() -> None:
    with _LOCK:
        _CACHE.clear()


def search(
    store: Store,
    user_id: str,
    query: str,
    *,
    top_k: int,
    date_from: str | int | None = None,
    date_to: str | int | None = None,
    options: Sequence[str] = (),
    as_of: int | None = None,
    config: SearchConfig | None = None,
    skip: Skip | None = None,
) -> list[Block]:
    """One user's best ``top_k`` evidence blocks for ``query``: ``[]`` when nothing matches or the user is unknown.

    An unparsable date raises InvalidInput (checked before anything is read).
    """
    _bound(date_from, end=False), _bound(date_to, end=True)
    ui = user_index(store, user_id, as_of=as_of, config=config)
    return ui.search(query, top_k=top_k, date_from=date_from, date_to=date_to, skip=skip, options=options)
