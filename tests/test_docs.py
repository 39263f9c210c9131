"""Docs that cannot drift: the README opens with the two commands, shows every command with an example, and lists
every REFIND_* variable the code reads; every command's --help works."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from conftest import ROOT

from refind_cli.cli import app

README = (ROOT / "README.md").read_text(encoding="utf-8")


def all_commands() -> list[tuple[str, Any]]:
    """Every command and subcommand (`inspect users`, …). typer 0.28 builds them on its own copy of click, so a
    group is told by its commands, not by ``isinstance(cmd, click.Group)``: that was never true, and no subcommand
    of `inspect` was checked."""
    root = typer.main.get_command(app)
    found = []

    def walk(group: Any, prefix: str) -> None:
        for name, cmd in group.commands.items():
            path = f"{prefix} {name}".strip()
            found.append((path, cmd))
            if hasattr(cmd, "commands"):
                walk(cmd, path)

    walk(root, "")
    return found


def test_readme_opens_with_the_two_commands() -> None:
    first_code = README.split("```", 2)[1]
    assert "make demo" in first_code and "make test" in first_code
    assert README.index("make demo") < README.index("## Commands")


@pytest.mark.parametrize("path", [p for p, _ in all_commands()])
def test_every_command_has_an_example_in_the_readme(path: str) -> None:
    assert re.search(rf"^refind {re.escape(path)}\b", README, re.M), f"README shows no example of `refind {path}`"


@pytest.mark.parametrize("path", [p for p, _ in all_commands()])
def test_every_command_has_help(path: str, cli) -> None:
    result = cli(*path.split(), "--help")
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and len(result.output.splitlines()) > 3


@pytest.mark.parametrize("path", [p for p, _ in all_commands()])
def test_every_example_in_a_help_text_prints_as_written(path: str, cli) -> None:
    """click re-wraps a paragraph unless a ``\\b`` line opens it: examples glued into one line ("refind forget …
    --yes refind forget …") read as one command."""
    examples = [line.strip() for line in (dict(all_commands())[path].help or "").splitlines()]
    shown = {line.strip() for line in cli(*path.split(), "--help").output.splitlines()}
    missing = [line for line in examples if line.startswith("refind ") and line not in shown]
    assert not missing, f"`refind {path} --help` re-wraps its examples: {missing}"


def test_every_refind_variable_in_the_code_is_in_the_configuration_table() -> None:
    used = set()  # REFIND__NAME (double underscore) is internal: how `serve --workers` hands settings to workers
    for source in (ROOT / "refind_cli").rglob("*.py"):
        used |= set(re.findall(r'"(REFIND_[A-Z][A-Z_]*)"', source.read_text(encoding="utf-8")))
    table = README[README.index("## Configuration") :]
    missing = sorted(v for v in used if f"`{v}`" not in table)
    assert not missing, f"REFIND_* variables read by the code but not in README's configuration table: {missing}"


def test_version(cli) -> None:
    from refind_cli import __version__

    result = cli("--version")
    assert result.exit_code == 0 and result.output.strip() == f"refind {__version__}"
