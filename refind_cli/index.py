"""Ranking one user's turns: BM25 scoring, the eligibility mask (date range, skip set), session fusion, neighbours.

Each stage is a small function over numpy arrays so it can be tested on a toy corpus ranked by hand:

* :func:`bm25_scores` — Lucene BM25 (k1 = 1.2, b = 0.75 by default) over every turn. Either bm25s builds the index
  (its eager sparse matrix of per-token, per-turn scores) and scoring a query sums that matrix's rows for the query's
  tokens, as ``bm25s.BM25.get_scores`` does; or the index is the maintained one (``index.postings``, from
  :mod:`refind_cli.index_cache`), which computes the same float32 contributions from stored term frequencies at
  query time — equal to bm25s's, bit for bit;
* :func:`flat_scores` — the same, except that a word found in more than a share of the turns counts by presence;
* :func:`answer_scores` — adjacent turns of two speakers that both match the query's rarer words (a question and
  its answer) each gain a share of the other's score;
* :func:`eligible` — the mask applied **before** ranking: said-at inside the date range (a turn without a said-at
  is left out of any date-bounded search, since it cannot be shown to lie inside the range), not in the skip set;
* :func:`fuse` — reciprocal rank fusion, k = 60: a turn's rank among turns with a positive score and its session's
  rank (session score = the sum of its turns' positive scores), ``1/(k + turn rank) + 1/(k + session rank)``;
* :func:`neighbours` — ±N turns around an anchor, cut at the session's edges.

Heavy imports (numpy, bm25s) happen on first use, never at module import.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from .turns import Turn

if TYPE_CHECKING:
    import numpy as np


class Postings(Protocol):
    """A maintained index's query-time scoring (index_cache.LivePostings): the same numbers as the eager matrix."""

    def scores(self, tokens: Sequence[str]) -> np.ndarray: ...

    def df(self, token: str) -> int: ...

    def holders(self, token: str) -> np.ndarray: ...

    def present(self, tokens: Mapping[str, int]) -> set[str]: ...


@dataclass
class TurnIndex:
    """The BM25 index of one user's turns plus the per-turn arrays ranking needs. Built once, read many times."""

    turns: Sequence[Turn]  # session by session, chronological within each (as turns.build_turns returns them)
    vocab: dict[str, int]  # token → row of the score matrix
    data: np.ndarray  # float32 BM25 contributions, CSC by token: token t's turns are indices[indptr[t]:indptr[t+1]]
    indices: np.ndarray  # int32 turn numbers
    indptr: np.ndarray  # int64, len(vocab) + 1
    session_ix: np.ndarray  # int32: the session number of each turn
    session_ids: list[str]  # session number → session id
    session_start: np.ndarray  # int64: index of each session's first turn
    session_end: np.ndarray  # int64: one past each session's last turn
    said_at: np.ndarray  # float64 Unix ms; NaN when unknown
    min_recorded_at: int | None  # the oldest recorded-at of any message in the index
    postings: Postings | None = None  # set for a maintained index: scores come from it, not from data/indices
    _turn_pos: dict[str, int] | None = field(default=None, repr=False)
    # who said each turn and its length, read when answer_scores first pairs it (never passed in: positions are this
    # index's own); searches share an index, so under a lock
    _voices: np.ndarray | None = field(default=None, init=False, repr=False)  # int32 code per turn, -1: not read yet
    _sizes: np.ndarray | None = field(default=None, init=False, repr=False)  # int32 characters per turn
    _voice_codes: dict[tuple[str, str | None], int] = field(default_factory=dict, init=False, repr=False)
    _voice_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _names: dict[str, bool] = field(default_factory=dict, init=False, repr=False)  # is_name's answers
    # aliases.alias's answers for this index: a word → the label of the speaker it names (None: nobody)
    alias_memo: dict[str, str | None] = field(default_factory=dict, init=False, repr=False)
    # aliases.han_names's answer for this index: a Chinese speaker's nicknames (小陈, 阿乐 …) → their label
    han_names: dict[str, tuple[str, bool]] | None = field(default=None, init=False, repr=False)

    def __len__(self) -> int:
        return len(self.turns)

    def voices(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Who said each turn at ``positions`` (``Turn.voice``), as codes equal for equal voices, and each turn's
        length in characters. Read once per index: the maintained index reads role, label and length in one query,
        without the text (``LazyTurns.voices_at``)."""
        import numpy as np

        from .index_store import distinct  # (np.unique's masked-array check costs a search ~5 µs)

        with self._voice_lock:
            if self._voices is None or self._sizes is None:
                self._voices = np.full(len(self.turns), -1, dtype=np.int32)
                self._sizes = np.zeros(len(self.turns), dtype=np.int32)
            codes, sizes = self._voices, self._sizes
            missing = positions[codes[positions] < 0]
            if missing.size:
                missing = distinct(missing)
                read = getattr(self.turns, "voices_at", None)
                if read is not None:
                    found: list[tuple[tuple[str, str | None], int]] = read(missing)
                else:
                    turns = [self.turns[p] for p in missing.tolist()]
                    found = [(t.voice, sum(len(m.content) for m in t.messages)) for t in turns]
                known = self._voice_codes
                for pos, (voice, size) in zip(missing.tolist(), found, strict=True):
                    codes[pos] = known.setdefault(voice, len(known))
                    sizes[pos] = size
            return codes[positions], sizes[positions]

    def is_name(self, token: str) -> bool:
        """Whether ``token`` is a speaker's name in this index (:func:`speaker_name` of the turns holding it, found
        from its postings: a month or year word in most turns is no name, and is not scored to learn that), once per
        index and token."""
        known = self._names.get(token)
        if known is None:
            known = self._names[token] = speaker_name(self, token, holders(self, token))
        return known

    def speakers(self, positions: np.ndarray) -> list[tuple[str, str | None]]:
        """``Turn.voice`` of each turn at ``positions`` (role, speaker label), read as :meth:`voices` reads them."""
        codes, _ = self.voices(positions)
        with self._voice_lock:
            listed = list(self._voice_codes)  # a voice's code is its place in insertion order
        return [listed[c] for c in codes.tolist()]

    @property
    def turn_pos(self) -> dict[str, int]:
        """Turn id → index (built on first use: a search that skips no turns never needs it)."""
        if self._turn_pos is None:
            listing = getattr(self.turns, "ids", None)  # a maintained index lists its ids without its text
            ids = listing() if listing is not None else [t.id for t in self.turns]
            self._turn_pos = {tid: i for i, tid in enumerate(ids)}
        return self._turn_pos


def build_index(
    turns: list[Turn], *, tokenize: Callable[[Turn], list[str]], k1: float = 1.2, b: float = 0.75
) -> TurnIndex:
    """Index ``turns`` (which must be grouped by session, as ``build_turns`` returns them)."""
    import numpy as np

    corpus = [tokenize(t) for t in turns]
    vocab: dict[str, int] = {}
    data = np.zeros(0, dtype=np.float32)
    indices = np.zeros(0, dtype=np.int32)
    indptr = np.zeros(1, dtype=np.int64)
    if any(corpus):
        import bm25s

        bm25 = bm25s.BM25(k1=k1, b=b)
        bm25.index(corpus, show_progress=False)
        vocab = dict(bm25.vocab_dict)
        data = np.asarray(bm25.scores["data"], dtype=np.float32)
        indices = np.asarray(bm25.scores["indices"], dtype=np.int32)
        indptr = np.asarray(bm25.scores["indptr"], dtype=np.int64)
    return assemble(turns, vocab, data, indices, indptr)


def assemble(
    turns: list[Turn], vocab: dict[str, int], data: np.ndarray, indices: np.ndarray, indptr: np.ndarray
) -> TurnIndex:
    """A TurnIndex from turns and a score matrix (freshly built, or loaded with :func:`from_blob`)."""
    import numpy as np

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
        vocab=vocab,
        data=data,
        indices=indices,
        indptr=indptr,
        session_ix=session_ix,
        session_ids=session_ids,
        session_start=session_start,
        session_end=session_end,
        said_at=said,
        min_recorded_at=min(recorded) if recorded else None,
    )


def _turn_said_at(turn: Turn) -> float:
    for m in turn.messages:
        if m.said_at is not None:
            return float(m.said_at)
    return float("nan")


def bm25_scores(index: TurnIndex, query_tokens: Sequence[str]) -> np.ndarray:
    """Every turn's BM25 score for the query (zeros when no query token is in the user's vocabulary)."""
    import numpy as np

    if index.postings is not None:
        return index.postings.scores(query_tokens)
    scores = np.zeros(len(index), dtype=np.float32)
    vocab = index.vocab
    for token in query_tokens:  # a repeated query token counts again, as in bm25s
        row = vocab.get(token) if token else None
        if row is None:
            continue
        start, end = index.indptr[row], index.indptr[row + 1]
        np.add.at(scores, index.indices[start:end], index.data[start:end])
    return scores


def weighted_scores(index: TurnIndex, terms: Iterable[tuple[str, float]]) -> np.ndarray | None:
    """Each term's BM25 scores times its weight, summed in order (None for no term): what a query expansion adds —
    fuzzy spellings, feedback words, the user's other spellings."""
    total = None
    for term, weight in terms:
        part = bm25_scores(index, [term]) * weight
        total = part if total is None else total + part
    return total


def doc_freq(index: TurnIndex, token: str) -> int:
    """How many of the user's turns hold ``token``."""
    if not token:  # (bm25s's vocabulary holds "" at a row past its matrix; bm25_scores skips it too)
        return 0
    if index.postings is not None:
        return index.postings.df(token)
    row = index.vocab.get(token)
    return 0 if row is None else int(index.indptr[row + 1] - index.indptr[row])


def holders(index: TurnIndex, token: str) -> np.ndarray:
    """The positions of the turns holding ``token``, ascending: where :func:`bm25_scores` of it is positive (every
    term a turn holds adds a positive score), without scoring."""
    import numpy as np

    if not token:
        return np.zeros(0, dtype=np.intp)
    if index.postings is not None:
        return index.postings.holders(token)
    row = index.vocab.get(token)
    if row is None:
        return np.zeros(0, dtype=np.intp)
    return np.sort(index.indices[index.indptr[row] : index.indptr[row + 1]]).astype(np.intp)


def drop_common(index: TurnIndex, tokens: Sequence[str], share: float) -> list[str]:
    """The query tokens without those found in more than ``share`` of the turns — unless that leaves none."""
    n = max(len(index), 1)
    kept = [t for t in tokens if doc_freq(index, t) <= share * n]
    return kept if any(doc_freq(index, t) for t in kept) else list(tokens)


def flat_scores(index: TurnIndex, tokens: Sequence[str], share: float | None) -> np.ndarray:
    """:func:`bm25_scores`, except that a token found in more than ``share`` of the turns (a speaker's name, in the
    label of every turn of theirs) counts by presence: every turn that holds it gets the median of its BM25 scores.
    BM25's length normalisation makes such a word rank a speaker's shortest turns ("Kate: lol") first, when it is the
    other query words that should tell the speaker's turns apart — so when no other query word is in any turn ("kayak"
    asked of a user who wrote it in most turns), every token keeps its BM25 score. A token repeated in the query
    counts again, as in :func:`bm25_scores`. ``share`` None: plain BM25 for every token."""

    return flat_and_rarer_scores(index, tokens, share)[0]


def flat_and_rarer_scores(
    index: TurnIndex, tokens: Sequence[str], share: float | None, *, names_only: bool = False, lift: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`flat_scores`, and the scores of the other tokens alone (the *rarer* ones; every token when none counts
    by presence, or when no other one is in any turn). ``names_only``: a token found in more than ``share`` of the
    turns counts by presence only when it is a speaker's name (:func:`speaker_name`) — in a short history about one
    topic ("the museums I visited") the topic's own words are in most turns too, and there BM25 tells the turns apart.

    ``lift``: a turn holding such a name — that speaker's own turns (their label holds it) and turns that name them —
    also scores ``lift`` times its rarer words' score more, once per name it holds: of two turns that say the same
    about sports, Kevin's first when the question asks about Kevin. In REALTALK and LoCoMo 96% of the evidence of a
    question naming one speaker is that speaker's own turns."""
    import numpy as np

    if share is None:
        plain = bm25_scores(index, tokens)
        return plain, plain
    n = max(len(index), 1)
    times = Counter(tokens)
    df = {t: doc_freq(index, t) for t in times}
    frequent = [t for t in times if df[t] > share * n]
    common = [t for t in frequent if not names_only or index.is_name(t)]
    if not common or not any(df[t] > 0 for t in times if t not in common):
        plain = bm25_scores(index, tokens)  # no other word to tell the turns apart: BM25's own order, as drop_common
        return plain, plain
    rarer = bm25_scores(index, [t for t in tokens if t not in common])
    scores = rarer
    for token in common:
        if _accent_twin(token, common):  # "José" gives josé and jose: one name, counted once
            continue
        one = bm25_scores(index, [token])
        holds = one > 0
        scores = scores + holds * np.float32(np.median(one[holds]) * times[token])
        if lift and (names_only or index.is_name(token)):  # (without names_only a topic word counts by presence too)
            scores = scores + rarer * holds * np.float32(lift)
    return scores, rarer


def _accent_twin(token: str, tokens: Collection[str]) -> bool:
    """Whether ``token`` is the accent-free token that the analyzer gave beside another of ``tokens`` ("jose" beside
    "josé"): what was one word of the question."""
    from .tokenize import unaccented

    return token.isascii() and any(other != token and unaccented(other) == token for other in tokens)


NAME_SAMPLE = 32  # speaker_name reads who said this many of the turns holding a token, drawn among them


def speaker_name(index: TurnIndex, token: str, holders: np.ndarray) -> bool:
    """Whether ``token`` is a speaker's name: a word of the ``Name: `` label of at least half of a sample of the turns
    that hold it (``holders``): all of them, or :data:`NAME_SAMPLE` drawn at random with a seed taken from the token
    — the same sample for the same turns in every process, and not fooled, as an evenly spaced one would be, by a
    pattern that repeats (her turn, then two of Bob's that name her)."""
    import zlib

    import numpy as np

    if holders.size == 0:
        return False
    sample = holders
    if holders.size > NAME_SAMPLE:
        rng = np.random.default_rng(zlib.crc32(token.encode()))
        sample = np.sort(rng.choice(holders, NAME_SAMPLE, replace=False))
    named = sum(1 for _, label in index.speakers(sample) if label is not None and token in _label_tokens(label))
    return 2 * named >= sample.size


@lru_cache(maxsize=4096)
def _label_tokens(label: str) -> frozenset[str]:
    from .tokenize import analyze

    return frozenset(analyze(label))


ANSWER_POOL = 1000  # answer_scores pairs at most this many turns, the best by the rarer words (it reads who said them)


def answer_scores(
    index: TurnIndex, scores: np.ndarray, rarer: np.ndarray, weight: float, *, max_chars: int | None = None
) -> np.ndarray:
    """``scores`` plus, for each turn the rarer query words matched (``rarer`` > 0), ``weight`` × the rarer-word
    score of an adjacent turn of its session said by another speaker that they matched too: a question and its answer
    lift each other ("Do you ski, Kate?" / "Emi: I love skiing"), where BM25 scores each alone. A run of one
    speaker's messages does not (it is one voice, already ranked by its own words), and a turn longer than
    ``max_chars`` is not lifted (an essay is a document of its own, not a line of an exchange; it still lifts its
    partner). Only the ``ANSWER_POOL`` turns best by the rarer words are paired."""
    import numpy as np

    matched = (rarer > 0).nonzero()[0]
    if not weight or matched.size < 2:
        return scores
    if matched.size > ANSWER_POOL:
        matched = np.sort(matched[np.argpartition(-rarer[matched], ANSWER_POOL - 1)[:ANSWER_POOL]])
    after = matched[1:][matched[1:] - matched[:-1] == 1]  # turn i + 1 where turns i and i + 1 both matched
    before = after - 1
    together = index.session_ix[before] == index.session_ix[after]
    before, after = before[together], after[together]
    if before.size == 0:
        return scores
    codes, sizes = index.voices(np.concatenate([before, after]))  # one read of both sides of every pair
    n = before.size
    voice_b, voice_a, size_b, size_a = codes[:n], codes[n:], sizes[:n], sizes[n:]
    two = voice_b != voice_a
    before, after, size_b, size_a = before[two], after[two], size_b[two], size_a[two]
    gain_b, gain_a = rarer[after], rarer[before]
    if max_chars is not None:
        gain_b = np.where(size_b <= max_chars, gain_b, 0)
        gain_a = np.where(size_a <= max_chars, gain_a, 0)
    # only the paired turns change: the lift of each (each turn is the first of at most one pair and the second of
    # at most one), then what ``scores + weight × lift`` gives them, elementwise as it would over every turn
    paired = np.concatenate([before, after])
    lift = np.zeros(len(scores), dtype=scores.dtype)
    lift[before] = gain_b
    lift[after] = np.maximum(lift[after], gain_a)
    out = scores.copy()
    out[paired] = scores[paired] + np.float32(weight) * lift[paired]
    return out


def eligible(
    index: TurnIndex,
    *,
    date_from: int | None = None,
    date_to: int | None = None,
    skip_sessions: Collection[str] = (),
    skip_turns: Collection[str] = (),
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
    scores: np.ndarray,
    session_ix: np.ndarray,
    *,
    rrf_k: int = 60,
    use_sessions: bool = True,
    session_top: int | None = None,
    session_weight: float = 1.0,
    shared_ranks: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Rank the turns with a positive score. Returns (turn indices best first, their fused scores).

    Ties break on the higher BM25 score, then on the earlier turn. Without ``use_sessions`` the fused score is
    ``1/(k + turn rank)`` alone (the plain BM25 order). With ``shared_ranks`` turns of equal BM25 score share the best
    of their ranks (as "1, 2, 2, 4" ranks a tie), so their sessions' ranks, not their places in the conversation,
    order them; without it the earlier turn takes the better rank.
    """
    import numpy as np

    # (array methods, not the np.* functions that wrap them: a search calls ~30 of these on arrays of a few hundred
    # turns, where each wrapper's microsecond is a fair share of the work)
    cand = (scores > 0).nonzero()[0]
    if cand.size == 0:
        return cand, np.zeros(0)
    positive = scores[cand]
    # Every order below is stable: ``cand`` ascends, so the stable order by score already breaks ties on the earlier
    # turn; the same holds below for sessions and for the fused order (one-key sorts where lexsort took two). Each
    # array from here on is in that order, best first (no scatter to turn order and gather back).
    by_score = descending(positive)
    ranked = cand[by_score]
    s = positive[by_score].astype(np.float64)
    if shared_ranks:  # a tie's turns share its first rank: where its run starts in the ascending negated scores
        below = -s
        rank = below.searchsorted(below) + 1.0
    else:
        rank = np.arange(1.0, cand.size + 1)
    fused = 1.0 / (rrf_k + rank)
    if use_sessions:
        sess = session_ix[ranked]
        n_sessions = int(session_ix.max()) + 1 if session_ix.size else 0
        if session_top is None:  # (summed in turn order: the order of a float sum is part of its value)
            sums = np.bincount(session_ix[cand], weights=positive.astype(np.float64), minlength=n_sessions)
        else:  # the sum of each session's best ``session_top`` turn scores
            key = sess.astype(np.uint16) if n_sessions <= 1 << 16 else sess  # (a stable sort of 16-bit integers is
            by_session = key.argsort(kind="stable")  # a radix sort: linear)
            ss, sv = sess[by_session], s[by_session]
            keep = (np.arange(ss.size) - ss.searchsorted(ss)) < session_top  # each turn's place in its session
            sums = np.bincount(ss[keep], weights=sv[keep], minlength=n_sessions)
        present = (sums > 0).nonzero()[0]
        order = present[descending(sums[present])]
        session_rank = np.zeros(n_sessions, dtype=np.float64)
        session_rank[order] = np.arange(1, order.size + 1)
        fused = fused + session_weight / (rrf_k + session_rank[sess])
    final = descending(fused)  # ties → the better turn rank
    return ranked[final], fused[final]


def descending(values: np.ndarray) -> np.ndarray:
    """The positions of ``values`` from the largest value to the smallest, equal values in the order of their
    positions: what ``np.argsort(-values, kind="stable")`` gives (no NaN in ``values``).

    Many positive values take a faster way. A positive float's bits, read as an unsigned integer, order as its value
    does, so one 64-bit key per value — its bits inverted, then its position — is unique, and NumPy's unstable sort
    sorts those integers 1.7–2.5× as fast as its stable sort sorts floats (3,000 values: 42–58 against 97–109 µs;
    under about 1,000 values the stable sort is as fast). A float32's 31 bits and a position fit in the key; a
    float64 gives up as many of its lowest bits as the position needs (13 for 5,000 values), and the order is kept
    only when it is also the values' own (no two values that differ only there fell out of order); else the stable
    sort decides.
    """
    import numpy as np

    n = values.size
    if n < DESCENDING_KEYED or values.dtype not in (np.float32, np.float64) or not bool(values.min() > 0):
        return (-values).argsort(kind="stable")
    wide = values.dtype == np.float64
    bits = values.view(np.uint64) if wide else values.view(np.uint32).astype(np.uint64)
    at_bits = (n - 1).bit_length()
    dropped = max(0, at_bits + (63 if wide else 31) - 64)  # the sign bit is 0: 63 (31) bits hold the value
    high = np.uint64((1 << (64 - at_bits)) - 1) - (bits >> np.uint64(dropped))
    key = (high << np.uint64(at_bits)) | np.arange(n, dtype=np.uint64)
    order = (np.sort(key) & np.uint64((1 << at_bits) - 1)).astype(np.intp)
    if dropped:
        ranked = values[order]
        earlier, later = ranked[:-1], ranked[1:]
        if not bool(((earlier > later) | ((earlier == later) & (order[:-1] < order[1:]))).all()):
            return (-values).argsort(kind="stable")
    return order


DESCENDING_KEYED = 1_000  # from this many values on, ``descending`` sorts keys (measured: see its docstring)


def neighbours(index: TurnIndex, pos: int, n: int) -> range:
    """The turn indices of the anchor at ``pos`` and its ±n neighbours inside its session."""
    s = index.session_ix[pos]
    lo = max(int(index.session_start[s]), pos - n)
    hi = min(int(index.session_end[s]), pos + n + 1)
    return range(lo, hi)
