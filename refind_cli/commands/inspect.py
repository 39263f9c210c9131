"""`refind inspect …`: the review surface (a Typer sub-app; the planner's trace commands live in traces.py)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import render
from ..options import DbOption, JsonOption, RetentionOption, open_store

inspect_app = typer.Typer(
    help="Look into the database: users, sessions, turns, events and stored planner searches.\n\n"
    "Without a subcommand: an overview (file size, schema version, counts, said-at and recorded-at ranges, "
    "retention). Everything past retention is hidden, as from search.",
    no_args_is_help=False,
    invoke_without_command=True,
)


def register(app: typer.Typer) -> None:
    from . import traces

    traces.register(inspect_app)
    app.add_typer(inspect_app, name="inspect")


def _show(data, as_json: bool, table) -> None:
    if as_json:
        render.print_json(data)
    else:
        render.console().print(table(data))


@inspect_app.callback()
def overview(
    ctx: typer.Context,
    db: DbOption = "refind.db",
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Database path and size, schema version, users, sessions, messages, time ranges and retention."""
    if ctx.invoked_subcommand is not None:
        return
    from .. import review

    with open_store(db, retention) as store:
        _show(review.overview(store), as_json, render.overview)


@inspect_app.command("users")
def users(db: DbOption = "refind.db", retention: RetentionOption = None, as_json: JsonOption = False) -> None:
    """Every user with visible messages: sessions, requests, messages, said-at and recorded-at ranges."""
    from .. import review

    with open_store(db, retention) as store:
        _show(review.users(store), as_json, render.users_table)


@inspect_app.command("user")
def user(
    user_id: Annotated[str, typer.Argument(metavar="USER", help="The user id.")],
    db: DbOption = "refind.db",
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    """One user's sessions with dates and counts.

      refind inspect user alice
    """
    from .. import review

    with open_store(db, retention) as store:
        _show(review.user(store, user_id), as_json, render.user_sessions)


@inspect_app.command("session")
def session(
    user_id: Annotated[str, typer.Argument(metavar="USER", help="The user id.")],
    session_id: Annotated[str, typer.Argument(metavar="SESSION", help="The session id.")],
    db: DbOption = "refind.db",
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    """One session's transcript as the index sees it: turns with their stable ids.

      refind inspect session alice s1
    """
    from .. import review

    with open_store(db, retention) as store:
        _show(review.session(store, user_id, session_id), as_json, render.session_transcript)


@inspect_app.command("turn")
def turn(
    turn_id: Annotated[str, typer.Argument(metavar="ID", help="A turn id (from `inspect session` or a search).")],
    neighbours: Annotated[int, typer.Option("--neighbours", "-n", min=0, help="Turns to show either side.")] = 2,
    db: DbOption = "refind.db",
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    """One turn with its neighbours in the same session."""
    from .. import review

    with open_store(db, retention) as store:
        _show(review.turn(store, turn_id, neighbours=neighbours), as_json, render.turn_view)


@inspect_app.command("events")
def events(
    user_id: Annotated[Optional[str], typer.Option("--user", "-u", help="Only this user's events.")] = None,
    kind: Annotated[
        Optional[str], typer.Option("--kind", help="Only this kind: add, forget, expire, migrate.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Newest N events (0 = all).")] = 100,
    db: DbOption = "refind.db",
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    """The audit log, newest first: every add, forget, expire and migration (counts and ids, never text)."""
    from .. import review

    with open_store(db, retention) as store:
        _show(review.events(store, user_id=user_id, kind=kind, limit=limit), as_json, render.events_table)
