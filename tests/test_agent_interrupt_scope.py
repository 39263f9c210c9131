"""``model.interrupt`` is process-wide, but an interrupted `refind search --mode agent` run in-process (a test, a
program driving the CLI) is not the end of the process: the searches that follow ask the model again. Round 30's
interruption never ended — every later agent search of the process answered "interrupted" without one model call,
exit 0, and each retry's backoff was skipped. A real SIGTERM to this process during a model call held by the scripted
server on loopback, through the CliRunner (the main thread, where `refind search` installs its handlers)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from helpers import T0, add, agent_cli

pytestmark = pytest.mark.usefixtures("no_model_env")

SEARCH = '{"action": "search_chatrecord", "keywords": "hiking"}'


def test_a_search_after_an_interrupted_one_in_the_same_process_asks_the_model(cli, store, llm_server, db_path):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    asked, release = threading.Event(), threading.Event()

    def held() -> str:
        asked.set()
        release.wait(60)
        return '{"action": "finish_search"}'

    def terminate() -> None:
        if asked.wait(60):
            os.kill(os.getpid(), signal.SIGTERM)  # `refind search`'s handler takes it: the search is interrupted

    llm_server.play(SEARCH, held)
    threading.Thread(target=terminate, daemon=True).start()
    try:
        first = agent_cli(cli, llm_server, "--json")
    finally:
        release.set()
    assert first.exit_code == 143, first.output
    assert json.loads(first.stdout)["interrupted"] is True
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is not left installed

    llm_server.play(SEARCH, '{"action": "take_note", "results": [1]}', '{"action": "finish_search"}')
    asked_before = len(llm_server.requests)
    second = agent_cli(cli, llm_server, "--json")
    assert second.exit_code == 0, second.output
    found = json.loads(second.stdout)
    kinds = [e["kind"] for e in found["trace"]]
    assert found["interrupted"] is False and "interrupted" not in kinds, kinds  # was: start, interrupted, fallback
    assert len(llm_server.requests) - asked_before == 3 and found["path"] == "notes"

    from refind_cli import Memory

    with Memory(db_path, retention_days=None) as memory:  # the library's agent search likewise
        llm_server.play(SEARCH, '{"action": "finish_search"}')
        answer = memory.agent_search(
            "where did Caroline go hiking", user="alice", model="openai/scripted", api_base=llm_server.url
        )
    assert answer.interrupted is None and answer.llm_calls == 2


# a program that runs `refind mcp` in-process, then searches with the library: Ctrl-C ends the session, which
# interrupts its agent searches, then the program goes on, its signal handlers Python's own again
IN_PROCESS_MCP = """
import sys
from refind_cli import Memory
from refind_cli.cli import app

db, url = sys.argv[1], sys.argv[2]
app(["mcp", "--user", "alice", "--db", db, "--retention-days", "off", "--mode", "agent", "--model", "openai/scripted",
     "--api-base", url], standalone_mode=False)
with Memory(db, retention_days=None) as memory:
    answer = memory.agent_search("where did we go hiking", user="alice", model="openai/scripted", api_base=url)
import signal

handlers = {  # as the session found them: Python's own
    "SIGINT": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "SIGTERM": signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
}
print(json.dumps({"interrupted": answer.interrupted, "llm_calls": answer.llm_calls}), file=sys.stderr)
print(json.dumps(handlers), file=sys.stderr)
"""


@pytest.mark.slow  # a subprocess that imports the SDK and litellm
def test_a_search_after_an_in_process_mcp_session_stopped_by_ctrl_c_asks_the_model(tmp_path, llm_server) -> None:
    from test_agent_interrupted import INITIALIZE, INITIALIZED, _db, _env, _line
    from test_agent_interrupted import SEARCH as SEARCH_MEMORY

    db = _db(tmp_path)
    asked, release = threading.Event(), threading.Event()

    def held() -> str:
        asked.set()
        release.wait(60)
        return '{"action": "finish_search"}'

    llm_server.play(SEARCH, held, SEARCH, '{"action": "finish_search"}')  # then the library's search, after it
    argv = [sys.executable, "-c", "import json\n" + IN_PROCESS_MCP, str(db), llm_server.url]
    proc = subprocess.Popen(argv, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(_line(INITIALIZE) + _line(INITIALIZED) + _line(SEARCH_MEMORY))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        assert asked.wait(60), "the planner never asked the model a second time"
        proc.send_signal(signal.SIGINT)  # the session's search is interrupted
        ended = proc.wait(60)
        out, err = proc.stdout.read(), proc.stderr.read().decode()
    finally:
        release.set()
        proc.kill()
    assert ended == 0, err
    assert json.loads(json.loads(out.splitlines()[0])["result"]["content"][0]["text"])["interrupted"] is True
    # was {"interrupted": "Ctrl-C", "llm_calls": 0}: the session's end outlived it
    assert json.loads(err.splitlines()[-2]) == {"interrupted": None, "llm_calls": 2}
    # and the session left the process's Ctrl-C handler as it found it: it left asyncio.run's for the finished
    # session (the wire put it back after asyncio.run ended), so a later `refind search --mode agent` in the process
    # (signals.stopping, which takes over Python's own handler only) let Ctrl-C end it with its trace never stored
    assert json.loads(err.splitlines()[-1]) == {"SIGINT": True, "SIGTERM": True}
