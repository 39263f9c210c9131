"""Item 13: `refind add --file` reads a line in linear time and refuses one over the limit as FILE:LINE, storing
every other line."""

from __future__ import annotations

import io
import json
import random

from refind_cli import replay


def message(user: str, text: str) -> str:
    return json.dumps({"user_id": user, "session_id": "s", "role": "user", "content": text, "request_id": text[:8]})


def test_a_line_over_the_limit_is_one_line_error_and_the_rest_is_stored(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "MAX_LINE_BYTES", 1_000)
    path = tmp_path / "log.jsonl"
    big = message("alice", "x" * 5_000)
    path.write_text("\n".join([message("alice", "first ok"), big, message("alice", "last ok!")]))
    result = cli("add", "--file", str(path), "--quiet")
    assert result.exit_code == 2
    assert f"{path}:2: line of {len(big):,} bytes, over the limit of 1,000 bytes; split its messages" in result.output
    exported = cli("export", "--user", "alice").stdout
    assert "first ok" in exported and "last ok!" in exported and "xxxx" not in exported


def test_lines_come_back_whole_whatever_the_chunking() -> None:
    rng = random.Random(7)
    data = b"".join(rng.choice([b"a", b"bb", b"\n", b"ccc", b"\n\n"]) for _ in range(3_000)) + b"tail"
    for chunk in (1, 2, 5, 64, 1 << 20):
        assert list(replay._iter_lines(io.BytesIO(data), chunk=chunk)) == data.split(b"\n")


def test_an_overlong_line_is_never_held_whole(monkeypatch) -> None:
    monkeypatch.setattr(replay, "MAX_LINE_BYTES", 100)
    data = b"short\n" + b"y" * 10_000 + b"\nafter"
    lines = list(replay._iter_lines(io.BytesIO(data), chunk=64))
    assert lines[0] == b"short" and lines[2] == b"after"
    assert isinstance(lines[1], replay.Overlong) and lines[1].size == 10_000 and lines[1] == b""


def test_a_line_of_too_many_json_arrays_is_one_line_error_and_the_rest_is_stored(cli, tmp_path):
    from refind_cli.contract import MAX_CONTAINERS

    path = tmp_path / "log.jsonl"
    arrays = json.loads(message("alice", "arrays!!"))
    arrays["junk"] = [[] for _ in range(MAX_CONTAINERS + 10)]
    path.write_text("\n".join([message("alice", "first ok"), json.dumps(arrays), message("alice", "last ok!")]))
    result = cli("add", "--file", str(path), "--quiet")
    assert result.exit_code == 2
    expected = f"{MAX_CONTAINERS + 12:,} JSON objects and arrays, over the limit of {MAX_CONTAINERS:,}"
    assert f"{path}:2: {expected}" in result.output
    exported = cli("export", "--user", "alice").stdout
    assert "first ok" in exported and "last ok!" in exported and "arrays!!" not in exported


def test_a_number_past_python_s_digit_limit_is_said_in_refind_s_words(cli, tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(
        '{"user_id": "a", "session_id": "s", "role": "user", "content": "x", "timestamp": ' + "9" * 5000 + "}"
    )
    result = cli("add", "--file", str(path), "--quiet")
    assert result.exit_code == 2
    assert f"{path}:1: a number of more than 4,300 digits" in result.output
