"""A console that cannot write every character (a Latin-1 or cp1252 terminal, a Windows pipe, PYTHONIOENCODING=ascii)
shown Chinese text: escapes, never a traceback; JSON and exported JSONL stay the same data (\\uXXXX escapes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TEXT = "我去北京看长城 café 🎉"


def _refind(*argv: str, encoding: str, cwd) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONIOENCODING": encoding, "REFIND_DB": str(cwd / "m.db")}
    return subprocess.run(
        [sys.executable, "-m", "refind_cli", *argv], capture_output=True, env=env, cwd=cwd, timeout=120
    )


@pytest.fixture
def stored(tmp_path):
    log = tmp_path / "log.jsonl"
    line = {"request_id": "r1", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": TEXT}]}
    log.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    assert _refind("add", "--file", str(log), "-q", encoding="utf-8", cwd=tmp_path).returncode == 0
    return tmp_path


@pytest.mark.parametrize("encoding", ["latin-1", "ascii", "cp1252"])
def test_search_and_export_on_a_console_that_cannot_write_chinese(stored, encoding):
    shown = _refind("search", "北京", "--user", "u", "--mode", "bm25", encoding=encoding, cwd=stored)
    assert shown.returncode == 0, shown.stderr.decode(encoding, "replace")
    assert b"Traceback" not in shown.stderr
    assert "\\u5317\\u4eac" in shown.stdout.decode(encoding)  # 北京, escaped
    as_json = _refind("search", "北京", "--user", "u", "--mode", "bm25", "--json", encoding=encoding, cwd=stored)
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout.decode("ascii"))["data"][0]["content"] == f"user: {TEXT}"
    exported = _refind("export", "--user", "u", encoding=encoding, cwd=stored)
    assert exported.returncode == 0
    (request,) = [json.loads(line) for line in exported.stdout.decode("ascii").splitlines()]
    assert request["messages"][0]["content"] == TEXT


def test_an_error_naming_chinese_text_is_escaped_too(stored):
    failed = _refind(
        "search", "北京", "--user", "u", "--mode", "bm25", "--date-from", "北京", encoding="ascii", cwd=stored
    )
    assert failed.returncode == 2
    assert b"Traceback" not in failed.stderr and b"\\u5317\\u4eac" in failed.stderr


def test_export_on_a_utf7_console_is_escaped_json_that_reads_back(stored):
    # a probe of round 18: UTF-7 passed for a UTF; it writes "+" as "+-" and "é" as "+AOk", which read back as JSON
    # (UTF-8) were stored so — "a+-b caf+AOk" for "a+b café", exit 0
    exported = _refind("export", "--user", "u", encoding="utf-7", cwd=stored)
    assert exported.returncode == 0, exported.stderr
    (request,) = [json.loads(line) for line in exported.stdout.decode("ascii").splitlines()]
    assert request["messages"][0]["content"] == TEXT
