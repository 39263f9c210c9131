"""Why a labelled message was missed (misses.py, ``refind eval --misses``): each reason on a toy corpus ranked by
hand in a real SQLite file, the reasons summing to what recall misses on a real set, and the CLI's file and errors."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES
from helpers import DAY, T0, add

from refind_cli.evaluate import EvalSettings, evaluate, search_config
from refind_cli.misses import REASONS, Explainer

LONG = "Our kayak trip, the whole story: " + "the kayak trip of a lifetime, we paddled all day. " * 17  # 883 chars
TEXTS = [
    "kayak trip, kayak trip, kayak trip!",  # 1st: short, both words three times (the lead block)
    LONG,  # 2nd: over defer_chars (800), so it goes behind the shorter anchors
    "a kayak trip in June",  # 3rd: the second block
    "another kayak trip with friends",  # 4th: past a list of two
    "the trip home was slow and long and dull",  # 5th: one word, in a longer turn
    "the weather is sunny today",  # no word of the question
]


@pytest.fixture
def toy(store):
    for i, text in enumerate(TEXTS):  # one session each: no neighbours, and a day apart
        add(store, "u", f"s{i}", ("user", text, T0 + i * DAY))
    return store


def test_each_reason_on_a_toy_corpus_ranked_by_hand(toy):
    config = search_config((("neighbours", "0"),))
    explainer = Explainer(config, top_k=2)
    # the list of two: TEXTS[0] (lead), then TEXTS[2] (TEXTS[1] deferred); within 60 characters only the first block
    misses = explainer.explain(
        toy,
        user_id="u",
        question="Where did the kayak trip go?",
        category="1",
        evidence=[*TEXTS, "a message nobody said"],
        query="kayak trip",
        budget=60,
    )
    got = {m.evidence: m for m in misses}
    assert TEXTS[0] not in got  # its block is the first 60 characters: found
    deferred = got[LONG]
    assert deferred.reason == "deferred" and (deferred.rank, deferred.reached, deferred.matching) == (2, 3, 5)
    assert deferred.detail == (
        "a long turn (883 characters, over defer_chars 800) ranked 2: it went behind the shorter anchors, and the list "
        "had its 2 blocks first"
    )
    past = got[TEXTS[2]]  # block 2 starts at 60 + 2; its line at 62 + len("[2023-06-03 08:00] user: ") = 87
    assert past.reason == "past the budget" and past.offset == 87 and past.rank == 3
    assert past.detail == "returned at character 87 (block 2, its anchor), past 60"
    for text, rank in ((TEXTS[3], 4), (TEXTS[4], 5)):
        below = got[text]
        assert below.reason == "ranked below the list" and below.rank == rank
        assert below.detail == f"ranked {rank} of 5 matching turns; the list's 2 blocks reached rank 3"
    assert got[TEXTS[5]].reason == "no shared word" and got[TEXTS[5]].rank is None
    assert got["a message nobody said"].reason == "not stored"
    assert all(m.weight == 1 / 7 for m in misses)


def test_nothing_is_explained_when_everything_is_found(toy):
    explainer = Explainer(search_config(), top_k=10)
    found = explainer.explain(
        toy, user_id="u", question="q", category="1", evidence=TEXTS[:1], query="kayak trip", budget=8000
    )
    assert found == []


@pytest.mark.parametrize("budget", [2000, 8000])
def test_the_reasons_sum_to_what_recall_misses_on_a_real_set(budget):
    path = FIXTURES / "blind" / "chat_en5"
    seen = []
    report = evaluate(path, settings=EvalSettings(misses_at=budget), on_miss=seen.append)
    recall = report["systems"]["refind"]["recall"][str(budget)]
    by_reason = report["misses"]["by_reason"]
    assert set(by_reason) <= set(REASONS) and by_reason
    assert sum(r["recall"] for r in by_reason.values()) == pytest.approx(1 - recall, abs=1e-3)
    assert sum(r["messages"] for r in by_reason.values()) == len(seen)
    for miss in seen:
        assert miss.budget == budget
        if miss.reason == "past the budget":  # in the list, but not wholly within the budget
            assert miss.offset is not None and miss.offset + len(miss.evidence) > budget
        assert miss.plain_found is not None  # (the baseline ran)


def test_eval_misses_writes_one_json_line_per_missed_message(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # (a table's title wraps at a narrow terminal's width)
    out = tmp_path / "misses.jsonl"
    result = cli(
        "eval", str(FIXTURES / "eval" / "locomo_small.json"), "--json", "--misses", str(out), "--misses-at", "300"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert report["misses"]["budget"] == 300
    assert len(lines) == sum(r["messages"] for r in report["misses"]["by_reason"].values()) > 0
    assert {line["reason"] for line in lines} <= set(REASONS)
    assert all(line["budget"] == 300 and line["detail"] for line in lines)
    path = str(FIXTURES / "eval" / "locomo_small.json")
    table = cli("eval", path, "--quiet", "--misses", str(out), "--misses-at", "300")
    assert "Why refind missed labelled messages within 300 characters" in table.output
    assert "past the budget" in table.output and f"misses written to {out}" in table.output
    total = next(line for line in table.output.splitlines() if line.strip("│ ").startswith("all "))
    assert total.split("│")[2].strip() == f"{sum(r['recall'] for r in report['misses']['by_reason'].values()):.3f}"
    none = cli("eval", path, "--quiet", "--misses", str(out))  # (the default budget: 8,000)
    assert "refind missed no labelled message within 8,000 characters" in none.output
    assert out.read_text(encoding="utf-8") == ""


def test_a_failed_eval_leaves_the_misses_file_as_it_was(cli, tmp_path):
    out = tmp_path / "misses.jsonl"
    out.write_text("the last run's misses\n", encoding="utf-8")
    broken = tmp_path / "broken.json"
    broken.write_text('[{"sample_id": "x"}]', encoding="utf-8")  # no conversation: refused while loading
    result = cli("eval", str(broken), "--format", "locomo", "--misses", str(out))
    assert result.exit_code != 0
    assert out.read_text(encoding="utf-8") == "the last run's misses\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".misses")]  # no partial file beside it


def test_misses_flags_refused_with_one_line(cli, tmp_path):
    path = str(FIXTURES / "eval" / "locomo_small.json")
    alone = cli("eval", path, "--misses-at", "2000")
    assert alone.exit_code == 2
    assert "--misses-at sets the budget --misses explains: give --misses FILE too" in alone.output
    agent = cli("eval", path, "--mode", "agent", "--misses", str(tmp_path / "m.jsonl"))
    assert agent.exit_code == 2 and "--misses explains bm25 mode's ranking" in agent.output
    dash = cli("eval", path, "--misses", "-")
    assert dash.exit_code == 2 and "--misses: name a file to write (stdout prints the report)" in dash.output
    nowhere = cli("eval", path, "--misses", str(tmp_path / "no" / "m.jsonl"))
    assert nowhere.exit_code == 2 and f"--misses: folder {tmp_path / 'no'} does not exist" in nowhere.output
    assert not (tmp_path / "m.jsonl").exists()


def test_a_turn_shown_as_context_for_a_short_list_keeps_its_place(toy):
    # five turns match, a list of ten is asked for: the sixth, sharing no word, is shown after them (backfill)
    config = search_config((("neighbours", "0"),))
    misses = Explainer(config, top_k=10).explain(
        toy, user_id="u", question="q", category="1", evidence=[TEXTS[5]], query="kayak trip", budget=60
    )
    (miss,) = misses
    assert miss.reason == "past the budget" and "its anchor" in miss.detail
    assert (miss.rank, miss.matching, miss.reached) == (6, 5, 6)


def test_a_label_quoting_part_of_a_message_is_that_messages_and_a_straddling_one_says_where_it_ends(toy):
    config = search_config((("neighbours", "0"),))
    one = Explainer(config, top_k=1).explain(
        toy, user_id="u", question="q", category="1", evidence=["sunny today", TEXTS[2]], query="kayak trip", budget=100
    )
    got = {m.evidence: m for m in one}
    # recall counts a label found wherever the list holds it: part of a stored message is that message's
    assert got["sunny today"].reason == "no shared word"
    assert got[TEXTS[2]].detail == "ranked 3 of 5 matching turns; the list's 1 block reached rank 1"
    two = Explainer(config, top_k=2).explain(
        toy, user_id="u", question="q", category="1", evidence=[TEXTS[2]], query="kayak trip", budget=100
    )
    # its line starts at 87 (as above) and ends at 107: past a budget of 100, though it starts within it
    assert two[0].detail == "returned from character 87 to 107 (block 2, its anchor), past 100"


def test_misses_never_replace_the_set_they_read(cli, tmp_path):
    import shutil

    copy = tmp_path / "set.json"
    shutil.copy(FIXTURES / "eval" / "locomo_small.json", copy)
    before = copy.read_bytes()
    same = cli("eval", str(copy), "--misses", str(copy))
    assert same.exit_code == 2
    assert f"--misses: {copy} is the labelled set itself; name a file outside it, e.g. misses.jsonl" in same.output
    folder = tmp_path / "realtalk"
    shutil.copytree(FIXTURES / "eval" / "realtalk", folder)
    inside = cli("eval", str(folder), "--misses", str(folder / "m.jsonl"))
    assert inside.exit_code == 2 and "is inside the labelled set" in inside.output
    assert copy.read_bytes() == before and not (folder / "m.jsonl").exists()


def test_a_search_scored_with_nothing_missed_is_not_made_again(toy):
    # evaluate passes the contents it scored: when they hold every label within the budget the search is not made
    # again (here they are said to, though a list of two would leave TEXTS[3] out — so nothing is explained)
    explainer = Explainer(search_config((("neighbours", "0"),)), top_k=2)
    kwargs = {"user_id": "u", "question": "q", "category": "1", "evidence": [TEXTS[3]], "query": "kayak trip"}
    assert explainer.explain(toy, budget=8000, returned=f"user: {TEXTS[3]}", **kwargs) == []
    (miss,) = explainer.explain(toy, budget=8000, returned="user: something else", **kwargs)
    assert miss.reason == "ranked below the list"
