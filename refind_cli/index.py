"""Ranking one user's turns: BM25 scoring, the eligibility mask (date range, skip set), session fusion, neighbours.

Each stage is a small function over numpy arrays so it can be tested on a toy corpus ranked by hand:

* :func:`bm25_scores` — bm25s (Lucene BM25, k1 = 1.2, b = 0.75 by default) over every turn;
* :func:`eligible` — the mask applied **before** ranking: said-at inside the date range (a turn without a said-at
  is left out of any date-bounded search, since it cannot be shown to lie inside the range), not in the skip set;
* :func:`fuse` — reciprocal rank fusion, k = 60: a turn's rank among turns with a positive score and its session's
  rank (session score = the sum of its turns' positive scores), ``1/(k + turn rank) + 1/(k + session rank)``;
* :func:`neighbours` — ±N turns around an anchor, cut at the session's edges.

Heavy imports (numpy, bm25s) happen on first use, never at module import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .turns import Turn

if TYPE_CHECKING:
    import numpy as np


@dataclass
class TurnIndex:
    """The BM25 index of one user's turns plus the per-turn arrays ranking needs. Built once, read many times."""

    turns: list[Turn]  # session by session, chronological within each (as turns.build_turns returns them)
    bm25: Any  # bm25s.BM25, or None when the user has no tokens at all
    session_ix: np.ndarray  # int32: the session number of each turn
    session_ids: list[str]  # session number → session id
    session_start: np.ndarray  # int64: index of each session's first turn
    session_end: np.ndarray  # int64: one past each session's last turn
    said_at: np.ndarray  # float64 Unix ms; NaN when unknown
    min_recorded_at: int | None  # the oldest recorded-at of any message in the index
    turn_pos: dict[str, int]  # turn id → index

    def __len__(self) -> int:
        return len(self.turns)


def build_index(
    turns: list[Turn], *, tokenize: Callable[[Turn], list[str]], k1: float = 1.2, b: float = 0.75
) -> TurnIndex:
    """Index ``turns`` (which must be grouped by session, as ``build_turns`` returns them)."""
    import numpy as np

    corpus = [tokenize(t) for t in turns]
    bm25 = None
    if any(corpus):
        import bm25s

        bm25 = bm25s.BM25(k1=k1, b=b)
        bm25.index(corpus, show_progress=False)
    session_ids: list[str] = []
    session_ix = np.empty(len(turns), dtype=np.int32)
    starts: list[int] = []
    for i, t in enumerate(turns):
        if not session_ids or session_ids[-1] != t.session_id:
            session_ids.append(t.session_id)
            starts.append(i)
        session_ix[i] = len(session_ids) - 1
    session_start = np.asarray(starts, dtype=np.int64)
    session_end = np.append(session_start[1:], len(turns)).astype(np.int64)
    said = np.array([_turn_said_at(t) for t in turns], dtype=np.float64)
    recorded = [m.recorded_at for t in turns for m in t.messages]
    return TurnIndex(
        turns=turns,
        bm25=bm25,
        session_ix=session_ix,
        session_ids=session_ids,
        session_start=session_start,
        session_end=session_end,
        said_at=said,
        min_recorded_at=min(recorded) if recorded else None,
        turn_pos={t.id: i for i, t in enumerate(turns)},
    )


def _turn_said_at(turn: Turn) -> float:
    for m in turn.messages:
        if m.said_at is not None:
            return float(m.said_at)
    return float("nan")


def bm25_scores(index: TurnIndex, query_tokens: Sequence[str]) -> np.ndarray:
    """Every turn's BM25 score for the query (zeros when no query token is in the user's vocabulary)."""
    import numpy as np

    if index.bm25 is None:
        return np.zeros(len(index), dtype=np.float32)
    vocab = index.bm25.vocab_dict
    ids = [vocab[t] for t in query_tokens if t and t in vocab]
    if not ids:
        return np.zeros(len(index), dtype=np.float32)
    return index.bm25.get_scores_from_ids(ids)


def eligible(
    index: TurnIndex,
    *,
    date_from: int | None = None,
    date_to: int | None = None,
    skip_sessions: Sequence[str] = (),
    skip_turns: Sequence[str] = (),
) -> np.ndarray:
    """The boolean mask of turns a search may rank (see the module docstring)."""
    import numpy as np

    mask = np.ones(len(index), dtype=bool)
    if date_from is not None or date_to is not None:
        said = index.said_at
        known = ~np.isnan(said)
        mask &= known
        if date_from is not None:
            mask &= np.where(known, said, 0) >= date_from
        if date_to is not None:
            mask &= np.where(known, said, 0) <= date_to
    if skip_sessions:
        wanted = set(skip_sessions)
        for s, sid in enumerate(index.session_ids):
            if sid in wanted:
                mask[index.session_start[s] : index.session_end[s]] = False
    for tid in skip_turns:
        pos = index.turn_pos.get(tid)
        if pos is not None:
            mask[pos] = False
    return mask


def fuse(
    scores: np.ndarray, session_ix: np.ndarray, *, rrf_k: int = 60, use_sessions: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Rank the turns with a positive score. Returns (turn indices best first, their fused scores).

    Ties break on the higher BM25 score, then on the earlier turn. Without ``use_sessions`` the fused score is
    ``1/(k + turn rank)`` alone (the plain BM25 order).
    """
    import numpy as np

    cand = np.flatnonzero(scores > 0)
    if cand.size == 0:
        return cand, np.zeros(0)
    s = scores[cand].astype(np.float64)
    by_score = np.lexsort((cand, -s))  # best first; ties → earlier turn
    turn_rank = np.empty(cand.size, dtype=np.float64)
    turn_rank[by_score] = np.arange(1, cand.size + 1)
    fused = 1.0 / (rrf_k + turn_rank)
    if use_sessions:
        sess = session_ix[cand]
        n_sessions = int(session_ix.max()) + 1 if session_ix.size else 0
        sums = np.bincount(sess, weights=s, minlength=n_sessions)
        present = np.flatnonzero(sums > 0)
        order = present[np.lexsort((present, -sums[present]))]
        session_rank = np.zeros(n_sessions, dtype=np.float64)
        session_rank[order] = np.arange(1, order.size + 1)
        fused = fused + 1.0 / (rrf_k + session_rank[sess])
    final = np.lexsort((turn_rank, -fused))
    return cand[final], fused[final]


def neighbours(index: TurnIndex, pos: int, n: int) -> range:
    """The turn indices of the anchor at ``pos`` and its ±n neighbours inside its session."""
    s = index.session_ix[pos]
    lo = max(int(index.session_start[s]), pos - n)
    hi = min(int(index.session_end[s]), pos + n + 1)
    return range(lo, hi)
