"""What a planner's trace shows when the model, the provider or a caller's ids are hostile: `refind search --trace`
and `refind inspect search ID` against the scripted server, a real database and the CLI."""

from __future__ import annotations

import json

import pytest
from helpers import T0, add, agent_cli
from llm_server import Fail, Tools

ESC = "\x1b]0;owned\x07\x1b[2J"  # retitles and clears a terminal that receives it raw
NOTE = '{"action": "take_note", "results": [1]}'
FINISH = '{"action": "finish_search"}'


pytestmark = pytest.mark.usefixtures("no_model_env")


def agent(cli, llm, *extra):
    return agent_cli(cli, llm, "--max-actions", "5", *extra)


def test_control_characters_from_the_model_the_provider_and_ids_never_reach_the_terminal(cli, store, llm_server):
    add(store, "alice", "hike" + ESC, ("user", "Caroline: I went hiking at Mount Rainier", T0))
    llm_server.play(
        json.dumps({"action": "search_chatrecord", "keywords": "hiking", "date_to": "2023/12/31" + ESC}),
        json.dumps({"action": "search_chatrecord", "keywords": "hiking"}),
        NOTE,
        FINISH,
    )
    live = agent(cli, llm_server, "--trace")
    assert live.exit_code == 0, live.output
    llm_server.play(Fail(400, "the provider says " + ESC))
    failed = agent(cli, llm_server, "--trace")
    assert failed.exit_code != 0
    listed = cli("inspect", "--json", "searches")
    ids = [row["id"] for row in json.loads(listed.output)["searches"]]
    assert len(ids) == 2
    shown = [cli("inspect", "search", i) for i in ids]
    for r in (live, failed, *shown):
        assert "\x1b" not in r.output and "\x07" not in r.output, r.output
    text = " ".join(" ".join(r.output for r in shown).split())  # rich wraps lines at spaces
    owned = "\\x1b]0;owned\\x07\\x1b[2J"  # shown escaped, not dropped
    assert f"2023/12/31{owned}" in text and f"session hike{owned}" in text and f"the provider says {owned}" in text


def test_a_planner_date_against_the_callers_bound_is_corrected_naming_that_bound(cli, store, llm_server):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    llm_server.play(
        json.dumps({"action": "search_chatrecord", "keywords": "hiking", "date_from": "2024/01/01"}),
        json.dumps({"action": "search_chatrecord", "keywords": "hiking", "date_to": "2023/01/01"}),
        FINISH,
    )
    r = agent(
        cli, llm_server, "--date-from", "2023-05-01", "--date-to", "2023-07-01", "--as-of", "2030-01-01", "--json"
    )
    assert r.exit_code == 0, r.output
    trace = json.loads(r.output)["trace"]
    start = trace[0]["data"]
    assert (start["date_from"], start["date_to"]) == ("2023-05-01T00:00:00.000Z", "2023-07-01T23:59:59.999Z")
    assert start["as_of"] == "2030-01-01T23:59:59.999Z"
    reasons = [e["data"]["reason"] for e in trace if e["kind"] == "correction"]
    caller = "date this search may cover (its caller set it)"
    assert reasons == [
        f"date_from 2024/01/01 is after 2023-07-01T23:59:59.999Z, the latest {caller}",
        f"date_to 2023/01/01 is before 2023-05-01T00:00:00.000Z, the earliest {caller}",
    ]  # it said "date_from 2024/01/01 is after date_to None": the planner gave no date_to
    shown = cli("inspect", "search", json.loads(r.output)["search_id"])
    flat = " ".join(shown.output.split())
    assert "only dates 2023-05-01T00:00:00.000Z → 2023-07-01T23:59:59.999Z" in flat
    assert "stored by 2030-01-01T23:59:59.999Z" in flat


def test_a_search_whose_trace_a_forget_removed_does_not_name_a_stored_trace(cli, store, db_path, llm_server):
    from refind_cli.lifecycle import forget
    from refind_cli.store import Store

    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))

    def forget_then_finish() -> str:  # the user forgets the session while the planner is still deciding
        other = Store(db_path, retention_days=None)
        forget(other, "alice", session_id="hike")
        other.close()
        return FINISH

    llm_server.play(json.dumps({"action": "search_chatrecord", "keywords": "hiking"}), NOTE, forget_then_finish)
    r = agent(cli, llm_server)
    assert r.exit_code == 0, r.output
    assert "None" not in r.output  # it said "agent search None … `refind inspect search None` shows its trace"
    assert "its trace was not stored" in " ".join(r.output.split())
    assert json.loads(cli("inspect", "--json", "searches").output)["searches"] == []


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("UPDATE searches SET trace = substr(trace, 1, 100)", "JSONDecodeError"),
        ("""UPDATE searches SET trace = '[{"step": 0, "t_ms": 0}]'""", "KeyError: 'kind'"),
        ("""UPDATE searches SET trace = '[{"kind": "start", "step": "x", "t_ms": 0}]'""", "ValueError"),
    ],
)
def test_a_stored_trace_damaged_on_disk_is_one_error_line_naming_the_search(cli, store, db_path, damage, why):
    import sqlite3

    from refind_cli.model import Reply
    from refind_cli.planner import agent_search

    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    found = agent_search(store, "alice", "hiking", top_k=5, model=lambda m: Reply(content=FINISH), model_name="m")
    with sqlite3.connect(db_path) as conn:
        conn.execute(damage)
    conn.close()
    for args in (("searches",), ("search", found.search_id), ("--json", "search", found.search_id)):
        r = cli("inspect", *args)  # a JSONDecodeError, KeyError or ValueError traceback
        assert r.exit_code == 10, r.output
        assert r.output.startswith(f"error: stored search {found.search_id!r} is damaged: its trace cannot be read (")
        assert why in r.output and "restore a copy made by `refind backup`" in r.output
    checked = cli("inspect", "--check", "--json")  # it answered ok
    assert checked.exit_code == 10
    (problem,) = json.loads(checked.stdout)["derived"]
    assert problem.startswith(f"stored search {found.search_id!r} is damaged: its trace cannot be read (")


def test_a_reply_holding_an_unpaired_surrogate_is_stored_with_a_replacement_character(cli, store, llm_server):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    # the server escapes it in its JSON ("\ud800"), which decodes to a Python string no UTF-8 can hold: in the
    # reply's text, and (escaped twice) inside the JSON object the reply writes
    llm_server.play(
        "\udcff no JSON here",
        json.dumps({"thought": "look \ud800", "action": "search_chatrecord", "keywords": "hiking \udcff"}),
        NOTE,
        FINISH,
    )
    r = agent(cli, llm_server, "--json", "--trace")  # a UnicodeEncodeError saving the trace: the search was lost
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    action = next(e for e in found["trace"] if e["kind"] == "action")
    assert action["data"]["thought"] == "look \ufffd" and action["data"]["args"]["keywords"] == "hiking \ufffd"
    assert found["data"] and found["search_id"] is not None
    (correction,) = (e for e in found["trace"] if e["kind"] == "correction")
    assert correction["data"]["reply"] == "\ufffd no JSON here"
    shown = cli("inspect", "--json", "search", found["search_id"])
    assert shown.exit_code == 0
    assert json.loads(shown.stdout)["events"] == found["trace"]  # stored as it ran


def test_a_key_the_provider_echoes_is_redacted_in_the_live_trace_and_the_json_as_in_the_stored_one(
    cli, store, llm_server, monkeypatch
):
    key = "local-secret-key-123456"
    monkeypatch.setenv("REFIND_API_KEY", key)
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))

    def echo() -> str:  # a provider (or a proxy) that quotes the request's credentials back
        headers = {k.lower(): v for k, v in llm_server.headers[-1].items()}
        return f"you sent {headers['authorization']}"

    llm_server.play(echo, FINISH)
    r = agent(cli, llm_server, "--json", "--trace")
    assert r.exit_code == 0, r.output
    assert key not in r.output  # stdout and stderr: it was printed in both
    (correction,) = (e for e in json.loads(r.stdout)["trace"] if e["kind"] == "correction")
    assert correction["data"]["reply"] == "you sent Bearer [redacted]"
    stored = cli("inspect", "--json", "search", json.loads(r.stdout)["search_id"])
    assert json.loads(stored.stdout)["events"] == json.loads(r.stdout)["trace"]


def test_a_key_the_model_echoes_json_escaped_is_redacted_in_its_reply_its_tool_call_and_the_stored_trace(
    cli, store, llm_server, monkeypatch
):
    key = "Zm9vYmFy/c2VjcmV0+a2V5"  # a base64 token: JSON may write its "/" as "\\/"
    monkeypatch.setenv("REFIND_API_KEY", key)
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    slashed, unicoded = key.replace("/", "\\/"), "\\u005a" + key[1:]  # both read back as the key itself
    llm_server.play(
        '{"thought": "the key is ' + slashed + '", "action": "search_chatrecord", "keywords": "hiking"}',
        Tools(("take_note", '{"results": [1], "thought": "' + unicoded + '"}')),
        FINISH,
    )
    r = agent(cli, llm_server, "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    stored = json.loads(cli("inspect", "--json", "search", found["search_id"]).stdout)["events"]
    for events in (found["trace"], stored):
        for text in strings(events):  # each field as a reader gets it: the reply's JSON escapes still in it
            assert not any(form in text for form in (key, slashed, unicoded)), text
        calls = [e["data"] for e in events if e["kind"] == "model_call"]
        assert calls[0]["reply"] == (
            '{"thought": "the key is [redacted]", "action": "search_chatrecord", "keywords": "hiking"}'
        )
        assert calls[1]["tool_calls"][0]["arguments"] == '{"results": [1], "thought": "[redacted]"}'


def test_a_key_holding_a_quote_or_a_backslash_is_redacted_where_the_model_echoes_it_in_json(
    cli, store, llm_server, monkeypatch
):
    # JSON always escapes '"' and '\\' (as \\" and \\\\): a configured key holding one was never redacted in a reply
    # that echoed it, once or twice escaped — the trace kept the key, which reads back from its JSON as itself
    key = 'Zm9v"YmFy\\c2VjcmV0'
    monkeypatch.setenv("REFIND_API_KEY", key)
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    once = json.dumps(key)[1:-1]
    twice = json.dumps(once)[1:-1]
    llm_server.play(
        '{"thought": "the key is ' + once + '", "action": "search_chatrecord", "keywords": "hiking"}',
        Tools(("take_note", '{"results": [1], "thought": "' + twice + '"}')),
        FINISH,
    )
    r = agent(cli, llm_server, "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    stored = json.loads(cli("inspect", "--json", "search", found["search_id"]).stdout)["events"]
    for events in (found["trace"], stored):
        for text in strings(events):
            assert not any(form in text for form in (key, once, twice)), text
        calls = [e["data"] for e in events if e["kind"] == "model_call"]
        assert calls[0]["reply"] == (
            '{"thought": "the key is [redacted]", "action": "search_chatrecord", "keywords": "hiking"}'
        )


def strings(data: object) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in strings(v)]
    return []


def test_a_stored_trace_holding_a_lone_surrogate_is_not_blamed_on_the_arguments(cli, store, llm_server):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    llm_server.play(FINISH)
    r = agent(cli, llm_server, "--json")
    assert r.exit_code == 0, r.output
    search_id = json.loads(r.stdout)["search_id"]
    # a trace stored before replies were cleaned of surrogates: its JSON escapes one, which no terminal can print
    with store.write():
        store.conn.execute("UPDATE searches SET trace = replace(trace, 'hiking', 'hiking \\ud800')")
    for args in (("inspect", "search", search_id), ("inspect", "--json", "search", search_id)):
        shown = cli(*args)
        said = " ".join(shown.output.split())
        assert shown.exit_code == 1, said  # was 2: "an argument holds bytes that are not UTF-8 text"
        assert "argument holds" not in said
        assert (
            "error: text that is not Unicode could not be written: it holds an unpaired UTF-16 surrogate ('\\ud800'"
            in said
        )
        assert "it came from stored data, a file or a model's reply, not from the arguments" in said


def test_a_refind_variable_holding_bytes_that_are_not_utf8_is_named(cli, store, llm_server, monkeypatch):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    llm_server.play(FINISH)
    monkeypatch.setenv("REFIND_MODEL", "openai/scripted-\udcff")  # what Python makes of the byte 0xff in a variable
    r = cli(
        "search", "where did Caroline go hiking", "--user", "alice", "--mode", "agent", "--api-base", llm_server.url
    )
    said = " ".join(r.output.split())
    assert r.exit_code == 2, said  # the model's name, stored with the search, cannot be encoded
    assert "error: REFIND_MODEL holds bytes that are not UTF-8 text ('\\udcff'): set it in UTF-8" in said
