"""`refind add --file` from a pipe — a named pipe, or the shell's ``<(zcat log.gz)`` — is read once, like stdin: it was
refused as "not a regular file" (a probe of round 17)."""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")

LINES = [
    {"user_id": "p", "session_id": "s", "role": "user", "content": "Caroline: I adopted a cat"},
    {"user_id": "p", "session_id": "s", "role": "assistant", "content": "What is its name?"},
]


def _pipe(tmp_path: Path, data: bytes) -> tuple[str, threading.Thread]:
    """A named pipe a thread writes ``data`` into once a reader opens it."""
    path = tmp_path / "log.pipe"
    os.mkfifo(path)

    def write() -> None:
        with open(path, "wb") as pipe:
            pipe.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return str(path), writer


def _text(lines: list[dict]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("packed", ["plain", "gzip"])
def test_a_replay_from_a_named_pipe_stores_every_line(cli, tmp_path, strict, packed) -> None:
    data = _text(LINES)
    path, writer = _pipe(tmp_path, gzip.compress(data) if packed == "gzip" else data)
    result = cli("add", "--file", path, "--json", *(["--strict"] if strict else []))
    writer.join(5)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["source"], summary["lines"], summary["messages_added"]) == (path, 2, 2)
    exported = [json.loads(line) for line in cli("export", "--user", "p").stdout.splitlines()]
    assert [m["content"] for r in exported for m in r["messages"]] == [line["content"] for line in LINES]


def test_a_strict_replay_from_a_pipe_with_a_bad_line_stores_nothing(cli, tmp_path) -> None:
    path, writer = _pipe(tmp_path, _text(LINES) + b"not json\n")
    result = cli("add", "--file", path, "--strict", "--json")
    writer.join(5)
    assert result.exit_code == 2, result.output
    assert f"{path}:3: " in result.output
    assert cli("export", "--user", "p").stdout == ""
