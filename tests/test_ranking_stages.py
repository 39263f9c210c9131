"""Ranking stages added for issue 10's REALTALK misses, each on a toy corpus ranked by hand: days named in the
question (query_dates.py), the plain-BM25 interleave (blocks.py), common words weighed instead of dropped, the session
rank's weight in the fusion and the neighbour filter that ignores common words."""

from __future__ import annotations

import re
import time
from datetime import date

import numpy as np
import pytest
from helpers import DAY, T0, add

from refind_cli import search as S
from refind_cli.blocks import render_blocks
from refind_cli.errors import InvalidInput
from refind_cli.index import (
    answer_scores,
    bm25_scores,
    build_index,
    flat_and_rarer_scores,
    flat_scores,
    fuse,
    speaker_name,
)
from refind_cli.query_dates import date_boost, named_days
from refind_cli.store import StoredMessage
from refind_cli.tokenize import analyze
from refind_cli.turns import Turn

EPOCH = date(1970, 1, 1)


def _day(y: int, m: int, d: int) -> int:
    return (date(y, m, d) - EPOCH).days


def _index(spec):
    """spec: list of (session, text, said_at or None)."""
    turns = []
    for i, (sid, text, said) in enumerate(spec):
        m = StoredMessage(i + 1, f"m{i}", "u", sid, "r", i, "user", text, said, 1_000)
        turns.append(Turn(m.id, sid, (m,)))
    return build_index(turns, tokenize=lambda t: analyze(t.messages[0].content))


@pytest.mark.parametrize(
    ("query", "days"),
    [
        ("What kind of pasta did Kate make on 29 Dec 2023?", [(2023, 12, 29)]),
        ("What movie did Akib watch on the 31 of December 2023?", [(2023, 12, 31)]),
        ("Where is Paola going on the 10th of February 2024?", [(2024, 2, 10)]),
        ("What did Melanie show to Caroline on October 13, 2023?", [(2023, 10, 13)]),
        ("Did Vanessa take the test before December 23rd, 2023?", [(2023, 12, 23)]),
        ("What did Gina find on 1 February, 2023?", [(2023, 2, 1)]),
        ("What is Paola planning to do on 10.01.2024?", [(2024, 1, 10)]),  # day.month.year
        ("Between 1/10/2024 and 2024-01-12", [(2024, 1, 10), (2024, 1, 12)]),  # month/day/year; ISO
        ("What did Emi do on 5 Jan 2024 and on 5 Jan 2024 again?", [(2024, 1, 5)]),  # no repeats
        ("What happened in January 2024?", []),  # a month names no day (the index has month words)
        ("What happened on 31.02.2024 or on 30 February 2024?", []),  # impossible dates are ignored
        ("How many times in 2023?", []),
        ("我2024年3月12日那天在做什么？", [(2024, 3, 12)]),  # Chinese, Japanese: no space, no \b beside 年
        ("2023 年 12 月 31 号去了哪儿", [(2023, 12, 31)]),
        ("2024년 1월 5일에 뭐 했어?", [(2024, 1, 5)]),  # Korean
        ("在2024/3/12和2024-3-13之间", [(2024, 3, 12), (2024, 3, 13)]),  # year first, one-digit month and day
        ("我在10.01.2024和1/12/2024做了什么", [(2024, 1, 10), (2024, 1, 12)]),
        ("编号12024年3月12日", []),  # a longer number's last four digits are no year
        ("3月12日那天呢", []),  # a day without a year: which year is not said
        ("2024年2月30日", []),
        ("2024-3/12", []),  # mixed separators are not a date
    ],
)
def test_named_days_reads_the_forms_questions_use(query, days):
    assert named_days(query) == [_day(*d) for d in days]


@pytest.mark.parametrize(
    ("query", "days"),
    [
        ("11月18日黄家乐在深圳都做了些什么？", [(2023, 11, 18), (2024, 11, 18)]),  # each year the turns were said in
        ("11月18号呢", [(2023, 11, 18), (2024, 11, 18)]),
        ("11월 18일에 뭐 했어?", [(2023, 11, 18), (2024, 11, 18)]),
        ("What did Kate do on December 29th?", [(2023, 12, 29), (2024, 12, 29)]),
        ("What did Kate do on the 3rd of January?", [(2023, 1, 3), (2024, 1, 3)]),
        ("2024年11月18日和12月1日", [(2024, 11, 18), (2023, 12, 1), (2024, 12, 1)]),  # a year's date once, first
        ("on 29 Dec 2023", [(2023, 12, 29)]),  # not also year-less
        ("may 5 people come?", []),  # a month name written as a date is capitalised: "may" is a verb
        ("2月30日", []),
    ],
)
def test_a_day_named_without_its_year_is_that_day_of_each_year_said_in(query, days):
    assert named_days(query, lambda: [2023, 2024]) == [_day(*d) for d in days]
    written = [d for d in days if f"{d[0]}年{d[1]}月{d[2]}日" in query or f" {d[0]}" in query]
    assert named_days(query) == [_day(*d) for d in written]  # without years: only the dates with theirs


def test_said_years_are_the_years_from_the_first_turn_to_the_last():
    from refind_cli.query_dates import MAX_YEARS, said_years

    jan = _day(2021, 1, 1) * DAY
    idx = _index([("a", "x", jan), ("a", "y", None), ("b", "z", _day(2023, 12, 31) * DAY + DAY - 1)])
    assert said_years(idx) == range(2021, 2024)
    assert said_years(_index([("a", "x", None)])) == range(0)  # no said-at known
    wide = _index([("a", "x", _day(1990, 5, 1) * DAY), ("a", "y", jan)])
    assert said_years(wide) == range(2021 - MAX_YEARS + 1, 2022)  # the last ones


def test_search_prefers_the_turn_said_on_a_day_named_without_its_year(store):
    # by hand: both turns say 深圳 and hold the same words; the question names 18 November, no year: the 18 November
    # 2023 turn rises above the earlier one (1 November), as with the year written
    add(store, "u", "first", ("user", "我在深圳吃了早茶"), at=_day(2023, 11, 1) * DAY)
    add(store, "u", "other", ("user", "我在深圳吃了早茶"), at=_day(2023, 11, 18) * DAY + 3_600_000)
    query = "11月18日我在深圳做了什么？"
    off = S.SearchConfig(yearless_dates=False, neighbours=0)
    assert [b.session_id for b in S.search(store, "u", query, top_k=2, config=off)] == ["first", "other"]
    on = off.with_(yearless_dates=True)
    assert [b.session_id for b in S.search(store, "u", query, top_k=2, config=on)] == ["other", "first"]
    assert S.SearchConfig().yearless_dates


def test_a_day_written_in_chinese_is_a_word_the_turns_said_that_day_hold(store):
    # by hand, 9 turns: "3月12日那天我做了什么" shares no character with 12 March's only turn, and the index's date words
    # ("March 2024") are none of its words; 1 March's "我做了饭" shares 我做 and 做了. Without the day as a word, 12 March's
    # turn scores 0 and is not found; as a word only it holds (idf log(1 + 8.5 / 1.5) ≈ 1.9), boosted twice (≈ 3.8),
    # it ranks above 我做了饭 (我做 ≈ 1.9 + 做了 ≈ 1.4 at most)
    add(store, "u", "vet", ("user", "请假带猫去打疫苗"), at=_day(2024, 3, 12) * DAY + 3_600_000)
    add(store, "u", "cook", ("user", "我做了饭"), at=_day(2024, 3, 1) * DAY)
    add(store, "u", "cake", ("user", "周末做了蛋糕"), at=_day(2024, 3, 20) * DAY)
    for i, text in enumerate(["下雨", "加班到很晚", "看了电影", "跑步五公里", "买菜", "读书"]):
        add(store, "u", f"f{i}", ("user", text), at=_day(2024, 3, 22 + i) * DAY)
    query = "3月12日那天我做了什么？"
    off = S.SearchConfig(cjk_day_weight=0.0, neighbours=0, backfill=False)
    assert "vet" not in [b.session_id for b in S.search(store, "u", query, top_k=3, config=off)]
    on = off.with_(cjk_day_weight=1.0)
    assert [b.session_id for b in S.search(store, "u", query, top_k=2, config=on)] == ["vet", "cook"]
    from refind_cli.query_dates import cjk_day

    assert cjk_day(query) and cjk_day("2024년 3월 12일") and cjk_day("2024年3月12号")
    assert not cjk_day("What did I do on 12 Mar 2024?")  # its month and year are words each turn is indexed with
    assert not cjk_day("2024-03-12") and not cjk_day("3月的时候")
    assert S.SearchConfig().cjk_day_weight == 1.0


def test_a_query_without_a_digit_names_no_day_and_compiles_no_pattern():
    from refind_cli import query_dates

    query_dates._patterns.cache_clear()
    assert named_days("what did Caroline do on the last day of December?") == []
    assert query_dates._patterns.cache_info().currsize == 0  # a cold process's search skips compiling them
    assert named_days("on ２９ Dec ２０２３") == [_day(2023, 12, 29)]  # fullwidth digits are digits (\d, isdecimal)


def test_date_boost_multiplies_matching_turns_said_near_a_named_day():
    day = _day(2024, 1, 10)
    ms = day * DAY
    idx = _index(
        [
            ("a", "t0", ms - 2 * DAY + 1),  # two days before
            ("a", "t1", ms - DAY + 1),  # the day before
            ("b", "t2", ms + 3_600_000),  # that day, 01:00
            ("b", "t3", ms + 3_600_000),  # that day, but it shares no query word
            ("c", "t4", None),  # said-at unknown
        ]
    )
    scores = np.array([1.0, 1.0, 1.0, 0.0, 1.0], dtype=np.float32)
    got = date_boost(idx, scores, [day], boost=1.0)
    assert got.tolist() == [1.0, 1.0, 2.0, 0.0, 1.0]  # only a matching turn, only that day
    assert date_boost(idx, scores, [day], boost=1.0, window_days=1).tolist() == [1.0, 2.0, 2.0, 0.0, 1.0]
    assert date_boost(idx, scores, [], boost=1.0) is scores
    assert date_boost(idx, scores, [day], boost=0.0) is scores
    assert scores.tolist() == [1.0, 1.0, 1.0, 0.0, 1.0]  # the input is left alone


def test_search_prefers_the_turn_said_on_the_named_day(store):
    # by hand: both turns say "hiking" and both are indexed with "June 2023": a tie, broken by the earlier turn
    # (1 June); the question names 5 June, so the boost puts that day's turn first
    add(store, "u", "first", ("user", "went hiking with Sam"), at=T0)
    add(store, "u", "fifth", ("user", "went hiking with Ana"), at=T0 + 4 * DAY)
    query = "Where did I go hiking on 5 June 2023?"
    off = S.SearchConfig(date_boost=0.0, neighbours=0)
    assert [b.session_id for b in S.search(store, "u", query, top_k=2, config=off)] == ["first", "fifth"]
    on = off.with_(date_boost=1.0)
    assert [b.session_id for b in S.search(store, "u", query, top_k=2, config=on)] == ["fifth", "first"]


def test_a_turn_a_day_from_the_named_day_across_a_year_end_counts_as_holding_its_year(store):
    # by hand: "dinner" is in all five turns (idf ~0.09), "2023" in one (idf ~1.4): 2 December's turn scores
    # dinner + 2023; 1 January's, within a day of the named 31 December, scores dinner only, doubled by the boost —
    # below 2 December, said four weeks away. Credited the year it lacks, it scores (dinner + 2023) × 2: first.
    at = _day(2023, 12, 2) * DAY + 19 * 3_600_000
    add(store, "u", "team", ("user", "dinner with the team"), at=at)
    add(store, "u", "eve", ("user", "dinner with family"), at=_day(2024, 1, 1) * DAY + 3_600_000)
    for i, text in enumerate(["dinner again", "dinner out", "cooked dinner"]):
        add(store, "u", f"late{i}", ("user", text), at=_day(2024, 1, 20 + i) * DAY)
    query = "Where was I for dinner on 31 Dec 2023?"
    off = S.SearchConfig(date_words_near=False, neighbours=0)
    assert [b.session_id for b in S.search(store, "u", query, top_k=2, config=off)] == ["team", "eve"]
    on = off.with_(date_words_near=True)
    assert [b.session_id for b in S.search(store, "u", query, top_k=2, config=on)] == ["eve", "team"]
    assert S.SearchConfig().date_words_near  # the default


def test_date_boost_credits_a_named_days_month_and_year_words_to_the_turns_near_it():
    day = _day(2023, 12, 31)
    idx = _index(
        [
            ("a", "dinner decemb 2023", day * DAY - 20 * DAY),  # holds the words, weeks away
            ("b", "dinner januari 2024", day * DAY + DAY + 1),  # the next day, holds neither
            ("b", "2023 2023 short", day * DAY + 1),  # that day, holds one
            ("c", "dinner", None),  # said-at unknown: never near
        ]
    )
    scores = np.array([2.0, 1.0, 1.0, 1.0], dtype=np.float32)
    one = bm25_scores(idx, ["2023"])
    median = float(np.median(one[one > 0]))
    got = date_boost(idx, scores, [day], boost=1.0, window_days=1, words=["2023", "2023"])
    np.testing.assert_allclose(got, [2.0, (1.0 + median) * 2, 2.0, 1.0], rtol=1e-6)  # credited once, if lacking
    assert date_boost(idx, scores, [day], boost=1.0, window_days=1).tolist() == [2.0, 2.0, 2.0, 1.0]


def test_a_long_anchor_is_measured_with_each_wide_character_counted_three_times():
    # ranked by hand: 0 leads (never deferred), then 1, then 2; turn 1 is 406 characters, 400 of them Chinese —
    # 1,206 when each counts three times, past the 800 that defer an anchor behind the shorter ones
    idx = _index([("a", "kayak lead", None), ("b", "kayak " + "船" * 400, None), ("c", "kayak short", None)])
    order, fused = np.array([0, 1, 2]), np.array([3.0, 2.0, 1.0], dtype=np.float32)
    scores = fused.copy()
    assert S.SearchConfig().defer_wide == 1.0  # the default: each character once (BENCHMARKS.md)
    cfg = S.SearchConfig(neighbours=0, defer_wide=3.0)
    assert [b.session_id for b in render_blocks(idx, order, fused, top_k=3, cfg=cfg, scores=scores)] == ["a", "c", "b"]
    for change, want in [
        ({"defer_wide": 1.0}, ["a", "b", "c"]),  # each character once: 406, not deferred
        ({"defer_chars": 1205}, ["a", "c", "b"]),  # the width is counted, not guessed: 1,206 > 1,205
        ({"defer_chars": 1206}, ["a", "b", "c"]),
        ({"defer_wide": 2.0}, ["a", "c", "b"]),  # 806
        ({"defer_wide": 2.0, "defer_chars": 806}, ["a", "b", "c"]),
    ]:
        got = render_blocks(idx, order, fused, top_k=3, cfg=cfg.with_(**change), scores=scores)
        assert [b.session_id for b in got] == want, change


def test_a_long_message_a_named_person_wrote_keeps_its_place():
    # ranked by hand: 0 leads (never deferred), then 1 (over 800 characters), then 2. A long message that a named
    # person wrote is their own account: it keeps its place. One labelled by a role ("user: …", "assistant: …"), by
    # nothing, or said in the assistant's role goes behind the shorter anchor (deferred), as every long one did
    long_text = "kayak " + "x" * 800
    order, fused = np.array([0, 1, 2]), np.array([3.0, 2.0, 1.0], dtype=np.float32)
    scores = fused.copy()
    cfg = S.SearchConfig(neighbours=0)
    assert cfg.defer_people is False  # the default (BENCHMARKS.md, "A person's long message keeps its place")

    def sessions(idx, config):
        return [b.session_id for b in render_blocks(idx, order, fused, top_k=3, cfg=config, scores=scores)]

    for label, kept in [
        ("Kate: ", True),
        ("Fahim Khan: ", True),
        ("李雷: ", True),
        ("user: ", False),
        ("Assistant: ", False),
        ("", False),
        ("Our kayak trip, the whole story: ", False),  # a sentence before a colon, not a name
    ]:
        idx = _index([("a", "kayak lead", None), ("b", label + long_text, None), ("c", "kayak short", None)])
        assert sessions(idx, cfg) == (["a", "b", "c"] if kept else ["a", "c", "b"]), label
        assert sessions(idx, cfg.with_(defer_people=True)) == ["a", "c", "b"], label  # as before: deferred
    said = StoredMessage(2, "m1", "u", "b", "r", 1, "assistant", "Kate: " + long_text, None, 1_000)  # the role decides
    idx = _index([("a", "kayak lead", None), ("b", "placeholder", None), ("c", "kayak short", None)])
    turns = list(idx.turns)
    turns[1] = Turn(said.id, "b", (said,))
    idx = build_index(turns, tokenize=lambda t: analyze(t.messages[0].content))
    assert sessions(idx, cfg) == ["a", "c", "b"]


def test_a_short_list_grows_its_short_blocks_into_what_it_leaves():
    # by hand: one session of five turns; the only anchor, "kayak" (5 characters), renders as "user: kayak" — a list
    # of 11 + 2 characters. Its nearest turns, the earlier first at each distance: t0 (13), t2 (13), t3, t4
    idx = _index(
        [("a", "one two three", None), ("a", "kayak", None), ("a", "four five six", None), ("a", "seven eight", None)]
    )
    order, fused = np.array([1]), np.array([1.0], dtype=np.float32)
    scores = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)
    cfg = S.SearchConfig(neighbours=0, block_floor=20, fill_after=0)

    def texts(**change):
        (block,) = render_blocks(idx, order, fused, top_k=5, cfg=cfg.with_(**change), scores=scores)
        return _lines_of(block)

    assert (S.SearchConfig().fill_chars, S.SearchConfig().fill_after) == (8000, 2000)  # the defaults (BENCHMARKS.md)
    assert texts(fill_chars=None) == ["kayak"]
    assert texts(fill_chars=30) == ["one two three", "kayak", "four five six"]  # 17 spare: 5 → 18 → 31, past 20
    assert texts(fill_chars=20) == ["one two three", "kayak"]  # 7 spare: t0 (13) spends it
    assert texts(fill_chars=13) == ["kayak"]  # the list is not shorter than 13: nothing grows
    assert texts(fill_chars=1000, block_floor=5) == ["kayak"]  # no block shorter than the floor
    assert texts(fill_chars=1000, fill_reach=0) == ["kayak"]


def test_only_blocks_that_start_past_fill_after_grow():
    # by hand: two sessions; anchors "kayak" (a, 11 + 2 characters as a list's text) then "kayak canoe" (b). With
    # fill_after 13 the first block starts at 0 and stays as it is; the second starts at 13 and grows by its
    # nearest turn. With fill_after past the list's text (both start before it) nothing grows: the list of fill off
    idx = _index(
        [
            ("a", "one two three", None),
            ("a", "kayak", None),
            ("b", "four five six", None),
            ("b", "kayak canoe", None),
        ]
    )
    order, fused = np.array([1, 3]), np.array([2.0, 1.0], dtype=np.float32)
    scores = np.array([0.0, 1.0, 0.0, 1.0], dtype=np.float32)
    cfg = S.SearchConfig(neighbours=0, block_floor=20, fill_chars=1000)

    def texts(**change):
        return [_lines_of(b) for b in render_blocks(idx, order, fused, top_k=5, cfg=cfg.with_(**change), scores=scores)]

    off = texts(fill_chars=None)
    assert off == [["kayak"], ["kayak canoe"]]
    assert texts(fill_after=0) == [["one two three", "kayak"], ["four five six", "kayak canoe"]]
    assert texts(fill_after=13) == [["kayak"], ["four five six", "kayak canoe"]]
    assert texts(fill_after=14) == off  # the second block starts at 13: before it
    assert texts(fill_after=0, bare_blocks=2) == off  # a block shown alone by design never grows
    assert texts(fill_after=0, bare_blocks=1) == [["kayak"], ["four five six", "kayak canoe"]]
    with pytest.raises(InvalidInput, match="fill_after must be 0 or more, got -1"):
        cfg.with_(fill_after=-1)


def _lines_of(block):
    return [line.split(": ", 1)[1] if line.startswith("user: ") else line for line in block.content.split("\n")]


def _interleave_case():
    idx = _index(
        [
            ("a", "kayak one", None),
            ("a", "filler", None),
            ("a", "kayak two", None),
            ("b", "kayak kayak", None),
            ("b", "x" * 600 + " kayak", None),
        ]
    )
    scores = np.array([3.0, 0.0, 2.0, 5.0, 1.0], dtype=np.float32)  # plain BM25 order: 3, 0, 2, 4
    order, fused = np.array([0, 2, 3, 4]), np.array([0.4, 0.3, 0.2, 0.1])  # the block ranking
    cfg = S.SearchConfig(neighbours=1, neighbour_filter="all", defer_chars=None, context_blocks=None)
    return idx, scores, order, fused, cfg


def _contents(blocks):
    return [b.content.replace("user: ", "").replace("x" * 600, "X") for b in blocks]


def test_interleave_follows_each_block_with_the_best_plain_turn_not_shown_yet():
    idx, scores, order, fused, cfg = _interleave_case()
    plain = render_blocks(idx, order, fused, top_k=10, cfg=cfg, scores=scores)
    assert _contents(plain) == ["kayak one\nfiller", "kayak two", "kayak kayak", "X kayak"]
    got = render_blocks(idx, order, fused, top_k=10, cfg=cfg.with_(interleave_chars=10_000), scores=scores)
    # by hand: block 0 (with neighbour 1); plain turn 3; block 2 (neighbour 1 already shown); plain 0 and 2 are
    # shown, so 4; block 3 shows turn 3 again, now in context (neighbour 4 is over neighbour_max_chars); block 4
    # likewise shows turn 4 again (its neighbour 3 is shown)
    assert _contents(got) == ["kayak one\nfiller", "kayak kayak", "kayak two", "X kayak", "kayak kayak", "X kayak"]
    assert [b.score for b in got] == sorted((b.score for b in got), reverse=True)
    assert len({b.score for b in got}) == len(got)


def test_interleave_stops_at_its_character_budget_and_skips_long_turns():
    idx, scores, order, fused, cfg = _interleave_case()
    # "kayak one\nfiller" rendered is 30 characters with the separator: one plain turn fits before 40, none after
    got = render_blocks(idx, order, fused, top_k=10, cfg=cfg.with_(interleave_chars=40), scores=scores)
    assert _contents(got) == ["kayak one\nfiller", "kayak kayak", "kayak two", "kayak kayak", "X kayak"]
    short = cfg.with_(interleave_chars=10_000, interleave_max_chars=100)
    got = render_blocks(idx, order, fused, top_k=10, cfg=short, scores=scores)
    assert _contents(got) == ["kayak one\nfiller", "kayak kayak", "kayak two", "kayak kayak", "X kayak"]
    two = cfg.with_(interleave_chars=10_000, interleave_turns=2)
    got = render_blocks(idx, order, fused, top_k=3, cfg=two, scores=scores)
    assert _contents(got) == ["kayak one\nfiller", "kayak kayak", "kayak two"]  # plain 3 and 2; top_k counts all


def test_common_words_can_weigh_less_instead_of_being_dropped(store):
    # "paola" is in 4 of 5 turns (every label of hers); "exam" ties between Kevin's turn and Paola's
    add(
        store,
        "u",
        "s",
        ("user", "Kevin: exam today"),
        ("user", "Paola: exam today"),
        ("user", "Paola: hi"),
        ("user", "Paola: hello"),
        ("user", "Paola: bye"),
        at=T0,
    )
    base = S.SearchConfig(neighbours=0)

    def first(cfg):
        return S.search(store, "u", "paola exam", top_k=1, config=cfg)[0].content.split("user: ")[1]

    assert first(base) == "Paola: exam today"  # the name counts fully
    assert first(base.with_(common_df=0.5)) == "Kevin: exam today"  # dropped: a tie, the earlier turn first
    assert first(base.with_(common_df=0.5, common_weight=0.3)) == "Paola: exam today"  # weighed: breaks the tie


def test_session_weight_scales_the_session_rank_in_the_fusion():
    # test_index's case: t0 is the best turn, but its session ranks 3rd. With the session rank at full weight
    # t1 = 1/62 + 1/61 overtakes t0 = 1/61 + 1/63; at half weight t0 = 1/61 + .5/63 > t1 = 1/62 + .5/61
    scores = np.array([3.0, 2.9, 2.8, 2.0, 1.9], dtype=np.float32)
    sessions = np.array([0, 1, 1, 2, 2], dtype=np.int32)
    assert fuse(scores, sessions)[0].tolist() == [1, 0, 2, 3, 4]
    order, fused = fuse(scores, sessions, session_weight=0.5)
    assert order.tolist() == [0, 1, 2, 3, 4]
    assert np.isclose(fused[0], 1 / 61 + 0.5 / 63)


def test_neighbour_match_can_ignore_a_word_found_in_most_turns(store):
    # every turn holds "paola" (her label); only the anchor holds "tennis". With the match filter a neighbour
    # sharing only her name is kept; with neighbour_match_df=0.5 it is not
    add(store, "u", "s", ("user", "Paola: hi"), ("user", "Paola: tennis"), ("user", "Paola: bye"), at=T0)
    cfg = S.SearchConfig(neighbours=1)
    (b,) = S.search(store, "u", "paola tennis", top_k=1, config=cfg.with_(backfill=False))
    assert b.content.count("\n") == 2
    (b,) = S.search(store, "u", "paola tennis", top_k=1, config=cfg.with_(backfill=False, neighbour_match_df=0.5))
    assert b.content.endswith("user: Paola: tennis") and "\n" not in b.content


def test_session_cap_spreads_the_list_over_more_sessions():
    # ranked anchors 0..5 of sessions A A A B A C: with a cap of 2 a session's third and later anchors (2 and 4)
    # move behind the others' first two, keeping their order; scores travel with their anchors
    order = np.array([0, 1, 2, 3, 4, 5])
    fused = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    sessions = np.array([0, 0, 0, 1, 0, 2], dtype=np.int32)
    spread, scores = S.spread_sessions(order, fused, sessions, 2)
    assert spread.tolist() == [0, 1, 3, 5, 2, 4]
    assert scores.tolist() == [6.0, 5.0, 3.0, 1.0, 4.0, 2.0]
    assert S.spread_sessions(order, fused, sessions, 3)[0].tolist() == [0, 1, 2, 3, 5, 4]


def test_session_cap_changes_which_sessions_a_short_list_shows(store):
    # three turns about pasta in session a outrank one in session b; top_k 2 shows a's best two, or with a cap
    # of one anchor per session a's best and b's
    add(store, "u", "a", ("user", "pasta pasta"), ("user", "pasta pasta again"), ("user", "pasta and more"), at=T0)
    add(store, "u", "b", ("user", "some pasta said once in a longer turn"), at=T0 + DAY)
    cfg = S.SearchConfig(neighbours=0, backfill=False)
    assert {b.session_id for b in S.search(store, "u", "pasta", top_k=2, config=cfg)} == {"a"}
    assert {b.session_id for b in S.search(store, "u", "pasta", top_k=2, config=cfg.with_(session_cap=1))} == {
        "a",
        "b",
    }


def test_session_cap_below_one_is_refused():
    with pytest.raises(InvalidInput, match="session_cap must be 1 or more"):
        S.SearchConfig(session_cap=0)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("recalled_neighbours", -1, "recalled_neighbours must be 0 or more, got -1"),
        ("fill_reach", -2, "fill_reach must be 0 or more, got -2"),
        ("block_floor", -1, "block_floor must be 0 or more, got -1"),
        ("fill_chars", -5, "fill_chars must be 0 or more, got -5"),
        ("defer_wide", 0.5, "defer_wide must be 1 or more"),
        ("defer_wide", float("nan"), "defer_wide must be 1 or more"),
        ("cjk_day_weight", -1.0, "cjk_day_weight must be a number 0 or more, got -1.0"),
        ("cjk_day_weight", float("inf"), "cjk_day_weight must be a number 0 or more, got inf"),
        ("name_lift", float("inf"), "name_lift must be a number 0 or more, got inf"),
        ("name_lift", float("nan"), "name_lift must be a number 0 or more, got nan"),
    ],
)
def test_this_rounds_fields_refuse_values_out_of_range(field, value, message):
    with pytest.raises(InvalidInput, match=re.escape(message)):
        S.SearchConfig(**{field: value})
    S.SearchConfig(**{field: None if field in ("recalled_neighbours", "fill_chars") else 1})  # in range: accepted


def test_a_block_s_neighbours_stop_at_its_session_however_many_are_asked():
    """``neighbours`` of a billion shows the whole session, nearest first, and walks only the session's turns (a
    loop over the billion steps took minutes)."""
    from refind_cli.blocks import compose

    idx = _index([("s1", f"turn {i}", None) for i in range(5)] + [("s2", "other session", None)])
    cfg = S.SearchConfig(neighbours=10**9, neighbour_filter="all")
    chosen = compose(idx, 2, cfg, set(), None)
    assert list(chosen) == [2, 1, 3, 0, 4]  # the anchor, then nearest first, the earlier of two first; not s2


def test_a_search_asking_any_number_of_neighbours_shows_the_session(store):
    # a probe of round 17: the search's prefetch of the neighbours' text raised "Maximum allowed size exceeded" for
    # neighbours=10**23 (10**8 asked 38.7 GiB); it now reads at most 64 each side, the rest as blocks ask for them
    for i in range(200):
        add(store, "u", "s1", ("user", f"turn {i} {'kayak' if i == 100 else 'walk'}"), at=T0 + i * 60_000)
    add(store, "u", "s2", ("user", "another session"), at=T0 + DAY)
    cfg = S.SearchConfig(neighbours=10**23, neighbour_filter="all", context_blocks=None, backfill=False)
    blocks = S.search(store, "u", "turn kayak", top_k=1, config=cfg)
    assert len(blocks) == 1 and len(blocks[0].message_ids) == 200  # the whole session, not s2


def test_a_word_in_most_turns_counts_by_presence_not_by_how_short_the_turn_is():
    # "kate" labels 4 of 6 turns. Plain BM25 scores it highest in her shortest turn; flat_df counts it the same in
    # each (the median of its BM25 scores), so the other query words alone tell her turns apart
    idx = _index(
        [
            ("a", "Kate: ok", None),
            ("a", "Kate: I went skiing with my brother in the mountains all weekend", None),
            ("a", "Bob: that sounds cold", None),
            ("b", "Kate: lol", None),
            ("b", "Kate: my sister and I spent the whole afternoon at the museum downtown", None),
            ("b", "Bob: nice", None),
        ]
    )
    plain = bm25_scores(idx, ["kate"])
    assert plain[0] > plain[1] and plain[3] > plain[4]  # BM25: the shorter turn first
    holds = plain > 0
    median = np.median(plain[holds])
    ski = bm25_scores(idx, ["ski"])  # (the analyzer stems: skiing → ski)
    assert np.allclose(flat_scores(idx, ["kate", "ski"], 0.2), holds * median + ski)
    assert np.allclose(flat_scores(idx, ["kate", "ski", "kate"], 0.2), 2 * holds * median + ski)  # counts again
    assert np.allclose(flat_scores(idx, ["kate", "ski"], 0.7), bm25_scores(idx, ["kate", "ski"]))  # 4/6 < 0.7
    # no other query word in any turn: nothing else tells her turns apart, so BM25's own order stays
    assert np.allclose(flat_scores(idx, ["kate"], 0.2), plain)
    assert np.allclose(flat_scores(idx, ["kate", "hobbi"], 0.2), bm25_scores(idx, ["kate", "hobbi"]))
    assert np.allclose(flat_scores(idx, ["kate"], None), plain)


def test_turns_of_equal_score_can_share_a_rank_so_their_sessions_order_them():
    # t3 scores 2; t0, t1, t2 tie at 1. Sessions: s1 (t1 + t2 = 2) and s2 (t3 = 2) tie, s1 first (lower index);
    # s0 (t0 = 1) last. Ranked one by one, the earliest of the tie (t0) takes rank 2 and beats t2 (rank 4):
    # t0 = 1/62 + .5/63 > t2 = 1/64 + .5/61. Sharing rank 2, the session decides: t1 = t2 = 1/62 + .5/61 > t0
    scores = np.array([1.0, 1.0, 1.0, 2.0], dtype=np.float32)
    sessions = np.array([0, 1, 1, 2], dtype=np.int32)
    assert fuse(scores, sessions, session_weight=0.5)[0].tolist() == [3, 1, 0, 2]
    order, fused = fuse(scores, sessions, session_weight=0.5, shared_ranks=True)
    assert order.tolist() == [3, 1, 2, 0]
    assert np.allclose(fused, [1 / 61 + 0.5 / 62, 1 / 62 + 0.5 / 61, 1 / 62 + 0.5 / 61, 1 / 62 + 0.5 / 63])


def test_a_speakers_name_no_longer_puts_her_shortest_turns_first(store):
    # "What are Kate's hobbies?": no turn says "hobbies"; Bob's question does. Plain BM25 ranks Kate's "ok" and
    # "lol" (short) above her answer about skiing; counted by presence, her turns tie on her name and her answer's
    # session — the one that holds "hobbies" — puts it first among them
    add(store, "u", "chat", ("user", "Kate: ok"), ("user", "Kate: lol"), ("user", "Bob: hi"), at=T0)
    add(
        store,
        "u",
        "later",
        ("user", "Bob: what are your hobbies these days"),
        ("user", "Kate: I go skiing in the mountains most winters, and I paint"),
        at=T0 + DAY,
    )
    cfg = S.SearchConfig(neighbours=0, backfill=False, answer_weight=0)  # (the name alone: Bob's question and
    # Kate's answer would lift each other through "hobbies" and her name when every word counts as rarer)

    def kates(c):
        return [b.content.split("user: ")[1] for b in S.search(store, "u", "Kate's hobbies", top_k=5, config=c)][1:3]

    assert kates(cfg)[0].startswith("Kate: I go skiing")
    assert kates(cfg.with_(flat_df=None, shared_ranks=False)) == ["Kate: ok", "Kate: lol"]
    assert kates(cfg.with_(shared_ranks=False)) == ["Kate: ok", "Kate: lol"]  # presence alone: a tie, earlier first
    assert kates(cfg.with_(flat_df=None)) == ["Kate: ok", "Kate: lol"]  # shared ranks alone: no tie to share


def test_a_question_and_its_answer_lift_each_other_but_one_speakers_run_does_not():
    # "ski" is the rarer word. t0/t1: Bob asks, Kate answers — another speaker, adjacent, both match: each gains
    # weight × the other's score. t1/t2: Kate twice in a row — one voice, no lift. t2/t3: adjacent but in two
    # sessions — no lift. t3/t4: t4 does not match — no lift either way, nor t6/t7 (t6 matches nothing, before a match)
    idx = _index(
        [
            ("a", "Bob: do you like skiing", None),
            ("a", "Kate: I love skiing", None),
            ("a", "Kate: skiing again tomorrow at the lake with my brother", None),
            ("b", "Bob: skiing is fun", None),
            ("b", "Kate: ok", None),
            ("b", "Bob: the museum was closed", None),
            ("b", "Kate: hello", None),
            ("b", "Bob: skiing", None),
        ]
    )
    rarer = bm25_scores(idx, ["ski"])
    assert (rarer > 0).tolist() == [True, True, True, True, False, False, False, True]
    base = rarer + np.float32(0.5)  # another word's score, the same for every turn: the lift alone differs
    lifted = answer_scores(idx, base, rarer, 0.35)
    expected = base.copy()
    expected[0] += np.float32(0.35) * rarer[1]
    expected[1] += np.float32(0.35) * rarer[0]
    assert np.allclose(lifted, expected)
    assert lifted.dtype == base.dtype
    assert np.array_equal(answer_scores(idx, base, rarer, 0.0), base)  # weight 0: off


def test_a_turn_longer_than_answer_max_chars_is_not_lifted_but_lifts_its_partner():
    # an assistant's essay next to the user's question: the question gains from it, the essay gains nothing
    essay = "assistant: " + "Skiing is a sport of many kinds, from alpine to cross-country. " * 20
    idx = _index(
        [
            ("a", "user: how do I start skiing", None),
            ("a", essay, None),
            ("b", essay, None),  # and the essay first, a follow-up after it
            ("b", "user: and skiing for kids?", None),
        ]
    )
    rarer = bm25_scores(idx, ["ski"])
    lifted = answer_scores(idx, rarer, rarer, 1.0, max_chars=1000)
    assert len(essay) > 1000
    assert np.allclose(lifted, [rarer[0] + rarer[1], rarer[1], rarer[2], rarer[3] + rarer[2]])
    every = answer_scores(idx, rarer, rarer, 1.0)  # no limit: the essays are lifted too
    assert np.allclose(every, [rarer[0] + rarer[1], rarer[1] + rarer[0], rarer[2] + rarer[3], rarer[3] + rarer[2]])


def test_who_said_a_turn_is_read_once_per_index():
    idx = _index([("a", "Bob: skiing", None), ("a", "Kate: skiing", None), ("a", "Bob: skiing", None)])
    reads: list[int] = []

    class Counting(list):
        def __getitem__(self, pos):
            reads.append(pos)
            return list.__getitem__(self, pos)

    idx.turns = Counting(idx.turns)
    codes, sizes = idx.voices(np.array([0, 1, 2]))
    assert codes.tolist() == [0, 1, 0] and sizes.tolist() == [11, 12, 11]  # Bob, Kate, Bob
    assert sorted(reads) == [0, 1, 2]
    assert idx.voices(np.array([2, 1]))[0].tolist() == [0, 1]
    assert sorted(reads) == [0, 1, 2]  # kept: nothing read again


def test_the_maintained_index_reads_who_said_a_turn_without_its_text(store):
    # the maintained index's turns read their text lazily; voices_at reads role, label and length in one query and
    # leaves the turn cache alone — and agrees with Turn.voice on every turn, a label of 40 characters included
    long_label = "L" * 40
    add(
        store,
        "u",
        "s",
        ("user", "Kate: hi"),
        ("assistant", "no label here: just text"),
        ("user", f"{long_label}: the longest label"),
        ("user", "L" * 41 + ": too long to be a label"),
        ("user", "line one\nName: not a label"),
        ("user", "Ka\x00te: a NUL in the label"),  # SQLite's substr and length stop at a NUL
        ("user", "Kate: a NUL\x00 inside the text"),
        at=T0,
    )
    idx = S.user_index(store, "u").index
    lazy = idx.turns
    assert hasattr(lazy, "voices_at")  # the maintained index, its turns read lazily
    pos = np.arange(len(idx))
    codes, sizes = idx.voices(pos)
    assert len(lazy._state.turn_cache) == 0  # no text read
    turns = [idx.turns[p] for p in pos.tolist()]
    by_voice = {t.voice: c for t, c in zip(turns, codes.tolist(), strict=True)}
    assert len(by_voice) == len(set(codes.tolist())) == 5
    assert [t.voice for t in turns] == [
        ("user", "Kate"),
        ("assistant", "no label here"),
        ("user", long_label),
        ("user", None),
        ("user", None),
        ("user", "Ka\x00te"),
        ("user", "Kate"),
    ]
    assert codes[3] == codes[4]  # the same voice: a user without a label
    assert sizes.tolist() == [len(t.messages[0].content) for t in turns]


def test_who_said_a_turn_is_read_once_and_kept_across_an_add_but_not_a_forget(store):
    # voices_at keeps the speakers it read in the user's state, and an Add carries them to the next state (every
    # message is still there, unchanged): a search after an Add reads only the new message's; a forget assembles a
    # new state, which reads them again. Each time the maintained index pairs turns as the in-memory index does
    from refind_cli import lifecycle

    add(store, "u", "s1", ("user", "Bob: do you ski?"), ("user", "Kate: every winter, at Alta, I ski"), at=T0)
    add(store, "u", "s2", ("user", "Bob: ski trip?"), ("user", "Kate: ski in March"), at=T0 + DAY)
    cfg = S.SearchConfig(neighbours=0, backfill=False)
    statements: list[str] = []

    def voices_read() -> list[int]:  # the messages (seqs) whose role, label and length voices_at's queries read
        return sorted(int(n) for q in statements if "substr(content" in q for n in q.split("IN (")[1][:-1].split(","))

    def seqs() -> list[int]:
        return [m.seq for m in store.user_messages("u")]

    def ranked() -> list[tuple[str, float]]:
        found = S.search(store, "u", "ski alta march", top_k=6, config=cfg)
        memory = S.UserIndex(store.user_messages("u"), cfg).search("ski alta march", top_k=6, config=cfg)
        assert [(b.id, round(b.score, 9)) for b in found] == [(b.id, round(b.score, 9)) for b in memory]
        return [(b.id, round(b.score, 9)) for b in found]

    store.conn.set_trace_callback(statements.append)
    try:
        first = ranked()
        assert voices_read() == seqs()  # the four turns' speakers, each once
        statements.clear()
        # as a big user's: the turn cache (4,096 turns) holds few of the 1,000 turns the answer lift may pair
        S.user_index(store, "u", config=cfg).index.turns._state.turn_cache.clear()
        add(store, "u", "s3", ("user", "Bob: Alta again?"), at=T0 + 2 * DAY)
        assert ranked() != first  # the new turn ranks
        assert voices_read() == seqs()[-1:]  # the new message's only
        statements.clear()
        lifecycle.forget(store, "u", session_id="s1")
        ranked()
        assert voices_read() == seqs()  # read again: the three messages left, each once
    finally:
        store.conn.set_trace_callback(None)


def test_who_said_each_turn_follows_the_view_when_sessions_interleave(store):
    # a session written to again later is laid out with its other turns, so a view's positions are not the state's
    # rows: the voices kept by state row are read through the view, after an Add and in an as_of view too
    add(store, "u", "s1", ("user", "Bob: one"), at=T0)
    add(store, "u", "s2", ("user", "Kate: two two"), at=T0 + DAY)
    add(store, "u", "s1", ("assistant", "three three three"), at=T0 + 2 * DAY)

    def check(idx):
        pos = np.arange(len(idx))
        turns = [idx.turns[p] for p in pos.tolist()]
        assert idx.speakers(pos) == [t.voice for t in turns]
        assert idx.voices(pos)[1].tolist() == [len(t.messages[0].content) for t in turns]

    idx = S.user_index(store, "u").index
    assert idx.turns._layout.rows.tolist() == [0, 2, 1]  # s1's two turns, then s2's
    check(idx)
    before = max(m.recorded_at for m in store.user_messages("u"))
    time.sleep(0.01)  # the next message is recorded after ``before``
    add(store, "u", "s1", ("user", "Zed: four"), at=T0 + 3 * DAY)
    idx = S.user_index(store, "u").index
    assert idx.turns._layout.rows.tolist() == [0, 2, 3, 1]
    check(idx)
    earlier = S.user_index(store, "u", as_of=before).index  # a view without the new message
    assert earlier.turns._layout.rows.tolist() == [0, 2, 1]
    check(earlier)


def test_past_the_voices_a_state_keeps_a_voice_is_read_again_and_still_right(store, monkeypatch):
    # labels are free text: a state keeps codes for MAX_VOICES distinct voices, and reads any other each time
    from refind_cli import index_cache

    monkeypatch.setattr(index_cache, "MAX_VOICES", 2)
    add(
        store, "u", "s1", ("user", "Bob: one"), ("user", "Kate: two"), ("user", "Zed: three"), ("user", "Bob: 4"), at=T0
    )
    idx = S.user_index(store, "u").index
    pos = np.arange(len(idx))
    turns = [idx.turns[p] for p in pos.tolist()]
    for _ in range(2):
        assert idx.turns.voices_at(pos) == [(t.voice, len(t.messages[0].content)) for t in turns]
    assert idx.turns._state.voice_list == [("user", "Bob"), ("user", "Kate")]
    assert idx.turns._state.voice_codes.tolist() == [0, 1, -1, 0]


def test_only_the_best_turns_by_the_rarer_words_are_paired(monkeypatch):
    # with a pool of 2, only t2 and t3 (the two shortest, so best-scored, "ski" turns) may lift each other
    from refind_cli import index as I

    idx = _index(
        [
            ("a", "Bob: and skiing, do you like it in the cold winter months or not", None),
            ("a", "Kate: I love skiing in the high mountains every single winter", None),
            ("a", "Bob: skiing", None),
            ("a", "Kate: skiing", None),
        ]
    )
    rarer = bm25_scores(idx, ["ski"])
    assert set(np.argsort(-rarer)[:2].tolist()) == {2, 3}
    monkeypatch.setattr(I, "ANSWER_POOL", 2)
    lifted = answer_scores(idx, rarer, rarer, 1.0)
    assert np.allclose(lifted, rarer + np.array([0, 0, rarer[3], rarer[2]], dtype=np.float32))
    monkeypatch.setattr(I, "ANSWER_POOL", 1000)
    every = answer_scores(idx, rarer, rarer, 1.0)  # every pair: t1 and t2 take the larger of their two partners
    lift = [rarer[1], max(rarer[0], rarer[2]), max(rarer[1], rarer[3]), rarer[2]]
    assert np.allclose(every, rarer + np.array(lift, dtype=np.float32))


def test_a_question_whose_answer_matched_outranks_a_turn_that_only_repeats_the_words(store):
    # "ski winter": Bob asks "do you ski?" and Kate's answer says "winter"; in another session Bob only talks about
    # ski season. BM25 ranks his ski-season turn (two "ski" in a short turn) above his question; the question and
    # its answer lift each other, so the exchange comes first, together
    add(
        store,
        "u",
        "trip",
        ("user", "Bob: do you ski?"),
        ("user", "Kate: every winter, mostly at Alta with my two sisters and their dogs"),
        at=T0,
    )
    add(
        store,
        "u",
        "news",
        ("user", "Bob: ski season opened, the ski lifts are new"),
        ("user", "Bob: and I bought new ski boots and gloves for my cousin who visits in spring"),
        at=T0 + DAY,
    )
    cfg = S.SearchConfig(neighbours=0, backfill=False, flat_df=None)

    def order(c):
        return [b.content.split("user: ")[1][:12] for b in S.search(store, "u", "ski winter", top_k=4, config=c)]

    assert order(cfg.with_(answer_weight=0)) == ["Kate: every ", "Bob: ski sea", "Bob: do you ", "Bob: and I b"]
    assert order(cfg) == ["Kate: every ", "Bob: do you ", "Bob: ski sea", "Bob: and I b"]


KATE_MUSEUM = [  # "kate" labels 4 of 6 turns, "museum" is in 4 of 6 but in no label
    ("a", "Kate: the museum was closed", None),
    ("a", "Kate: I went to the science museum with my brother and we stayed all day", None),
    ("a", "Bob: which museum", None),
    ("b", "Kate: lol", None),
    ("b", "Kate: the art museum downtown has a new wing for modern sculpture", None),
    ("b", "Bob: nice", None),
]


def test_only_a_speakers_name_counts_by_presence_not_a_topic_word_in_most_turns():
    # "kate" labels 4 of 6 turns; "museum" is in 4 of 6 turns too, but in no label (a short history about one
    # topic). With names_only, the name counts by presence and the topic word keeps its BM25 scores
    idx = _index(KATE_MUSEUM)
    assert speaker_name(idx, "kate", np.array([0, 1, 3, 4]))
    assert not speaker_name(idx, "museum", np.array([0, 1, 2, 4]))
    assert not speaker_name(idx, "kate", np.array([], dtype=np.int64))
    kate, museum, art = (bm25_scores(idx, [t]) for t in ("kate", "museum", "art"))
    median = np.median(kate[kate > 0])
    # names only: "kate" by presence, "museum" (a topic word) and "art" by BM25 — and "museum" counts as rarer
    scores, rarer = flat_and_rarer_scores(idx, ["kate", "museum", "art"], 0.2, names_only=True)
    assert np.allclose(scores, (kate > 0) * median + museum + art)
    assert np.allclose(rarer, museum + art)
    # without it, both count by presence
    scores, rarer = flat_and_rarer_scores(idx, ["kate", "museum", "art"], 0.2)
    assert np.allclose(scores, (kate > 0) * median + (museum > 0) * np.median(museum[museum > 0]) + art)
    assert np.allclose(rarer, art)
    # a topic word alone with the name: the topic word tells the turns apart, so the name still counts by presence
    scores, _ = flat_and_rarer_scores(idx, ["kate", "museum"], 0.2, names_only=True)
    assert np.allclose(scores, (kate > 0) * median + museum)


def test_a_named_speakers_turns_are_lifted_by_their_other_words_score():
    # the same toy chat: each turn holding the name "kate" also scores name_lift times its rarer words' score more;
    # a turn without the name, and a turn with the name but no other word, gain nothing
    idx = _index(KATE_MUSEUM)
    kate = bm25_scores(idx, ["kate"])
    plain, rarer = flat_and_rarer_scores(idx, ["kate", "museum", "art"], 0.2, names_only=True)
    lifted, same_rarer = flat_and_rarer_scores(idx, ["kate", "museum", "art"], 0.2, names_only=True, lift=0.5)
    assert np.allclose(same_rarer, rarer)
    assert np.allclose(lifted, plain + (kate > 0) * rarer * 0.5)
    assert lifted[2] == plain[2] and lifted[3] == plain[3]  # Bob's "which museum"; Kate's "lol" (no other word)
    # without names_only "museum" counts by presence too, but lifts nothing: only the name does
    plain, rarer = flat_and_rarer_scores(idx, ["kate", "museum", "art"], 0.2)
    lifted, _ = flat_and_rarer_scores(idx, ["kate", "museum", "art"], 0.2, lift=0.5)
    assert np.allclose(lifted, plain + (kate > 0) * rarer * 0.5)
    plain, _ = flat_and_rarer_scores(idx, ["kate", "museum", "art"], 0.2, names_only=True)
    # a topic word in most turns is no name: nothing is lifted by it
    assert np.allclose(
        flat_and_rarer_scores(idx, ["museum", "art"], 0.2, names_only=True, lift=0.5)[0],
        plain - (kate > 0) * np.median(kate[kate > 0]),
    )


def test_the_speaker_a_question_names_comes_first_among_turns_saying_the_same(store):
    # "Does Kevin like football?": Paola's short turn about football outscores Kevin's longer one by BM25, and his
    # name (in most turns: a small presence bonus) does not make up for it; lifted by the name, his own turn comes first
    add(
        store,
        "u",
        "s1",
        ("user", "Kevin: hi"),
        ("user", "Paola: football tonight"),
        ("user", "Kevin: I watch football every weekend with friends from work, then we eat together"),
        ("user", "Paola: sounds fun"),
        ("user", "Kevin: yes it is"),
        ("user", "Kevin: ok"),
        ("user", "Kevin: see you"),
        ("user", "Kevin: lol"),
        at=T0,
    )
    cfg = S.SearchConfig(neighbours=0, backfill=False, answer_weight=0, session_fusion=False)

    def first(c):
        return S.search(store, "u", "Does Kevin like football?", top_k=1, config=c)[0].content

    assert "Paola: football tonight" in first(cfg.with_(name_lift=0))
    assert "Kevin: I watch football" in first(cfg)
    with pytest.raises(InvalidInput, match="name_lift must be a number 0 or more"):
        cfg.with_(name_lift=-0.1)


def test_a_name_said_more_by_others_than_in_labels_is_not_a_speakers_name():
    # Bob talks about Kate in most of the turns that hold "kate": a person talked about, not the speaker
    idx = _index(
        [
            ("a", "Bob: Kate called", None),
            ("a", "Bob: Kate is late again", None),
            ("a", "Bob: tell Kate", None),
            ("a", "Kate: hi", None),
        ]
    )
    assert not speaker_name(idx, "kate", np.array([0, 1, 2, 3]))
    assert speaker_name(idx, "bob", np.array([0, 1, 2]))


def test_a_speakers_name_is_judged_on_a_sample_that_a_repeating_pattern_cannot_fool():
    # 94 turns hold "kate": her own turn, then two of Bob's that name her, over and over, and hers last — 32 of them
    # her labels. An evenly spaced sample of 32 (a step of exactly 3) would see only her turns; the seeded random one
    # sees the mix
    spec = []
    for i in range(31):
        spec += [("a", f"Kate: note {i}", None), ("a", "Bob: ask Kate", None), ("a", "Bob: Kate again", None)]
    idx = _index([*spec, ("a", "Kate: last note", None)])
    holders = np.arange(94)
    assert not speaker_name(idx, "kate", holders)
    assert speaker_name(idx, "bob", np.flatnonzero(bm25_scores(idx, ["bob"]) > 0))  # in every label of his (62 turns)


def test_half_the_sample_named_is_enough():
    idx = _index(
        [("a", "Kate: hi", None), ("a", "Bob: Kate", None), ("a", "Kate: yo", None), ("a", "Bob: Kate?", None)]
    )
    assert speaker_name(idx, "kate", np.array([0, 1, 2, 3]))  # 2 of 4
    assert not speaker_name(idx, "kate", np.array([0, 1, 3]))  # 1 of 3


def test_names_only_ranks_alike_on_the_maintained_and_the_in_memory_index(store):
    # "museum" is in most of the user's turns but in no label; "kate" labels half. Asked "kate museum dinosaur", the
    # maintained index (its turns' speakers read by voices_at) and an index built in memory rank alike, with and
    # without names only — and the two settings score differently
    add(
        store,
        "u",
        "s1",
        ("user", "Kate: the museum"),
        ("user", "Bob: which museum was it, the one near the river with the long queue"),
        ("user", "Kate: the science museum, with the big dinosaur hall and the planetarium upstairs"),
        ("user", "Bob: museum"),
        at=T0,
    )
    add(store, "u", "s2", ("user", "Kate: a museum of modern art"), ("user", "Bob: nice"), at=T0 + DAY)
    on = S.SearchConfig(neighbours=0, backfill=False, answer_weight=0)
    off = on.with_(flat_names=False)
    memory = S.UserIndex(store.user_messages("u"), on)
    maintained = S.user_index(store, "u", config=on)
    assert hasattr(maintained.index.turns, "voices_at")

    def ids(index, cfg):
        return [(b.id, round(b.score, 9)) for b in index.search("kate museum dinosaur", top_k=6, config=cfg)]

    assert ids(maintained, on) == ids(memory, on)
    assert ids(maintained, off) == ids(memory, off)
    assert [i for i, _ in ids(maintained, on)] != [i for i, _ in ids(maintained, off)]  # "museum" by BM25, not presence
    assert [b.id for b in S.search(store, "u", "kate museum dinosaur", top_k=6, config=on)] == [
        i for i, _ in ids(memory, on)
    ]


def test_a_speaker_s_name_with_accents_counts_by_presence_once(store):
    # "José" gives two tokens (josé, jose: analyzer 7); both in every turn of José's, both names: counted by presence
    # twice, the name outweighed the topic, and "José" and "Jose" ranked differently (review of analyzer 7)
    lines = []
    for i in range(12):
        who = ["José", "Zoë", "Bob"][i % 3]
        topic = ["kayak trip", "coffee beans", "mountain bike", "a long day at the office today, nothing else"][i % 4]
        lines.append(("user", f"{who}: {topic} {i}", T0 + i * 60_000))
    add(store, "u", "s1", *lines)
    config = S.SearchConfig(backfill=False, session_fusion=False)

    def ranked(query: str) -> list[str]:
        return [b.id for b in S.search(store, "u", query, top_k=6, config=config)]

    assert ranked("What did José say about coffee?") == ranked("what did Jose say about coffee")


def test_filling_never_changes_what_a_list_shows_before_fill_after(store):
    # a real chat of short Chinese messages (fixtures/blind/chat_zh4, one of its two chats), stored in a real SQLite
    # file; every question asked with filling on and off: each block that starts within the first fill_after
    # characters of the joined list is the same block (what the planner reads of its hits), and filling did grow
    # something later on most lists (else this would test nothing)
    from conftest import ROOT

    from refind_cli import datasets
    from refind_cli.evaluate import JOIN, replay_sample

    sample = next(iter(datasets.load(ROOT / "fixtures" / "blind" / "chat_zh4" / "Chat_1.json")))
    replay_sample(store, sample)
    on = S.SearchConfig()
    off = on.with_(fill_chars=None)
    grown = 0
    for q in sample.questions:
        filled = S.search(store, sample.user_id, q.text, top_k=100, config=on)
        plain = S.search(store, sample.user_id, q.text, top_k=100, config=off)
        start = 0
        for a, b in zip(filled, plain, strict=False):
            if start >= on.fill_after:
                break
            assert (a.id, a.content, a.message_ids) == (b.id, b.content, b.message_ids), q.text
            start += len(a.content) + len(JOIN)
        grown += len(JOIN.join(x.content for x in filled)) > len(JOIN.join(x.content for x in plain))
    assert grown >= len(sample.questions) // 2


def _resumes(monkeypatch):
    """Wrap blocks._render so that every filling pass that starts from the first pass's state is also made from
    scratch, and the two must give the same list; returns the phases those passes started in."""
    from refind_cli import blocks as B

    seen = []
    real = B._render

    def both(*args, start=None, **kw):
        if start is None:
            return real(*args, **kw)
        budget = kw["spare"].chars  # (a pass spends its Spare: the pass from scratch gets the same budget)
        got = real(*args, start=start, **kw)
        again = real(*args, **{**kw, "spare": B.Spare(budget)})
        fields = [
            [(b.id, b.content, b.score, b.message_ids, b.anchor_lines, b.message_lines) for b in x]
            for x in (got, again)
        ]
        assert fields[0] == fields[1]
        seen.append(start.phase)
        return got

    monkeypatch.setattr(B, "_render", both)
    return seen


def test_the_filling_pass_starts_where_the_first_reached_fill_after(store, monkeypatch):
    # a real Chinese chat: every question, filling from the first pass's state and from scratch give the same list
    from conftest import ROOT

    from refind_cli import datasets
    from refind_cli.evaluate import replay_sample

    seen = _resumes(monkeypatch)
    sample = next(iter(datasets.load(ROOT / "fixtures" / "blind" / "chat_zh4" / "Chat_1.json")))
    replay_sample(store, sample)
    for q in sample.questions:
        S.search(store, sample.user_id, q.text, top_k=100)
    assert seen.count(0) >= len(sample.questions) // 2  # (the state kept while the ranked anchors were shown)


def test_the_filling_pass_can_start_among_the_deferred_anchors(monkeypatch):
    # by hand: the lead block "kayak" (13 characters as a list's text), then three long anchors deferred
    # (defer_chars 8); fill_after 20: the first deferred block starts at 13, the second past 20 — the state is kept
    # there, in the deferred phase, and the list made from it is the one made from scratch
    seen = _resumes(monkeypatch)
    idx = _index(
        [
            ("a", "kayak", None),
            ("a", "ok", None),
            ("b", "kayak trip one", None),
            ("b", "ok", None),
            ("c", "kayak trip two", None),
            ("c", "ok", None),
            ("d", "kayak trip three", None),
            ("d", "ok", None),
        ]
    )
    order, fused = np.array([0, 2, 4, 6]), np.array([4.0, 3.0, 2.0, 1.0], dtype=np.float32)
    scores = np.array([1.0, 0, 1.0, 0, 1.0, 0, 1.0, 0], dtype=np.float32)
    cfg = S.SearchConfig(neighbours=0, defer_chars=8, fill_after=20, block_floor=30, fill_chars=1000)
    got = render_blocks(idx, order, fused, top_k=10, cfg=cfg, scores=scores)
    assert seen == [1]
    assert [_lines_of(b) for b in got] == [
        ["kayak"],
        ["kayak trip one"],  # starts at 13: before fill_after, as it was
        ["kayak trip two", "ok"],  # past it: grown
        ["kayak trip three", "ok"],
    ]
