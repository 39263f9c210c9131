"""A new user's first hour, mistakes included: each message says what is wrong and what to do, through the real CLI
(Typer's CliRunner) on real SQLite files."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def error_lines(output: str) -> list[str]:
    assert "Traceback" not in output
    return [line for line in output.splitlines() if line.startswith(("error:", "warning:", "Error:"))]


def test_the_root_helps_example_finds_what_it_asks(runner, db_path, monkeypatch):
    """`refind --help` replays the fixture and searches it: the search must be about that fixture (it asked "where
    did Caroline go hiking" of user alice, who never mentions Caroline or hiking there; the top hit was a Lisbon
    hotel)."""
    from refind_cli.cli import app

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("REFIND_DB", str(db_path))
    lines = [line.strip() for line in runner.invoke(app, ["--help"]).output.splitlines()]
    add = next(shlex.split(line) for line in lines if line.startswith("refind add "))
    search = next(shlex.split(line) for line in lines if line.startswith("refind search "))
    assert runner.invoke(app, [*add[1:], "--quiet"]).exit_code == 0
    result = runner.invoke(app, [*search[1:], "--json", "--top-k", "1"])
    assert result.exit_code == 0, result.output
    top = json.loads(result.output)["data"][0]["content"].lower()
    asked = {word.strip("?").lower() for word in search[2].split()} - {"where", "was", "did", "the", "go"}
    assert asked and all(word in top for word in asked), (asked, top)
