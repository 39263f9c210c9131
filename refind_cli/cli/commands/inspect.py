"""`refind inspect …`: the review surface (a Typer sub-app; the planner's trace commands live in traces.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .. import render
from ..options import DEFAULT_DB, DbOption, JsonOption, RetentionOption, a_user, open_existing

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...store import Store

inspect_app = typer.Typer(
    help="Look into the database: users, sessions, turns, events and stored planner searches.\n\n"
    "Without a subcommand: an overview (file size, schema version, counts, said-at and recorded-at ranges, "
    "retention). Everything past retention is hidden, as from search.",
    no_args_is_help=False,
    invoke_without_command=True,
)


TableOption = Annotated[
    bool | None,
    typer.Option(
        "--table/--plain",
        help="Draw the table, or print plain text (every message whole, its further lines indented). Default: the "
        f"table up to {render.TABLE_MAX_CHARS:,} characters and {render.TABLE_MAX_MESSAGES:,} messages, plain text "
        "past them.",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    """Add `refind inspect` (cli.py adds the stored-search subcommands of traces.py to it first)."""
    app.add_typer(inspect_app, name="inspect")


def _open(ctx: typer.Context, db: Path, retention: str | None) -> Store:
    """The store, honouring --db/--retention-days given before the subcommand (`refind inspect --db X users`); read
    only: inspect creates, migrates and writes nothing."""
    db, retention = _shared(ctx, db=db, retention=retention)
    return open_existing(db, retention, read_only=True)


def _shared(ctx: typer.Context, **values: Any) -> list[Any]:
    parent = ctx.parent
    out = []
    for name, value in values.items():
        # compared by name: the enum class differs between click and the click that typer may bundle
        mine = getattr(ctx.get_parameter_source(name), "name", None)
        theirs = getattr(parent.get_parameter_source(name), "name", None) if parent is not None else None
        if parent is not None and mine != "COMMANDLINE" and theirs == "COMMANDLINE":
            value = parent.params[name]
        out.append(value)
    return out


RowsOption = Annotated[
    bool | None,
    typer.Option(
        "--table/--plain",
        help=f"Draw the table, or print tab-separated lines (a row a line). Default: the table up to "
        f"{render.TABLE_MAX_ROWS:,} rows, the lines past them.",
        show_default=False,
    ),
]


def _show(ctx: typer.Context, data: Any, as_json: bool, table: Callable[[Any], Any], drawn: bool | None = None) -> None:
    (as_json,) = _shared(ctx, as_json=as_json)
    if as_json:
        render.print_json(data)
    else:
        render.print_listing(table(data), drawn=drawn)


@inspect_app.callback()
def overview(
    ctx: typer.Context,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Check the file instead: PRAGMA integrity_check, and derived data (request counts, search index) "
            "against the messages. Exit code 10 when anything is wrong.",
        ),
    ] = False,
) -> None:
    """Database path and size, schema version, users, sessions, messages, time ranges and retention."""
    if ctx.invoked_subcommand is not None:
        return  # the subcommand reads these options from ctx.parent
    from ... import review

    if check:
        _check(db, as_json)
        return

    with open_existing(db, retention, read_only=True) as store:
        data = review.overview(store)
    if as_json:
        render.print_json(data)
    else:
        render.console().print(render.overview(data))


def _check(db: Path, as_json: bool) -> None:
    from ... import health
    from ...errors import CorruptDatabase
    from ..options import remember_db

    remember_db(db)
    report = health.check(Path(db))
    if as_json:
        render.print_json(report)
    else:
        render.console().print(render.check_report(report))
    if not report["ok"]:
        raise typer.Exit(CorruptDatabase.exit_code)


@inspect_app.command("users")
def users(
    ctx: typer.Context,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    table: RowsOption = None,
) -> None:
    """Every user with visible messages: sessions, requests, messages, said-at and recorded-at ranges."""
    from ... import review

    with _open(ctx, db, retention) as store:
        data = review.users(store)
    _show(ctx, data, as_json, render.users_table, table)


@inspect_app.command("user")
def user(
    ctx: typer.Context,
    user_id: Annotated[str, typer.Argument(metavar="USER", help="The user id.")],
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    table: RowsOption = None,
) -> None:
    """One user's sessions with dates and counts.

    refind inspect user alice
    """
    from ... import review

    with _open(ctx, db, retention) as store:
        data = review.user(store, user_id)
    _show(ctx, data, as_json, render.user_sessions, table)


@inspect_app.command("session")
def session(
    ctx: typer.Context,
    user_id: Annotated[str, typer.Argument(metavar="USER", help="The user id.")],
    session_id: Annotated[str, typer.Argument(metavar="SESSION", help="The session id.")],
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    table: TableOption = None,
) -> None:
    """One session's transcript as the index sees it: turns with their stable ids.

    refind inspect session alice s1
    """
    from ... import review

    (as_json,) = _shared(ctx, as_json=as_json)
    with _open(ctx, db, retention) as store:
        with store.reading():  # the order and the size from one snapshot; the rows are read as printed, no read held
            turns = review.session_turns(store, user_id, session_id)
            size = None if as_json else review.session_size(store, user_id, session_id)
        data = {"user_id": user_id, "session_id": session_id, "turns": turns}
        if size is None:
            render.print_json_streamed(data)
        else:
            render.print_session(data, table=table, size=size)


@inspect_app.command("turn")
def turn(
    ctx: typer.Context,
    turn_id: Annotated[str, typer.Argument(metavar="ID", help="A turn id (from `inspect session` or a search).")],
    neighbours: Annotated[int, typer.Option("--neighbours", "-n", min=0, help="Turns to show either side.")] = 2,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    table: TableOption = None,
) -> None:
    """One turn with its neighbours in the same session."""
    from ... import review

    with _open(ctx, db, retention) as store:
        data = review.turn(store, turn_id, neighbours=neighbours)
    (as_json,) = _shared(ctx, as_json=as_json)
    if as_json:
        render.print_json(data)
    else:
        render.print_turn(data, table=table)


@inspect_app.command("events")
def events(
    ctx: typer.Context,
    user_id: Annotated[
        str | None, typer.Option("--user", "-u", callback=a_user, help="Only this user's events.")
    ] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="Only this kind: add, forget, expire, migrate.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Newest N events (0 = all).")] = 100,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    table: RowsOption = None,
) -> None:
    """The audit log, newest first: every add, forget, expire and migration (counts and ids, never text)."""
    from ... import review

    with _open(ctx, db, retention) as store:
        data = review.events(store, user_id=user_id, kind=kind, limit=limit)
    _show(ctx, data, as_json, render.events_table, table)


@inspect_app.command("tombstones")
def tombstones(
    ctx: typer.Context,
    user_id: Annotated[
        str | None, typer.Option("--user", "-u", callback=a_user, help="Only this user's tombstones.")
    ] = None,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    table: RowsOption = None,
) -> None:
    """What forget removed, newest first: scope, ids, counts and content hashes (never text)."""
    from ... import lifecycle

    with _open(ctx, db, retention) as store:
        data = lifecycle.tombstones(store, user_id=user_id)
    _show(ctx, data, as_json, render.tombstones_table, table)
