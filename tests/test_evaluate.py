"""The evaluation: the recall-in-budget metric, the plain BM25 baseline, the run over a temporary database."""

from __future__ import annotations

import pytest
from conftest import FIXTURES
from helpers import T0, add

from refind_cli import datasets, search
from refind_cli.blocks import render_line
from refind_cli.errors import InvalidInput, RefindError
from refind_cli.evaluate import (
    BUDGETS,
    JOIN,
    BaselineBM25,
    EvalSettings,
    Hits,
    evaluate,
    found_within,
    parse_variants,
    percentile,
    search_config,
)

EVAL = FIXTURES / "eval"
LOCOMO = EVAL / "locomo_small.json"
MEMDAILY = EVAL / "memdaily"

# ---- the metric ----------------------------------------------------------------------------------------------


def test_found_within_counts_text_entirely_inside_the_budget():
    contents = ["a" * 10, "EVIDENCE"]
    end = len("a" * 10 + JOIN + "EVIDENCE")
    assert found_within(contents, ["EVIDENCE"], (end, end - 1)) == [1, 0]  # one character short: not found
    assert found_within(contents, ["EVIDENCE", "absent"], (end,)) == [1]
    assert found_within([], ["EVIDENCE"]) == [0] * len(BUDGETS)
    # the join counts against the budget too
    assert found_within(["x", "y"], ["x" + JOIN + "y"], (2 + len(JOIN),)) == [1]


def test_percentile_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) == 0.0
    assert percentile([3, 1, 2], 50) == 2


# ---- the baseline --------------------------------------------------------------------------------------------


def test_baseline_ranks_messages_and_renders_them_like_refind(store):
    add(
        store,
        "u",
        "s1",
        ("user", "Ana: my beagle Pepper loves the park"),
        ("user", "Ben: nice weather today"),
        ("user", "Ana: the beagle chewed my shoe"),
        at=T0,
    )
    hits = BaselineBM25()(store, user_id="u", query="what did the beagle Pepper do", top_k=10)
    msgs = {m.content: m for m in store.user_messages("u")}
    best = msgs["Ana: my beagle Pepper loves the park"]
    assert hits.contents[0] == render_line(best.said_at, best.role, best.content)
    assert len(hits.contents) == 2  # the weather message shares no word with the query
    (only,) = BaselineBM25()(store, user_id="u", query="beagle", top_k=1).contents  # top_k messages at most
    assert "beagle" in only


def test_baseline_no_match_stopwords_and_unknown_user(store):
    add(store, "u", "s1", ("user", "Ana: my beagle Pepper loves the park"), at=T0)
    baseline = BaselineBM25()
    assert baseline(store, user_id="u", query="zebra", top_k=5).contents == []
    assert baseline(store, user_id="u", query="the of and", top_k=5).contents == []
    assert baseline(store, user_id="nobody", query="beagle", top_k=5).contents == []


def test_baseline_sees_new_messages_of_the_user(store):
    baseline = BaselineBM25()
    add(store, "u", "s1", ("user", "Ana: my beagle Pepper loves the park"), at=T0)
    assert baseline(store, user_id="u", query="marathon", top_k=5).contents == []
    add(store, "u", "s2", ("user", "Ana: I ran a marathon"), at=T0)
    assert [
        c.endswith("I ran a marathon") for c in baseline(store, user_id="u", query="marathon", top_k=5).contents
    ] == [True]


def test_baseline_never_returns_another_users_message(store):
    """Negative test: another user's message sharing the session id and the query words never comes back."""
    add(store, "alice", "s1", ("user", "Alice: my beagle Pepper loves the park"), at=T0)
    add(store, "mallory", "s1", ("user", "Mallory: beagle Pepper beagle Pepper park"), at=T0, request_id="m1")
    for baseline in (BaselineBM25(), BaselineBM25("plain")):
        contents = baseline(store, user_id="alice", query="beagle Pepper park", top_k=10).contents
        assert contents and not any("Mallory" in c for c in contents)
        assert baseline(store, user_id="mallory", query="Alice", top_k=10).contents == []


def test_baseline_breaks_ties_at_the_top_k_cut_in_arrival_order(store):
    """Messages of equal score are taken in arrival order at the cut as well as above it, as ``rank`` counts them:
    argpartition took any of the tied ones, so a labelled message ranked 90th of a tie around the 100th was left
    out while later ties came back (LoCoMo's baseline 0.773 at 32k where these rules give 0.775)."""
    words = ["apple", "mango", "lemon", "melon", "grape", "peach", "olive", "onion", "basil", "cocoa"]
    texts = [f"Ana: beagle {a} {b}" for a in words for b in words[:5]]  # 50 messages of one score for "beagle"
    add(store, "u", "s1", *[("user", t) for t in texts[:20]], at=T0)
    add(store, "u", "s2", *[("user", t) for t in texts[20:40]], at=T0 + 1000)
    add(store, "u", "s3", *[("user", t) for t in texts[40:]], ("user", "Ben: a beagle"), at=T0 + 2000)
    baseline = BaselineBM25()
    best = baseline(store, user_id="u", query="beagle", top_k=1).contents
    assert [c.endswith("Ben: a beagle") for c in best] == [True]  # the shortest first
    for k in (2, 8, 26, 40):
        contents = baseline(store, user_id="u", query="beagle", top_k=k).contents
        assert [c.split("user: ", 1)[1] for c in contents[1:]] == texts[: k - 1]
        ranks = [baseline.rank(store, user_id="u", query="beagle", content=t) for t in texts[: k - 1]]
        assert ranks == list(range(2, k + 1))


def test_plain_tokenizer_baseline_misses_chinese_that_bigrams_find(store):
    add(store, "u", "t1", ("user", "我把雨伞放在了客厅里。"), ("user", "今天天气很好。"), at=T0)
    query = "雨伞放在哪里了？"
    assert BaselineBM25("analyze")(store, user_id="u", query=query, top_k=5).contents[0].endswith("客厅里。")
    assert BaselineBM25("plain")(store, user_id="u", query=query, top_k=5).contents == []


# ---- variants ------------------------------------------------------------------------------------------------


def test_variants_parse_to_the_fields_types():
    cfg = search_config(
        parse_variants(["neighbours=0", "session_fusion=off", "block_chars=300", "k1=1.5", "overlap=repeat"])
    )
    assert (cfg.neighbours, cfg.session_fusion, cfg.block_chars, cfg.k1, cfg.overlap) == (
        0,
        False,
        300,
        1.5,
        "repeat",
    )
    assert search_config(parse_variants(["defer_chars=none"])).defer_chars is None
    assert search_config() == search.SearchConfig()


@pytest.mark.parametrize(
    "items, message",
    [
        (["nope=1"], "no such field"),
        (["neighbours=two"], "expected a int"),
        (["session_fusion=maybe"], "expected a bool"),
        (["neighbours"], "KEY=VALUE"),
    ],
)
def test_bad_variants_are_refused(items, message):
    with pytest.raises(RefindError, match=message):
        search_config(parse_variants(items))


# ---- the run -------------------------------------------------------------------------------------------------


def _evidence_by_question(path, **kw):
    return {q.text: q for s in datasets.load(path, **kw) for q in s.questions}


def test_evaluate_scores_any_searcher_within_budgets():
    questions = _evidence_by_question(LOCOMO)
    seen_paths = []

    def padded(store, *, user_id, query, options, top_k):  # evidence after 3,000 characters of filler
        seen_paths.append(store.path)
        assert questions[query].user_id == user_id
        return Hits(["x" * 3_000, *questions[query].evidence])

    def nothing(store, *, user_id, query, options, top_k):
        return Hits([])

    report = evaluate(LOCOMO, systems={"padded": padded, "nothing": nothing})
    assert report["questions"] == len(questions) and report["users"] == 2
    padded_r = report["systems"]["padded"]["recall"]
    assert padded_r["2000"] == 0.0
    assert padded_r["8000"] == padded_r["32000"] == 1.0
    assert report["systems"]["nothing"]["recall"] == {str(b): 0.0 for b in BUDGETS}
    cats = report["systems"]["padded"]["by_category"]
    assert sum(c["questions"] for c in cats.values()) == len(questions)
    assert report["skipped"]["locomo category 5 (not scored)"] == 1
    # the temporary database is gone afterwards
    assert seen_paths and not seen_paths[0].exists() and not seen_paths[0].parent.exists()


def test_recall_is_averaged_per_question():
    questions = _evidence_by_question(LOCOMO)
    multi = [q for q in questions.values() if len(q.evidence) == 2]
    assert multi  # the fixture has a two-evidence question

    def first_only(store, *, user_id, query, options, top_k):  # one of each question's evidence
        return Hits([questions[query].evidence[0]])

    r = evaluate(LOCOMO, systems={"first": first_only})["systems"]["first"]["recall"]["2000"]
    expected = sum(1 / len(q.evidence) for q in questions.values()) / len(questions)
    assert r == pytest.approx(expected, abs=1e-4) and r < 1.0


def test_evaluate_passes_options_suffix_top_k_and_limit():
    calls = []

    def record(store, *, user_id, query, options, top_k):
        calls.append((query, options, top_k))
        return Hits([])

    evaluate(
        MEMDAILY,
        systems={"r": record},
        settings=EvalSettings(limit=3, top_k=7, query_suffix="Answer briefly.", warm_up=False),
    )
    assert len(calls) == 3
    assert all(q.endswith(" Answer briefly.") and opts and k == 7 for q, opts, k in calls)
    calls.clear()
    evaluate(MEMDAILY, systems={"r": record}, settings=EvalSettings(limit=2, options=False, warm_up=False))
    assert [opts for _, opts, _ in calls] == [(), ()]


def test_evaluate_default_systems_on_fixture():
    """refind's search() and the baseline, both asked every question, on a corpus small enough that top_k covers
    every message sharing a word with the question."""
    report = evaluate(LOCOMO, settings=EvalSettings(top_k=100))
    assert set(report["systems"]) == {"refind", "baseline"}
    for s in report["systems"].values():
        assert s["questions"] == report["questions"]
        assert s["recall"]["32000"] == 1.0
        assert 0 <= s["p50_ms"] <= s["p95_ms"]


def test_wrong_format_is_an_error_not_a_traceback():
    with pytest.raises(
        InvalidInput,
        match=r"is this a MemDaily file\? \(read as one because of --format memdaily; its shape says LoCoMo",
    ):
        evaluate(LOCOMO, fmt="memdaily", systems={})
    with pytest.raises(RefindError, match="unknown format"):
        evaluate(LOCOMO, fmt="csv", systems={})


def test_warm_up_asks_each_users_first_question_once_more_untimed():
    calls = []

    def record(store, *, user_id, query, options, top_k):
        calls.append(user_id)
        return Hits([])

    report = evaluate(LOCOMO, systems={"r": record})
    assert len(calls) == report["questions"] + report["users"]
    assert report["systems"]["r"]["questions"] == report["questions"]
    calls.clear()
    evaluate(LOCOMO, systems={"r": record}, settings=EvalSettings(mode="agent"))
    assert len(calls) == report["questions"]  # never in agent mode: a warm-up would cost LLM calls
