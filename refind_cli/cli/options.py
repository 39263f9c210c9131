"""Options shared by several commands, defined once as ``Annotated`` aliases with their REFIND_* variables."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .. import settings
from ..errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from ..store import Store

DEFAULT_DB = Path(settings.DEFAULT_DB)


def db_path(value: str | Path) -> Path:
    """--db's value as a path; an empty one is refused (Path("") is the current folder, which SQLite cannot open). An
    empty REFIND_DB never gets here: an empty variable counts as unset, as every REFIND_* variable does."""
    if isinstance(value, str) and not value.strip():
        raise InvalidInput(
            f"--db: an empty value is not a database file; leave the flag out for {settings.ENV_DB}, else "
            f"{settings.DEFAULT_DB}"
        )
    return Path(value)


# The path REFIND_DB gave a command's --db (None: the flag or the default did), for what a refusal says of it.
DB_FROM_VARIABLE: ContextVar[str | None] = ContextVar("refind_db_from_variable", default=None)


def _note_db_source(ctx: typer.Context, param: typer.CallbackParam, value: Path) -> Path:
    """Note a --db that REFIND_DB set: "no database at X" then says the variable names X (a path set long ago in a
    shell profile is easily forgotten; the refusal read as if the user had typed it)."""
    from_variable = getattr(ctx.get_parameter_source(param.name or ""), "name", None) == "ENVIRONMENT"
    DB_FROM_VARIABLE.set(str(value) if from_variable else None)  # (set each time: one process may run many commands)
    return value


DbOption = Annotated[
    Path,
    typer.Option(
        "--db",
        envvar=settings.ENV_DB,
        parser=db_path,
        callback=_note_db_source,
        metavar="<path>",
        help="SQLite database file.",
        show_default=True,
    ),
]


def a_user(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """An empty or blank --user is refused (exit 2) by every command, as `search` and `expire` refused it: `export`
    and `forget` answered "nothing … for user ''" (exit 4) of `--user "$U"` with U unset, and `inspect searches`
    listed every user's."""
    if value is not None and not value.strip() and not ctx.resilient_parsing:
        from ..contract import empty_text

        raise empty_text("--user", value, "" if param.required else " (leave the flag out for every user)")
    return value


UserOption = Annotated[
    str, typer.Option("--user", "-u", callback=a_user, help="The user whose memory to use (the isolation key).")
]
OptionalUserOption = Annotated[str | None, typer.Option("--user", "-u", callback=a_user, help="Limit to this user.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of rich output.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]


ARGS = "refind.args"  # ctx.meta key of the command line's arguments (RefindGroup.parse_args keeps them)


def given_as(ctx: typer.Context, param: typer.CallbackParam) -> str:
    """Where an option's value came from, as an error names it: its variable, or the flag as the command line spelt
    it (``--days`` or ``--retention-days``: one option), else all its flags."""
    if getattr(ctx.get_parameter_source(param.name or ""), "name", None) == "ENVIRONMENT":
        envvar = param.envvar
        return envvar if isinstance(envvar, str) else " / ".join(envvar or param.opts)
    args = ctx.meta.get(ARGS, [])
    used = [o for o in param.opts if any(a == o or a.startswith(f"{o}=") for a in args)]
    return used[0] if len(used) == 1 else " / ".join(param.opts)


def not_empty_on_the_line(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """A retention given on the command line with an empty value is refused (exit 2): `--days "$DAYS"` with DAYS unset
    was read as no flag at all, and `expire` swept with the stored policy or the default (found by a probe). An empty
    variable still counts as unset, as every REFIND_* variable does. A bad value is refused here, naming the flag or
    the variable it came from (the error said only "retention:" whichever it was)."""
    source = ctx.get_parameter_source(param.name or "")
    if value is not None and not value.strip() and getattr(source, "name", None) == "COMMANDLINE":
        raise InvalidInput(
            f"{' / '.join(param.opts)}: an empty value is not a number of days (or 'off'); leave the flag out for the "
            "retention the database remembers, else 30 days"
        )
    if value is not None and value.strip() and not ctx.resilient_parsing:
        settings.parse_retention(value, given_as(ctx, param))
    return value


RetentionOption = Annotated[
    str | None,
    typer.Option(
        "--retention-days",
        envvar=settings.ENV_RETENTION_DAYS,
        callback=not_empty_on_the_line,
        help=(
            "Hide and expire messages recorded more than this many days ago ('off' keeps everything). Default: what "
            "the database remembers (add, serve and mcp store a value given them), else 30."
        ),
    ),
]


# The database the running command opened, for the CLI's error line: a storage fault names the file.
CURRENT_DB: ContextVar[str | None] = ContextVar("refind_current_db", default=None)


def remember_db(db: Path) -> None:
    """Note the command's database for the CLI's error line."""
    CURRENT_DB.set(str(db))


def refuse_memory_db(db: Path) -> None:
    """SQLite's ':memory:' is one connection's database: gone when the command ends, with all it stored."""
    if str(db) == ":memory:":
        raise InvalidInput("--db: ':memory:' would be gone when this command ends, with all it stored; give a file")


def open_store(
    db: Path,
    retention: str | None,
    *,
    writer: str | None = None,
    read_only: bool = False,
    until: float | None = None,
) -> Store:
    """Open the store named by --db with the retention from --retention-days / REFIND_RETENTION_DAYS, else the one
    the database remembers, else the default; a ``writer`` (``"refind add"``) stores one given explicitly.
    ``read_only``: an existing refind database, changed in nothing (``Store(read_only=True)``). ``until``: an agent
    search's deadline (``time.monotonic()``), which the open's waits for a lock end by (``Store(until=)``)."""
    from .. import retention as policy
    from ..store import Store
    from .plain import index_progress

    days = policy.given(retention)  # (a bad value is refused before any file is created)
    remember_db(db)
    refuse_memory_db(db)
    store = Store(db, index_progress=index_progress(), read_only=read_only, until=until)
    try:
        policy.apply(store, days, writer=writer)
    except BaseException:
        store.close()
        raise
    return store


def source_name(ctx: typer.Context, param: str, flag: str, variable: str) -> str:
    """Where a command's option came from, as an error names it: its flag, or the variable that set it."""
    return variable if getattr(ctx.get_parameter_source(param), "name", None) == "ENVIRONMENT" else flag


def retention_source(ctx: typer.Context) -> str:
    """Where the command's --retention-days came from: the flag or the variable (for what it says of it)."""
    return source_name(ctx, "retention", "--retention-days", settings.ENV_RETENTION_DAYS)


def mode_source(ctx: typer.Context) -> str:
    """Where the command's --mode came from: the flag or REFIND_MODE."""
    return source_name(ctx, "mode", "--mode", settings.ENV_MODE)


def open_to_read(db: Path, retention: str | None) -> Store:
    """:func:`open_existing` for a command that only reads (``search`` in bm25 mode, ``export``): where the database
    cannot be written — a backup on read-only media, a file of another account — it is read as ``refind inspect``
    reads it (``Store(read_only=True)``, changed in nothing) instead of refused (exit 9, "cannot be written": a
    probe of round 24). A database that can be written is opened as before (an older one is upgraded); an older one
    that cannot is ReadOnlyDatabase, saying how to read it (inspect's refusal lists this command among the upgraders)."""
    from ..errors import OlderDatabase, ReadOnlyDatabase

    try:
        return open_existing(db, retention)
    except ReadOnlyDatabase as cannot_write:
        try:
            return open_existing(db, retention, read_only=True)
        except OlderDatabase:
            raise ReadOnlyDatabase(
                f"{cannot_write.message}; and an older refind wrote it, which this version reads only once a command "
                f"that can write it has upgraded it — nothing was changed: `refind backup COPY --db {db}` copies it "
                "as it is to where it can be written, and this command upgrades and reads the copy there"
            ) from None


def open_existing(db: Path, retention: str | None, *, read_only: bool = False, until: float | None = None) -> Store:
    """open_store, refusing a path where no database is (a typo must not create an empty one), or a zero-byte file
    (search, export, forget and expire would write a whole schema into it, and find nothing)."""
    if not Path(db).exists():
        from ..store import no_database

        raise no_database(db, from_variable=str(db) == DB_FROM_VARIABLE.get())
    if Path(db).is_file() and Path(db).stat().st_size == 0:
        from ..migrations import EMPTY

        raise NotFound(f"cannot open database {db}: {EMPTY}")
    return open_store(db, retention, read_only=read_only, until=until)


# Agent mode (the planner)
def a_model(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """An empty or blank --model (or a blank REFIND_MODEL) is refused (exit 2), naming where it came from: `--model
    ""` was read as no flag, and the default model asked (`mcp`: bm25 mode, silently). An empty variable is unset."""
    if value is not None and not value.strip() and not ctx.resilient_parsing:
        from ..model import blank_model

        raise blank_model(given_as(ctx, param), value)
    return value


ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar=settings.ENV_MODEL,
        callback=a_model,
        help=f"litellm model string for agent mode (default {settings.DEFAULT_MODEL}).",
    ),
]


def an_api_base(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """An empty or blank --api-base (or a blank REFIND_API_BASE) is refused (exit 2), naming where it came from:
    `--api-base ""` was read as no flag, and the model's provider asked at its own address. An empty variable is
    unset."""
    if value is not None and not value.strip() and not ctx.resilient_parsing:
        from ..model import blank_api_base

        raise blank_api_base(given_as(ctx, param), value)
    return value


ApiBaseOption = Annotated[
    str | None,
    typer.Option(
        "--api-base",
        envvar=settings.ENV_API_BASE,
        callback=an_api_base,
        help="Base URL of an OpenAI-compatible server (ollama, vLLM, llama.cpp), e.g. http://127.0.0.1:11434/v1.",
    ),
]
MaxActionsOption = Annotated[
    str | None,
    typer.Option(
        "--max-actions",
        envvar=settings.ENV_MAX_ACTIONS,
        help=(
            f"The planner's budget: at most this many actions (model replies) per search, 1 to "
            f"{settings.MAX_MAX_ACTIONS} (default {settings.DEFAULT_MAX_ACTIONS}). Read in agent mode only."
        ),
    ),
]
DeadlineOption = Annotated[
    str | None,
    typer.Option(
        "--deadline",
        envvar=settings.ENV_AGENT_DEADLINE,
        help=(
            f"Agent mode: seconds one search may take in all (default {settings.DEFAULT_AGENT_DEADLINE_S:g}, at most "
            f"{settings.MAX_AGENT_DEADLINE_S:,g}); past it the planner stops and returns what it kept. Read in agent "
            "mode only."
        ),
    ),
]
SkipOption = Annotated[
    str | None,
    typer.Option(
        "--skip",
        envvar=settings.ENV_AGENT_SKIP,
        help=(
            "Agent mode: what a later search of the planner skips of what earlier ones showed: session (every "
            "session shown; default) or turn (only the hits shown). Read in agent mode only."
        ),
    ),
]
TraceOption = Annotated[
    bool,
    typer.Option("--trace", help="Show every planner step live (stderr with --json); stored either way."),
]
