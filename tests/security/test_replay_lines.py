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
