"""End to end: a real `refind serve` subprocess on a free loopback port, spoken to over real HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from refind_cli.store import Store

pytestmark = pytest.mark.slow  # subprocesses, real servers or fuzzing: `make test-fast` skips them

TOKEN = "e2e-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class ServerProcess:
    """`python -m refind_cli serve --port 0 …`; the port is read from uvicorn's startup line."""

    def __init__(self, db: Path, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
        given = dict(zip(extra[::2], extra[1::2]))  # (options of one value: given twice they are refused)
        options = {"--port": "0", "--db": str(db), "--mode": "bm25", "--token": TOKEN, "--expire-interval": "0"}
        options |= {"--retention-days": "off"} | given
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "refind_cli", "serve", *(part for pair in options.items() for part in pair)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self.url = self._wait_for_port()
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_for_port(self) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("server exited before listening:\n" + "".join(self.lines))
            self.lines.append(line)
            match = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
            if match:
                return match.group(1)
        raise RuntimeError("server did not start in 30 s:\n" + "".join(self.lines))

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def server(db_path):
    started = ServerProcess(db_path)
    yield started
    started.stop()


def add_body(request_id: str, user_id: str = "alice", text: str = "Caroline: I went hiking at Mount Rainier") -> dict:
    return {
        "request_id": request_id,
        "user_id": user_id,
        "session_id": "s1",
        "messages": [
            {"role": "user", "content": text, "timestamp": 1_683_554_160_000},
            {"role": "assistant", "content": "Nice!", "timestamp": None},
        ],
    }


def test_health_add_search_with_all_three_auth_headers(server):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get("/health").json() == {"status": "ok"}
        assert http.post("/v1/memories/add", json=add_body("r0")).status_code == 401
        for i, headers in enumerate([AUTH, {"Authorization": f"Token {TOKEN}"}, {"X-Api-Key": TOKEN}]):
            added = http.post(
                "/v1/memories/add", json=add_body(f"r{i}", text=f"Caroline: hike number{i}"), headers=headers
            )
            assert added.status_code == 200, added.text
            assert added.json() == {"success": True, "request_id": f"r{i}", "user_id": "alice", "session_id": "s1"}
            found = http.post("/search", json={"query": f"number{i}", "user_id": "alice", "top_k": 2}, headers=headers)
            assert found.status_code == 200 and f"number{i}" in found.json()["data"][0]["content"]
    log = "".join(server.lines)
    assert "POST /v1/memories/add 200" in log and "GET /health 200" in log
    assert "number1" not in log and TOKEN not in log


def test_a_race_on_one_new_request_id_writes_exactly_once(server, db_path):
    threads, barrier = 24, threading.Barrier(24)
    answers: list[tuple[int, int]] = []

    def worker(i: int) -> None:
        body = add_body("race-1", text=f"Caroline: variant {i % 2}")  # two payloads compete for one id
        with httpx.Client(base_url=server.url, timeout=60, headers=AUTH) as http:
            barrier.wait()
            answers.append((i % 2, http.post("/v1/memories/add", json=body).status_code))

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert len(answers) == threads and {code for _, code in answers} <= {200, 409}
    winners = {variant for variant, code in answers if code == 200}
    assert len(winners) == 1  # every 200 carried the stored payload; every other answer is a 409
    assert all(code == 409 for variant, code in answers if variant not in winners)
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 1 and store.counts()["messages"] == 2
        assert store.user_messages("alice")[0].content == f"Caroline: variant {winners.pop()}"
        adds = store.conn.execute("SELECT count(*) FROM events WHERE kind = 'add'").fetchone()[0]
        assert adds == 1


def test_kill_9_and_restart_keeps_every_acknowledged_add(db_path):
    server = ServerProcess(db_path)
    acked: list[str] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        with httpx.Client(base_url=server.url, timeout=10, headers=AUTH) as http:
            for n in range(10_000):
                if stop.is_set():
                    return
                rid = f"w{w}-{n}"
                try:
                    response = http.post("/v1/memories/add", json=add_body(rid, user_id=f"user{w}"))
                except httpx.HTTPError:
                    return
                if response.status_code == 200:
                    acked.append(rid)

    pool = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in pool:
        t.start()
    deadline = time.monotonic() + 10
    while len(acked) < 60 and time.monotonic() < deadline:
        time.sleep(0.02)
    server.kill()  # SIGKILL mid-stream: no shutdown hook runs
    stop.set()
    for t in pool:
        t.join()
    assert len(acked) >= 60

    restarted = ServerProcess(db_path)
    try:
        with Store(db_path, retention_days=None) as store:
            stored = {row[0] for row in store.conn.execute("SELECT request_id FROM requests")}
            before = store.counts()
        assert set(acked) <= stored
        with httpx.Client(base_url=restarted.url, timeout=30, headers=AUTH) as http:
            for rid in acked[:20]:  # an identical replay of an acknowledged Add is a harmless 200
                w = rid.split("-")[0][1:]
                assert http.post("/add", json=add_body(rid, user_id=f"user{w}")).status_code == 200
        with Store(db_path, retention_days=None) as store:
            assert store.counts() == before
    finally:
        restarted.stop()


def test_sigterm_finishes_in_flight_adds_and_exits_cleanly(db_path):
    server = ServerProcess(db_path)
    acked: list[str] = []
    codes: list[int] = []

    def writer(w: int) -> None:
        with httpx.Client(base_url=server.url, timeout=10, headers=AUTH) as http:
            for n in range(10_000):
                try:
                    response = http.post("/v1/memories/add", json=add_body(f"w{w}-{n}"))
                except httpx.HTTPError:
                    return
                codes.append(response.status_code)
                if response.status_code == 200:
                    acked.append(f"w{w}-{n}")

    pool = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in pool:
        t.start()
    while len(acked) < 20:
        time.sleep(0.02)
    assert server.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once shutdown is complete
    for t in pool:
        t.join()
    assert all(code == 200 for code in codes)
    with Store(db_path, retention_days=None) as store:
        stored = {row[0] for row in store.conn.execute("SELECT request_id FROM requests")}
    assert set(acked) <= stored
    log = "".join(server.lines)
    assert "Application shutdown complete" in log and "Traceback" not in log


def test_a_forced_quit_answers_the_adds_still_in_flight_with_a_retryable_503(db_path):
    """A second Ctrl-C (or SIGTERM) while shutdown waits for requests forces the quit: uvicorn cancels them. Each was
    answered a plain-text 500 ("Internal Server Error", not the JSON error shape) with a traceback in the log, though
    an Add among them may have been stored (a probe of round 28: 163 of 180 Adds, 60 of those stored). Now each is a
    JSON 503 — retried by the platform, and the replay of a stored Add is harmless."""
    import sqlite3

    server = ServerProcess(db_path)
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write: the Adds wait in the server's writer
    answers: list[httpx.Response] = []

    def writer(w: int) -> None:
        with httpx.Client(base_url=server.url, timeout=20, headers=AUTH) as http:
            answers.append(http.post("/v1/memories/add", json=add_body(f"w{w}")))

    pool = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in pool:
        t.start()
    time.sleep(1.0)  # all three in flight, waiting for the lock
    server.proc.send_signal(signal.SIGINT)  # shutdown begins: it waits for them
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGINT)  # the forced quit
    for t in pool:
        t.join()
    server.proc.wait(30)
    holder.execute("ROLLBACK")
    holder.close()
    assert [a.status_code for a in answers] == [503, 503, 503]
    assert {a.json()["error"]["type"] for a in answers} == {"unavailable"}
    assert "the server is shutting down; retry the request" in answers[0].json()["error"]["message"]
    assert "Exception in ASGI application" not in "".join(server.lines)


def test_a_forced_quit_ends_the_process_at_once_with_agent_searches_still_waiting_on_the_model(db_path, llm_server):
    """After a second Ctrl-C the searches in flight are answered (503), but the interpreter's exit joined the search
    threads: the process went on until each agent search's model call came back — up to its deadline, 120 s by
    default (a probe of round 28: 40 s). It ends now."""
    from llm_server import Slow

    from refind_cli.contract import parse_add

    with Store(db_path, retention_days=None) as store:
        store.add(parse_add(add_body("seed")))
    llm_server.play(*[Slow(30.0, '{"action": "finish_search"}') for _ in range(2)])
    server = ServerProcess(db_path, "--mode", "agent", "--model", "openai/scripted", "--api-base", llm_server.url)
    answers: list[int] = []

    def ask() -> None:
        with httpx.Client(base_url=server.url, timeout=60, headers=AUTH) as http:
            body = {"query": "where did Caroline go hiking", "user_id": "alice", "top_k": 5}
            answers.append(http.post("/v1/memories/search", json=body).status_code)

    pool = [threading.Thread(target=ask) for _ in range(2)]
    for t in pool:
        t.start()
    deadline = time.monotonic() + 10
    while len(llm_server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(llm_server.requests) == 2  # both searches wait on the model
    server.proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    started = time.monotonic()
    server.proc.send_signal(signal.SIGINT)  # the forced quit
    try:
        server.proc.wait(10)
    finally:
        server.kill()
    assert time.monotonic() - started < 10
    for t in pool:
        t.join()
    assert answers == [503, 503]
    assert "forced quit: searches still running were abandoned" in "".join(server.lines)


def test_a_public_bind_without_a_token_refuses_to_start(cli, monkeypatch):
    monkeypatch.delenv("REFIND_SERVER_TOKEN", raising=False)
    result = cli("serve", "--host", "0.0.0.0", "--mode", "bm25")
    assert result.exit_code == 1
    assert "refusing to serve on 0.0.0.0 without a token" in result.output


def test_agent_searches_in_flight_never_block_adds_or_health_and_model_failures_are_502(db_path, llm_server):
    from llm_server import Fail, Slow

    with Store(db_path, retention_days=None) as store:
        from refind_cli.contract import parse_add

        store.add(parse_add(add_body("seed")))
    server = ServerProcess(db_path, "--mode", "agent", "--model", "openai/scripted", "--api-base", llm_server.url)
    try:
        searches = 6
        llm_server.play(*[Slow(2.0, '{"action": "finish_search"}') for _ in range(searches)])
        results: list[int] = []

        def ask() -> None:
            with httpx.Client(base_url=server.url, timeout=60, headers=AUTH) as http:
                body = {"query": "where did Caroline go hiking", "user_id": "alice", "top_k": 5}
                results.append(http.post("/v1/memories/search", json=body).status_code)

        pool = [threading.Thread(target=ask) for _ in range(searches)]
        for t in pool:
            t.start()
        deadline = time.monotonic() + 10
        while len(llm_server.requests) < searches and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(llm_server.requests) == searches  # every search is now waiting on the model
        with httpx.Client(base_url=server.url, timeout=60, headers=AUTH) as http:
            started = time.monotonic()
            assert http.get("/health").status_code == 200
            for i in range(5):
                assert http.post("/v1/memories/add", json=add_body(f"during-{i}")).status_code == 200
            assert time.monotonic() - started < 1.5  # well under one model call: nothing waited on a search
        for t in pool:
            t.join()
        assert results == [200] * searches

        llm_server.play(Fail(400, "the provider says: model quota exceeded"))
        with httpx.Client(base_url=server.url, timeout=60, headers=AUTH) as http:
            failed = http.post("/search", json={"query": "hiking", "user_id": "alice", "top_k": 5})
        assert failed.status_code == 502
        assert failed.json()["error"]["type"] == "model"
        assert "model quota exceeded" in failed.json()["error"]["message"]
        search_id = failed.json()["search_id"]  # the failed search is stored: its trace says what happened
    finally:
        server.stop()
    from refind_cli import trace

    with Store(db_path, retention_days=None) as store:
        assert trace.load(store, search_id).events[-1].kind == "error"
    log = "".join(server.lines)
    assert "POST /search 502" in log and "where did Caroline" not in log and "Traceback" not in log


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_concurrent_adds_and_searches_across_two_worker_processes_all_succeed(db_path):
    """--workers 2: two processes, one database. Many threads interleave Adds and Searches (each search must see
    the Add acknowledged just before it, whichever process answers); every answer is a 200, nothing is locked."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "refind_cli",
            "serve",
            "--port",
            str(port),
            "--db",
            str(db_path),
            "--mode",
            "bm25",
            "--token",
            TOKEN,
            "--expire-interval",
            "0",
            "--workers",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        failures: list[str] = []

        def worker(w: int) -> None:
            with httpx.Client(base_url=url, timeout=60, headers=AUTH) as http:
                for n in range(12):
                    added = http.post("/add", json=add_body(f"r{n}", user_id=f"user{w}", text=f"Jon: word{n}x{w}"))
                    found = http.post("/search", json={"query": f"word{n}x{w}", "user_id": f"user{w}", "top_k": 3})
                    if added.status_code != 200 or found.status_code != 200 or f"word{n}x{w}" not in found.text:
                        failures.append(f"{added.status_code} {found.status_code} {found.text[:80]}")

        pool = [threading.Thread(target=worker, args=(w,)) for w in range(16)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert failures == []
    finally:
        proc.terminate()
        log = proc.communicate(timeout=30)[1]
    assert log.count("Started server process") == 2
    assert "database is locked" not in log and "internal error" not in log
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 16 * 12


def test_insecure_public_bind_starts_with_a_loud_warning(db_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "refind_cli",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--insecure",
            "--db",
            str(db_path),
            "--mode",
            "bm25",
            "--expire-interval",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "running on" in line:
                break
        port = re.search(r"running on http://0\.0\.0\.0:(\d+)", "".join(seen)).group(1)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json() == {"status": "ok"}
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    warning = " ".join((out + "".join(seen)).split())
    assert "WITHOUT AUTHENTICATION" in warning


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/PID/limits (Linux)")
def test_the_server_lifts_a_low_open_file_limit(db_path):
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip("the hard limit leaves nothing to lift")

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))

    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "refind_cli",
            "serve",
            "--port",
            "0",
            "--db",
            str(db_path),
            "--mode",
            "bm25",
            "--expire-interval",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=low_limit,
    )
    try:
        for line in proc.stderr:
            if "running on" in line:
                break
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
    finally:
        proc.terminate()
        proc.wait(30)
    soft_now = int(re.search(r"Max open files\s+(\d+)", limits).group(1))
    assert soft_now > 1024


def test_a_client_that_hangs_up_mid_body_is_logged_as_such_not_as_a_server_error(server):
    import socket

    host, port = server.url.rsplit("//", 1)[1].split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"POST /add HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{".encode()
        )
        time.sleep(0.3)
    deadline = time.monotonic() + 10
    while "POST /add" not in "".join(server.lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert httpx.get(server.url + "/health").status_code == 200
    log = "".join(server.lines)
    assert "POST /add 499" in log
    assert "internal error" not in log and "POST /add 500" not in log


def test_a_request_with_both_content_length_and_transfer_encoding_is_refused_and_its_connection_closed(server):
    # RFC 9112 §6.3: such a request may be a smuggling attempt (a proxy reading Content-Length, the server chunks):
    # the server must close the connection after answering. Before, the bytes that followed ran as a second request
    # — here an Add of user "smuggled", which was stored
    import socket

    host, port = server.url.rsplit("//", 1)[1].split(":")
    inner = json.dumps(add_body("r-smuggled", user_id="smuggled"))
    second = (
        f"POST /add HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(inner)}\r\n\r\n{inner}"
    )
    first = (
        f"POST /add HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall((first + second).encode())
        answer = b""
        while chunk := sock.recv(65536):  # until the server closes the connection
            answer += chunk
    assert answer.count(b"HTTP/1.1 ") == 1 and answer.startswith(b"HTTP/1.1 422 "), answer
    assert b"Content-Length and Transfer-Encoding" in answer
    found = httpx.post(
        server.url + "/search",
        json={"user_id": "smuggled", "query": "hiking Rainier", "top_k": 5},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert found.status_code == 200 and found.json()["data"] == []


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped by whoever adopted it, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_end_when_their_supervisor_is_killed_and_the_port_is_free_again(db_path):
    # kill -9 of `refind serve --workers 2` left both workers serving, Adds accepted, the port held: a restart failed
    # with "Address already in use". Now each asks the kernel for a SIGTERM when the supervisor dies.
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    command = [sys.executable, "-m", "refind_cli", "serve", "--port", str(port), "--db", str(db_path)]
    proc = subprocess.Popen(
        [*command, "--workers", "2", "--mode", "bm25", "--expire-interval", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        healthy = False
        while not healthy and time.monotonic() < deadline:
            try:
                healthy = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                time.sleep(0.2)
        assert healthy, "the workers did not start"
        workers = _children(proc.pid)  # the two workers (and perhaps multiprocessing's resource tracker)
        assert len(workers) >= 2, workers
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 30
        while any(map(_running, workers)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(map(_running, workers)), "workers outlived their supervisor"
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    finally:
        proc.kill()
        for p in workers if "workers" in locals() else ():
            if _running(p):
                os.kill(p, signal.SIGKILL)
