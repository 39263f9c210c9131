"""README's configuration table against the code, both ways: every option of every command (and its short form, its
environment variable and its default) is in a row that applies to that command, every REFIND_* variable the code
defines is in the table with the default the code uses, and nothing in the table is gone from the code.

The table is parsed, the options are read from the CLI Typer builds and the defaults from ``refind_cli.settings``:
a flag, a variable or a default changed in the code without README fails here (and README edited alone too)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import typer
from conftest import ROOT
from test_docs import all_commands

from refind_cli import settings
from refind_cli.cli import app
from refind_cli.server.connections import DEFAULT_MAX_CONNECTIONS

README = (ROOT / "README.md").read_text(encoding="utf-8")
HELP = {"--help", "-h"}


@dataclass(frozen=True)
class Row:
    flags: frozenset[str]  # every --long and -s named in the flag column
    variables: frozenset[str]  # every REFIND_* named in the variable column
    default: str
    scope: frozenset[str]  # the commands the row names as its own; empty: it applies to every command
    line: str


def table_text(readme: str = README) -> str:
    section = readme[readme.index("\n## Configuration") :]
    return section[: section.index("\n## ", 1)]


def command_paths() -> list[str]:
    return [path for path, _ in all_commands()]


def named_commands(text: str, paths: list[str]) -> set[str]:
    """Commands a cell names in backticks: `refind X`, `X`, `inspect X`, or `X` alone for a subcommand whose name no
    top-level command takes (`tombstones` after `inspect events`, as README lists them)."""
    top = {p for p in paths if " " not in p}
    found = set()
    for quoted in re.findall(r"`([^`]+)`", text):
        name = quoted.removeprefix("refind ").strip()
        name = re.sub(r"\s+--.*$", "", name)  # `refind serve --mode agent`: the command
        if name in paths:
            found.add(name)
        else:
            found |= {p for p in paths if " " in p and p.split()[-1] == name and name not in top}
    return found


def parse_rows(readme: str = README) -> list[Row]:
    paths = command_paths()
    rows = []
    for line in table_text(readme).splitlines():
        if not line.startswith("| ") or line.startswith("| flag ") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == 4, f"a configuration row without its four cells: {line}"
        flag, variable, default, meaning = cells
        flags = frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)", flag))
        # its scope: the commands in parentheses in the flag cell, else those the meaning opens with
        # ("`refind serve`: …", "agent mode (`search`, `serve`, …): …")
        scope = set()
        for paren in re.findall(r"\(([^)]*)\)", flag):
            scope |= named_commands(paren, paths)
        if not scope and meaning.startswith("`refind "):
            scope = named_commands(meaning, paths)
        elif not scope and meaning.startswith("agent mode ("):
            scope = named_commands(meaning.split(":", 1)[0], paths)
        rows.append(Row(flags, frozenset(re.findall(r"REFIND_[A-Z_]+", variable)), default, frozenset(scope), line))
    return rows


ROWS = parse_rows()


def rows_for(path: str, name: str, rows: list[Row] = ROWS) -> list[Row]:
    return [r for r in rows if name in r.flags and (not r.scope or path in r.scope)]


def cli_options() -> list[tuple[str, object]]:
    """(command path, option) for every option of every command; "" is `refind` itself."""
    root = typer.main.get_command(app)
    found = [("", p) for p in root.params]
    for path, cmd in all_commands():
        found += [(path, p) for p in cmd.params if p.param_type_name == "option"]
    return [(path, p) for path, p in found if not set(p.opts) <= HELP]


def shown(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def test_the_table_is_parsed() -> None:
    # (a parser that found nothing would pass every check below)
    assert len(ROWS) > 50
    assert rows_for("search", "--top-k") and rows_for("eval", "--top-k")
    assert {r.scope for r in ROWS if "--mode" in r.flags} >= {frozenset({"search", "serve"}), frozenset({"mcp"})}
    assert len(cli_options()) > 100


@pytest.mark.parametrize(("path", "option"), cli_options(), ids=lambda x: x if isinstance(x, str) else x.name)
def test_every_option_is_in_a_row_of_its_command(path: str, option) -> None:
    command = f"refind {path}".strip()
    for name in [*option.opts, *option.secondary_opts]:
        assert rows_for(path, name), f"README's configuration table has no row for `{command} {name}`"
    long = option.opts[0]
    if option.envvar:
        rows = rows_for(path, long)
        assert any(option.envvar in r.variables for r in rows), (
            f"`{command} {long}` reads {option.envvar}, which its row does not name: {[r.line for r in rows]}"
        )
    default = option.default
    if default not in (None, False, "", ()) and not option.is_flag:
        value = getattr(default, "name", default)  # a Path: its name as typed
        rows = rows_for(path, long)
        assert any(shown(value) in r.default for r in rows), (
            f"`{command} {long}` defaults to {value!r}, which its row does not say: {[r.default for r in rows]}"
        )


def test_every_flag_and_variable_in_the_table_is_in_the_code() -> None:
    options = {name for _, p in cli_options() for name in [*p.opts, *p.secondary_opts]}
    gone = sorted({f for r in ROWS for f in r.flags} - options)
    assert not gone, f"README's configuration table names flags no command has: {gone}"
    defined = {v for k, v in vars(settings).items() if k.startswith("ENV_") and isinstance(v, str)}
    gone = sorted({v for r in ROWS for v in r.variables} - defined)
    assert not gone, f"README's configuration table names REFIND_* variables the code does not read: {gone}"


# The defaults the code resolves itself (the option is None until read), by the variable that sets them.
RESOLVED = {
    settings.ENV_DB: settings.DEFAULT_DB,
    settings.ENV_RETENTION_DAYS: settings.DEFAULT_RETENTION_DAYS,
    settings.ENV_MODE: settings.DEFAULT_MODE,
    settings.ENV_INDEX_CACHE_MB: settings.DEFAULT_INDEX_CACHE_MB,
    settings.ENV_MODEL: settings.DEFAULT_MODEL,
    settings.ENV_MAX_ACTIONS: settings.DEFAULT_MAX_ACTIONS,
    settings.ENV_AGENT_DEADLINE: settings.DEFAULT_AGENT_DEADLINE_S,
    settings.ENV_AGENT_SKIP: settings.SKIP_MODES[0],
    settings.ENV_LLM_TIMEOUT: settings.DEFAULT_LLM_TIMEOUT_S,
    settings.ENV_LLM_RETRIES: settings.DEFAULT_LLM_RETRIES,
    settings.ENV_BUSY_TIMEOUT: settings.DEFAULT_BUSY_TIMEOUT_S,
    settings.ENV_SERVER_MAX_BODY_MB: settings.DEFAULT_MAX_BODY_MB,
    settings.ENV_SERVER_SEARCH_THREADS: settings.DEFAULT_SEARCH_THREADS,
    settings.ENV_EXPIRE_INTERVAL_S: settings.DEFAULT_EXPIRE_INTERVAL_S,
    settings.ENV_SERVER_MAX_INFLIGHT_MB: settings.DEFAULT_MAX_INFLIGHT_MB,
    settings.ENV_SERVER_HEADER_TIMEOUT_S: settings.DEFAULT_HEADER_TIMEOUT_S,
    settings.ENV_SERVER_BODY_TIMEOUT_S: settings.DEFAULT_BODY_TIMEOUT_S,
    settings.ENV_SERVER_MAX_CONNECTIONS: DEFAULT_MAX_CONNECTIONS,
}


@pytest.mark.parametrize("variable", sorted(RESOLVED))
def test_a_variables_row_says_the_default_the_code_uses(variable: str) -> None:
    rows = [r for r in ROWS if variable in r.variables]
    assert rows, f"{variable} is in no row of README's configuration table"
    value = RESOLVED[variable]
    assert all(shown(value) in r.default for r in rows), (
        f"{variable} defaults to {value!r} in the code; README says {[r.default for r in rows]}"
    )


def test_the_check_fails_on_drift() -> None:
    """The parser is not blind: a row removed, a short flag changed or a default changed in README is caught."""
    top_k = next(r for r in ROWS if "`refind search`: at most N" in r.line)
    without = parse_rows(README.replace(top_k.line + "\n", ""))
    assert not rows_for("search", "--top-k", without)
    assert not rows_for("search", "-k", parse_rows(README.replace(top_k.line, top_k.line.replace("`-k`", "`-K`"))))
    changed = parse_rows(README.replace(top_k.line, top_k.line.replace("`10`", "`20`")))
    assert not any(shown(10) in r.default for r in rows_for("search", "--top-k", changed))


def flags_shown_with_commands(readme: str) -> set[tuple[str, str, str]]:
    """(command, flag, where) for every flag README shows after `refind COMMAND`, in running text and in examples,
    that the command does not have."""
    commands = dict(all_commands())
    options = {
        path: {n for p in cmd.params if p.param_type_name == "option" for n in [*p.opts, *p.secondary_opts]} | HELP
        for path, cmd in commands.items()
    }
    shown = re.findall(r"`(refind [^`]+)`", readme)
    shown += [line.split(" #")[0] for line in readme.splitlines() if re.match(r"(\S+=\S+ )*refind ", line)]
    wrong = set()
    for text in shown:
        words = text.split("refind ", 1)[1].split()
        path = ""
        while words and f"{path} {words[0]}".strip() in commands:
            path = f"{path} {words.pop(0)}".strip()
        if not path:
            continue
        for flag in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", " ".join(words)):
            if flag not in options[path]:
                wrong.add((path, flag, text))
    return wrong


def test_every_flag_readme_shows_with_a_command_is_one_of_its_options() -> None:
    assert flags_shown_with_commands(README) == set()
    # (and it is not blind: a flag shown with a command that lacks it is found, in an example and in running text)
    planted = README + "\n`refind inspect turn --bogus ID`\nrefind export --user alice --top-k 3 --db demo.db\n"
    assert {(p, f) for p, f, _ in flags_shown_with_commands(planted)} == {
        ("inspect turn", "--bogus"),
        ("export", "--top-k"),
    }


def layout_names(readme: str = README) -> set[str]:
    section = readme[readme.index("\n## How the code is laid out") :]
    section = section[: section.index("\n## ", 1)]
    cells = [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| `")]
    return {name for cell in cells for name in re.findall(r"`([\w/]+(?:\.py)?/?)`", cell)}


def test_the_layout_table_names_every_module_and_only_modules_that_exist() -> None:
    package = ROOT / "refind_cli"
    named = layout_names()
    modules = {p.name for p in package.glob("*.py")} - {"__init__.py", "__main__.py"}
    folders = {f"{p.name}/" for p in package.iterdir() if p.is_dir() and p.name not in ("data", "__pycache__")}
    missing = sorted((modules | folders) - named)
    assert not missing, f"README's 'How the code is laid out' names no row for: {missing}"
    gone = sorted(n for n in named if not list(package.rglob(n.rstrip("/"))))
    assert not gone, f"README's 'How the code is laid out' names what refind_cli does not hold: {gone}"
