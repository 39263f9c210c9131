"""Term proximity, a ranking stage measured in round 26 and left off by default (``proximity_weight=0``; BENCHMARKS.md,
"Ideas measured and not taken (round 26)").

:func:`proximity_scores`: a turn where two words that stand next to each other in the question (after stop-words are
dropped) also stand near each other scores more of its own rarer-word score — up to ``weight`` more, in proportion to
the question's adjacent pairs found within ``window`` tokens of each other, each counting ``1 / d`` at distance ``d``
(a phrase counts 1). Only the ``pool`` turns best by ``scores`` are read again, tokenized as the index tokenized them:
the sequential-dependence idea (Metzler and Croft) scored on the candidates BM25 found. A turn longer than
``max_chars`` is not read (an essay is a document of its own: its words meet by chance).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .index import TurnIndex
from .turns import Turn

if TYPE_CHECKING:
    import numpy as np


def query_pairs(tokens: Sequence[str], keep: Callable[[str], bool]) -> list[tuple[str, str]]:
    """The pairs of tokens next to each other in the query, both kept by ``keep`` and not the same word (each pair
    once, in the query's order): a dropped token ends a run, so no pair spans it."""
    pairs: list[tuple[str, str]] = []
    prev: str | None = None
    for token in tokens:
        if not token or not keep(token):
            prev = None
            continue
        if prev is not None and prev != token and (prev, token) not in pairs:
            pairs.append((prev, token))
        prev = token
    return pairs


def nearest(at_a: Sequence[int], at_b: Sequence[int]) -> int | None:
    """The smallest distance between a position in ``at_a`` and one in ``at_b`` (both ascending); None if either is
    empty."""
    if not at_a or not at_b:
        return None
    i = j = 0
    best = None
    while i < len(at_a) and j < len(at_b):
        d = abs(at_a[i] - at_b[j])
        if best is None or d < best:
            best = d
        if at_a[i] < at_b[j]:
            i += 1
        else:
            j += 1
    return best


def proximity_scores(
    index: TurnIndex,
    scores: np.ndarray,
    rarer: np.ndarray,
    pairs: Sequence[tuple[str, str]],
    tokenize: Callable[[Turn], list[str]],
    *,
    weight: float,
    window: int,
    pool: int,
    max_chars: int | None = None,
) -> np.ndarray:
    """``scores`` plus, for each of the ``pool`` turns best by ``scores`` (those the rarer words matched, at most
    ``max_chars`` long), ``weight`` × its ``rarer`` score × the share of ``pairs`` it holds within ``window`` tokens
    (each pair 1 / distance)."""
    import numpy as np

    if not weight or not pairs or pool <= 0:
        return scores
    cand = (rarer > 0).nonzero()[0]
    if cand.size == 0:
        return scores
    if cand.size > pool:
        cand = np.sort(cand[np.argpartition(-scores[cand], pool - 1)[:pool]])
    if max_chars is not None:  # (who said each turn and its length are read without its text)
        _, sizes = index.voices(cand)
        cand = cand[sizes <= max_chars]
    prefetch = getattr(index.turns, "prefetch", None)  # the maintained index reads their text in one query
    if prefetch is not None:
        prefetch(cand, 0)
    wanted = {t for pair in pairs for t in pair}
    out = scores.copy()
    for pos in cand.tolist():
        at: dict[str, list[int]] = {}
        for i, token in enumerate(tokenize(index.turns[pos])):
            if token in wanted:
                at.setdefault(token, []).append(i)
        if len(at) < 2:
            continue
        near = 0.0
        for a, b in pairs:
            d = nearest(at.get(a, ()), at.get(b, ()))
            if d is not None and 0 < d <= window:
                near += 1.0 / d
        if near:
            out[pos] = scores[pos] + np.float32(weight * near / len(pairs)) * rarer[pos]
    return out
