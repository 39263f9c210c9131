"""`refind expire`, `refind forget`, `refind export`: age data out, delete it for good, take it away."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ... import settings
from ...errors import InvalidInput
from .. import render
from ..options import (
    DEFAULT_DB,
    DbOption,
    JsonOption,
    OptionalUserOption,
    RetentionOption,
    UserOption,
    not_empty_on_the_line,
    open_existing,
    open_to_read,
)
from ..plain import writes_unicode

if TYPE_CHECKING:
    from ...lifecycle import ExportResult
    from ...store import Store

EXPIRE_HELP = """\
Delete now every message recorded (stored) more than the retention window ago, and print counts per user.

Retention counts from recorded-at, when this store received a message, not from when it was said. Reads hide
expired messages even before a sweep; expire removes them from the file (scrubbed, WAL truncated), with their
request rows and stored planner searches that quote them. Without --days (or REFIND_RETENTION_DAYS, which stands
for it) the window is the retention the database remembers (the last one given to add, serve, mcp or a Memory),
else 30 days; the output says which applied.

\b
  refind expire --dry-run            # what would go, per user
  refind expire --days 7             # delete what was recorded more than 7 days ago
"""

FORGET_HELP = """\
Delete a user's memory — all of it, one session, or one request — and everything derived from it.

The text is scrubbed from the database file and the WAL is truncated; a tombstone keeps ids, counts and
content hashes (never text). A forgotten request is not stored again by a later replay (refused, exit code 6);
send it under a new request id to store it deliberately. Asks for confirmation on a terminal unless --yes.

\b
  refind forget --user alice --session s2 --yes
  refind forget --user alice --request-id alice-s1-0 --yes
  refind forget --user alice --yes
"""

EXPORT_HELP = """\
Write a user's visible messages (or one session's) as Add-request JSONL, with the original request ids, message
order and said-at timestamps. `refind add --file` reads it back into an identical store.

\b
  refind export --user alice --output alice.jsonl
  refind add --file alice.jsonl --db copy.db
"""


# The shared --retention-days, with the shorter spelling for the command whose whole job it is.
ExpireDaysOption = Annotated[
    str | None,
    typer.Option(
        "--retention-days",
        "--days",
        envvar=settings.ENV_RETENTION_DAYS,
        callback=not_empty_on_the_line,
        help=(
            "Expire messages recorded more than this many days ago (at least 1; 'off': nothing). Default: the "
            "retention the database remembers, else 30. Applies to this run only; a shorter one than the stored "
            "policy is allowed, and said."
        ),
    ),
]


def register(app: typer.Typer) -> None:
    app.command("expire", help=EXPIRE_HELP)(expire)
    app.command("forget", help=FORGET_HELP, no_args_is_help=True)(forget)
    app.command("export", help=EXPORT_HELP, no_args_is_help=True)(export)


def expire(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")] = False,
    user: OptionalUserOption = None,
    db: DbOption = DEFAULT_DB,
    retention: ExpireDaysOption = None,
    as_json: JsonOption = False,
) -> None:
    from ... import lifecycle
    from ... import retention as policy

    days = policy.given(retention)
    with open_existing(db, None) as store:
        applied = policy.apply(store, days)  # (not stored: a sweep's window is for this run)
        try:
            result = lifecycle.expire(store, user_id=user, dry_run=dry_run)
        except lifecycle.ExpireStopped as stop:  # steps committed before it: said, as a replay says what it stored
            render.error_console().print(stop.said(), markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(143 if stop.stopped_by == "SIGTERM" else 130) from None
    data = result.as_dict() | {"policy": applied.as_dict()}
    if as_json:
        render.print_json(data)
    else:
        render.console().print(render.expire_result(data))


def forget(
    user: UserOption,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Forget only this session.")] = None,
    request_id: Annotated[str | None, typer.Option("--request-id", help="Forget only this request.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    from ... import lifecycle
    from ...errors import NotFound

    if session is not None and request_id is not None:
        raise InvalidInput("give --session or --request-id, not both (or neither, to forget the whole user)")
    with open_existing(db, retention) as store:
        if not yes:  # (nothing in scope is said first: no confirmation asked of what is not there)
            nothing = lifecycle.nothing_to_forget(store, user, session_id=session, request_id=request_id)
            if nothing is not None:
                raise NotFound(nothing)
            what = (
                f"request {request_id!r} of user {user!r}"
                if request_id is not None
                else f"session {session!r} of user {user!r}"
                if session is not None
                else f"ALL memory of user {user!r}"
            )
            if not sys.stdin.isatty():
                raise InvalidInput(f"refusing to forget {what} without confirmation: pass --yes")
            typer.confirm(f"Permanently delete {what}?", abort=True, err=True)
        result = lifecycle.forget(store, user, session_id=session, request_id=request_id)
    data = result.as_dict()
    if as_json:
        render.print_json(data)
    else:
        render.console().print(render.forget_result(data))


def export(
    user: UserOption,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Export only this session.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    from ... import lifecycle

    with open_to_read(db, retention) as store:  # (a backup on read-only media too)
        if output is None or str(output) == "-":
            lifecycle.export(store, user, sys.stdout, session_id=session, ascii_only=not writes_unicode(sys.stdout))
            sys.stdout.flush()
            return
        result = _export_to_file(store, user, session, output)
    data = {**result.as_dict(), "output": str(output)}
    if as_json:
        render.print_json(data)
    else:
        render.error_console().print(
            f"exported {data['requests']:,} request(s), {data['messages']:,} message(s) to {output}",
            markup=False,
        )


def _export_to_file(store: Store, user: str, session: str | None, output: Path) -> ExportResult:
    """Write next to the target and rename into place, so a failed export never leaves a partial file."""
    from ... import lifecycle
    from ...files import whole_file

    database = store.path.resolve()
    for suffix in ("", "-wal", "-shm", "-journal"):  # replacing one of them would destroy every user's memory
        if output.resolve() == database.with_name(database.name + suffix):
            raise InvalidInput(
                f"--output: {output} is the database{f' {suffix} file' if suffix else ''} itself; name another "
                f"file, e.g. {user}.jsonl"
            )
    with whole_file(output, option="--output", example=f"{user}.jsonl") as out:
        return lifecycle.export(store, user, out, session_id=session)
