"""An agent search stopped by the process's end — an MCP client that quits (it closes stdin, then SIGTERMs the
server, as the SDK's stdio client does), SIGTERM or Ctrl-C — stores what the planner did so far as a trace marked
interrupted: what it searched, what it kept, why it ended. Real `refind mcp` / `refind search` subprocesses, litellm
over HTTP to the scripted server on loopback, which holds its reply until the test ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from test_mcp_start import INITIALIZE, INITIALIZED

from refind_cli import Memory

pytestmark = pytest.mark.slow  # subprocesses that import the SDK and litellm (seconds each)

SEARCH = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "search_memory", "arguments": {"query": "where did we go hiking", "top_k": 3}},
}


def _env() -> dict[str, str]:
    return {
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": os.environ.get("PATH", ""),
        "REFIND_MCP_CACHE": "off",
        "REFIND_API_KEY": "sk-test-placeholder",
    }


def _line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "agent.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("We went hiking on Mount Rainier last weekend", user="alice", session="a1", at="2023-05-02")
        memory.add("Lake Tahoe camping trip with the kids", user="alice", session="a2", at="2023-05-03")
    return db


def _held_after_a_search_and_a_note(llm_server: Any) -> tuple[threading.Event, threading.Event]:
    """The model searches, keeps result 1, then its third reply is held until ``release`` (set when the test ends)."""
    asked, release = threading.Event(), threading.Event()

    def held() -> str:
        asked.set()
        release.wait(120)
        return '{"action": "finish_search"}'

    llm_server.play(
        '{"thought": "look", "action": "search_chatrecord", "keywords": "hiking"}',
        '{"thought": "keep", "action": "take_note", "results": [1]}',
        held,
    )
    return asked, release


def _stored(db: Path) -> list[Any]:
    from refind_cli import trace
    from refind_cli.store import Store

    with Store(db, retention_days=None) as store:
        return trace.recent(store, user_id="alice")


def _assert_interrupted(db: Path, why: str) -> None:
    """One stored search: it searched, kept result 1, and was interrupted (``why``) while the model was asked."""
    (stored,) = _stored(db)
    kinds = [e.kind for e in stored.events]
    assert kinds[:1] == ["start"] and "search" in kinds and "note" in kinds, kinds
    (stop,) = [e for e in stored.events if e.kind == "interrupted"]
    assert stop.data["reason"] == why and stop.data["llm_calls"] == 2
    assert kinds[-1] == "evidence" and stored.events[-1].data["path"] == "notes"
    assert stored.returned_ids and stored.llm_calls == 2


def _mcp(tmp_path: Path, llm_server: Any) -> tuple[Path, subprocess.Popen[bytes]]:
    db = _db(tmp_path)
    argv = [sys.executable, "-m", "refind_cli", "mcp", "--user", "alice", "--db", str(db), "--retention-days", "off"]
    argv += ["--model", "openai/scripted", "--api-base", llm_server.url]
    proc = subprocess.Popen(argv, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_line(INITIALIZE) + _line(INITIALIZED) + _line(SEARCH))
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    return db, proc


@pytest.mark.parametrize(
    ("how", "code", "why"),
    [
        ("stdin closed, then SIGTERM", 143, "SIGTERM"),  # what the SDK's stdio client does when it quits
        ("SIGTERM", 143, "SIGTERM"),
        ("Ctrl-C", 130, "Ctrl-C"),
    ],
)
def test_an_mcp_client_that_quits_mid_agent_search_leaves_its_trace_stored_as_interrupted(
    tmp_path: Path, llm_server: Any, how: str, code: int, why: str
) -> None:
    # round 30: the search's trace was never stored — after the end of its input the server waited for the held model
    # (up to the deadline + 30 s), and the client's SIGTERM 2 s later (the SDK's stdio client) ended it at once; a
    # SIGTERM alone ended it at once too
    asked, release = _held_after_a_search_and_a_note(llm_server)
    db, proc = _mcp(tmp_path, llm_server)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        assert asked.wait(60), "the planner never asked the model a third time"
        if how.startswith("stdin closed"):
            proc.stdin.close()
            with pytest.raises(subprocess.TimeoutExpired):  # closing the input alone stops no search
                proc.wait(1)
        proc.send_signal(signal.SIGINT if how == "Ctrl-C" else signal.SIGTERM)
        ended = proc.wait(60)
        assert not release.is_set()  # the model is still held: the server ended without waiting for it
        out, err = proc.stdout.read(), proc.stderr.read().decode()
    finally:
        release.set()
        proc.kill()
    assert ended == code, err
    assert err == ""
    answer = json.loads(out.splitlines()[0])  # the search is answered with what the planner had
    assert answer["id"] == 2
    found = json.loads(answer["result"]["content"][0]["text"])
    assert found["interrupted"] is True
    assert [e["session_id"] for e in found["evidence"]] == ["a1"]
    _assert_interrupted(db, why)


def test_a_client_that_closes_its_input_gets_its_agent_search_answered_in_full(tmp_path: Path, llm_server: Any) -> None:
    # a client that pipes its requests and closes its input at once (`printf … | refind mcp`) is answered as one that
    # waits: the end of the input stops no search (only SIGTERM or Ctrl-C does)
    asked, release = _held_after_a_search_and_a_note(llm_server)
    db, proc = _mcp(tmp_path, llm_server)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        assert asked.wait(60), "the planner never asked the model a third time"
        proc.stdin.close()
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(1)
        release.set()  # the model answers: finish_search
        ended = proc.wait(60)
        out, err = proc.stdout.read(), proc.stderr.read().decode()
    finally:
        release.set()
        proc.kill()
    assert ended == 0, err
    found = json.loads(json.loads(out.splitlines()[0])["result"]["content"][0]["text"])
    assert "interrupted" not in found
    assert [e["session_id"] for e in found["evidence"]] == ["a1"]
    (stored,) = _stored(db)
    assert "interrupted" not in [e.kind for e in stored.events] and stored.llm_calls == 3


@pytest.mark.parametrize(("signum", "code", "why"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_refind_search_stopped_mid_agent_search_answers_and_stores_its_trace_as_interrupted(
    tmp_path: Path, llm_server: Any, signum: int, code: int, why: str
) -> None:
    # round 30: SIGTERM ended `refind search` at once and Ctrl-C with a traceback, the search's trace never stored
    db = _db(tmp_path)
    asked, release = _held_after_a_search_and_a_note(llm_server)
    argv = [sys.executable, "-m", "refind_cli", "search", "where did we go hiking", "--user", "alice", "--db", str(db)]
    argv += ["--mode", "agent", "--model", "openai/scripted", "--api-base", llm_server.url, "--json", "--top-k", "3"]
    proc = subprocess.Popen(argv, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert asked.wait(60), "the planner never asked the model a third time"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        assert not release.is_set()  # the model is still held: the search ended without waiting for it
    finally:
        release.set()
        proc.kill()
    assert proc.returncode == code, err
    found = json.loads(out)
    assert found["interrupted"] is True and found["deadline_passed"] is False
    assert [b["id"] for b in found["data"]] == _stored(db)[0].returned_ids
    assert found["search_id"] == _stored(db)[0].id
    _assert_interrupted(db, why)
    shown = subprocess.run(  # the stored trace renders the stop as --trace would have
        [sys.executable, "-m", "refind_cli", "inspect", "search", found["search_id"], "--db", str(db)],
        env={**_env(), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"interrupted ({why}): the planner stopped" in shown.stdout, shown.stderr


@pytest.mark.parametrize("when", ["while the model is asked", "while its trace waits for the lock"])
def test_an_interrupted_agent_search_gives_up_its_trace_while_another_process_holds_the_write_lock(
    tmp_path: Path, llm_server: Any, when: str
) -> None:
    # round 30 review: SQLite's busy wait runs in C, where no signal handler runs — a SIGTERM while the trace's store
    # waited for another process's write lock took effect only once the wait ended, at the search's deadline (120 s
    # by default; 30 here), the trace then unrecorded as "locked". Now the wait is taken in slices that look at the
    # interruption: it gives up at once, says why, and exits 143 with the answer printed.
    import sqlite3
    import time

    db = _db(tmp_path)
    asked, release = _held_after_a_search_and_a_note(llm_server)
    argv = [sys.executable, "-m", "refind_cli", "search", "where did we go hiking", "--user", "alice", "--db", str(db)]
    argv += ["--mode", "agent", "--model", "openai/scripted", "--api-base", llm_server.url, "--top-k", "3"]
    argv += ["--deadline", "30"]
    proc = subprocess.Popen(argv, env={**_env(), "COLUMNS": "300"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    holder = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        assert asked.wait(60), "the planner never asked the model a third time"
        holder.execute("BEGIN IMMEDIATE")  # another process's writer: holds the write lock until the test ends
        if when == "while its trace waits for the lock":
            release.set()  # the model answers finish_search; the search goes on to store its trace, and waits
            time.sleep(1)  # (not asserted: a SIGTERM before the wait begins meets the same wait, interrupted)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        release.set()
        proc.kill()
        holder.close()
    assert proc.returncode == 143, err
    text = out.decode()
    assert "its trace was not stored: interrupted while waiting for another process's lock" in text, text + err.decode()
    assert "Mount Rainier" in text  # the evidence is answered all the same
    assert _stored(db) == []  # nothing was written


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler of its own for SIGTERM now (Linux: its SigCgt mask)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the process's signal mask in /proc")
@pytest.mark.parametrize("closed", [True, False], ids=["stdin closed", "stdin open"])
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "Ctrl-C"])
def test_sigterm_while_agent_mode_mcp_starts_answers_and_stores_what_the_client_sent(
    tmp_path: Path, llm_server: Any, closed: bool, signum: int, code: int
) -> None:
    # round 30 review: agent mode imports litellm (seconds) before the wire handled SIGTERM — an SDK-style client that
    # sent initialize and a remember, closed its input and SIGTERMed got exit -15, nothing stored or answered; and a
    # handler installed earlier ended the input on the signal before reading the lines still in the pipe (initialize
    # unanswered). Now the first SIGTERM from the launch on is noted, what the client sent is read, answered and
    # stored, then the server exits 143. The signal is sent as soon as the process catches it: at its launch, before
    # litellm and the SDK load (the SigCgt mask and the mapped libraries in /proc, Linux only). Round 31: Ctrl-C then
    # raised KeyboardInterrupt inside an import — exit 130, nothing answered or stored; now it is noted as SIGTERM
    # is (exit 130). (Python catches SIGINT from its start: SIGTERM's bit says when both are noted.)
    remember = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "sent just before the client quit"}},
    }
    for attempt in range(5):  # (a launch this test's process slept through is not the case: another is tried)
        (folder := tmp_path / f"launch{attempt}").mkdir()
        db = _db(folder)
        argv = [sys.executable, "-m", "refind_cli", "mcp", "--user", "alice", "--db", str(db), "--retention-days"]
        argv += ["off", "--model", "openai/scripted", "--api-base", llm_server.url]
        proc = subprocess.Popen(argv, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin is not None
        try:
            proc.stdin.write(_line(INITIALIZE) + _line(INITIALIZED) + _line(remember))
            proc.stdin.flush()
            if closed:
                proc.stdin.close()
            while True:  # (the interpreter starting: Python's default would end it)
                assert proc.poll() is None
                loaded = Path(f"/proc/{proc.pid}/maps").read_text()  # read first: loaded before the handler
                if _catches_sigterm(proc.pid):
                    break
            # still starting: litellm (agent mode's import) and the SDK had not loaded pydantic's core yet — unless
            # this process went unscheduled between two looks while the launch went from before its handler to past
            # that import (a loaded machine: 1 run of this file in 5 failed here, round 31 review): launched again
            if "pydantic_core" in loaded:
                continue
            proc.send_signal(signum)
            ended = proc.wait(60)  # (the input left open, when it was: the signal alone ends it)
            assert proc.stdout is not None and proc.stderr is not None
            out, err = proc.stdout.read(), proc.stderr.read().decode()
            break
        finally:
            proc.kill()
            if not proc.stdin.closed:
                proc.stdin.close()
            proc.wait()
    else:
        pytest.fail("five launches were past litellm's import when first seen catching SIGTERM")
    assert ended == code, err
    answers = {m["id"]: m for m in map(json.loads, out.splitlines())}
    assert set(answers) == {1, 2}, out
    assert "result" in answers[1] and answers[2]["result"]["isError"] is False, answers
    with Memory(db, retention_days=None) as memory:
        assert "sent just before the client quit" in json.dumps(memory.export(user="alice"))


# served without a wire (no standard descriptors to hold, or Windows): SIGTERM must still end the server — the
# launch's handler (mcp_start.starting) only notes a first one, for a wire that never comes
NO_WIRE = """
import os, signal, sys, time, types
from refind_cli import mcp_start

class NoWire:
    def __init__(self, *args, **kwargs):
        raise OSError("no standard descriptors")

mcp_start.Wire = NoWire

def start(on_running):
    def run():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        print("served on after SIGTERM", flush=True)
    return run

with mcp_start.starting():
    mcp_start.serve(types.SimpleNamespace(mode=sys.argv[1], deadline_s=120.0), start)
"""


@pytest.mark.parametrize("mode", ["bm25", "agent"])
def test_sigterm_ends_an_mcp_server_served_without_a_wire(mode: str) -> None:
    out = subprocess.run([sys.executable, "-c", NO_WIRE, mode], env=_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGTERM, (out.returncode, out.stdout, out.stderr)
    assert "served on" not in out.stdout
