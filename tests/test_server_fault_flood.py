"""A storage fault that refuses every request (a full disk refuses every Add) is logged once, then counted: one
warning per refused request (563 lines in 0.3 s in a probe of round 28) hid everything else in the operator's log.
Every request still gets its own status."""

from __future__ import annotations

import logging
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from test_server_e2e import AUTH, TOKEN

from refind_cli.server.fault_log import EVERY_S, FaultLog
from refind_cli.store import Store

LIMIT = 2 * 1024 * 1024  # the server's file size limit (`ulimit -f`): its -wal stops growing there, a full disk


def _body(i: int) -> dict[str, object]:
    text = f"entry {i}: " + "a long story about the mountains and the lakes " * 2000  # ~100 KB
    return {
        "request_id": f"r{i}",
        "user_id": "alice",
        "session_id": "s1",
        "messages": [{"role": "user", "content": text}],
    }


@pytest.mark.slow
def test_a_full_disk_under_a_flood_of_adds_is_logged_once_then_once_over(db_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    if hard != resource.RLIM_INFINITY and hard < LIMIT:
        pytest.skip("a lower hard file size limit is in force already")
    Store(db_path, retention_days=None).close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "refind_cli", "serve", "--port", "0", "--db", str(db_path), "--mode", "bm25"]
        + ["--token", TOKEN, "--expire-interval", "0", "--retention-days", "off"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, hard)),
    )
    assert proc.stderr is not None
    lines: list[str] = []
    url = ""
    while not url:
        line = proc.stderr.readline()
        assert line, "".join(lines)
        lines.append(line)
        found = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
        url = found.group(1) if found else ""
    threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True).start()
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as http:
            statuses = [http.post("/v1/memories/add", json=_body(i)).status_code for i in range(200)]
            assert 200 in statuses and statuses[-150:] == [507] * 150, statuses
            searched = http.post("/search", json={"query": "mountains", "user_id": "alice", "top_k": 2})
            assert searched.status_code == 200  # a read succeeding ends no run of refused writes
            again = http.post("/v1/memories/search/", json={"query": "mountains", "user_id": "alice", "top_k": 2})
            assert again.status_code == 200  # nor the same route with a slash (was: a write, the run said over)
            assert http.get("/health").status_code == 200  # nor a probe of /health
            assert http.post("/v1/memories/add", json=_body(500)).status_code == 507
            # an identical replay of a stored Add: 200, nothing written (it was 507 "retry" on a full disk), and it
            # ends no run of refused writes — nothing was written
            stored = statuses.index(200)
            replayed = http.post("/v1/memories/add", json=_body(stored))
            assert replayed.status_code == 200 and replayed.json()["request_id"] == f"r{stored}", replayed.text
            assert set(replayed.json()) == {"success", "request_id", "user_id", "session_id"}
            assert http.post("/v1/memories/add", json=_body(503)).status_code == 507
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (hard, hard))  # space is back
            assert http.post("/v1/memories/add", json=_body(501)).status_code == 200
            assert http.post("/v1/memories/add", json=_body(502)).status_code == 200
        time.sleep(0.5)  # (the log lines of the last requests reach the reader)
    finally:
        proc.terminate()
        proc.wait(30)
    refused = statuses.count(507) + 2
    faults = [line.split(": ", 1)[1].strip() for line in lines if "storage fault" in line]
    assert len(faults) <= 3, faults  # (a summary line only where the flood lasted past EVERY_S)
    assert faults == [
        f"storage fault on POST /v1/memories/add: no_space (more writes refused by it are counted: one line every "
        f"{EVERY_S:g} s)",
        *faults[1:-1],
        faults[-1],
    ]
    assert re.fullmatch(
        rf"storage fault over: writes succeed again, after {refused} refused \(no_space\) over [\d.]+ s", faults[-1]
    ), faults


def test_refusals_are_counted_and_said_once_per_period(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    faults = FaultLog(clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="refind.server"):
        for _ in range(50):  # 50 refused Adds in the first second
            faults.refused("no_space", "POST", "/v1/memories/add")
            now[0] += 0.02
        faults.refused("locked", "POST", "/search")  # another sort and kind: its own first line
        faults.succeeded("POST", "/search")  # a read succeeds: the writes' run goes on
        now[0] = 100.0 + EVERY_S + 1
        faults.refused("no_space", "POST", "/v1/memories/add")
        faults.refused("no_space", "POST", "/v1/memories/add")  # within the period again: counted only
        now[0] += 2
        faults.succeeded("DELETE", "/v1/users/alice")  # a write succeeds: the writes' run is over
        faults.succeeded("POST", "/v1/memories/add")  # nothing more to say
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "storage fault on POST /v1/memories/add: no_space (more writes refused by it are counted: one line every 10 s)",
        "storage fault on POST /search: locked (more reads refused by it are counted: one line every 10 s)",
        "storage fault over: reads succeed again, after 1 refused (locked) over 0.0 s",
        "storage fault: 50 more writes refused in the last 11 s: no_space (51 since it began 11 s ago)",
        "storage fault over: writes succeed again, after 52 refused (no_space) over 13.0 s",
    ]


def test_only_a_request_of_the_same_sort_that_reads_or_writes_the_database_ends_a_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a supervisor's GET /health every few seconds (200: the file is there) ended a run of searches refused by a
    # damaged file: "storage fault over: reads succeed again" while every search still failed, and the next one was
    # a first line again; a search sent to /v1/memories/search/ (the same route) was a write, ending a full disk's run
    faults = FaultLog(clock=lambda: 100.0)
    with caplog.at_level(logging.INFO, logger="refind.server"):
        faults.refused("no_space", "POST", "/v1/memories/add")
        faults.refused("corrupt", "POST", "/v1/memories/search/")
        for method, path in (("GET", "/health"), ("HEAD", "/health"), ("GET", "/openapi.json"), ("GET", "/docs")):
            faults.succeeded(method, path)
        faults.refused("corrupt", "POST", "/search")  # counted: the run went on
        faults.succeeded("POST", "/v1/memories/search/")
        faults.refused("no_space", "POST", "/add")  # counted: a search ends no run of writes
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "storage fault on POST /v1/memories/add: no_space (more writes refused by it are counted: one line every 10 s)",
        "storage fault on POST /v1/memories/search/: corrupt (more reads refused by it are counted: one line every "
        "10 s)",
        "storage fault over: reads succeed again, after 2 refused (corrupt) over 0.0 s",
    ]


def test_requests_refused_because_the_file_was_replaced_are_logged(
    make_client, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A database file deleted or replaced under the server is a storage fault (503, 'restart the server'), raised as
    refind's own error: no line of the log said so — the operator saw 503s in the access log and nothing else (a
    probe of round 29). Now it is logged as the other faults are, once, then counted."""
    import shutil

    client = make_client()
    body = {"request_id": "r1", "user_id": "alice", "session_id": "s1", "messages": [{"role": "user", "content": "hi"}]}
    assert client.post("/v1/memories/add", json=body).status_code == 200
    shutil.copy(db_path, db_path.with_name("copy.db"))
    os.replace(db_path.with_name("copy.db"), db_path)  # `mv copy.db refind.db` under the server
    with caplog.at_level(logging.INFO, logger="refind.server"):
        for i in range(5):
            assert client.post("/v1/memories/add", json={**body, "request_id": f"n{i}"}).status_code == 503
    # (the index warmer, on its own thread, may log its own failure on the replaced file: not a request's line)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("storage fault")]
    assert said == [
        "storage fault on POST /v1/memories/add: file_replaced (more writes refused by it are counted: one line every "
        "10 s)"
    ]
