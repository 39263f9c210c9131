"""Ranking stages on toy corpora whose ranking is worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from refind_cli.index import (
    DESCENDING_KEYED,
    bm25_scores,
    build_index,
    descending,
    eligible,
    fuse,
    holders,
    neighbours,
)
from refind_cli.store import StoredMessage
from refind_cli.tokenize import analyze
from refind_cli.turns import Turn


def _turns(spec):
    """spec: list of (session, text, said_at)."""
    turns = []
    for i, (sid, text, said) in enumerate(spec):
        m = StoredMessage(i + 1, f"m{i}", "u", sid, "r", i, "user", text, said, 1_000)
        turns.append(Turn(m.id, sid, (m,)))
    return turns


def _index(spec):
    return build_index(_turns(spec), tokenize=lambda t: analyze(t.messages[0].content))


def test_holders_are_the_turns_a_token_scores_in_ascending():
    docs = ["apple banana", "cherry", "apple apple cherry", "date", "banana apple"]
    idx = _index([("s" if i < 3 else "t", d, None) for i, d in enumerate(docs)])
    for token in [*idx.vocab, "zzz", ""]:
        assert holders(idx, token).tolist() == np.flatnonzero(bm25_scores(idx, [token]) > 0).tolist()
    assert holders(idx, "appl").tolist() == [0, 2, 4]


def test_bm25_scores_match_the_lucene_formula():
    docs = ["apple banana", "apple apple cherry", "cherry date elderberry fig"]
    idx = _index([("s", d, None) for d in docs])
    got = bm25_scores(idx, analyze("apple"))
    tokens = [analyze(d) for d in docs]
    avgdl = sum(map(len, tokens)) / len(tokens)
    df = sum("appl" in t for t in tokens)
    idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
    want = []
    for t in tokens:
        tf = t.count("appl")
        want.append(idf * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * len(t) / avgdl)) if tf else 0.0)
    assert np.allclose(got, want, rtol=1e-5)
    assert got[1] > got[0] > got[2] == 0


def test_unknown_query_words_score_nothing():
    idx = _index([("s", "apple banana", None)])
    assert not bm25_scores(idx, ["zeppelin"]).any()


def test_fusion_by_hand():
    # turns 0..4 in sessions 0,0,1,1,2 with BM25 scores 3, 0, 2, 2.5, 1
    scores = np.array([3, 0, 2, 2.5, 1], dtype=np.float32)
    sessions = np.array([0, 0, 1, 1, 2], dtype=np.int32)
    # turn ranks: t0=1, t3=2, t2=3, t4=4; session sums s0=3, s1=4.5, s2=1 → ranks s1=1, s0=2, s2=3
    # fused: t0 = 1/61+1/62 = t3 = 1/62+1/61 (tie → better turn rank first), t2 = 1/63+1/61, t4 = 1/64+1/63
    order, fused = fuse(scores, sessions)
    assert order.tolist() == [0, 3, 2, 4]
    assert np.allclose(fused, [1 / 61 + 1 / 62, 1 / 62 + 1 / 61, 1 / 63 + 1 / 61, 1 / 64 + 1 / 63])
    plain, _ = fuse(scores, sessions, use_sessions=False)
    assert plain.tolist() == [0, 3, 2, 4]


def test_fusion_lifts_a_turn_from_a_strong_session():
    # t0 alone is the best turn, but its session s0 (sum 3) ranks 3rd behind s1 (5.7) and s2 (3.9):
    # t0 = 1/61 + 1/63 < t1 = 1/62 + 1/61, so t1 overtakes t0
    scores = np.array([3.0, 2.9, 2.8, 2.0, 1.9], dtype=np.float32)
    sessions = np.array([0, 1, 1, 2, 2], dtype=np.int32)
    order, _ = fuse(scores, sessions)
    assert order.tolist() == [1, 0, 2, 3, 4]
    assert fuse(scores, sessions, use_sessions=False)[0].tolist() == [0, 1, 2, 3, 4]


def test_eligible_masks_dates_unknown_dates_and_skips():
    idx = _index([("a", "x", 100.0), ("a", "x", 200.0), ("b", "x", None), ("b", "x", 300.0)])
    assert eligible(idx).tolist() == [True] * 4
    assert eligible(idx, date_from=150).tolist() == [False, True, False, True]
    assert eligible(idx, date_to=200).tolist() == [True, True, False, False]
    assert eligible(idx, skip_sessions=["b"]).tolist() == [True, True, False, False]
    assert eligible(idx, skip_turns=["m1"]).tolist() == [True, False, True, True]


def test_neighbours_stop_at_session_edges():
    idx = _index([("a", "x", None)] * 3 + [("b", "x", None)] * 4)
    assert list(neighbours(idx, 0, 2)) == [0, 1, 2]
    assert list(neighbours(idx, 2, 2)) == [0, 1, 2]
    assert list(neighbours(idx, 3, 2)) == [3, 4, 5]
    assert list(neighbours(idx, 5, 1)) == [4, 5, 6]
    assert list(neighbours(idx, 5, 0)) == [5]


def test_session_top_scores_a_session_by_its_best_turns():
    # s0: one turn of 3; s1: four turns of 1. Sum: s1 (4) beats s0 (3). Best turn only: s0 (3) beats s1 (1).
    scores = np.array([3, 1, 1, 1, 1], dtype=np.float32)
    sessions = np.array([0, 1, 1, 1, 1], dtype=np.int32)
    order, fused = fuse(scores, sessions)
    assert order[0] == 0 and np.isclose(fused[0], 1 / 61 + 1 / 62)
    order, fused = fuse(scores, sessions, session_top=1)
    assert order[0] == 0 and np.isclose(fused[0], 1 / 61 + 1 / 61)
    assert np.isclose(fused[1], 1 / 62 + 1 / 62)  # t1: turn rank 2, session rank 2


def _fuse_by_definition(scores, sessions, rrf_k, session_top, shared_ranks):
    """fuse as its docstring defines it, one turn and one session at a time (slow; the test's reference)."""
    cand = [i for i, x in enumerate(scores) if x > 0]
    by_score = sorted(cand, key=lambda i: (-float(scores[i]), i))
    rank = {}
    for place, i in enumerate(by_score, 1):
        tied_first = next(p for p, j in enumerate(by_score, 1) if scores[j] == scores[i])
        rank[i] = tied_first if shared_ranks else place
    best: dict[int, list[float]] = {}
    for i in by_score:
        best.setdefault(int(sessions[i]), []).append(float(scores[i]))
    sums = {s: sum(v if session_top is None else v[:session_top]) for s, v in best.items()}
    session_rank = {s: r for r, s in enumerate(sorted(sums, key=lambda s: (-sums[s], s)), 1)}
    fused = {i: 1 / (rrf_k + rank[i]) + 1 / (rrf_k + session_rank[int(sessions[i])]) for i in cand}
    return sorted(cand, key=lambda i: (-fused[i], by_score.index(i)))


@pytest.mark.parametrize("n", [40, DESCENDING_KEYED + 300])
def test_fusion_of_many_tied_turns_follows_its_definition(n):
    # past DESCENDING_KEYED candidates fuse sorts integer keys, not floats: the same order, ties included
    rng = np.random.default_rng(7)
    sessions = np.sort(rng.integers(0, max(n // 20, 3), n))
    scores = np.where(rng.random(n) < 0.9, np.round(rng.random(n) * 4, 1), 0).astype(np.float32)
    assert (scores > 0).sum() >= (DESCENDING_KEYED if n > DESCENDING_KEYED else n // 2)
    for session_top, shared in ((3, True), (None, False), (3, False), (None, True)):
        order, _ = fuse(scores, sessions, session_top=session_top, shared_ranks=shared)
        assert order.tolist() == _fuse_by_definition(scores, sessions, 60, session_top, shared)


def test_descending_is_the_stable_order_from_the_largest():
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, DESCENDING_KEYED - 1, DESCENDING_KEYED, 4 * DESCENDING_KEYED):
        tied = np.round(rng.random(n) * 20, 0) + 0.5  # few distinct values: most are tied
        ulps = 1.0 + rng.integers(0, 4, n) * np.finfo(np.float64).eps  # differ only in bits a float64's key drops
        for values in (tied.astype(np.float32), tied, ulps, tied.astype(np.float32) - 5):  # non-positive: argsort
            got = descending(values)
            assert got.tolist() == sorted(range(n), key=lambda i: (-values[i], i))


@pytest.mark.parametrize("k1", [0.0, 1.2, 3.0])
@pytest.mark.parametrize("b", [0.0, 0.75, 1.0])
def test_holders_are_where_bm25_is_positive_at_every_accepted_k1_and_b(k1, b):
    # one short turn among long ones and one long among short ones: where a k1 below 0 or a b outside 0..1 would
    # make a holder's score negative
    from refind_cli.search_config import SearchConfig

    cfg = SearchConfig(k1=k1, b=b)
    docs = ["apple", *(["apple " + "x " * 40] * 6), "apple " * 3 + "y " * 400, "apple " + "z " * 1500, "cherry"]
    idx = build_index(
        _turns([("s", d, None) for d in docs]), tokenize=lambda t: analyze(t.messages[0].content), k1=cfg.k1, b=cfg.b
    )
    for token in idx.vocab:
        assert holders(idx, token).tolist() == np.flatnonzero(bm25_scores(idx, [token]) > 0).tolist()


@pytest.mark.parametrize(("k1", "b"), [(-0.5, 0.75), (1.2, 3.0), (1.2, -0.1), (math.nan, 0.75), (1.2, math.nan)])
def test_bm25_parameters_outside_their_ranges_are_refused(k1, b):
    """A negative k1, or a b outside 0..1, gives a turn holding a word a negative score, so the turns holding a word
    (``holders``, what the speaker-name check reads) would not be those it scores in: refused, not ranked."""
    from refind_cli.errors import InvalidInput
    from refind_cli.search_config import SearchConfig

    with pytest.raises(InvalidInput, match=r"^(k1 must be 0 or more|b must be from 0 to 1)"):
        SearchConfig(k1=k1, b=b)
