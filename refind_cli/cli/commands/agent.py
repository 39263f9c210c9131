"""Agent mode of `refind search` (not a command of its own): build the model, run the planner with a live trace,
print the evidence and where the trace is stored."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .. import render

if TYPE_CHECKING:
    from ...trace import Event


def run_agent(
    db: Path,
    retention: str | None,
    *,
    user: str,
    query: str,
    top_k: int,
    date_from: str | None,
    date_to: str | None,
    options: tuple[str, ...],
    as_of: int | None,
    model: str | None,
    api_base: str | None,
    max_actions: int,
    show_trace: bool,
    as_json: bool,
) -> None:
    from ...model import from_env
    from ...planner import agent_search

    complete, model_name = from_env(model, api_base)  # fails fast (ModelError) before anything is searched
    on_event = None
    if show_trace:
        from .. import render_trace

        live = render.error_console() if as_json else render.console()

        def on_event(ev: Event) -> None:
            render_trace.print_event(live, ev)

    from .inspect import open_existing  # a typo in --db must not create an empty database

    with open_existing(db, retention) as store:
        result = agent_search(
            store,
            user,
            query,
            top_k=top_k,
            options=options,
            model=complete,
            model_name=model_name,
            max_actions=max_actions,
            as_of=as_of,
            date_from=date_from,
            date_to=date_to,
            on_event=on_event,
        )
    blocks = result.blocks[:top_k]
    if as_json:
        render.print_json(
            {
                "data": [b.as_contract() for b in blocks],
                "search_id": result.search_id,
                "path": result.path,
                "stats": result.stats.as_dict(),
                "trace": result.trace_dicts(),
            }
        )
        return
    render.print_blocks(blocks, query=query)
    s = result.stats
    render.console().print(
        f"agent search {result.search_id} · {s.llm_calls} LLM calls · {s.prompt_tokens + s.completion_tokens:,} "
        f"tokens · {s.duration_ms:,.0f} ms — `refind inspect search {result.search_id}` shows its trace",
        markup=False,
        highlight=False,
    )
