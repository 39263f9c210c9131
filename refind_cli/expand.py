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
* :func:`tail_terms` — a query word the user never wrote alone also matches their compounds that end in it ("Arzt"
  finds "Hausarzt": a compound names its kind last), and :func:`inflected_terms` its Turkish inflections ("bilet"
  finds "biletlerini"); :func:`form_scores` scores both;
* :func:`lone_unit_scores` — a query's lone CJK character (or grapheme cluster) matches the bigrams holding it;
* both group the vocabulary's words (by prefix and length; bigrams by unit) once per immutable *piece* of it — a
  maintained index's segment, or a whole score matrix — kept while the piece lives (:mod:`refind_cli.term_groups`),
  so an Add costs only its new segment's words; a search takes the union of its pieces' groups, and document
  frequencies are read over the view as before (a word a segment holds but no visible turn does is left out);
* :func:`backfill` — when fewer than ``need`` turns have a positive score, the rest of the list: the other turns of
  the matched sessions (nearest to a matched turn first), then the other sessions' turns, latest first — so a
  budget is spent on the likeliest context rather than left unused.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .index import TurnIndex, bm25_scores, weighted_scores
from .term_groups import GROUPS

if TYPE_CHECKING:
    import numpy as np


# A piece's words and, for each, at least how many of a view's turns hold it (its postings in the piece).
Words = tuple["Sequence[str]", "np.ndarray"]
# An immutable piece of a vocabulary — a segment, or a whole score matrix — (what its groups are kept by), its words.
Piece = tuple[object, "Callable[[], Words]"]


class _DocFreq(Mapping[str, int]):
    """Token → number of turns holding it, read lazily from the index's score matrix (no copy)."""

    def __init__(self, index: TurnIndex) -> None:
        self._index = index  # what this vocabulary's groups are kept by (term_groups: weakly)
        self._vocab = index.vocab
        self._indptr = index.indptr

    def __getitem__(self, token: str) -> int:
        row = self._vocab[token]
        return int(self._indptr[row + 1] - self._indptr[row])

    def __iter__(self) -> Iterator[str]:
        return iter(self._vocab)

    def __len__(self) -> int:
        return len(self._vocab)

    @property
    def view(self) -> object:
        return self._index

    def pieces(self) -> list[Piece]:
        """The score matrix's vocabulary, one piece: every word with its document frequency."""
        return [(self._index, self._words)]

    def _words(self) -> Words:
        import numpy as np

        rows = np.fromiter(self._vocab.values(), dtype=np.int64, count=len(self._vocab))
        counts = np.zeros(len(rows), dtype=np.int64)
        inside = rows < len(self._indptr) - 1  # (bm25s's vocabulary may hold a word past the matrix's rows: "")
        counts[inside] = np.diff(self._indptr)[rows[inside]]
        return list(self._vocab), counts


class _PostingsDocFreq(Mapping[str, int]):
    """The same over a maintained index's postings: membership and counts by ``df``; the word list (needed only
    when a query word is missing) read once, on first iteration."""

    def __init__(self, postings: Any) -> None:
        self._vocab = postings
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

    @property
    def view(self) -> object:
        """What a view's memos are kept by: its postings as one view holds them, whichever connection they are bound
        to (``cache_identity``)."""
        return getattr(self._vocab, "cache_identity", self._vocab)

    def pieces(self) -> list[Piece]:
        """The view's immutable segments, each with its words and, for each, its postings in the segment (at least
        the visible turns holding it) — or, for postings without segments, the whole vocabulary as one piece."""
        segments = getattr(self._vocab, "segments", None)
        if segments is None:
            return [(self.view, lambda: _counted(self))]
        return [(seg, functools.partial(_segment_words, seg)) for seg in segments.values()]


def _segment_words(segment: Any) -> Words:
    import numpy as np

    return segment.terms, np.diff(segment.indptr)


def _counted(vocab: Mapping[str, int]) -> Words:
    import numpy as np

    words = list(vocab)
    return words, np.fromiter((vocab[w] for w in words), dtype=np.int64, count=len(words))


def _pieces(vocab: Mapping[str, int]) -> list[Piece]:
    """The immutable pieces a vocabulary is the union of (a plain mapping: itself, one piece)."""
    pieces = getattr(vocab, "pieces", None)
    return list(pieces()) if pieces is not None else [(vocab, lambda: _counted(vocab))]


def _view(vocab: Mapping[str, int]) -> object:
    """What memos of this vocabulary as one view sees it are kept by."""
    return getattr(vocab, "view", vocab)


def _df(vocab: Mapping[str, int], word: str) -> int:
    """The word's document frequency in the view (0: no visible turn holds it, though a segment may)."""
    try:
        return vocab[word]
    except KeyError:
        return 0


def vocabulary(index: TurnIndex) -> Mapping[str, int]:
    """The user's vocabulary: every indexed token with the number of turns that hold it (from the maintained
    index's postings when it has them, else from the score matrix)."""
    if index.postings is not None:
        return _PostingsDocFreq(index.postings)
    return _DocFreq(index)


def present(index: TurnIndex, tokens: Mapping[str, int], key: Hashable | None = None) -> Collection[str]:
    """Which of ``tokens`` (its keys) the user's turns may hold — in some segment's term dictionary, or in the score
    matrix's vocabulary — for many candidate words at once: one intersection of dictionary keys, which walks the
    smaller side. ``key``, when given, names ``tokens`` (the same key, the same tokens: a category word's kinds):
    what each immutable piece of the index holds of them is kept while the piece lives (term_groups), in the order of
    their values in ``tokens`` (a kind's place) — so a word asked again costs a lookup per segment, not an
    intersection with its thousands of kinds, and sorting what is found by those values merges a run per segment."""
    postings = index.postings
    pieces = _term_dicts(index) if key is not None else None
    if pieces is None:
        return postings.present(tokens) if postings is not None else tokens.keys() & index.vocab.keys()
    held = [GROUPS.get(("present", key), piece, functools.partial(_held, tokens, piece)) for piece in pieces]
    return held[0] if len(held) == 1 else dict.fromkeys(itertools.chain.from_iterable(held)).keys()


def _term_dicts(index: TurnIndex) -> list[Any] | None:
    """The immutable pieces whose term dictionaries (``vocab``) make up the index's: its segments, or the index built
    from scratch itself; None for postings that show no segments."""
    if index.postings is None:
        return [index]
    segments = getattr(index.postings, "segments", None)
    return None if segments is None else list(segments.values())


def _held(tokens: Mapping[str, int], piece: Any) -> tuple[tuple[str, ...], int]:
    """Which of ``tokens`` the piece's term dictionary holds, in the order of their values, and about their size in
    bytes."""
    found = tuple(sorted(tokens.keys() & piece.vocab.keys(), key=tokens.__getitem__))
    return found, GROUP_BYTES + 8 * len(found)


def max_edits(word: str) -> int:
    """Lucene's ``AUTO`` fuzziness, one step stricter for the shortest words: 0 up to 3 characters, 1 for 4–5, 2
    from 6. Only words wholly of letters of an alphabet — Latin, Greek, Cyrillic, Armenian, Georgian, where a letter
    is a sound and an edit a small change ("Львів" finds "Львова") — are expanded: never numbers, CJK bigrams, abjads
    (Hebrew or Arabic words are short and mostly consonants) or the scripts whose vowels are marks."""
    if len(word) <= 3 or not word.isalpha():
        return 0
    if not word.isascii() and not _ALPHABETS.fullmatch(word):
        return 0  # (ASCII words, most of a vocabulary, skip the match: it is most of _buckets' time)
    return 1 if len(word) <= 5 else 2


# the letters of the alphabets beyond ASCII, as a character class's ranges: Latin, Greek, Cyrillic, Armenian, Georgian
ALPHABETS = "\u00c0-\u024f\u0370-\u03ff\u1f00-\u1fff\u0400-\u052f\u0530-\u058f\u10a0-\u10ff"
_ALPHABETS = re.compile(f"[A-Za-z{ALPHABETS}]+")


def edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` as soon as it must exceed ``limit`` (the definition:
    :func:`_near` computes the same with :func:`near_distance`, a few times faster)."""
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


def char_masks(word: str) -> dict[str, int]:
    """Each character of ``word`` with the bits of the places it holds (bit i: character i), for
    :func:`near_distance`: made once per query word, read for every candidate."""
    masks: dict[str, int] = {}
    for i, c in enumerate(word):
        masks[c] = masks.get(c, 0) | 1 << i
    return masks


def near_distance(masks: Mapping[str, int], m: int, b: str, limit: int) -> int:
    """The Levenshtein distance of the ``m``-character word that :func:`char_masks` made ``masks`` of and ``b``, or
    ``limit + 1`` when more: Myers' bit-parallel algorithm in Hyyrö's form for the distance of whole words (names as
    in his paper). A column of the dynamic programme is two integers of ``m`` bits, where it steps up (``pv``) and
    down (``mv``) from one row to the next; each character of ``b`` is a dozen integer operations, where
    :func:`edit_distance` takes ``m`` steps of Python (~2 µs for a word of 6 letters, where that took ~11)."""
    if abs(m - len(b)) > limit:
        return limit + 1
    if m == 0:
        return len(b)
    full = (1 << m) - 1
    last = 1 << (m - 1)
    pv, mv, score = full, 0, m  # the first column steps up by one in every row; score: its last row's value
    for c in b:
        eq = masks.get(c, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & full)  # where the new column is one more than the last one, in each row
        mh = pv & xh  # … one less
        if ph & last:
            score += 1
        elif mh & last:
            score -= 1
        ph = ((ph << 1) | 1) & full  # (the first row, above the word, is one more in every column)
        mh = (mh << 1) & full
        pv = mh | (~(xv | ph) & full)
        mv = ph & xv
    return score if score <= limit else limit + 1


PREFIX = 2  # characters a fuzzy match must share with the query word at its start (Lucene's prefixLength)
GROUP_BYTES = 160  # what a group costs besides its words: its list, its key, the dict's entry


def _buckets(words: Callable[[], Words]) -> tuple[dict[tuple[str, int], list[str]], int]:
    """A piece's expandable words by (first :data:`PREFIX` characters, length), and about their size in bytes."""
    out: dict[tuple[str, int], list[str]] = {}
    for word in words()[0]:
        if word and max_edits(word):
            out.setdefault((word[:PREFIX], len(word)), []).append(word)
    return out, sum(GROUP_BYTES + 8 * len(v) for v in out.values())


def fuzzy_terms(word: str, vocab: Mapping[str, int], *, max_expansions: int = 3) -> list[tuple[str, float]]:
    """The vocabulary's words near ``word`` with their weights (none when ``word`` is in the vocabulary)."""
    limit = max_edits(word)
    if not limit or word in vocab:
        return []
    return _near(word, limit, vocab, max_expansions)


def _near(word: str, limit: int, vocab: Mapping[str, int], max_expansions: int) -> list[tuple[str, float]]:
    """:func:`fuzzy_terms` for a word the vocabulary lacks, ``limit`` its edit distance: the candidates are the
    union of each piece's bucket (grouped once per piece: an Add groups only its new segment's words)."""
    if max_expansions <= 0:
        return []
    groups = [GROUPS.get("buckets", piece, functools.partial(_buckets, words)) for piece, words in _pieces(vocab)]
    found: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    masks, m = char_masks(word), len(word)
    for length in range(len(word) - limit, len(word) + limit + 1):
        key = (word[:PREFIX], length)
        for buckets in groups:
            for candidate in buckets.get(key, ()):
                if candidate in seen:  # (in more than one segment)
                    continue
                seen.add(candidate)
                d = near_distance(masks, m, candidate, limit)
                if d <= limit and (n := _df(vocab, candidate)) > 0:  # (a segment's word no visible turn holds: 0)
                    found.append((d, -n, candidate))
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
    missing = ((t, n) for t in dict.fromkeys(tokens) if (n := max_edits(t)) and t not in vocab)
    expanded = itertools.islice(missing, max_words)  # stops reading the query at the last one expanded
    return weighted_scores(
        index, (near for word, limit in expanded for near in _near(word, limit, vocab, max_expansions))
    )


TAIL_KEY = 4  # characters a compound is grouped by: its last four
MIN_TAIL = 4  # a query word at least this long may be a compound's last part
MIN_REST = 4  # … of a word at least this much longer ("Haus" + "arzt"; "por" + "trait" is no compound)


def _by(key: Callable[[str], str], shortest: int, words: Callable[[], Words]) -> tuple[dict[str, list[str]], int]:
    """A piece's words of letters at least ``shortest`` long by ``key`` of each, and about their size in bytes."""
    out: dict[str, list[str]] = {}
    for word in words()[0]:
        if len(word) >= shortest and word.isalpha():
            out.setdefault(key(word), []).append(word)
    return out, sum(GROUP_BYTES + 8 * len(v) for v in out.values())


def _last_letters(word: str) -> str:
    return word[-TAIL_KEY:]


def _first_letters(word: str) -> str:
    return word[:HEAD_KEY]


def _longer_forms(
    word: str,
    vocab: Mapping[str, int],
    most: int,
    grouping: tuple[str, Callable[[str], str], int],
    accepts: Callable[[str], bool],
) -> list[tuple[str, float]]:
    """The user's words in ``word``'s group (``grouping``: the group's kind, the key of a word, the shortest word
    grouped; grouped once per piece) that ``accepts`` takes, the ``most`` held by the most turns, each weighted
    ``len(word) / len(it)``."""
    kind, key, shortest = grouping
    groups = [GROUPS.get(kind, piece, functools.partial(_by, key, shortest, words)) for piece, words in _pieces(vocab)]
    found: dict[str, int] = {}
    for group in groups:
        for candidate in group.get(key(word), ()):
            if candidate not in found and accepts(candidate) and (n := _df(vocab, candidate)) > 0:
                found[candidate] = n  # (a segment's word no visible turn holds has 0)
    best = sorted(found, key=lambda w: (-found[w], w))[:most]
    return [(w, len(word) / len(w)) for w in best]


def tail_terms(word: str, vocab: Mapping[str, int], *, most: int = 3) -> list[tuple[str, float]]:
    """The user's compounds that end in ``word`` — German, Dutch or Scandinavian compounds name their kind last
    ("Arzt" → "Hausarzt", "Therapie" → "Physiotherapie", not "Zahnarzttermin") — at least :data:`MIN_REST` letters
    longer, the ``most`` held by the most turns, each weighted ``len(word) / len(compound)``. None when the user wrote
    ``word`` itself, or it is shorter than :data:`MIN_TAIL` letters or not all letters."""
    if most <= 0 or len(word) < MIN_TAIL or not word.isalpha() or word in vocab:
        return []
    return _longer_forms(
        word,
        vocab,
        most,
        ("tails", _last_letters, MIN_TAIL + MIN_REST),
        lambda compound: len(compound) - len(word) >= MIN_REST and compound.endswith(word),
    )


HEAD_KEY = MIN_TAIL  # characters an inflected word is grouped by: its first four (form_scores reads both alike)


@functools.lru_cache(maxsize=1)
def _turkish() -> Any:
    """Snowball's Turkish stemmer (Finnish's and Hungarian's were tried too: they take "passion" for "pass" + a
    suffix, and no question needed them; BENCHMARKS.md)."""
    import Stemmer

    return Stemmer.Stemmer("turkish")


def inflected_terms(word: str, vocab: Mapping[str, int], *, most: int = 3) -> list[tuple[str, float]]:
    """The user's words that are ``word`` with suffixes Turkish stemming takes off ("bilet" → "biletlerini", their
    tickets: Turkish stacks suffixes), where the user never wrote ``word`` itself: the ``most`` in the most turns,
    each weighted ``len(word) / len(inflected)``. The index's analyzer stems Turkish only where its own letters show
    ("kitaplarımı"); typed in ASCII, an inflected word is its own token."""
    if most <= 0 or len(word) < HEAD_KEY or not word.isalpha() or word in vocab:
        return []
    stem = _turkish().stemWord
    return _longer_forms(
        word,
        vocab,
        most,
        ("heads", _first_letters, HEAD_KEY + 1),
        lambda inflected: len(inflected) > len(word) and inflected.startswith(word) and stem(inflected) == word,
    )


def form_scores(
    index: TurnIndex,
    tokens: Sequence[str],
    *,
    tails: tuple[int, float] = (3, 1.0),
    inflections: tuple[int, float] = (3, 1.0),
    max_words: int = MAX_FUZZY_WORDS,
) -> np.ndarray | None:
    """The BM25 scores that the first ``max_words`` query words of letters the vocabulary lacks (4 letters or more)
    add by their compounds' tails and their Turkish inflections (each ``(most, weight)``: the terms per word, and the
    weight their own weights are multiplied by): both asked in one pass over the query, scored in one (None when
    neither finds any)."""
    (tails_most, tails_weight), (inflections_most, inflections_weight) = tails, inflections
    if not (tails_most and tails_weight) and not (inflections_most and inflections_weight):
        return None
    vocab = vocabulary(index)
    missing = (t for t in dict.fromkeys(tokens) if len(t) >= MIN_TAIL and t.isalpha() and t not in vocab)
    terms: list[tuple[str, float]] = []
    for word in itertools.islice(missing, max_words):
        if tails_most and tails_weight:
            terms += ((w, tails_weight * x) for w, x in tail_terms(word, vocab, most=tails_most))
        if inflections_most and inflections_weight:
            terms += ((w, inflections_weight * x) for w, x in inflected_terms(word, vocab, most=inflections_most))
    return weighted_scores(index, terms) if terms else None


_Units = dict[str, tuple[list[str], list[int]]]  # unit → its bigrams, the most postings first, and their postings


def _unit_bigrams(words: Callable[[], Words]) -> tuple[_Units, int]:
    """A piece's bigrams of CJK characters or grapheme clusters by each unit they hold, each unit's in descending
    order of their postings in the piece (an upper bound of a view's document frequency: :func:`_most_frequent`),
    and about their size in bytes."""
    import numpy as np

    from .tokenize import units

    terms, counts = words()
    wide = np.asarray([i for i, word in enumerate(terms) if not word.isascii()], dtype=np.int64)
    out: _Units = {}
    for i in wide[np.argsort(-counts[wide], kind="stable")].tolist():
        word = terms[i]
        if len(word) == 2 and "\u4e00" <= word[0] <= "\u9fff" and "\u4e00" <= word[1] <= "\u9fff":
            pair: Sequence[str] = word  # (most of a Chinese vocabulary: common Han characters, without a regex)
        elif len(pair := units(word) or ()) != 2:
            continue
        n = int(counts[i])
        for unit in dict.fromkeys(pair):
            group = out.get(unit)
            if group is None:
                group = out[unit] = ([], [])
            group[0].append(word)
            group[1].append(n)
    return out, sum(2 * GROUP_BYTES + 16 * len(g[0]) for g in out.values())


def _unit_terms(unit: str, vocab: Mapping[str, int], most: int) -> list[str]:
    """The bigrams a lone ``unit`` reads in this view: those holding it that a visible turn holds, the ``most`` most
    frequent when there are more (ties: in word order) — memoised per view, from each piece's groups."""

    def build() -> tuple[list[str], int]:
        lists = []
        for piece, words in _pieces(vocab):
            group = GROUPS.get("units", piece, functools.partial(_unit_bigrams, words)).get(unit)
            if group is not None:
                lists.append(group)
        top = _most_frequent(lists, vocab, most)
        return top, GROUP_BYTES + 8 * len(top)

    return GROUPS.get(("top", unit, most), _view(vocab), build)


def _most_frequent(lists: Sequence[tuple[list[str], list[int]]], vocab: Mapping[str, int], most: int) -> list[str]:
    """The ``most`` words of ``lists`` with the highest document frequency in the view (``vocab``; ties: in word
    order; words it lacks left out) — Fagin's threshold algorithm: each list is in descending order of an upper bound
    of its words' share of the frequency (their postings in one segment), so the lists are read a row at a time, each
    new word's frequency looked up, until the ``most``-th best found beats the sum of the next row's bounds (no word
    unread can reach it): a common character's thousands of bigrams are not all counted."""
    import heapq

    if most <= 0 or not lists:
        return []
    seen: set[str] = set()
    found: list[tuple[int, str]] = []
    best: list[int] = []  # a min-heap of the `most` highest frequencies found
    longest = max(len(words) for words, _ in lists)
    for depth in range(longest):
        bound = 0  # what a word not read yet can have at most
        for words, bounds in lists:
            if depth < len(words):
                word = words[depth]
                if word not in seen:
                    seen.add(word)
                    n = _df(vocab, word)
                    if n > 0:
                        found.append((-n, word))
                        if len(best) < most:
                            heapq.heappush(best, n)
                        elif n > best[0]:
                            heapq.heapreplace(best, n)
                if depth + 1 < len(words):
                    bound += bounds[depth + 1]
        if len(best) >= most and best[0] > bound:
            break
    found.sort()
    return [word for _, word in found[:most]]


MAX_UNIT_BIGRAMS = 64  # bigrams read per lone character of a query (the most frequent)
MAX_LONE_UNITS = 16  # lone characters expanded per search; the shared sets' questions hold at most 3


def lone_unit_scores(
    index: TurnIndex,
    tokens: Sequence[str],
    *,
    most: int = MAX_UNIT_BIGRAMS,
    max_units: int = MAX_LONE_UNITS,
    pair_units_df: float | None = None,
) -> np.ndarray | None:
    """What a lone CJK character (or grapheme cluster of a spaceless script) of a query adds: a turn that holds it
    inside a word — where the analyzer made bigrams of it, "猫" in "我的猫叫咪咪" (的猫 猫叫) — scores as the best of
    the bigrams it holds, as Solr's CJK setup that also indexes single characters would find it. None when the query
    has no lone unit or the user's turns hold none of its bigrams. Only the first ``max_units`` lone units are
    expanded: each reads up to ``most`` bigrams' postings, and a query of 3,000 characters apart held a search thread
    for 14 s on a user of 50,000 Chinese messages.

    With ``pair_units_df``, a question's bigram that no turn holds gives its units too — "猫的名字" asks of 猫 glued to
    的 (猫的), which "我家的猫叫咪咪" never writes — but not a unit of a bigram some turn holds (名 of 名字), nor a
    common one: a unit in more than this share of the turns (的, 是, 么: counted in the bigrams read for it) would
    find any turn."""
    import numpy as np

    from .tokenize import units

    vocab = None
    total = None
    queried = dict.fromkeys(tokens)
    lone: Iterator[str] = (t for t in queried if not t.isascii() and len(units(t) or ()) == 1)
    if pair_units_df is not None and not all(t.isascii() for t in queried):
        vocab = vocabulary(index)
        paired = _pair_units(queried, vocab)
        lone = itertools.chain(lone, itertools.islice((u for u in paired if u not in queried), MAX_PAIR_UNITS))
    limit = max((pair_units_df or 0.0) * len(index), MIN_PAIR_UNIT_LIMIT)
    for token in itertools.islice(lone, max_units):  # stops reading the query at the last one expanded
        vocab = vocab if vocab is not None else vocabulary(index)
        asked = token in queried
        terms = _unit_terms(token, vocab, most if asked else min(most, PAIR_UNIT_BIGRAMS))
        dfs = [] if asked else [_df(vocab, term) for term in terms]
        if dfs and max(dfs) > limit:  # a common unit of a bigram the user never wrote: one bigram says so
            continue
        best = None
        for term in terms:
            part = bm25_scores(index, [term])
            best = part if best is None else np.maximum(best, part)
        if best is None or (sum(dfs) > limit and np.count_nonzero(best) > limit):  # … or the turns holding it do
            continue
        total = best if total is None else total + best
    return total


HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")  # a Han character (aliases.py too)
PAIR_UNIT_BIGRAMS = 8  # bigrams read per character of a bigram no turn holds (the most frequent)
MAX_PAIR_UNITS = 4  # characters of bigrams no turn holds asked per search (after the lone ones)
MIN_PAIR_UNIT_LIMIT = 2  # a unit of a bigram no turn holds is asked when in at most this many turns, however few


def _pair_units(tokens: Iterable[str], vocab: Mapping[str, int]) -> list[str]:
    """The characters of the query's bigrams of two Han characters that no visible turn holds, less those of bigrams
    some turn holds. Only Han: a Chinese character is most often a word or a word's root (猫, 车, 药), where a kana,
    a Hangul syllable or a Thai cluster alone is most often part of one."""
    from .tokenize import units

    held: set[str] = set()
    absent: list[str] = []
    for token in tokens:
        pair = None if token.isascii() else units(token)
        if pair is None or len(pair) != 2 or not all(HAN.fullmatch(unit) for unit in pair):
            continue
        if _df(vocab, token):
            held.update(pair)
        else:
            absent.extend(pair)
    return [u for u in dict.fromkeys(absent) if u not in held]


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
