"""Pseudo-relevance feedback (RM3): words that the best-scoring turns share, added to the query with a small weight.

:func:`rm3_terms` reads the ``docs`` best turns of the first ranking (each weighted by its share of their scores),
estimates P(word | relevant) as the score-weighted mean of each turn's word frequency (word count / turn length),
and keeps the ``terms`` most likely words that are not already query words and are found in at most ``max_df`` of the
user's turns (a speaker's name, present in every label, says nothing). Each is weighted ``weight × P / max P``.
:func:`~refind_cli.index.weighted_scores` gives the BM25 scores those words add. A stage measured, not assumed: see
BENCHMARKS.md for whether it earns its place in the defaults.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .expand import vocabulary
from .index import TurnIndex
from .turns import Turn

if TYPE_CHECKING:
    import numpy as np


def rm3_terms(
    index: TurnIndex,
    scores: np.ndarray,
    query_tokens: Sequence[str],
    tokenize: Callable[[Turn], list[str]],
    *,
    docs: int = 10,
    terms: int = 10,
    weight: float = 0.3,
    max_df: float = 0.1,
) -> list[tuple[str, float]]:
    """The feedback words of the first ranking ``scores`` and their weights, best first."""
    import numpy as np

    positive = np.flatnonzero(scores > 0)
    if positive.size == 0 or terms <= 0:
        return []
    top = positive[np.lexsort((positive, -scores[positive]))][:docs]
    total = float(scores[top].sum())
    vocab = vocabulary(index)
    limit = max_df * len(index)
    asked = set(query_tokens)
    likely: dict[str, float] = {}
    for pos in top.tolist():
        tokens = tokenize(index.turns[pos])
        if not tokens:
            continue
        share = float(scores[pos]) / total
        for word, n in Counter(tokens).items():
            if word not in asked and word in vocab and vocab[word] <= limit:
                likely[word] = likely.get(word, 0.0) + share * n / len(tokens)
    best = sorted(likely.items(), key=lambda item: (-item[1], item[0]))[:terms]
    if not best:
        return []
    top_p = best[0][1]
    return [(word, weight * p / top_p) for word, p in best]
