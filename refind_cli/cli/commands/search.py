"""`refind search`: one user's evidence blocks — by the LLM planner (agent mode) or by BM25 alone (bm25 mode)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from ... import settings
from ...errors import RefindError
from ..options import (
    DEFAULT_DB,
    ApiBaseOption,
    DbOption,
    DeadlineOption,
    JsonOption,
    MaxActionsOption,
    ModelOption,
    RetentionOption,
    SkipOption,
    TraceOption,
    UserOption,
    mode_source,
)

SEARCH_HELP = """\
Search one user's memory and print evidence blocks, best first.

\b
  refind search "where did Caroline go hiking" --user alice --mode bm25
  refind search "hiking" --user alice --mode bm25 --date-from 2023/05/01 --date-to 2023/05/31 --json

bm25 mode ranks the user's turns with BM25, fuses each turn's rank with its session's rank, and shows each hit
with its neighbouring turns. agent mode lets an LLM planner run several such searches. --json prints the
contract's search response: {"data": [{"id", "content", "score", "created_at"}]}; no match prints {"data": []};
a failure prints {"error": {"type", "message"}, "search_id"} (an agent search's stored id, else null).
"""


def register(app: typer.Typer) -> None:
    app.command("search", help=SEARCH_HELP, no_args_is_help=True)(search)


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    user: UserOption,
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="At most this many blocks.", min=1, max=1000)] = 10,
    date_from: Annotated[
        str | None,
        typer.Option(
            "--date-from", help="Only turns said on/after this date (YYYY/MM/DD, YYYYMMDD, ISO 8601 or Unix ms)."
        ),
    ] = None,
    date_to: Annotated[
        str | None,
        typer.Option(
            "--date-to", help="Only turns said on/before this date (YYYY/MM/DD, YYYYMMDD, ISO 8601 or Unix ms)."
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", envvar=settings.ENV_MODE, help="agent (LLM planner) or bm25. Default: agent."),
    ] = None,
    options: Annotated[
        list[str] | None, typer.Option("--option", help="A multiple-choice answer option (repeatable).")
    ] = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="Search only what was stored by this time (ISO or Unix ms).")
    ] = None,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
    max_actions: MaxActionsOption = None,
    deadline: DeadlineOption = None,
    skip: SkipOption = None,
    show_trace: TraceOption = False,
) -> None:
    from ...contract import CLI_NAMES, search_request

    request = search_request(  # every value checked and parsed once, before anything is opened
        query,
        user,
        top_k=top_k,
        date_from=date_from,
        date_to=date_to,
        as_of=as_of,
        options=tuple(options or ()),
        mode=mode or os.environ.get(settings.ENV_MODE) or settings.DEFAULT_MODE,
        names={**CLI_NAMES, "mode": mode_source(ctx)},
    )
    with _failure_as_json(as_json):  # once the request is read, a failure is JSON on stdout too
        if request.mode == "agent":
            from .agent import run_agent  # the planner's wiring: model check, live trace, stored search

            run_agent(
                db,
                retention,
                request,
                model=model,
                api_base=api_base,
                max_actions=settings.parse_max_actions(max_actions),
                deadline_s=settings.parse_agent_deadline(deadline),
                skip=settings.parse_agent_skip(skip),
                show_trace=show_trace,
                as_json=as_json,
            )
            return
        from ...retrieval import no_match, retrieve
        from ..options import open_to_read  # a typo in --db must not create an empty database and answer "no match"

        with open_to_read(db, retention) as store:
            blocks = retrieve(store, request).blocks
            # no match: say why when refind can tell (a mistyped "Alice" for "alice" finds nothing either)
            why = no_match(store, request) if not blocks and not as_json else None
        if as_json:  # through plain: a scripted search never imports rich
            from ..plain import print_json

            print_json({"data": [b.as_contract() for b in blocks]})
            return
        from .. import render

        render.print_blocks(blocks, query=query, user=request.user_id, nothing=why)


@contextmanager
def _failure_as_json(as_json: bool) -> Iterator[None]:
    """With ``--json``, a search that fails prints ``{"error": {"type", "message"}, "search_id"}`` on stdout (the
    server's error shape; ``search_id``: the stored agent search that failed, else null) before the error goes on to
    the red line on stderr and the exit code, as for every command: a script reading stdout sees why, and the id
    ``refind inspect search`` takes."""
    try:
        yield
    except RefindError as exc:
        if as_json:
            from ..plain import print_json

            print_json({"error": {"type": exc.kind, "message": exc.message}, "search_id": exc.search_id})
        raise
