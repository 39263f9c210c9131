"""`refind eval` through the CLI, on the small fixtures."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

from refind_cli import datasets

EVAL = FIXTURES / "eval"


def questions_in(path, **kw) -> int:
    return sum(len(s.questions) for s in datasets.load(path, **kw))


def test_eval_json_report(cli):
    path = EVAL / "locomo_small.json"
    result = cli("eval", str(path), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["format"] == "locomo"
    assert report["questions"] == questions_in(path)
    assert list(report["systems"]) == ["refind", "baseline"]
    for s in report["systems"].values():
        assert set(s["recall"]) == {"2000", "8000", "32000"}
        assert all(0.0 <= v <= 1.0 for v in s["recall"].values())
        assert s["by_category"]


def test_eval_tables(cli):
    result = cli("eval", str(EVAL / "longmemeval_small.json"), "--quiet")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Evidence recall" in out and "R@8k" in out and "p95 ms" in out
    assert "refind" in out and "baseline" in out
    assert "single-session-user" in out  # the per-category breakdown
    assert "abstention" in out  # what was left out is said


def test_eval_memdaily_folder_with_flags(cli):
    result = cli(
        "eval",
        str(EVAL / "memdaily"),
        "--json",
        "--limit",
        "4",
        "--top-k",
        "5",
        "--no-options",
        "--append",
        "Answer in one word.",
        "--baseline-tokenizer",
        "plain",
        "-V",
        "neighbours=0",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["format"] == "memdaily" and report["questions"] == 4
    s = report["settings"]
    assert (s["top_k"], s["options"], s["query_suffix"], s["tokenizer"], s["variants"]) == (
        5,
        False,
        "Answer in one word.",
        "plain",
        {"neighbours": "0"},
    )


def test_eval_role_faithful(cli):
    result = cli("eval", str(EVAL / "longmemeval_small.json"), "--role-faithful", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["settings"]["role_faithful"] is True


def test_eval_errors_are_one_line(cli):
    bad = cli("eval", str(EVAL / "locomo_small.json"), "--variant", "nope=1")
    assert bad.exit_code == 2 and "no such field" in bad.output  # invalid input
    wrong = cli("eval", str(EVAL / "locomo_small.json"), "--format", "memdaily")
    assert (
        wrong.exit_code == 2
        and "is this a MemDaily file? (read as one because of --format memdaily; its shape says LoCoMo" in wrong.output
    )  # invalid input
    missing = cli("eval", str(EVAL / "nope.json"))
    assert missing.exit_code == 2 and missing.output == f"error: {EVAL / 'nope.json'}: no such file or folder\n"
    mode = cli("eval", str(EVAL / "locomo_small.json"), "--mode", "fast")
    assert mode.exit_code == 2 and "unknown mode" in mode.output


def test_a_set_read_as_another_format_is_invalid_input_naming_the_item_and_field_in_words(cli):
    # exit 1 with "at [0]: KeyError: 'question_id'"; the README's exit codes say invalid input is 2
    path = EVAL / "locomo_small.json"
    r = cli("eval", str(path), "--format", "longmemeval")
    assert r.exit_code == 2
    assert r.output == (
        f"error: {path}: item 0 has no question_id: is this a LongMemEval file? (read as one because of --format "
        "longmemeval; its shape says LoCoMo: pass --format locomo, or leave --format out)\n"
    )  # the hint once read "(--format longmemeval)": advice to pass the very flag that had just failed


def test_a_set_of_no_known_shape_read_under_format_names_only_the_flag(cli, tmp_path):
    path = tmp_path / "odd.json"
    path.write_text('[{"question_id": "q1"}]', encoding="utf-8")  # no shape detect_format knows
    r = cli("eval", str(path), "--format", "longmemeval")
    assert r.exit_code == 2
    assert r.output.endswith("is this a LongMemEval file? (read as one because of --format longmemeval)\n"), r.output


def test_eval_realtalk_folder_by_format(cli):
    result = cli("eval", str(EVAL / "realtalk"), "--format", "realtalk", "--json", "--top-k", "5")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["format"] == "realtalk" and report["users"] == 2 and report["questions"] == 4
    assert set(report["systems"]["refind"]["by_category"]) == {"1 multi-hop", "2 temporal", "3 open-domain"}
    assert report["systems"]["refind"]["recall"]["2000"] == 1.0


def test_eval_title_on_one_line_where_the_terminal_is_wide(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    result = cli("eval", str(EVAL / "locomo_small.json"), "--quiet")
    assert result.exit_code == 0, result.output
    assert "(locomo, top_k 100, mode bm25)" in result.output.splitlines()[0]


@pytest.mark.usefixtures("no_model_env")
def test_eval_agent_mode_takes_model_and_api_base_as_search_does(cli, llm_server, monkeypatch):
    """`refind eval --mode agent` names --model in its advice: it takes --model and --api-base (and their
    variables), checked as `refind search` checks them, before anything is replayed."""
    llm_server.default = '{"thought": "enough", "action": "finish_search"}'
    path = str(EVAL / "locomo_small.json")
    flags = ("--mode", "agent", "--limit", "2", "--json")
    result = cli("eval", path, *flags, "--model", "openai/scripted", "--api-base", llm_server.url)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["questions"] == 2 and report["systems"]["refind"]["llm_calls"] == 2
    assert all(r["model"] == "scripted" for r in llm_server.requests) and len(llm_server.requests) == 2
    bad = cli("eval", path, *flags, "--model", "openai/scripted", "--api-base", "ftp://127.0.0.1/v1")
    assert bad.exit_code == 2 and "give --api-base / REFIND_API_BASE" in bad.output
    monkeypatch.setenv("REFIND_MODEL", "openai/scripted")
    monkeypatch.setenv("REFIND_API_BASE", llm_server.url)
    assert cli("eval", path, *flags).exit_code == 0
    assert len(llm_server.requests) == 4
