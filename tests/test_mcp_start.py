"""`refind mcp`'s start (refind_cli/mcp_start.py): a launch records the SDK's answers to a client's first requests;
the next launch answers the same lines with those bytes while the SDK loads, then the SDK serves the session —
each request answered exactly once, every tool call and error by the SDK, a stale record reported and deleted.

The client here is plain JSON-RPC lines over the process's pipes, so the bytes on the wire are what is compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from refind_cli import mcp_start

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recent_sessions", "arguments": {}}}
BAD_DATE = {
    "jsonrpc": "2.0",
    "id": 4,
    "method": "tools/call",
    "params": {"name": "search_memory", "arguments": {"query": "x", "date_from": "2023-13-45"}},
}
HANDSHAKE = [INITIALIZE, INITIALIZED, TOOLS]


def _session(db: Path, cache: Path | str, messages: list[dict]) -> tuple[list[bytes], str]:
    """Launch `refind mcp`, send each message (waiting for the answer of each request), close stdin; every line it
    wrote (in order) and its stderr."""
    env = {
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": os.environ.get("PATH", ""),
        "REFIND_MCP_CACHE": str(cache),
    }
    argv = [sys.executable, "-m", "refind_cli", "mcp", "--user", "alice", "--db", str(db), "--retention-days", "off"]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    out: list[bytes] = []
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            while "id" in message and not any(json.loads(line).get("id") == message["id"] for line in out):
                line = proc.stdout.readline()
                assert line, "refind mcp closed its output before answering"
                out.append(line)
        proc.stdin.close()
        out += proc.stdout.readlines()  # anything more, up to the end (a repeated answer would show here)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert proc.wait(60) == 0, stderr
    finally:
        proc.kill()
    return out, stderr


def _by_id(lines: list[bytes]) -> dict[object, bytes]:
    answers: dict[object, bytes] = {}
    for line in lines:
        key = json.loads(line).get("id")
        assert key not in answers, f"request {key} answered twice"
        answers[key] = line
    return answers


def _records(cache: Path) -> list[Path]:
    return sorted(cache.glob("mcp-*.json"))


@pytest.mark.slow
def test_a_launch_answers_from_the_sdks_recorded_bytes_and_the_sdk_serves_the_rest(tmp_path: Path) -> None:
    db, cache = tmp_path / "m.db", tmp_path / "cache"
    sdk, _ = _session(db, "off", [*HANDSHAKE, CALL, BAD_DATE])  # the SDK alone: nothing recorded, nothing read
    assert not cache.exists()
    first, _ = _session(db, cache, [*HANDSHAKE, CALL])
    [record] = _records(cache)
    lines = json.loads(record.read_text(encoding="utf-8"))
    assert [json.loads(request) for request, _ in lines[0]] == HANDSHAKE  # up to the first tool call, not past it
    assert [answer.encode() + b"\n" for _, answer in lines[0] if answer] == first[:2]  # what the SDK wrote

    second, stderr = _session(db, cache, [*HANDSHAKE, CALL, BAD_DATE])
    answers, alone = _by_id(second), _by_id(sdk)
    assert answers == alone  # byte for byte the SDK's, each request answered once (_by_id checks)
    assert "differs" not in stderr and _records(cache) == [record]
    error = json.loads(answers[4])["result"]
    assert (
        error["isError"] and "date_from: date '2023-13-45' is not a date" in error["content"][0]["text"]
    )  # the SDK's clean tool error


@pytest.mark.slow
def test_a_cache_setting_that_names_a_file_serves_without_a_record(tmp_path: Path) -> None:
    # a probe of round 28: REFIND_MCP_CACHE naming a file ended the server with NotADirectoryError once the handshake
    # was answered (the cleanup of the record it could not write raised), before the tool list
    cache = tmp_path / "cache.json"
    cache.write_text("not a folder", encoding="utf-8")
    lines, stderr = _session(tmp_path / "m.db", cache, [*HANDSHAKE, CALL])  # (exit 0, each request answered)
    assert [json.loads(line).get("id") for line in lines] == [1, 2, 3] and stderr == ""
    assert cache.read_text(encoding="utf-8") == "not a folder"


def _tampered(cache: Path) -> Path:
    """Record a handshake, then change the recorded tools/list answer (a description), as a stale record would."""
    _session(cache.parent / "m.db", cache, HANDSHAKE)
    [record] = _records(cache)
    text = record.read_text(encoding="utf-8")
    assert text.count("Store one message of the conversation") == 1
    record.write_text(text.replace("Store one message of the conversation", "TAMPERED"), encoding="utf-8")
    return record


@pytest.mark.slow
def test_a_recorded_answer_that_differs_from_the_sdks_is_reported_and_deleted(tmp_path: Path) -> None:
    record = _tampered(tmp_path / "cache")
    out, stderr = _session(tmp_path / "m.db", tmp_path / "cache", [*HANDSHAKE, CALL])
    answers = _by_id(out)  # once each: the SDK's own tools/list answer is not sent a second time
    assert b"TAMPERED" in answers[2]  # the record answered it (before the SDK had loaded) ...
    assert "recorded answer to request 2 differs from the SDK's" in stderr  # ... the SDK's differed: reported
    assert not record.exists() or b"TAMPERED" not in record.read_bytes()  # and the stale record is gone
    assert not json.loads(answers[3])["result"]["isError"]


@pytest.mark.slow
def test_a_line_unlike_the_record_waits_for_the_sdk(tmp_path: Path) -> None:
    _tampered(tmp_path / "cache")
    other_id = {**INITIALIZE, "id": 7}
    other_client = {**INITIALIZE, "params": {**INITIALIZE["params"], "clientInfo": {"name": "other", "version": "1"}}}
    for first in (other_id, other_client):
        out, _ = _session(tmp_path / "m.db", tmp_path / "cache", [first, INITIALIZED, TOOLS])
        answers = _by_id(out)
        assert set(answers) == {first["id"], 2}
        assert b"TAMPERED" not in answers[2]  # tools/list came after an unrecorded line: the SDK answered it


@pytest.mark.slow
def test_an_error_answer_is_never_recorded(tmp_path: Path) -> None:
    bad_list = {**TOOLS, "params": {"cursor": 5}}  # the SDK refuses it (cursor must be a string)
    out, _ = _session(tmp_path / "m.db", tmp_path / "cache", [INITIALIZE, INITIALIZED, bad_list])
    assert "error" in json.loads(_by_id(out)[2])
    for record in _records(tmp_path / "cache"):  # at most the handshake before it
        assert all(json.loads(request)["method"] != "tools/list" for request, _ in json.loads(record.read_text())[0])


def test_a_record_others_can_write_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "mcp-x.json"
    mcp_start.save(path, [[(b'{"id":1}', b'{"id":1,"result":{}}')]])
    assert path.stat().st_mode & 0o777 == 0o600
    assert mcp_start.load(path) == [[(b'{"id":1}', b'{"id":1,"result":{}}')]]
    path.chmod(0o666)
    assert mcp_start.load(path) == []


# ---- the gate: what the SDK would drop unanswered is answered (a probe of round 17) --------------------------------


def _gated(*chunks: bytes) -> tuple[bytes, list[dict]]:
    answers: list[bytes] = []
    gate = mcp_start.Gate(answers.append)
    passed = b"".join(gate.feed(chunk) for chunk in chunks)
    return passed, [json.loads(a) for a in answers]


def _line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_a_line_the_sdk_reads_passes_whole_even_split_across_reads() -> None:
    line = _line(TOOLS)
    passed, answers = _gated(line[:7], line[7:] + _line(INITIALIZED)[:3], _line(INITIALIZED)[3:], b"")
    assert passed == line + _line(INITIALIZED) and answers == []
    assert _gated(json.dumps(TOOLS).encode(), b"") == (json.dumps(TOOLS).encode(), [])  # a last line, no newline


@pytest.mark.parametrize(
    ("line", "code", "key", "said"),
    [
        (b"this is not json\n", -32700, None, "Parse error: the line is not JSON"),
        (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": "caf\xe9"}}\n', -32700, 7, "not UTF-8"),
        (_line({**TOOLS, "jsonrpc": "1.0"}), -32600, 2, "jsonrpc"),
        (_line({"id": 2, "method": "tools/list"}), -32600, 2, "jsonrpc"),
        (_line({**CALL, "params": [1, 2]}), -32600, 3, "params"),
        (_line({**TOOLS, "id": 1.5}), -32600, None, "an id is a string or an integer"),
        (_line([TOOLS]), -32600, None, "a batch"),
        (
            b'{"jsonrpc": "2.0", "id": "A", "method": "tools/call", "params": {"name": "remember", '
            b'"arguments": {"content": "half an emoji \\ud83d"}}}\n',
            -32600,
            "A",
            "unpaired UTF-16 surrogate",
        ),
    ],
    ids=["not-json", "not-utf8", "jsonrpc-1.0", "no-jsonrpc", "array-params", "float-id", "batch", "half-an-emoji"],
)
def test_a_line_the_sdk_would_drop_is_answered_with_json_rpc_s_error(line, code, key, said) -> None:
    # Checked by hand: the SDK logs each at debug level and answers nothing; its client waits forever
    passed, answers = _gated(line + _line(TOOLS))
    assert passed == _line(TOOLS)  # the next line is read as ever
    assert len(answers) == 1 and answers[0]["id"] == key and answers[0]["error"]["code"] == code
    assert said in answers[0]["error"]["message"]


def test_a_refused_notification_is_dropped_unanswered_and_a_whole_emoji_passes() -> None:
    assert _gated(_line({"jsonrpc": "1.0", "method": "notifications/initialized"})) == (b"", [])
    emoji = b'{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"x": "\\ud83d\\ude00"}}\n'
    assert _gated(emoji) == (emoji, [])


@pytest.mark.slow
@pytest.mark.parametrize("cache", ["off", "on"])
def test_a_malformed_request_is_answered_and_one_in_flight_at_the_end_still_is(tmp_path: Path, cache: str) -> None:
    # a probe of round 17: a request the SDK cannot read was never answered; and a remember sent just before the
    # client closed its end was stored but never answered (the SDK ended the session at once)
    env = {
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": os.environ.get("PATH", ""),
        "REFIND_MCP_CACHE": "off" if cache == "off" else str(tmp_path / "cache"),
    }
    db = tmp_path / "m.db"
    argv = [sys.executable, "-m", "refind_cli", "mcp", "--user", "alice", "--db", str(db), "--retention-days", "off"]
    remember = {
        "jsonrpc": "2.0",
        "id": "last",
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "said just before the end"}},
    }
    half = b'{"jsonrpc":"2.0","id":"half","method":"tools/call","params":{"name":"remember","arguments":{"content":"\\ud83d"}}}\n'
    lines = [_line(INITIALIZE), _line(INITIALIZED), half, _line(remember)]
    done = subprocess.run(argv, input=b"".join(lines), capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    answers = _by_id(done.stdout.splitlines())
    assert "unpaired UTF-16 surrogate" in json.loads(answers["half"])["error"]["message"]
    assert json.loads(json.loads(answers["last"])["result"]["content"][0]["text"])["stored"] is True


def test_a_request_naming_a_key_twice_is_refused_not_read_as_its_last_value() -> None:
    # a probe of round 18: the SDK's models keep a key's last value — remember stored "second" in session "B"
    line = (
        b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "remember", '
        b'"arguments": {"content": "first", "content": "second", "session": "A"}}}\n'
    )
    passed, answers = _gated(line + _line(TOOLS))
    assert passed == _line(TOOLS)
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": 4,
            "error": {"code": -32600, "message": "Invalid Request: the key 'content' appears 2 times in one object"},
        }
    ]
    once = line.replace(b'"content": "first", ', b"")
    assert _gated(once) == (once, [])  # each key once: passed on as ever


@pytest.mark.slow
@pytest.mark.parametrize("stderr_too", [False, True])
def test_a_client_that_quits_mid_call_ends_the_server_quietly_and_what_it_sent_is_stored(
    tmp_path: Path, stderr_too: bool
) -> None:
    # a probe of round 28: a client that closed its ends with a call in flight (it quit) ended `refind mcp` with the
    # SDK's BrokenPipeError, ~100 lines of traceback and exit 1 (and, with stderr closed too, exit 1 by the line
    # saying so)
    env = {
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": os.environ.get("PATH", ""),
        "REFIND_MCP_CACHE": "off",
    }
    db = tmp_path / "m.db"
    argv = [sys.executable, "-m", "refind_cli", "mcp", "--user", "alice", "--db", str(db), "--retention-days", "off"]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(_line(INITIALIZE))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.stdout.close()  # the client stops reading: every answer from now on meets a closed pipe
        if stderr_too:
            proc.stderr.close()
        remember = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "said as the client quit"}},
        }
        proc.stdin.write(_line(INITIALIZED) + _line(remember))
        proc.stdin.close()
        assert proc.wait(60) == 0
        stderr = "" if stderr_too else proc.stderr.read().decode()
    finally:
        proc.kill()
    if not stderr_too:
        assert stderr == "refind mcp: the client closed its end of the output; answers are dropped\n"
    from refind_cli import Memory

    with Memory(db) as memory:
        assert [m["content"] for r in memory.export(user="alice") for m in r["messages"]] == ["said as the client quit"]


@pytest.mark.slow
def test_a_prompt_this_server_does_not_offer_is_invalid_params_with_nothing_logged(tmp_path: Path) -> None:
    # a probe of round 28: the SDK answered prompts/get of a name it does not know with error code 0 (no JSON-RPC
    # code) and logged a traceback of ~150 lines on stderr
    get = {"jsonrpc": "2.0", "id": 5, "method": "prompts/get", "params": {"name": "summarize"}}
    lines, stderr = _session(tmp_path / "m.db", "off", [*HANDSHAKE, get])
    assert json.loads(_by_id(lines)[5])["error"] == {
        "code": -32602,
        "message": "Unknown prompt: summarize (this server offers no prompts)",
    }
    assert stderr == ""


@pytest.mark.slow
def test_ctrl_c_ends_a_serving_server_with_status_130(tmp_path: Path) -> None:
    # a probe of round 28: Ctrl-C while the SDK served cancelled its session, but its reading thread, blocked on the
    # client's stream, kept the process alive and answering nothing until the client closed it (three Ctrl-C ended
    # it, with a traceback)
    import signal

    env = {
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": os.environ.get("PATH", ""),
        "REFIND_MCP_CACHE": "off",
    }
    argv = [sys.executable, "-m", "refind_cli", "mcp", "--user", "alice", "--db", str(tmp_path / "m.db")]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        for message in (INITIALIZE, INITIALIZED, CALL):
            proc.stdin.write(_line(message))
            proc.stdin.flush()
        assert [json.loads(proc.stdout.readline())["id"] for _ in range(2)] == [1, 3]
        proc.send_signal(signal.SIGINT)  # the client's stdin stays open
        assert proc.wait(20) == 130
        assert proc.stdout.read() == b"" and proc.stderr.read() == b""
    finally:
        proc.kill()
