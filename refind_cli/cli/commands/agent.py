"""Agent mode of `refind search` (not a command of its own): build the model, run the planner with a live trace,
print the evidence and where the trace is stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import render

if TYPE_CHECKING:
    from ...contract import SearchRequest
    from ...trace import Event


def run_agent(
    db: Path,
    retention: str | None,
    request: SearchRequest,
    *,
    model: str | None,
    api_base: str | None,
    max_actions: int,
    deadline_s: float,
    skip: str | None,
    show_trace: bool,
    as_json: bool,
) -> None:
    import time

    from ...model import from_env
    from ...retrieval import Planner, retrieve

    asked_at = time.perf_counter()  # the deadline counts from here: litellm's import (seconds) is part of the search
    complete, model_name = from_env(model, api_base)  # fails fast (ModelError) before anything is searched
    on_event: Callable[[Event], None] | None = None
    if show_trace:
        from .. import render_trace

        live = render.error_console() if as_json else render.console()

        def print_event(ev: Event) -> None:
            render_trace.print_event(live, ev)

        on_event = print_event

    from ..options import open_existing  # a typo in --db must not create an empty database

    planner = Planner(
        model=complete,
        model_name=model_name,
        max_actions=max_actions,
        deadline_s=deadline_s,
        asked_at=asked_at,
        on_event=on_event,
        skip=skip,
    )
    from ...model import interrupt, interruptible
    from ...signals import stopping

    # Ctrl-C or SIGTERM stops the planner where it is (a model call it waits on is abandoned): the search answers
    # what it has and stores its trace marked interrupted, then exits 130 / 143 — it ended the process with nothing
    # stored (round 30). The open's waits for another process's lock end by the deadline too (an upgraded file's
    # migration or index catch-up under another writer waited the whole busy timeout: BENCHMARKS.md)
    # (interruptible: the interruption ends with the search — an in-process caller's later searches ask the model)
    with (
        interruptible(),
        stopping(interrupt) as caught,
        open_existing(db, retention, until=planner.ends_at()) as store,
    ):
        found = retrieve(store, request, planner=planner)
    result = found.agent
    assert result is not None  # an agent-mode request
    blocks = found.blocks
    if as_json:
        render.print_json(
            {
                "data": [b.as_contract() for b in blocks],
                "search_id": result.search_id,
                "path": result.path,
                "deadline_passed": result.deadline_passed,
                "interrupted": result.interrupted is not None,
                "refused": result.refused is not None,
                "withheld": None if result.withheld is None else result.withheld.as_dict(),
                "stats": result.stats.as_dict(),
                "trace": result.trace_dicts(),
            }
        )
        _stopped_by(caught)
        return
    render.print_blocks(blocks, query=request.query)
    if result.withheld is not None:  # forgotten while the planner ran: left out, and said so
        render.console().print(result.withheld.line(), style="yellow", markup=False, highlight=False)
    from ..render_trace import counted

    s = result.stats
    stored = (
        f"`refind inspect search {result.search_id}` shows its trace"
        if result.search_id is not None
        else f"its trace was not stored: {result.unrecorded or 'it was not recorded'}"
    )
    render.console().print(
        f"agent search {result.search_id or '(not stored)'} · {counted(s.llm_calls, 'LLM call')} · "
        f"{s.prompt_tokens + s.completion_tokens:,} tokens · {s.duration_ms:,.0f} ms"
        + (f" · {result.stopped(deadline_s)}" if result.deadline_passed else "")
        + (f" · stopped by {result.interrupted}" if result.interrupted is not None else "")
        + (" · the model refused" if result.refused is not None else "")
        + f" — {stored}",
        markup=False,
        highlight=False,
    )
    _stopped_by(caught)


def _stopped_by(caught: list[str]) -> None:
    """The exit status of a search Ctrl-C (130) or SIGTERM (143) stopped, once its answer is printed."""
    if caught:
        import typer

        raise typer.Exit(143 if caught[0] == "SIGTERM" else 130)
