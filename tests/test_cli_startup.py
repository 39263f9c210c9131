"""What a `refind` process builds and imports before it runs one command (root.main): only that command, and for a
scripted search (`--mode bm25 --json`) neither rich nor pydantic (BENCHMARKS.md, "Index on write": the cold
process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import FIXTURES

from refind_cli.cli import root


def _names(app) -> set[str]:
    import typer.main
    from typer.core import TyperGroup

    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return set(group.commands)


def test_every_top_level_command_but_inspect_can_be_built_alone():
    assert set(root.ONE_COMMAND) | {"inspect"} == _names(root.full_app())


@pytest.mark.parametrize("name", sorted(root.ONE_COMMAND))
def test_a_command_built_alone_is_the_full_apps_command(runner, name):
    alone = runner.invoke(root.command_app(name), [name, "--help"], prog_name="refind", terminal_width=120)
    full = runner.invoke(root.full_app(), [name, "--help"], prog_name="refind", terminal_width=120)
    assert alone.exit_code == full.exit_code == 0
    assert alone.output == full.output
    assert name in _names(root.command_app(name))


@pytest.mark.slow
def test_a_scripted_search_imports_no_rich_pydantic_or_other_commands(cli, db_path):
    """A cold `refind search --mode bm25 --json` loads its own command module and nothing heavy it does not use:
    no rich or pydantic, no other command, and none of litellm, fastapi, openai or mcp (agent mode, the server)."""
    assert cli("add", "--file", str(FIXTURES / "conversations.jsonl"), "--quiet").exit_code == 0
    code = (
        "import sys\n"
        "from refind_cli.cli import main\n"
        f"sys.argv = ['refind', 'search', 'Lisbon', '--user', 'alice', '--mode', 'bm25', '--json', '--db', "
        f"{str(db_path)!r}, '--retention-days', 'off']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "prefixes = ('rich', 'pydantic', 'refind_cli.cli.render', 'refind_cli.cli.commands.', 'litellm', 'fastapi', "
        "'openai', 'mcp')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(prefixes))\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Lisbon" in out.stdout
    assert "LOADED ['refind_cli.cli.commands.search']" in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["serch", "x"], 2, "No such command 'serch'. Did you mean 'search'"),
        (["--version"], 0, "refind "),
        (["inspect", "--help"], 0, "searches"),
    ],
)
def test_other_command_lines_run_the_full_app(argv, code, expected):
    out = subprocess.run([sys.executable, "-m", "refind_cli", *argv], capture_output=True, text=True, timeout=120)
    assert out.returncode == code, out.stderr
    assert expected in out.stdout + out.stderr


@pytest.mark.parametrize(("preset", "expected"), [(None, "1"), ("3", "3")])
def test_refind_runs_numpy_with_one_openblas_thread_unless_told_otherwise(preset, expected):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = (
        "import os, sys\n"
        "from refind_cli.cli import main\n"
        "sys.argv = ['refind', '--version']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('THREADS', os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert f"THREADS {expected}" in out.stdout


@pytest.mark.parametrize(("terminal", "drawn"), [(True, True), (False, False)])
def test_the_reindex_progress_bar_is_drawn_on_a_terminal_only(terminal, drawn):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    if terminal:
        env["FORCE_COLOR"] = "1"  # rich takes stderr for a terminal
    code = (
        "import sys\n"
        "from refind_cli.cli.plain import index_progress\n"
        "report = index_progress()\n"
        "print('BEFORE', 'rich' in sys.modules)\n"
        "report(0, 10)\nreport(10, 10)\n"
        "print('PROGRESS', 'rich.progress' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "BEFORE False" in out.stdout  # nothing is made until there is something to report
    assert ("indexing messages for search" in out.stderr) is drawn
    assert f"PROGRESS {drawn}" in out.stdout  # off a terminal no bar is made at all
