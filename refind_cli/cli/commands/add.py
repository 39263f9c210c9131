"""`refind add`: one message from the shell, or a JSONL replay."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...contract import number_text, parse_add, parse_said_at, parse_timestamp
from ...errors import Conflict, Forgotten, InvalidInput
from .. import render
from ..options import DEFAULT_DB, DbOption, JsonOption, QuietOption, RetentionOption, open_store, retention_source

if TYPE_CHECKING:
    from ...contract import AddRequest
    from ...store import Store

ADD_HELP = """\
Store messages verbatim: one message from the shell, or a JSONL replay with --file.

One message:

\b
  refind add "Caroline: I went hiking at Mount Rainier" --user alice --session s1 --at 2023-05-08T13:56

Without --request-id the request id is 'cli-' plus a hash of the payload (user, session, role, content,
timestamp), so running the same command twice stores the message once; pass --request-id to store
identical text twice.

A replay (--file PATH, '-' for stdin, a pipe such as <(zcat log.gz) too, .gz accepted) reads one JSON
object per line, in either shape:

\b
  {"request_id": "r1", "user_id": "alice", "session_id": "s1", "messages": [{"role": "user", "content": "hi"}]}

\b
  {"user_id": "alice", "session_id": "s1", "role": "user", "content": "hi", "timestamp": 1700000000000}

Message lines of one user and session in a row become one request: with their request_id when they carry
one, else up to 20 at a time under the id 'auto-<hash of the group>'. A bad line is reported as FILE:LINE
and skipped; every valid line is stored; the exit code is non-zero when anything was refused. Replaying a
file again (also after an interruption) stores nothing twice, and a log replayed again after it grew stores
only its new lines (what was forgotten since is not stored again).
"""


def register(app: typer.Typer) -> None:
    app.command("add", help=ADD_HELP, no_args_is_help=True)(add)


def add(
    ctx: typer.Context,
    text: Annotated[str | None, typer.Argument(help="The message content (omit with --file).")] = None,
    file: Annotated[
        str | None, typer.Option("--file", "-f", help="Replay a JSONL file ('-' = stdin; .gz accepted).")
    ] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="User id (one message).")] = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Session id (one message).")] = None,
    role: Annotated[str, typer.Option("--role", help="user, assistant or system.")] = "user",
    timestamp: Annotated[
        str | None, typer.Option("--timestamp", help="When it was said, Unix ms (Unix seconds are read ×1000).")
    ] = None,
    at: Annotated[
        str | None,
        typer.Option("--at", help="When it was said, ISO 8601 (UTC unless it names a zone) or Unix ms as digits."),
    ] = None,
    request_id: Annotated[str | None, typer.Option("--request-id", help="Request id (default: a hash).")] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Refuse unknown fields; check the whole file first, store nothing if bad.")
    ] = False,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    if (text is None) == (file is None):
        raise InvalidInput("give either the message TEXT or --file PATH, not both and not neither")
    source = retention_source(ctx)
    if file is not None:
        if user or session or request_id is not None or timestamp is not None or at is not None:
            raise InvalidInput(
                "--user, --session, --request-id, --timestamp and --at are for one message, "
                "not --file (each line carries its own)"
            )
        with open_store(db, retention) as store:
            try:
                _replay(store, file, strict=strict, as_json=as_json, quiet=quiet, retention=retention, source=source)
            except BaseException:  # refused or stopped, having stored nothing into a file it created: no file
                store.remove_if_unused()  # (an empty file replayed without fault keeps the database it asked for)
                raise
        return
    request = _one_request(text or "", user, session, role, timestamp, at, request_id)  # checked before any file
    with open_store(db, retention) as store:
        outcome = store.add(request)
        kept = _remember(store, retention, source, as_json=as_json)
    if _names_a_file(text):  # stored as asked (it may be meant), but said: `refind add log.jsonl` forgot --file
        from shlex import quote

        undo = f"refind forget --user {quote(user or '')} --request-id {quote(outcome.request_id)} --yes"
        render.error_console().print(
            f"warning: the message stored is the name of a file ({text}), not its lines; to replay the file give "
            f"--file {quote(text or '')} (`{undo}` removes this message)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    result = {
        "success": True,
        "request_id": outcome.request_id,
        "user_id": outcome.user_id,
        "session_id": outcome.session_id,
        "status": outcome.status,
        "messages": outcome.messages,
    } | kept
    if as_json:
        render.print_json(result)
    else:
        word = "stored" if outcome.status == "added" else "already stored (identical replay, nothing written)"
        ids = (render.plain_id(i) for i in (outcome.request_id, outcome.user_id, outcome.session_id))
        line = "{}: request {} · user {} · session {}".format(word, *ids)  # one line whatever an id holds
        render.console().print(line, markup=False, highlight=False, soft_wrap=True)


def _one_request(
    text: str,
    user: str | None,
    session: str | None,
    role: str,
    timestamp: str | None,
    at: str | None,
    request_id: str | None,
) -> AddRequest:
    """The Add request of one message from the shell, checked whole (a refused one opens no database, so creates
    none); a timestamp read as seconds is said on stderr, and the id below is derived from the milliseconds."""
    if not user or not session:
        from shlex import quote

        hint = f"; {text} is a file: to replay its lines give --file {quote(text)}" if _names_a_file(text) else ""
        raise InvalidInput(f"one message needs --user and --session{hint}")
    if timestamp is not None and at is not None:
        raise InvalidInput("give --timestamp or --at, not both")
    notes: list[str] = []
    ts = parse_said_at(at, "--at", notes) if at is not None else _parse_timestamp(timestamp, notes)
    for note in notes:
        render.error_console().print(f"warning: {note}", markup=False, highlight=False, soft_wrap=True)
    from ...auto_ids import auto_request_id

    rid = (
        request_id
        if request_id is not None
        else "cli-" + auto_request_id(user, session, [(role, text, ts)])[len("auto-") :]
    )
    body = {
        "request_id": rid,
        "user_id": user,
        "session_id": session,
        "messages": [{"role": role, "content": text, "timestamp": ts}],
    }
    try:
        return parse_add(body)
    except InvalidInput as exc:  # named as the user gave it: "--role: …", not the request's "messages[0].role: …"
        said = str(exc)
        for field, flag in _FLAGS.items():
            if said.startswith(f"{field}:"):
                raise InvalidInput(flag + said[len(field) :]) from None
        raise


def _names_a_file(text: str | None) -> bool:
    """Whether a message from the shell is the path of a file there (`refind add log.jsonl`: --file left out)."""
    import os

    if not text or len(text) > 4096 or "\n" in text or "\0" in text:
        return False
    try:
        return os.path.isfile(text)
    except (OSError, ValueError):
        return False


# a one-message Add request's fields, by the flag or argument that gave each
_FLAGS = {
    "messages[0].role": "--role",
    "messages[0].content": "TEXT",
    "user_id": "--user",
    "session_id": "--session",
    "request_id": "--request-id",
}


def _parse_timestamp(value: str | None, notes: list[str]) -> int | None:
    """``--timestamp``: a number read as an Add's ``timestamp`` is (:func:`parse_timestamp`: ``-1`` no said-at,
    ``1700000000000.5`` the fraction dropped, as over HTTP); a date is ``--at``'s."""
    if value is None:
        return None
    number = number_text(value)
    if number is None:
        raise InvalidInput(f"--timestamp: {value!r} is not Unix milliseconds; give a date or ISO 8601 time with --at")
    return parse_timestamp(number, "--timestamp", notes)


def _remember(store: Store, retention: str | None, source: str, *, as_json: bool) -> dict[str, Any]:
    """Once something is stored, keep a retention given explicitly as the database's policy (a plain `refind expire`
    later applies it). After the data, not before: a refused input or a locked database writes nothing at all. A
    change of the stored policy is said on stderr; a failure to store it is a warning, never an error (the data was
    stored). With --json, said by the key this returns (``retention_policy``, when one was given) instead."""
    import sqlite3

    from ... import retention as policy
    from ...errors import RefindError

    days = policy.given(retention)
    if days is policy.UNSET:
        return {}
    err = render.error_console()
    try:
        change = policy.remember(store, days, by="refind add")
    except (RefindError, sqlite3.Error) as exc:  # locked by another writer, no space…: the data is stored, not it
        if not as_json:
            err.print(
                f"warning: the data was stored but the retention policy ({policy.days_text(days)}, from {source}) was "
                f"not: {exc}. To store it, run again with --retention-days {(retention or '').strip()} (what is stored "
                "is skipped)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        return {"retention_policy": _policy_json(days, source, stored=False, changed=False, error=str(exc))}
    if change.changed and not as_json:
        err.print(
            f"retention policy: {change.describe()} (stored, from {source})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    before = None if change.before is None else {"days": change.before.days}
    return {"retention_policy": _policy_json(days, source, stored=True, changed=change.changed, before=before)}


def _policy_json(
    days: float | None,
    source: str,
    *,
    stored: bool,
    changed: bool,
    before: dict[str, float | None] | None = None,
    error: str | None = None,
) -> dict[str, object]:
    """``retention_policy`` in `refind add --json`, one shape: ``before`` is the policy stored before ({"days": …},
    days null for off) or null when none was; ``error`` why it could not be stored, else null."""
    return {"days": days, "source": source, "stored": stored, "changed": changed, "before": before, "error": error}


def _replay(
    store: Store, file: str, *, strict: bool, as_json: bool, quiet: bool, retention: str | None, source: str
) -> None:
    err = render.error_console()
    show_bar = not quiet and not as_json and err.is_terminal
    progress = task = None
    if show_bar:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        progress = Progress(
            TextColumn("replaying"), BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=err, transient=True
        )
        task = progress.add_task("replay", total=None)
        progress.start()

    def on_progress(done: int, total: int | None) -> None:
        if progress is not None and task is not None:
            progress.update(task, completed=done, total=total)

    def on_problem(line: str) -> None:
        if not as_json:
            # a line quotes the file (an unknown field's name, say): never raw to the terminal
            (progress.console if progress else err).print(
                render.printable(line), markup=False, highlight=False, soft_wrap=True
            )

    from ...replay import Interrupted, replay, rest_advice

    try:
        summary = replay(store, file, strict=strict, on_progress=on_progress, on_problem=on_problem)
    except Interrupted as stop:  # Ctrl-C: what was stored before it, so the user knows a rerun stores the rest
        summary = stop.summary
    finally:
        if progress is not None:
            progress.stop()
    kept = {}
    if summary.fault is None and (summary.requests_added or summary.duplicates):
        kept = _remember(store, retention, source, as_json=as_json)
    data = summary.as_dict() | kept
    if as_json:
        render.print_json(data)
    else:
        for w in summary.warnings[:20]:
            err.print(f"warning: {render.printable(w)}", markup=False, highlight=False, soft_wrap=True)
        if len(summary.warnings) > 20:
            err.print(f"warning: … and {len(summary.warnings) - 20} more warnings (--json lists all)", markup=False)
        render.console().print(render.replay_summary(data))
        # the whole file again would store a fixed line's group twice: said where a refused line may be a message
        # line without request_id (a line with one, or an Add request, is never grouped by its content)
        if summary.regrouping and not strict:
            err.print(
                "hint: once fixed, replay a file of the invalid lines only: message lines without a request_id are "
                "grouped into requests by their content, so replaying the whole file would store the valid lines "
                "grouped with a fixed one a second time (unless each of them carries a timestamp that tells it apart)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    if summary.interrupted:
        err.print(
            f"interrupted: {summary.requests_added:,} requests ({summary.messages_added:,} messages) were stored "
            f"before {summary.stopped_by}; {render.printable(rest_advice(summary))}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(143 if summary.stopped_by == "SIGTERM" else 130)
    if summary.fault is not None:  # disk full, locked, …: one red line saying what was stored, its exit code
        raise summary.fault
    if summary.invalid_lines:
        raise typer.Exit(InvalidInput.exit_code)
    if summary.conflicts:
        raise typer.Exit(Conflict.exit_code)
    if summary.forgotten:
        raise typer.Exit(Forgotten.exit_code)
