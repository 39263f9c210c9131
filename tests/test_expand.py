"""Robust queries (expand.py) and pseudo-relevance feedback (feedback.py) on toy corpora ranked by hand."""

from __future__ import annotations

import numpy as np
from helpers import T0, add
from hypothesis import given, settings
from hypothesis import strategies as st

from refind_cli import search as S
from refind_cli.expand import (
    MAX_FUZZY_WORDS,
    backfill,
    char_masks,
    edit_distance,
    form_scores,
    fuzzy_scores,
    fuzzy_terms,
    inflected_terms,
    max_edits,
    near_distance,
    tail_terms,
    vocabulary,
)
from refind_cli.feedback import rm3_terms
from refind_cli.index import bm25_scores, build_index, weighted_scores
from refind_cli.store import StoredMessage
from refind_cli.tokenize import analyze
from refind_cli.turns import Turn


def _turns(spec):
    """spec: list of (session, text)."""
    turns = []
    for i, (sid, text) in enumerate(spec):
        m = StoredMessage(i + 1, f"m{i}", "u", sid, "r", i, "user", text, None, 1_000)
        turns.append(Turn(m.id, sid, (m,)))
    return turns


def _tokenize(turn):
    return analyze(turn.messages[0].content)


def _index(spec):
    return build_index(_turns(spec), tokenize=_tokenize)


def test_vocabulary_counts_the_turns_holding_each_word():
    idx = _index([("s", "nicolas skis"), ("s", "nicolas cooks"), ("s", "pasta")])
    vocab = vocabulary(idx)
    assert vocab["nicola"] == 2 and vocab["pasta"] == 1 and "zeppelin" not in vocab
    assert set(vocab) == set(idx.vocab) and len(vocab) == len(idx.vocab)


def test_edit_distance_and_lucene_style_fuzziness():
    assert edit_distance("nikola", "nicola", 2) == 1
    assert edit_distance("kitten", "sitting", 3) == 3
    assert edit_distance("kitten", "sitting", 1) == 2  # stops early: more than the limit
    assert [max_edits(w) for w in ("kat", "kate", "nikola", "2023", "北京")] == [0, 1, 2, 0, 0]


# few letters, so that words share many (repeats, swaps, one letter for another), and a few past Latin-1
_LETTERS = "abcdeéxyzß"


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=_LETTERS, max_size=12), st.text(alphabet=_LETTERS, max_size=12), st.integers(0, 4))
def test_the_bit_parallel_distance_is_the_definitions_up_to_the_limit(a, b, limit):
    # what fuzzy expansion reads of a distance: the same number when within the limit, limit + 1 (or more) when not
    want = min(edit_distance(a, b, limit), limit + 1)
    assert near_distance(char_masks(a), len(a), b, limit) == want
    assert near_distance(char_masks(b), len(b), a, limit) == want  # (symmetric, as the definition is)


def test_the_bit_parallel_distance_by_hand():
    masks = char_masks("kitten")
    assert masks == {"k": 0b1, "i": 0b10, "t": 0b1100, "e": 0b10000, "n": 0b100000}
    assert near_distance(masks, 6, "sitting", 3) == 3  # k→s, e→i, + g
    assert near_distance(masks, 6, "sitting", 2) == 3  # more than the limit: limit + 1
    assert near_distance(masks, 6, "kitten", 0) == 0
    assert near_distance(masks, 6, "kitte", 2) == 1 and near_distance(masks, 6, "kittens", 2) == 1
    assert near_distance(char_masks("nikola"), 6, "nicola", 2) == 1
    assert near_distance(char_masks(""), 0, "ab", 2) == 2 and near_distance(char_masks("ab"), 2, "", 2) == 2


def test_a_misspelt_name_matches_the_transcripts_spelling_only_when_the_vocabulary_lacks_it():
    # by hand: "nikola" is missing; "nicola" is 1 edit away, "nikolai" would be too but is absent; "mikola" (1 edit,
    # another first letter) is not expanded: the first two characters are fixed (Lucene's prefix length 2)
    idx = _index([("s", "Nicolas went skiing"), ("s", "Mikolas cooked"), ("s", "the weather")])
    vocab = vocabulary(idx)
    assert fuzzy_terms("nikola", vocab) == [("nicola", 1 - 1 / 6)]
    assert fuzzy_terms("nicola", vocab) == []  # in the vocabulary: never expanded
    scores = fuzzy_scores(idx, analyze("What did Nikolas do?"))
    assert scores is not None and scores[0] > 0 and scores[1] == 0 and scores[2] == 0
    assert np.allclose(scores, bm25_scores(idx, ["nicola"]) * (1 - 1 / 6))
    assert fuzzy_scores(idx, analyze("weather")) is None


def test_expansions_prefer_fewer_edits_then_frequent_words():
    idx = _index([("s", "marathon"), ("s", "marathons marathon"), ("s", "maratons"), ("s", "marithon")])
    vocab = vocabulary(idx)  # stems: marathon ×2 turns, maraton, marithon
    assert [w for w, _ in fuzzy_terms("marrathon", vocab)] == ["marathon", "maraton", "marithon"]
    assert [w for w, _ in fuzzy_terms("marrathon", vocab, max_expansions=1)] == ["marathon"]


def test_a_long_query_expands_only_its_first_words_the_vocabulary_lacks():
    # each turn holds one made-up word ("zk" + two code letters + "t"); its query word ends in "v" instead: 1 edit
    # from it, 2 from every other turn's word (5 letters allow 1). Only the first MAX_FUZZY_WORDS missing query
    # words are looked up — each scans its vocabulary bucket, and 100,000 characters of made-up words held a search
    # thread for minutes — and words the vocabulary holds do not count against that limit.
    code = "bcdfghjkmp"
    words = [f"zk{code[i // 10]}{code[i % 10]}t" for i in range(MAX_FUZZY_WORDS + 6)]
    idx = _index([("s", w) for w in words])
    assert [analyze(w) for w in words] == [[w] for w in words]
    misspelt = [w[:-1] + "v" for w in words]
    scores = fuzzy_scores(idx, words[-3:] + misspelt)
    assert scores is not None and np.flatnonzero(scores).tolist() == list(range(MAX_FUZZY_WORDS))
    assert np.flatnonzero(fuzzy_scores(idx, misspelt, max_words=len(words))).tolist() == list(range(len(words)))


def test_search_finds_a_misspelt_name_and_the_stage_can_be_turned_off(store):
    add(store, "u", "a", ("user", "Muhhamed: I started a new job at the bakery"), at=T0)
    add(store, "u", "b", ("user", "Lena: the weather is lovely"), at=T0 + 60_000)
    hits = S.search(store, "u", "Where does Muhamed work?", top_k=1)
    assert hits and hits[0].session_id == "a"
    assert S.search(store, "u", "Where does Muhamed work?", top_k=1, config=S.SearchConfig(fuzzy=False)) == []


def test_a_word_never_written_alone_matches_the_compounds_that_end_in_it():
    # by hand: "arzt" is missing; "hausarzt" ends in it (4 letters more), "zahnarzttermin" holds it in its middle (a
    # dentist's appointment is no kind of doctor), "notarzt" ends in it but only 3 letters longer: left out, the
    # price of leaving out "portrait" for "trait" ("por" + "trait" is no compound); of the
    # two doctors the one in more turns first; "therapi" (Therapie) finds "physiotherapi"
    idx = _index(
        [
            ("s", "Termin beim Hausarzt"),
            ("s", "Der Hausarzt ruft an"),
            ("s", "Der Kinderarzt ist nett"),
            ("s", "Zahnarzttermin am Mittwoch"),
            ("s", "Der Notarzt"),
            ("s", "Physiotherapie am Dienstag"),
        ]
    )
    vocab = vocabulary(idx)
    assert tail_terms("arzt", vocab) == [("hausarzt", 4 / 8), ("kinderarzt", 4 / 10)]
    assert tail_terms("arzt", vocab, most=1) == [("hausarzt", 4 / 8)]
    assert tail_terms("therapi", vocab) == [("physiotherapi", 7 / 13)]
    assert tail_terms("hausarzt", vocab) == []  # a word the user wrote is never expanded
    assert tail_terms("arz", vocab) == []  # too short to be a compound's last part
    scores = form_scores(idx, analyze("Arzt Therapie"), inflections=(0, 0.0))
    assert scores is not None and np.flatnonzero(scores).tolist() == [0, 1, 2, 5]
    expected = bm25_scores(idx, ["hausarzt"]) * 0.5 + bm25_scores(idx, ["kinderarzt"]) * 0.4
    expected += bm25_scores(idx, ["physiotherapi"]) * 7 / 13
    assert np.allclose(scores, expected)
    assert form_scores(idx, analyze("Zahnarzttermin")) is None


def test_search_finds_a_compound_by_its_last_part_and_the_stage_can_be_turned_off(store):
    add(store, "u", "a", ("user", "Termin beim Hausarzt am Montag"), at=T0)
    add(store, "u", "b", ("user", "Zahnarzttermin am Mittwoch"), at=T0 + 60_000)
    add(store, "u", "c", ("user", "Wir gehen einkaufen"), at=T0 + 120_000)
    hits = S.search(store, "u", "Wann ist der Arzt?", top_k=1)
    assert hits and hits[0].session_id == "a"
    assert S.search(store, "u", "Wann ist der Arzt?", top_k=1, config=S.SearchConfig(compound_tails=0)) == []


def test_a_word_never_written_alone_matches_its_turkish_inflections():
    # by hand: "bilet" (ticket) is missing; "biletlerini" (their tickets) and "bileti" (its ticket) stem to it in
    # Turkish; "biletsiz" (ticketless) starts with it but is another word to the stemmer, "bilezik" (bracelet) shares
    # only four letters; of the two equally frequent, the first in order
    idx = _index(
        [
            ("s", "Konser biletlerini aldım"),
            ("s", "Otobüs bileti pahalı"),
            ("s", "Biletsiz geldim"),
            ("s", "Bilezik aldım"),
        ]
    )
    vocab = vocabulary(idx)
    assert inflected_terms("bilet", vocab) == [("bileti", 5 / 6), ("biletlerini", 5 / 11)]
    assert inflected_terms("bilet", vocab, most=1) == [("bileti", 5 / 6)]
    assert inflected_terms("bileti", vocab) == []  # a word the user wrote is never expanded
    scores = form_scores(idx, analyze("Bilet ne zaman?"), tails=(0, 0.0))
    assert scores is not None and np.flatnonzero(scores).tolist() == [0, 1]
    expected = bm25_scores(idx, ["bileti"]) * 5 / 6 + bm25_scores(idx, ["biletlerini"]) * 5 / 11
    assert np.allclose(scores, expected)


def test_search_finds_a_turkish_inflection_and_the_stage_can_be_turned_off(store):
    add(store, "u", "a", ("user", "Konser biletlerini aldım"), at=T0)
    add(store, "u", "b", ("user", "Bilezik aldım"), at=T0 + 60_000)
    hits = S.search(store, "u", "Bilet?", top_k=1)
    assert hits and hits[0].session_id == "a"
    assert S.search(store, "u", "Bilet?", top_k=1, config=S.SearchConfig(inflections=0)) == []


def test_backfill_takes_the_matched_sessions_nearest_turns_then_the_latest():
    # sessions: a = turns 0..3, b = turns 4..5, c = turn 6. Matched: turn 2 (session a) only.
    idx = _index([("a", "t0"), ("a", "t1"), ("a", "kayak"), ("a", "t3"), ("b", "t4"), ("b", "t5"), ("c", "t6")])
    order, fused = np.array([2]), np.array([0.5])
    mask = np.ones(len(idx), dtype=bool)
    got, scores = backfill(idx, order, fused, mask, 7)
    # by hand: session a by distance to turn 2 (1 and 3 tie at 1, the earlier first; then 0), then latest first
    assert got.tolist() == [2, 1, 3, 0, 6, 5, 4]
    assert scores.tolist() == [0.5] * 7
    assert backfill(idx, order, fused, mask, 3)[0].tolist() == [2, 1, 3]
    mask[1] = False
    assert backfill(idx, order, fused, mask, 3)[0].tolist() == [2, 3, 0]  # outside the mask: never added
    assert backfill(idx, order, fused, mask, 1)[0].tolist() == [2]  # enough already


def test_search_backfills_only_when_something_matched(store):
    add(store, "u", "a", ("user", "kayak"), ("user", "other"), ("user", "more"), at=T0)
    add(store, "u", "b", ("user", "later talk"), at=T0 + 86_400_000)
    cfg = S.SearchConfig(neighbours=0, late_neighbours=0)
    assert [len(S.search(store, "u", "kayak", top_k=k, config=cfg)) for k in (1, 3, 4, 9)] == [1, 3, 4, 4]
    assert len(S.search(store, "u", "kayak", top_k=4, config=cfg.with_(backfill=False))) == 1
    assert S.search(store, "u", "zeppelin", top_k=4, config=cfg) == []  # nothing matched: nothing made up


def test_backfill_stops_once_the_list_holds_backfill_chars(store):
    # ten pages in one session; by hand, a block is its page and the prefix "[2023-06-01 08:00] user: " (25
    # characters): the match 5,025, each filler 5,019, and two between blocks — they start at 0, 5,027, 10,048,
    # 15,069 … so a cap of 12,000 keeps the blocks that start before it (the match and two fillers) and leaves the
    # seven fillers after it out
    page = "filler words " * 384  # 4,992 characters
    add(store, "u", "a", ("user", page + "zeppelin"), *[("user", page + f"p{i}") for i in range(9)], at=T0)
    cfg = S.SearchConfig(neighbours=0, late_neighbours=0, fill_chars=None)
    whole = S.search(store, "u", "zeppelin", top_k=10, config=cfg.with_(backfill_chars=None))
    assert len(whole) == 10 and [len(b.content) for b in whole[:2]] == [5_025, 5_019]
    capped = S.search(store, "u", "zeppelin", top_k=10, config=cfg.with_(backfill_chars=12_000))
    assert capped == whole[:3]
    assert len(S.search(store, "u", "zeppelin", top_k=10, config=cfg.with_(backfill_chars=10_048))) == 2


def test_backfill_chars_never_leaves_out_a_turn_that_matched(store):
    # four matching pages fill 20,108 characters, past a cap of 6,000: all four are kept, no filler after them
    page = "filler words " * 384
    add(store, "u", "a", *[("user", page + "zeppelin") for _ in range(4)], ("user", page + "other"), at=T0)
    cfg = S.SearchConfig(neighbours=0, late_neighbours=0, fill_chars=None, backfill_chars=6_000)
    got = S.search(store, "u", "zeppelin", top_k=10, config=cfg)
    assert len(got) == 4 and all(b.content.endswith("zeppelin") for b in got)


def test_rm3_adds_the_words_the_best_turns_share():
    # by hand: "ski" matches turns 0 and 1 (equal length, equal score); both also hold "aspen", turn 0 holds
    # "vail": P(aspen) = .5·1/3 + .5·1/3 > P(vail) = .5·1/3. "snow" is in every turn (df share 1.0 > max_df).
    idx = _index(
        [
            ("s", "ski aspen vail snow"),
            ("s", "ski aspen trip snow"),
            ("s", "aspen lodge snow"),
            ("s", "vail snow"),
            ("s", "pasta snow"),
        ]
    )
    scores = bm25_scores(idx, ["ski"])
    terms = rm3_terms(idx, scores, ["ski"], _tokenize, docs=2, terms=2, weight=0.5, max_df=0.6)
    assert terms[0] == ("aspen", 0.5)
    assert {w for w, _ in terms} <= {"aspen", "vail", "trip"} and len(terms) == 2
    extra = weighted_scores(idx, terms)
    assert extra is not None and extra[2] > 0 and extra[4] == 0  # the unmatched aspen turn now scores
    assert rm3_terms(idx, np.zeros(len(idx)), ["ski"], _tokenize) == []
