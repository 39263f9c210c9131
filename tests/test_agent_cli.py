"""`refind search --mode agent` and `refind inspect search(es)` through the CLI, against the scripted server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES
from helpers import DAY, T0, add, agent_app, agent_cli

SEARCH = '{"thought": "look for the hike", "action": "search_chatrecord", "keywords": "hiking Rainier"}'
NOTE = '{"thought": "this answers it", "action": "take_note", "results": [1]}'
FINISH = '{"thought": "enough", "action": "finish_search"}'


pytestmark = pytest.mark.usefixtures("no_model_env")


@pytest.fixture
def filled(store):
    add(
        store,
        "alice",
        "hike",
        ("user", "Caroline: I went hiking at Mount Rainier", T0),
        ("assistant", "Great hike!", T0 + 60_000),
    )
    add(store, "alice", "dog", ("user", "Caroline: my dog Rex", T0 + DAY))
    add(store, "bob", "b1", ("user", "Bob: hiking Rainier is my secret too", T0))
    return store


@pytest.mark.slow
def test_trace_shows_every_step_and_inspect_re_renders_it_exactly(cli, filled, llm_server):
    llm_server.play(SEARCH, NOTE, FINISH)
    live = agent_cli(cli, llm_server, "--trace")
    assert live.exit_code == 0, live.output
    for part in (
        "agent search",
        "step 1",
        "thought look for the hike",
        "action search_chatrecord",
        "1 hit for 'hiking Rainier'",
        "▶",
        "kept result 1",
        "the planner finished",
        "evidence",
        "3 LLM calls",
        "Mount Rainier",
    ):
        assert part in live.output, part
    search_id = live.output.strip().split("agent search ")[-1].split()[0]
    shown = cli("inspect", "search", search_id)
    assert shown.exit_code == 0
    start = shown.output.index("agent search ─")
    header, replay = shown.output[:start], shown.output[start:]
    assert search_id in header and "user alice" in header
    assert replay in live.output  # the stored trace renders exactly as it did live
    assert live.output.index(replay) == 0


def test_json_includes_the_trace_and_the_contract_items(cli, filled, llm_server):
    llm_server.play(SEARCH, NOTE, FINISH)
    out = agent_cli(cli, llm_server, "--json", "--trace")  # --trace goes to stderr with --json
    data = json.loads(out.stdout)
    assert [set(d) for d in data["data"]] == [{"id", "content", "score", "created_at"}]
    assert "Mount Rainier" in data["data"][0]["content"]
    assert data["path"] == "notes" and data["stats"]["llm_calls"] == 3
    assert next(e["kind"] for e in data["trace"]) == "start" and data["trace"][-1]["kind"] == "evidence"
    stored = json.loads(cli("inspect", "search", data["search_id"], "--json").stdout)
    assert stored["events"] == data["trace"] and stored["returned_ids"] == [d["id"] for d in data["data"]]


def test_inspect_searches_lists_per_user(cli, filled, llm_server, monkeypatch):
    llm_server.play(FINISH)
    assert agent_cli(cli, llm_server, "--json").exit_code == 0
    mine = json.loads(cli("inspect", "searches", "--user", "alice", "--json").stdout)["searches"]
    assert len(mine) == 1 and mine[0]["query"] == "where did Caroline go hiking" and mine[0]["llm_calls"] == 1
    assert json.loads(cli("inspect", "searches", "--user", "bob", "--json").stdout)["searches"] == []
    table = cli("inspect", "searches")  # (80 columns: what a row is found by, each column readable)
    # it was ten columns, the query two letters a line ("wh", "er", "e", "di", …)
    assert mine[0]["id"] in table.output and "where did Caroline" in table.output and "go hiking" in table.output
    said = " ".join(table.output.split())
    assert "narrow terminal: user, model, cost, ms and returned left out (--json lists every field)" in said
    monkeypatch.setenv("COLUMNS", "160")
    wide = cli("inspect", "searches")
    assert "where did Caroline go hiking" in wide.output and "openai/scripted" in wide.output
    assert "narrow terminal" not in wide.output
    missing = cli("inspect", "search", "nope")
    assert missing.exit_code == 4 and "no stored search" in missing.output


def test_missing_credentials_fail_fast_naming_both_fixes_never_bm25(cli, filled, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    r = cli("search", "hiking", "--user", "alice")  # default mode agent, default model openai/gpt-4o-mini
    assert r.exit_code == 5
    assert "OPENAI_API_KEY" in r.output and "--model" in r.output and "--mode bm25" in r.output
    assert "Rainier" not in r.output  # no silent bm25 answer
    assert json.loads(cli("inspect", "searches", "--json").stdout)["searches"] == []


def test_unknown_model_fails_fast(cli, filled):
    r = cli("search", "hiking", "--user", "alice", "--model", "no-such-provider-model")
    assert r.exit_code == 5 and "--mode bm25" in r.output


def test_provider_401_is_one_red_line(cli, filled, llm_server):
    from llm_server import Fail

    llm_server.play(Fail(401, "Incorrect API key provided"))
    r = agent_cli(cli, llm_server)
    assert r.exit_code == 5 and "Incorrect API key provided" in r.output and "Traceback" not in r.output


def test_a_failed_search_names_its_stored_id_and_with_json_prints_the_error_on_stdout(cli, filled, llm_server):
    from llm_server import Fail

    llm_server.play(Fail(401, "Incorrect API key provided"))
    r = agent_cli(cli, llm_server, "--json")
    assert r.exit_code == 5  # as without --json
    failed = json.loads(r.stdout)
    (stored,) = json.loads(cli("inspect", "searches", "--json").stdout)["searches"]
    message = failed["error"]["message"]
    assert failed == {"error": {"type": "model", "message": message}, "search_id": stored["id"]}
    assert message.startswith("model openai/scripted: the provider refused the credentials: HTTP 401: ")
    assert "Incorrect API key provided" in message
    said = " ".join(r.stderr.split())
    assert said.startswith(f"error: {message} agent search {stored['id']} failed — `refind inspect search ")
    shown = json.loads(cli("inspect", "search", failed["search_id"], "--json").stdout)
    assert shown["events"][-1]["kind"] == "error" and shown["events"][-1]["data"]["message"] == message

    llm_server.play(Fail(401, "Incorrect API key provided"))
    r = agent_cli(cli, llm_server)  # the human output names the stored search too
    (second,) = {row["id"] for row in json.loads(cli("inspect", "searches", "--json").stdout)["searches"]} - {
        stored["id"]
    }
    assert r.exit_code == 5 and r.stdout == ""
    assert f"agent search {second} failed — `refind inspect search {second}` shows its trace" in r.stderr

    r = cli("search", "hiking", "--user", "alice", "--model", "no-such-provider-model", "--json")
    assert r.exit_code == 5 and json.loads(r.stdout)["search_id"] is None  # failed before anything was stored
    assert json.loads(r.stdout)["error"]["type"] == "model" and "failed —" not in r.stderr


def test_the_python_apis_error_of_a_failed_search_carries_its_stored_id(tmp_path, llm_server):
    from llm_server import Fail

    from refind_cli.api import Memory
    from refind_cli.errors import ModelError

    with Memory(tmp_path / "m.db") as memory:
        memory.add("Caroline: I went hiking at Mount Rainier", user="alice", session="hike")
        llm_server.play(Fail(401, "Incorrect API key provided"))
        with pytest.raises(ModelError) as failed:
            memory.agent_search("hiking", user="alice", model="openai/scripted", api_base=llm_server.url)
    from refind_cli import trace
    from refind_cli.store import Store

    with Store(tmp_path / "m.db", retention_days=None) as store:
        stored = trace.load(store, failed.value.search_id)  # the failed search, stored under the id its error names
    assert stored.user_id == "alice" and stored.events[-1].kind == "error"


def test_budget_flag_and_variable(cli, filled, llm_server, monkeypatch):
    llm_server.play(SEARCH, SEARCH, SEARCH)
    data = json.loads(agent_cli(cli, llm_server, "--json", "--max-actions", "2").stdout)
    assert data["stats"]["llm_calls"] == 2 and len(llm_server.requests) == 2
    monkeypatch.setenv("REFIND_MAX_ACTIONS", "1")
    llm_server.play(SEARCH, SEARCH)
    data = json.loads(agent_cli(cli, llm_server, "--json").stdout)
    assert data["stats"]["llm_calls"] == 1


def test_skip_flag_and_variable_set_what_later_searches_skip(cli, filled, llm_server, monkeypatch, db_path):
    def skips(*extra):
        llm_server.play(SEARCH, SEARCH, FINISH)
        llm_server.requests.clear()
        data = json.loads(agent_cli(cli, llm_server, "--json", *extra).stdout)
        (start,) = (e["data"] for e in data["trace"] if e["kind"] == "start")
        second = [e["data"] for e in data["trace"] if e["kind"] == "search"][1]
        assert second["skip"] == start["skip"]
        return start["skip"], llm_server.requests[0]["messages"][0]["content"]

    skip, prompt = skips()
    assert skip == "session" and "Sessions already shown by an earlier search are skipped" in prompt
    skip, prompt = skips("--skip", "turn")
    assert skip == "turn" and "Hits already shown by an earlier search are skipped" in prompt
    monkeypatch.setenv("REFIND_AGENT_SKIP", "turn")
    assert skips()[0] == "turn"
    assert skips("--skip", "session")[0] == "session"  # the flag wins over the variable

    monkeypatch.setenv("REFIND_AGENT_SKIP", "sessions")  # a planner setting: bm25 mode has no planner
    assert cli("search", "hiking Rainier", "--user", "alice", "--mode", "bm25").exit_code == 0
    llm_server.requests.clear()
    r = agent_cli(cli, llm_server)
    assert r.exit_code == 2 and llm_server.requests == []  # refused before any model call
    assert "error: --skip / REFIND_AGENT_SKIP: must be session or turn, got 'sessions'" in r.stderr
    monkeypatch.delenv("REFIND_AGENT_SKIP")

    from refind_cli.api import Memory
    from refind_cli.errors import InvalidInput

    with Memory(db_path) as memory:
        llm_server.play(SEARCH, SEARCH, FINISH)
        answer = memory.agent_search(
            "hiking", user="alice", model="openai/scripted", api_base=llm_server.url, skip="turn"
        )
        assert answer.trace[0]["data"]["skip"] == "turn"
        with pytest.raises(InvalidInput, match="skip: must be 'session' or 'turn' \\(or None\\), got 'all'"):
            memory.agent_search("hiking", user="alice", model="openai/scripted", api_base=llm_server.url, skip="all")


def test_the_server_passes_its_skip_setting_to_the_planner(tmp_path, llm_server):
    from fastapi.testclient import TestClient

    from refind_cli import trace
    from refind_cli.store import Store

    db = tmp_path / "s.db"
    app = agent_app(db, llm_server, skip="turn")
    llm_server.play(SEARCH, FINISH)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        r = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
    assert r.status_code == 200, r.text
    with Store(db, retention_days=None) as store:
        (stored,) = trace.recent(store, user_id="alice")
    assert stored.events[0].data["skip"] == "turn"


def _imports_after(args_list, tmp_path):
    db = tmp_path / "x.db"
    code = (
        "import sys\nfrom refind_cli.cli import main\n"
        f"for args in {args_list!r}:\n"
        f"    sys.argv = ['refind', *args, '--db', {str(db)!r}] if args != ['--help'] else ['refind', '--help']\n"
        "    try:\n        main()\n    except SystemExit as e:\n        assert not e.code, (args, e.code)\n"
        "print('LOADED', [m for m in ('litellm', 'openai', 'mcp', 'fastapi') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_help_and_bm25_commands_never_import_litellm_mcp_or_fastapi(tmp_path):
    line = _imports_after(
        [
            ["--help"],
            ["add", "--file", str(FIXTURES / "conversations.jsonl"), "-q"],
            ["search", "Lisbon", "--user", "alice", "--mode", "bm25"],
            ["search", "--help"],
            ["mcp", "--help"],
            ["inspect", "searches"],
        ],
        tmp_path,
    )
    assert line == "LOADED []"
    # (checked by hand: the same probe prints ['litellm', 'openai'] once an agent-mode search has run)


def test_eval_agent_mode_runs_the_planner_and_counts_calls_and_tokens(cli, llm_server, monkeypatch):
    monkeypatch.setenv("REFIND_MODEL", "openai/scripted")
    monkeypatch.setenv("REFIND_API_BASE", llm_server.url)
    llm_server.default = SEARCH  # every question: keep searching until the budget runs out
    out = cli(
        "eval",
        str(FIXTURES / "eval" / "locomo_small.json"),
        "--mode",
        "agent",
        "--limit",
        "2",
        "--json",
        "--top-k",
        "5",
    )
    assert out.exit_code == 0, out.output
    refind = json.loads(out.stdout)["systems"]["refind"]
    assert refind["questions"] == 2
    assert refind["llm_calls"] == len(llm_server.requests) == 2 * 4  # the default budget, per question
    assert refind["tokens"] > 0


def test_inspect_searches_honours_db_and_json_given_before_the_subcommand(
    runner, cli, filled, db_path, llm_server, tmp_path
):
    from refind_cli.cli import app

    llm_server.play(SEARCH, NOTE, FINISH)
    assert agent_cli(cli, llm_server).exit_code == 0
    elsewhere = {"REFIND_DB": str(tmp_path / "other.db")}
    listed = runner.invoke(app, ["inspect", "--db", str(db_path), "--json", "searches"], env=elsewhere)
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.output)["searches"]
    shown = runner.invoke(app, ["inspect", "--db", str(db_path), "--json", "search", row["id"]], env=elsewhere)
    assert shown.exit_code == 0 and json.loads(shown.output)["id"] == row["id"]
    assert not (tmp_path / "other.db").exists()


def test_markup_in_questions_keywords_and_ids_is_shown_literally(cli, filled, llm_server):
    add(filled, "[/u]", "[/s]", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    llm_server.play('{"thought": "go", "action": "search_chatrecord", "keywords": "hiking Rainier [/k]"}', NOTE, FINISH)
    live = cli(
        "search",
        "where did Caroline go hiking [/q]",
        "--user",
        "[/u]",
        "--mode",
        "agent",
        "--model",
        "openai/scripted",
        "--api-base",
        llm_server.url,
        "--trace",
    )
    assert live.exit_code == 0, live.output
    assert "[/k]" in live.output and "[/s]" in live.output
    listed = cli("inspect", "searches")
    assert listed.exit_code == 0 and "[/" in listed.output  # the narrow table folds the cells
    search_id = live.output.strip().split("agent search ")[-1].split()[0]
    assert cli("inspect", "search", search_id).exit_code == 0


def test_an_empty_api_key_fails_fast_naming_both_fixes(cli, filled, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "")
    r = cli("search", "hiking", "--user", "alice", "--mode", "agent")
    assert r.exit_code == 5
    assert "OPENAI_API_KEY" in r.output and "--model" in r.output and "--mode bm25" in r.output


def test_a_bad_budget_stops_agent_mode_only(cli, filled, llm_server, monkeypatch):
    monkeypatch.setenv("REFIND_MAX_ACTIONS", "lots")  # a planner setting: bm25 mode has no planner
    r = cli("search", "hiking Rainier", "--user", "alice", "--mode", "bm25", "--json")
    assert r.exit_code == 0, r.output
    assert "Mount Rainier" in r.output
    for value in ("lots", "0", "51"):
        monkeypatch.setenv("REFIND_MAX_ACTIONS", value)
        r = agent_cli(cli, llm_server)
        assert r.exit_code == 2
        assert f"--max-actions / REFIND_MAX_ACTIONS: {value!r} is not a whole number from 1 to 50" in r.output
    assert llm_server.requests == []  # refused before any model call


def test_a_budget_of_one_action_is_said_in_the_singular_to_the_model_and_in_the_trace(cli, filled, llm_server):
    # "You have at most 1 actions", "budget of 1 actions used up", "1 LLM calls"
    llm_server.play(SEARCH)
    live = agent_cli(cli, llm_server, "--trace", "--max-actions", "1")
    assert live.exit_code == 0, live.output
    system, opening = (m["content"] for m in llm_server.requests[0]["messages"])
    assert "You have at most 1 action in total." in system and "You have 1 action. Reply" in opening
    said = " ".join(live.output.split())
    assert "budget 1 action · 5 hits per search" in said and "budget of 1 action used up" in said
    assert "· 1 LLM call ·" in said
    assert "1 LLM calls" not in said and "1 actions" not in said
