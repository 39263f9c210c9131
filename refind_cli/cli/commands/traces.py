"""`refind inspect searches` and `refind inspect search ID`: stored planner traces, re-rendered as they ran."""

from __future__ import annotations

from typing import Annotated

import typer

from .. import render
from ..options import DEFAULT_DB, DbOption, JsonOption, OptionalUserOption, RetentionOption

SEARCHES_HELP = """\
List stored agent searches, newest first: id, time, user, query, model, LLM calls, tokens, cost, duration.

  refind inspect searches --user alice
"""

SEARCH_HELP = """\
Re-render one stored agent search exactly as `refind search --trace` showed it live.

  refind inspect search 18c1f3a2b4e9f01 --json
"""


def register(inspect_app: typer.Typer) -> None:
    inspect_app.command("searches", help=SEARCHES_HELP)(searches)
    inspect_app.command("search", help=SEARCH_HELP, no_args_is_help=True)(search)


def searches(
    ctx: typer.Context,
    user: OptionalUserOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.", min=1)] = 50,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    from ... import trace
    from .inspect import _open, _shared

    (as_json,) = _shared(ctx, as_json=as_json)  # `refind inspect --db X --json searches` as `… searches --json`
    with _open(ctx, db, retention) as store:
        rows = trace.recent(store, user_id=user, limit=limit)
    if as_json:
        render.print_json({"searches": [r.summary() for r in rows]})
        return
    if not rows:
        render.console().print(
            "no stored agent searches" + (f" for user {render.plain_id(user)}" if user else ""), markup=False
        )
        return
    from .. import render_trace

    out = render.console()
    out.print(render_trace.searches_table(rows, width=out.width))


def search(
    ctx: typer.Context,
    search_id: Annotated[
        str, typer.Argument(help="The id printed by `refind search` or listed by `inspect searches`.")
    ],
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
    as_json: JsonOption = False,
) -> None:
    from ... import trace
    from .inspect import _open, _shared

    (as_json,) = _shared(ctx, as_json=as_json)
    with _open(ctx, db, retention) as store:
        stored = trace.load(store, search_id)
    if as_json:
        render.print_json(stored.as_dict())
        return
    from .. import render_trace

    out = render.console()
    out.print(render_trace.search_header(stored))
    render_trace.print_trace(out, stored.events)
