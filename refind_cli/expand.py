"""Robust queries: fuzzy expansion of query words the user's vocabulary lacks, and backfill when few turns match.

Each stage is a small function so it can be tested on a toy corpus ranked by hand:

* :func:`vocabulary` — the user's words and their document frequencies, read from the index. It is the ONE place
  this module reads the index's vocabulary, so another index only needs this function repointed;
* :func:`fuzzy_terms` — what Lucene's ``FuzzyQuery`` does for a query word: the vocabulary's words within a small
  edit distance (Levenshtein; 1 edit for words of 4–5 characters, 2 from 6; shorter words and CJK bigrams are never
  expanded), the first two characters fixed (Lucene's prefix length, which keeps the scan to a sliver of the
  vocabulary), at most ``max_expansions`` of them (fewest edits first, then the most
  frequent), each weighted ``1 − edits / len(word)``. Only a word the vocabulary lacks is expanded: a misspelt name
  ("Nikolas") finds the transcript's spelling ("Nicolas") while a word that matches is left alone;
* :func:`fuzzy_scores` — the BM25 scores the expansions add (each expansion's own BM25 scores times its weight);
* :func:`backfill` — when fewer than ``need`` turns have a positive score, the rest of the list: the other turns of
  the matched sessions (nearest to a matched turn first), then the other sessions' turns, latest first — so a
  budget is spent on the likeliest context rather than left unused.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, TypeVar

from .index import TurnIndex, bm25_scores

if TYPE_CHECKING:
    import numpy as np


class _DocFreq(Mapping[str, int]):
    """Token → number of turns holding it, read lazily from the index's score matrix (no copy)."""

    def __init__(self, index: TurnIndex) -> None:
        self._vocab = index.vocab
        self._indptr = index.indptr

    def __getitem__(self, token: str) -> int:
        row = self._vocab[token]
        return int(self._indptr[row + 1] - self._indptr[row])

    def __iter__(self) -> Iterator[str]:
        return iter(self._vocab)

    def __len__(self) -> int:
        return len(self._vocab)


class _PostingsDocFreq(Mapping[str, int]):
    """The same over a maintained index's postings: membership and counts by ``df``; the word list (needed only
    when a query word is missing) read once, on first iteration."""

    def __init__(self, postings: Any) -> None:
        self._vocab = postings  # the identity _buckets caches by
        self._words: list[str] | None = None

    def __getitem__(self, token: str) -> int:
        n = int(self._vocab.df(token))
        if n <= 0:
            raise KeyError(token)
        return n

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and int(self._vocab.df(token)) > 0

    def _all(self) -> list[str]:
        if self._words is None:
            listing = getattr(self._vocab, "vocabulary", None)
            self._words = list(listing()) if listing is not None else []
        return self._words

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def vocabulary(index: TurnIndex) -> Mapping[str, int]:
    """The user's vocabulary: every indexed token with the number of turns that hold it (from the maintained
    index's postings when it has them, else from the score matrix)."""
    if index.postings is not None:
        return _PostingsDocFreq(index.postings)
    return _DocFreq(index)


def present(index: TurnIndex, tokens: Mapping[str, int]) -> AbstractSet[str]:
    """Which of ``tokens`` (its keys) the user's turns may hold — in some segment's term dictionary, or in the score
    matrix's vocabulary — for many candidate words at once: one intersection of dictionary keys, which walks the
    smaller side."""
    postings = index.postings
    if postings is not None:
        return postings.present(tokens)
    return tokens.keys() & index.vocab.keys()


def max_edits(word: str) -> int:
    """Lucene's ``AUTO`` fuzziness, one step stricter for the shortest words: 0 up to 3 characters, 1 for 4–5, 2
    from 6. Words that are not wholly letters (numbers, CJK bigrams) are never expanded."""
    if len(word) <= 3 or not word.isalpha():
        return 0
    if not word.isascii() and not all(c.isascii() or "\u00c0" <= c <= "\u024f" for c in word):
        return 0  # (ASCII words, most of a vocabulary, skip the per-character scan: it is most of _buckets' time)
    return 1 if len(word) <= 5 else 2


def edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` as soon as it must exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


T = TypeVar("T")
PREFIX = 2  # characters a fuzzy match must share with the query word at its start (Lucene's prefixLength)
_BUCKETS: dict[int, tuple[Callable[[], object], dict[tuple[str, int], list[str]]]] = {}


def _identity(vocab: Mapping[str, int]) -> object:
    """What a vocabulary's buckets are cached by: its source (a maintained index's postings as one view holds them,
    whichever connection they are bound to — ``cache_identity`` — or the score matrix's vocabulary)."""
    source = getattr(vocab, "_vocab", vocab)
    return getattr(source, "cache_identity", source)


def _per_vocabulary(
    cache: dict[int, tuple[Callable[[], object], T]], vocab: Mapping[str, int], build: Callable[[], T]
) -> T:
    """``build()``'s value for this vocabulary, built once and kept in ``cache`` (its 16 most recent vocabularies).
    An entry holds its vocabulary's source weakly and goes with it: a forgotten user's postings, once the index cache
    lets them go, take their words out of this cache too (forget removes a user's terms from memory)."""
    source = _identity(vocab)
    key = id(source)
    cached = cache.get(key)
    if cached is not None and cached[0]() is source:
        return cached[1]
    value = build()
    if len(cache) >= 16:
        cache.pop(next(iter(cache)))
    try:
        held: Callable[[], object] = weakref.ref(source, functools.partial(_gone, cache, key))
    except TypeError:  # a plain dict (the score matrix's vocabulary) takes no weak reference: held as it is
        held = functools.partial(_same, source)
    cache[key] = (held, value)
    return value


def _gone(cache: dict[int, tuple[Callable[[], object], Any]], key: int, ref: object) -> None:
    """A vocabulary's source was let go: its entry leaves the cache (unless the key holds another's by now)."""
    entry = cache.get(key)
    if entry is not None and entry[0] is ref:
        cache.pop(key, None)


def _same(source: object) -> object:
    return source


def _buckets(vocab: Mapping[str, int]) -> dict[tuple[str, int], list[str]]:
    """The vocabulary's expandable words by (first :data:`PREFIX` characters, length), built once per vocabulary."""

    def build() -> dict[tuple[str, int], list[str]]:
        out: dict[tuple[str, int], list[str]] = {}
        for word in vocab:
            if word and max_edits(word):
                out.setdefault((word[:PREFIX], len(word)), []).append(word)
        return out

    return _per_vocabulary(_BUCKETS, vocab, build)


def fuzzy_terms(word: str, vocab: Mapping[str, int], *, max_expansions: int = 3) -> list[tuple[str, float]]:
    """The vocabulary's words near ``word`` with their weights (none when ``word`` is in the vocabulary)."""
    limit = max_edits(word)
    if not limit or word in vocab:
        return []
    return _near(word, limit, vocab, max_expansions)


def _near(word: str, limit: int, vocab: Mapping[str, int], max_expansions: int) -> list[tuple[str, float]]:
    """:func:`fuzzy_terms` for a word the vocabulary lacks, ``limit`` its edit distance."""
    if max_expansions <= 0:
        return []
    buckets = _buckets(vocab)
    found: list[tuple[int, int, str]] = []
    for length in range(len(word) - limit, len(word) + limit + 1):
        for candidate in buckets.get((word[:PREFIX], length), ()):
            d = edit_distance(word, candidate, limit)
            if d <= limit:
                found.append((d, -vocab[candidate], candidate))
    found.sort()
    return [(w, 1.0 - d / len(word)) for d, _, w in found[:max_expansions]]


MAX_FUZZY_WORDS = 64  # query words expanded per search; the shared sets' questions have at most 23 expandable words


def fuzzy_scores(
    index: TurnIndex, tokens: Sequence[str], *, max_expansions: int = 3, max_words: int = MAX_FUZZY_WORDS
) -> np.ndarray | None:
    """The BM25 scores that the fuzzy expansions of ``tokens`` add (None when no token has one). Only the first
    ``max_words`` query words the vocabulary lacks are expanded: each costs a scan of its vocabulary bucket, and a
    query of 100,000 characters of made-up words held a search thread for minutes."""
    vocab = vocabulary(index)
    total = None
    missing = ((t, n) for t in dict.fromkeys(tokens) if (n := max_edits(t)) and t not in vocab)
    for token, limit in itertools.islice(missing, max_words):  # stops reading the query at the last one expanded
        for term, weight in _near(token, limit, vocab, max_expansions):
            part = bm25_scores(index, [term]) * weight
            total = part if total is None else total + part
    return total


_Units = tuple[dict[str, list[str]], dict[tuple[str, int], list[str]]]
_UNITS: dict[int, tuple[Callable[[], object], _Units]] = {}


def _unit_bigrams(vocab: Mapping[str, int]) -> _Units:
    """The vocabulary's bigrams of CJK characters or grapheme clusters by each unit they hold, built once per
    vocabulary (as :func:`_buckets`), and the memo of a common unit's most frequent ones (:func:`lone_unit_scores`)."""
    from .tokenize import units

    def build() -> _Units:
        out: dict[str, list[str]] = {}
        for word in vocab:
            if word.isascii():
                continue
            if len(word) == 2 and "\u4e00" <= word[0] <= "\u9fff" and "\u4e00" <= word[1] <= "\u9fff":
                pair: Sequence[str] = word  # (most of a Chinese vocabulary: common Han characters, without a regex)
            elif len(pair := units(word) or ()) != 2:
                continue
            for unit in dict.fromkeys(pair):
                out.setdefault(unit, []).append(word)
        return out, {}

    return _per_vocabulary(_UNITS, vocab, build)


MAX_UNIT_BIGRAMS = 64  # bigrams read per lone character of a query (the most frequent)
MAX_LONE_UNITS = 16  # lone characters expanded per search; the shared sets' questions hold at most 3


def lone_unit_scores(
    index: TurnIndex, tokens: Sequence[str], *, most: int = MAX_UNIT_BIGRAMS, max_units: int = MAX_LONE_UNITS
) -> np.ndarray | None:
    """What a lone CJK character (or grapheme cluster of a spaceless script) of a query adds: a turn that holds it
    inside a word — where the analyzer made bigrams of it, "猫" in "我的猫叫咪咪" (的猫 猫叫) — scores as the best of
    the bigrams it holds, as Solr's CJK setup that also indexes single characters would find it. None when the query
    has no lone unit or the user's turns hold none of its bigrams. A query of two or more units is unchanged. Only the
    first ``max_units`` lone units are expanded: each reads up to ``most`` bigrams' postings, and a query of 3,000
    characters apart held a search thread for 14 s on a user of 50,000 Chinese messages."""
    import numpy as np

    from .tokenize import units

    vocab = None
    total = None
    lone = (t for t in dict.fromkeys(tokens) if not t.isascii() and len(units(t) or ()) == 1)
    for token in itertools.islice(lone, max_units):  # stops reading the query at the last one expanded
        vocab = vocab if vocab is not None else vocabulary(index)
        best = None
        by_unit, ranked = _unit_bigrams(vocab)
        terms = by_unit.get(token, [])
        if len(terms) > most:  # the most frequent (a document frequency is a read: sorted once per vocabulary)
            top = ranked.get((token, most))
            if top is None:
                top = ranked[(token, most)] = sorted(terms, key=lambda w: (-vocab[w], w))[:most]
            terms = top
        for term in terms:
            part = bm25_scores(index, [term])
            best = part if best is None else np.maximum(best, part)
        if best is not None:
            total = best if total is None else total + best
    return total


def backfill(
    index: TurnIndex, order: np.ndarray, fused: np.ndarray, mask: np.ndarray, need: int
) -> tuple[np.ndarray, np.ndarray]:
    """``order`` (the matched turns, best first) and their ``fused`` scores, extended to ``need`` turns (the
    added ones scored as the last matched one): first the unmatched turns of the matched sessions, sessions in the
    order of their best turn, nearest to a matched turn first; then other turns, latest first. Only turns in
    ``mask`` are added."""
    import numpy as np

    extra = _backfill(index, order, mask, need - int(order.size))
    tail = np.full(extra.size, fused[-1] if fused.size else 0.0)
    return np.concatenate([order, extra]), np.concatenate([fused, tail])


def _backfill(index: TurnIndex, order: np.ndarray, mask: np.ndarray, missing: int) -> np.ndarray:
    import numpy as np

    if missing <= 0:
        return np.zeros(0, dtype=np.int64)
    taken = np.zeros(len(index), dtype=bool)
    taken[order] = True
    out: list[int] = []
    seen_sessions: list[int] = []
    for pos in order.tolist():
        s = int(index.session_ix[pos])
        if s not in seen_sessions:
            seen_sessions.append(s)
    for s in seen_sessions:
        lo, hi = int(index.session_start[s]), int(index.session_end[s])
        matched = np.flatnonzero(taken[lo:hi]) + lo
        rest = [j for j in range(lo, hi) if not taken[j] and mask[j]]
        rest.sort(key=lambda j: (int(np.abs(matched - j).min()) if matched.size else 0, j))
        out.extend(rest)
        if len(out) >= missing:
            return np.asarray(out[:missing], dtype=np.int64)
    taken[out] = True
    for j in range(len(index) - 1, -1, -1):
        if len(out) >= missing:
            break
        if mask[j] and not taken[j]:
            out.append(j)
    return np.asarray(out, dtype=np.int64)
