"""Term proximity (proximity.py, `proximity_weight`, off by default): the question's adjacent words near each other in
a turn, on toy corpora ranked by hand."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import T0, add

from refind_cli import search as S
from refind_cli.errors import InvalidInput
from refind_cli.index import bm25_scores, build_index
from refind_cli.proximity import nearest, proximity_scores, query_pairs
from refind_cli.store import StoredMessage
from refind_cli.tokenize import analyze
from refind_cli.turns import Turn


def _index(texts):
    turns = []
    for i, text in enumerate(texts):
        m = StoredMessage(i + 1, f"m{i}", "u", "s", "r", i, "user", text, None, 1_000)
        turns.append(Turn(m.id, "s", (m,)))
    return build_index(turns, tokenize=lambda t: analyze(t.messages[0].content))


def _tokenize(turn):
    return analyze(turn.messages[0].content)


def test_pairs_are_the_questions_adjacent_words_once_each_and_a_dropped_word_ends_a_run():
    assert query_pairs(["red", "kayak", "red", "kayak", "trip"], lambda t: True) == [
        ("red", "kayak"),
        ("kayak", "red"),
        ("kayak", "trip"),
    ]
    assert query_pairs(["red", "kate", "kayak"], lambda t: t != "kate") == []  # no pair spans a dropped word
    assert query_pairs(["red", "red"], lambda t: True) == []  # a word does not pair with itself


def test_nearest_is_the_smallest_distance_between_two_sorted_position_lists():
    assert nearest([0, 9], [4, 10]) == 1
    assert nearest([3], [0, 7]) == 3
    assert nearest([], [1]) is None


def test_a_turn_holding_the_questions_words_together_scores_more_of_its_own_score():
    # by hand: the same five words in both turns (equal BM25); "red kayak" adjacent in the first (distance 1), four
    # apart in the second; the third holds "red" alone (no pair). weight 0.5, one pair: the first gains 0.5 × its
    # score, the second 0.5 × its score / 4 within a window of 5, nothing within a window of 3
    idx = _index(["red kayak trip last summer", "red trip last summer kayak", "red car"])
    scores = bm25_scores(idx, ["red", "kayak"])
    assert scores[0] == scores[1] > 0
    pairs = query_pairs(analyze("red kayak"), lambda t: True)
    out = proximity_scores(idx, scores, scores, pairs, _tokenize, weight=0.5, window=5, pool=10)
    assert out[0] == pytest.approx(scores[0] * 1.5)
    assert out[1] == pytest.approx(scores[1] * (1 + 0.5 / 4))
    assert out[2] == scores[2]
    near = proximity_scores(idx, scores, scores, pairs, _tokenize, weight=0.5, window=3, pool=10)
    assert near[1] == scores[1] and near[0] == pytest.approx(scores[0] * 1.5)
    # only the ``pool`` best turns are read; a turn longer than ``max_chars`` is not
    ahead = scores.copy()
    ahead[0] += np.float32(0.1)  # the first turn best by score: the one a pool of 1 reads
    only = proximity_scores(idx, ahead, scores, pairs, _tokenize, weight=0.5, window=5, pool=1)
    assert only[0] == pytest.approx(ahead[0] + scores[0] * 0.5) and only[1] == scores[1]
    short = proximity_scores(idx, scores, scores, pairs, _tokenize, weight=0.5, window=5, pool=10, max_chars=20)
    assert short[0] == scores[0]  # 25 characters: not read
    assert proximity_scores(idx, scores, scores, pairs, _tokenize, weight=0.0, window=5, pool=10) is scores


def test_search_puts_the_turn_saying_the_questions_words_together_first_when_asked(store):
    # the two turns hold the same words; by BM25 they tie and the earlier one comes first. With proximity on, the
    # later one, where "red kayak" is said together, comes first ("red" and "kayak" in 2 of 10 turns: rarer words;
    # "kate", in every label, pairs with nothing)
    add(
        store,
        "u",
        "s",
        ("user", "Kate: red paint on the trip, then the kayak"),
        ("user", "Kate: the red kayak on the trip, then paint"),
        *[("user", f"Kate: hello {word}") for word in ("anna", "ben", "carl", "dora", "emil", "fritz", "gus", "hal")],
        at=T0,
    )
    base = S.SearchConfig(neighbours=0)

    def first(cfg):
        return S.search(store, "u", "Kate red kayak", top_k=1, config=cfg)[0].content.split("user: ")[1]

    assert S.SearchConfig().proximity_weight == 0  # off by default
    assert first(base) == "Kate: red paint on the trip, then the kayak"
    assert first(base.with_(proximity_weight=0.5)) == "Kate: the red kayak on the trip, then paint"
    assert first(base.with_(proximity_weight=0.5, proximity_max_chars=30)) == (
        "Kate: red paint on the trip, then the kayak"  # both turns longer than 30: neither is read
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("proximity_weight", -1.0, "proximity_weight must be a number 0 or more, got -1.0"),
        ("proximity_weight", float("inf"), "proximity_weight must be a number 0 or more, got inf"),
        ("proximity_window", -1, "proximity_window must be 0 or more, got -1"),
        ("proximity_pool", -1, "proximity_pool must be 0 or more, got -1"),
    ],
)
def test_proximity_fields_refuse_values_out_of_range(field, value, message):
    with pytest.raises(InvalidInput, match=re.escape(message)):
        S.SearchConfig(**{field: value})
