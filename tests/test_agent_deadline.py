"""An agent search ends by its deadline (--deadline / REFIND_AGENT_DEADLINE, Memory.agent_search(deadline=), the
server's --deadline): a slow model call is cut off, no retry starts past it, and the search returns what the planner
had — not an error. The scripted model delays its reply far past the deadline; no assertion times anything but "it
returned before that delay would have ended"."""

from __future__ import annotations

import json
import re
import time

import pytest
from helpers import T0, add, agent_app, agent_cli
from llm_server import Fail, Slow, Trickle

SEARCH = '{"action": "search_chatrecord", "keywords": "hiking"}'
NOTE = '{"action": "take_note", "results": [1]}'
FINISH = '{"action": "finish_search"}'
DELAY = 60.0  # seconds the scripted model sleeps before a reply: far past every deadline below

pytestmark = pytest.mark.usefixtures("no_model_env", "litellm_loaded")


@pytest.fixture(scope="module")
def litellm_loaded():
    """litellm imported before the tests' searches: the deadline counts its import (seconds in a new process), which
    a test that times the model's calls must not pay inside its own deadline."""
    import litellm  # noqa: F401


@pytest.fixture
def hikes(store):
    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    add(store, "alice", "camp", ("user", "Caroline: hiking and camping by Lake Tahoe", T0 + 86_400_000))
    return store


def test_a_slow_model_call_is_cut_off_and_the_search_returns_what_was_kept(cli, hikes, llm_server):
    llm_server.play(SEARCH, NOTE, Slow(DELAY, FINISH))
    began = time.monotonic()
    r = agent_cli(cli, llm_server, "--deadline", "2", "--json")
    assert time.monotonic() - began < DELAY / 2  # it waited on the model's reply
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    assert found["path"] == "notes" and len(found["data"]) == 1 and found["deadline_passed"] is True
    kinds = [e["kind"] for e in found["trace"]]
    assert kinds[-2:] == ["deadline", "evidence"] and "error" not in kinds
    stop = found["trace"][kinds.index("deadline")]["data"]
    # httpx's read timeout and the deadline's own clock end the call at the same instant: either may say so
    assert stop["deadline_s"] == 2 and "the search's deadline passed" in stop["message"]
    assert len(llm_server.requests) == 3  # no retry of the call the deadline cut off
    shown = " ".join(cli("inspect", "search", found["search_id"]).output.split())
    assert "deadline of 2 s passed: the planner stopped" in shown and "deadline 2 s" in shown


def test_a_provider_trickling_its_answer_is_cut_off_at_the_deadline(cli, hikes, llm_server):
    # a byte of the answer every 0.05 s: each read is quick (httpx's timeout bounds each read), the whole answer ~15 s
    llm_server.play(SEARCH, NOTE, Trickle(0.05, FINISH))
    r = agent_cli(cli, llm_server, "--deadline", "2", "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    assert found["path"] == "notes" and found["deadline_passed"] is True  # it waited for the whole answer
    stop = next(e for e in found["trace"] if e["kind"] == "deadline")["data"]
    assert "the search's deadline passed before the provider's answer was in (attempt 1)" in stop["message"]


def test_with_nothing_kept_the_deadline_returns_the_last_searchs_hits(cli, hikes, llm_server, monkeypatch):
    monkeypatch.setenv("REFIND_AGENT_DEADLINE", "1.5")
    llm_server.play(SEARCH, Slow(DELAY, NOTE))
    r = agent_cli(cli, llm_server)
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "Mount Rainier" in flat and "Lake Tahoe" in flat  # the hits the planner was looking at
    assert "stopped at its 1.5 s deadline" in flat


def test_no_retry_starts_past_the_deadline_and_only_errors_are_a_model_failure(cli, hikes, llm_server):
    # a 503 is retried after 1 s of backoff (then 2 s, 4 s): with under a second left, none may start — and a
    # provider that has answered the search nothing but errors is a model failure (exit 5, HTTP 502), as it is once
    # its retries are spent under a longer deadline (a probe of round 23: this answered BM25 on the question, exit 0)
    llm_server.play(Fail(503, "overloaded"), Fail(503, "overloaded"), FINISH)
    r = agent_cli(cli, llm_server, "--deadline", "1", "--json")
    assert r.exit_code == 5, r.output
    assert len(llm_server.requests) == 1
    said = " ".join(r.output.split())
    assert "HTTP 503" in said and "overloaded" in said
    # the deadline has not passed yet: the retry would start past it, and the message says so
    assert "(gave up after 1 attempt: a retry in 1 s would start past the search's deadline" in said


def test_a_provider_error_near_the_deadline_after_a_reply_ends_with_what_the_planner_had(cli, hikes, llm_server):
    # the model answered once, then a 503 with no time left for a retry: a deadline pass, not a model failure
    llm_server.play(SEARCH, Fail(503, "overloaded"), FINISH)
    r = agent_cli(cli, llm_server, "--deadline", "1", "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    assert len(llm_server.requests) == 2 and found["deadline_passed"] is True
    (stop,) = (e["data"] for e in found["trace"] if e["kind"] == "deadline")
    assert "HTTP 503" in stop["message"] and "a retry in 1 s would start past the search's deadline" in stop["message"]
    assert found["path"] == "last_search" and "Mount Rainier" in found["data"][0]["content"]


def test_a_retry_after_past_the_deadline_is_said_as_the_providers_wait_not_as_the_deadline(cli, hikes, llm_server):
    # a 429 asking 25 s with 10 s left: the planner stops at once, long before its deadline — the summary, the trace
    # and `refind inspect search` say the provider asked to wait past it (was: "stopped at its 10 s deadline")
    llm_server.play(SEARCH, Fail(429, "slow down", retry_after=25))
    began = time.monotonic()
    r = agent_cli(cli, llm_server, "--deadline", "10")
    assert r.exit_code == 0, r.output
    assert time.monotonic() - began < 9  # it did not wait for the deadline
    flat = " ".join(r.output.split())
    assert "stopped: the provider asked to wait 25 s, past its 10 s deadline —" in flat
    assert "stopped at its" not in flat
    llm_server.play(SEARCH, Fail(429, "slow down", retry_after=25))
    found = json.loads(agent_cli(cli, llm_server, "--deadline", "10", "--json").stdout)
    assert found["deadline_passed"] is True and found["path"] == "last_search"
    (stop,) = (e["data"] for e in found["trace"] if e["kind"] == "deadline")
    assert stop["retry_after_s"] == 25
    assert re.search(
        r"HTTP 429: .*slow down \(the provider asked to wait 25 s \(Retry-After\), past the search's deadline, "
        r"\d+\.\d s away; 1 attempt\)$",
        stop["message"],
    )
    shown = " ".join(cli("inspect", "search", found["search_id"]).output.split())
    assert "the provider asked to wait 25 s, past the deadline of 10 s: the planner stopped" in shown
    # a provider that answered nothing but the 429 is a model failure, its message saying the same
    llm_server.play(Fail(429, "slow down", retry_after=25))
    r = agent_cli(cli, llm_server, "--deadline", "10")
    assert r.exit_code == 5
    assert "(gave up after 1 attempt: the provider asked to wait 25 s (Retry-After), past the search's deadline" in (
        " ".join(r.output.split())
    )


@pytest.mark.parametrize("how", ["date", "ms"])
def test_a_retry_after_as_an_http_date_or_in_milliseconds_is_the_wait_it_says(cli, hikes, llm_server, how):
    # RFC 9110 lets Retry-After be an HTTP date, and OpenAI sends retry-after-ms: each was read as 0 (a retry after
    # the 1 s backoff, which the provider refuses again) — now a wait of 25 s, past a 10 s deadline, stops at once
    from email.utils import formatdate

    wait = (
        Fail(429, "slow down", retry_after=formatdate(time.time() + 25, usegmt=True))
        if how == "date"
        else Fail(429, "slow down", retry_after="1", retry_after_ms=25_000)  # the finer one wins, as OpenAI's does
    )
    llm_server.play(SEARCH, wait)
    began = time.monotonic()
    found = json.loads(agent_cli(cli, llm_server, "--deadline", "10", "--json").stdout)
    assert time.monotonic() - began < 9 and len(llm_server.requests) == 2  # no retry
    (stop,) = (e["data"] for e in found["trace"] if e["kind"] == "deadline")
    assert stop["retry_after_s"] in ((24, 25) if how == "date" else (25,))
    assert "(Retry-After), past the search's deadline" in stop["message"]


def test_retry_after_reads_seconds_dates_and_milliseconds():
    from types import SimpleNamespace

    from refind_cli.model import _retry_after

    def said(now: float = 1_000_000_000.0, **headers: str) -> float:
        named = {k.replace("_", "-"): v for k, v in headers.items()}
        return _retry_after(SimpleNamespace(response=SimpleNamespace(headers=named)), lambda: now)

    assert said(retry_after="7") == 7 and said(retry_after="2.5") == 2.5 and said() == 0
    # 1,000,000,000 s is Sun, 09 Sep 2001 01:46:40 GMT
    assert said(retry_after="Sun, 09 Sep 2001 01:47:10 GMT") == 30
    assert said(999_999_999.5, retry_after="Sun, 09 Sep 2001 01:47:10 GMT") == 31  # rounded up: the date's precision
    assert said(retry_after="Sun, 09 Sep 2001 01:47:10") == 30  # no zone: GMT, as RFC 9110's dates are
    assert said(retry_after="Sun, 09 Sep 2001 01:46:00 GMT") == 0  # already past
    assert said(retry_after="soon") == 0 and said(retry_after="-3") == 0 and said(retry_after="nan") == 0
    assert said(retry_after_ms="1500") == 1.5 and said(retry_after_ms="1500", retry_after="9") == 1.5
    assert said(retry_after_ms="soon", retry_after="9") == 9  # an unreadable retry-after-ms leaves Retry-After


def test_memory_and_the_server_keep_their_deadline(tmp_path, db_path, llm_server):
    from fastapi.testclient import TestClient

    from refind_cli.api import Memory

    with Memory(tmp_path / "m.db") as memory:
        memory.add("Caroline: I went hiking at Mount Rainier", user="alice", session="hike")
        llm_server.play(SEARCH, Slow(DELAY, NOTE))
        answer = memory.agent_search(
            "hiking", user="alice", model="openai/scripted", api_base=llm_server.url, deadline=1
        )
    assert answer.deadline_passed and answer.path == "last_search" and len(answer.evidence) == 1

    app = agent_app(db_path, llm_server, deadline_s=1.0)
    llm_server.play(SEARCH, Slow(DELAY, NOTE))
    began = time.monotonic()
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
    assert time.monotonic() - began < DELAY / 2
    assert r.status_code == 200, r.text
    assert "Mount Rainier" in r.json()["data"][0]["content"]


@pytest.mark.parametrize("value", [True, "3", 0, -1, float("nan"), float("inf"), 86_401])
def test_memory_refuses_a_deadline_that_is_not_seconds_from_above_0_to_a_day(tmp_path, llm_server, value):
    from refind_cli.api import Memory
    from refind_cli.errors import InvalidInput

    with Memory(tmp_path / "m.db") as memory:
        memory.add("Caroline: I went hiking at Mount Rainier", user="alice", session="hike")
        with pytest.raises(InvalidInput) as refused:
            memory.agent_search(
                "hiking", user="alice", model="openai/scripted", api_base=llm_server.url, deadline=value
            )
    assert refused.value.message == f"deadline: must be a number of seconds above 0 and at most 86,400, got {value!r}"
    assert llm_server.requests == []


def test_a_bad_deadline_stops_agent_mode_only(cli, hikes, llm_server, monkeypatch, tmp_path):
    monkeypatch.setenv("REFIND_AGENT_DEADLINE", "soon")  # a planner setting: bm25 mode has no planner
    r = cli("search", "hiking", "--user", "alice", "--mode", "bm25")
    assert r.exit_code == 0 and "Mount Rainier" in r.output
    for value, why in (
        ("soon", "'soon' is not a number"),
        ("0", "must be positive, got '0'"),
        ("1e9", "must be at most 86,400, got '1e9'"),
    ):
        monkeypatch.setenv("REFIND_AGENT_DEADLINE", value)
        r = agent_cli(cli, llm_server)
        assert r.exit_code == 2, r.output
        assert f"--deadline / REFIND_AGENT_DEADLINE: {why}" in r.output
    monkeypatch.delenv("REFIND_AGENT_DEADLINE")
    missing = tmp_path / "missing" / "refind.db"  # never opened: the deadline is refused first
    r = cli("serve", "--mode", "agent", "--db", str(missing), "--port", "0", "--deadline", "nan")
    assert r.exit_code == 2 and "--deadline / REFIND_AGENT_DEADLINE: must be a finite number, got 'nan'" in r.output
    r = cli("eval", str(missing), "--mode", "agent", "--deadline", "-1")
    assert r.exit_code == 2 and "--deadline / REFIND_AGENT_DEADLINE: must be positive, got '-1'" in r.output
    assert llm_server.requests == []  # refused before any model call


def test_a_model_of_ones_own_is_not_called_past_the_deadline(store):
    from refind_cli.model import Reply
    from refind_cli.planner import agent_search

    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    calls = []

    def slow(messages):  # a ``complete`` that does not read model.time_left(): each reply outlasts the deadline
        calls.append(messages)
        time.sleep(0.6)
        return Reply(content=SEARCH)

    found = agent_search(store, "alice", "hiking", top_k=5, model=slow, model_name="m", max_actions=50, deadline_s=0.5)
    assert len(calls) == 1 and found.deadline_passed and found.path == "last_search"
    (stop,) = (e for e in found.events if e.kind == "deadline")
    assert "message" not in stop.data  # it passed between actions, not during a call


def test_eval_gives_its_planner_the_deadline(cli, llm_server, monkeypatch):
    from conftest import FIXTURES

    monkeypatch.setenv("REFIND_MODEL", "openai/scripted")
    monkeypatch.setenv("REFIND_API_BASE", llm_server.url)
    llm_server.play(Slow(DELAY, SEARCH))
    path = FIXTURES / "eval" / "locomo_small.json"
    began = time.monotonic()
    r = cli("eval", str(path), "--mode", "agent", "--limit", "1", "--json", "--deadline", "1")
    assert time.monotonic() - began < DELAY / 2  # it waited on the model
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["questions"] == 1 and len(llm_server.requests) == 1  # cut off, not retried


def test_loading_the_model_counts_against_the_deadline(cli, hikes, llm_server, monkeypatch, tmp_path):
    # litellm's import takes seconds in a new process (4–5 s measured here): "the whole search" includes it. A model
    # that took longer to load than the deadline leaves no time for a call: BM25 on the question, deadline passed
    from refind_cli import model
    from refind_cli.api import Memory

    real = model.from_env

    def slow_to_load(*args, **kwargs):
        time.sleep(1.2)
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "from_env", slow_to_load)
    llm_server.play(SEARCH, NOTE, FINISH)
    r = agent_cli(cli, llm_server, "--deadline", "1", "--json")
    assert r.exit_code == 0, r.output
    found = json.loads(r.stdout)
    assert found["deadline_passed"] is True and found["path"] == "direct_bm25" and found["data"]
    assert llm_server.requests == []  # no call started past the deadline
    stop = next(e for e in found["trace"] if e["kind"] == "deadline")
    assert stop["t_ms"] >= 1000 and stop["data"]["ready_ms"] >= 1000  # timed from the question, and said so
    shown = " ".join(cli("inspect", "search", found["search_id"]).output.split())
    assert re.search(r"it began \d+\.\d s after the question: loading the model, reading the index", shown)

    with Memory(tmp_path / "m.db") as memory:
        memory.add("Caroline: I went hiking at Mount Rainier", user="alice", session="hike")
        answer = memory.agent_search(
            "hiking", user="alice", model="openai/scripted", api_base=llm_server.url, deadline=1
        )
    assert answer.deadline_passed and answer.path == "direct_bm25" and len(answer.evidence) == 1
    assert llm_server.requests == []


def test_the_planner_counts_its_deadline_from_when_the_search_was_asked(store):
    from refind_cli.model import Reply
    from refind_cli.planner import agent_search

    add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    calls = []

    def complete(messages):
        calls.append(messages)
        return Reply(content=FINISH)

    asked = time.perf_counter() - 3.0  # asked 3 s ago (a server's queue, a slow start): a 2 s deadline is past
    found = agent_search(
        store, "alice", "hiking", top_k=5, model=complete, model_name="m", deadline_s=2, asked_at=asked
    )
    assert calls == [] and found.deadline_passed and found.path == "direct_bm25"
    found = agent_search(
        store, "alice", "hiking", top_k=5, model=complete, model_name="m", deadline_s=8, asked_at=asked
    )
    assert len(calls) == 1 and not found.deadline_passed  # 5 s left: the call was made


def test_the_server_counts_a_wait_for_a_database_connection_against_the_deadline(db_path, llm_server, monkeypatch):
    # the search's deadline counts from the request: a wait for a searcher thread or a pooled connection is part of it
    from contextlib import contextmanager

    from fastapi.testclient import TestClient

    from refind_cli.server.dbpool import StorePool

    real = StorePool.store

    @contextmanager
    def slow(self):
        time.sleep(1.2)
        with real(self) as store:
            yield store

    app = agent_app(db_path, llm_server, deadline_s=1.0)
    llm_server.play(SEARCH, NOTE, FINISH)
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        monkeypatch.setattr(StorePool, "store", slow)
        r = client.post("/v1/memories/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
    assert r.status_code == 200, r.text
    assert "Mount Rainier" in r.json()["data"][0]["content"]  # BM25 on the question
    assert llm_server.requests == []  # no time was left for a model call


# A model call the deadline cut short is left running in its daemon thread (model._within). On litellm's first call
# that thread is mostly inside Python's import system (litellm imports lazily); the interpreter's shutdown stopped it
# there holding the import lock, and a finalizer that imports (litellm's AsyncHTTPHandler.__del__, run as litellm's
# modules are cleared) then waited on it for ever: `refind search --mode agent` printed its answer and never exited
# (a probe: 14 minutes). Both processes below have a model call the deadline cut short while it is inside an import
# (it holds the import lock for as long as HELD says), and keep an object in a module that imports as it is finalized.
_CUT_SHORT_INSIDE_AN_IMPORT = r"""
def inside_an_import():
    _imp.acquire_lock()
    time.sleep(HELD)
    _imp.release_lock()

try:
    model._within(0.1, inside_an_import)
except model._Overran:
    pass

class ImportsWhenFinalized:
    def __del__(self, _import=__import__):
        try:
            _import("refind_no_such_module")
        except ImportError:
            pass

model._imports_when_finalized = ImportsWhenFinalized()
"""


def _ended(script: str, *, timeout: float):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, cwd=root)


def test_a_process_ends_though_a_model_call_the_deadline_cut_short_holds_the_import_lock():
    script = (
        "import _imp, sys, time\nfrom refind_cli.cli import main\nfrom refind_cli import model\n"
        'sys.argv = ["refind", "--version"]\n'
        "try:\n    main()  # once first: what the command imports is imported before the lock is taken\n"
        "except SystemExit:\n    pass\n" + _CUT_SHORT_INSIDE_AN_IMPORT.replace("HELD", "3600") + "main()\n"
    )
    began = time.monotonic()
    out = _ended(script, timeout=120)  # (the old code waited as long as the lock's holder: an hour)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("refind ") == 2  # the second command's output was flushed before the process ended
    assert time.monotonic() - began < 60


def test_a_process_using_the_api_ends_though_a_model_call_the_deadline_cut_short_holds_the_import_lock():
    # no CLI to end the process at once: its exit waits for the call (model._wait_at_exit), which lets go in 2 s,
    # before the shutdown stops it inside the import
    script = "import _imp, time\nfrom refind_cli import model\n" + _CUT_SHORT_INSIDE_AN_IMPORT.replace("HELD", "2")
    out = _ended(script + 'print("answered")\n', timeout=60)  # (without the wait at exit: for ever)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "answered\n"


def test_a_call_the_deadline_cut_short_counts_as_running_until_it_ends():
    import threading

    from refind_cli import model

    release = threading.Event()
    with pytest.raises(model._Overran):
        model._within(0.05, release.wait)
    assert model.calls_left_running()
    release.set()
    until = time.monotonic() + 10
    while model.calls_left_running() and time.monotonic() < until:
        time.sleep(0.01)
    assert not model.calls_left_running()


def test_a_retry_after_past_the_cap_fails_at_once_saying_what_the_provider_asked(cli, hikes, llm_server):
    # a 429 asking 120 s, no deadline near: the retry waited refind's 30 s cap, and the provider, asked again 90 s
    # early, refused it again. Now it fails at once (exit 5), saying what the provider asked and the cap
    llm_server.play(Fail(429, "slow down", retry_after=120), FINISH)
    began = time.monotonic()
    r = agent_cli(cli, llm_server, "--deadline", "200")
    assert time.monotonic() - began < 20  # no 30 s wait
    assert r.exit_code == 5, r.output
    assert len(llm_server.requests) == 1
    said = " ".join(r.output.split())
    assert "HTTP 429" in said and "slow down" in said
    assert (
        "(gave up after 1 attempt: the provider asked to retry after 120 s, past refind's 30 s cap on a wait — retry "
        "the search later)"
    ) in said


def test_a_retry_after_past_the_cap_and_the_deadline_is_said_as_past_the_deadline_at_once(cli, hikes, llm_server):
    # 120 s asked with 60 s left: a retry at the 30 s cap would have started within the deadline — and been refused
    # by the provider, asked again 90 s early. It is the provider's wait past the deadline, said at once
    llm_server.play(Fail(429, "slow down", retry_after=120), FINISH)
    began = time.monotonic()
    r = agent_cli(cli, llm_server, "--deadline", "60")
    assert time.monotonic() - began < 20  # no 30 s wait
    assert r.exit_code == 5, r.output
    assert len(llm_server.requests) == 1
    assert "(gave up after 1 attempt: the provider asked to wait 120 s (Retry-After), past the search's deadline" in (
        " ".join(r.output.split())
    )
