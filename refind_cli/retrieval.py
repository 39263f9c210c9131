"""One search request, one entry point: :func:`retrieve` answers a :class:`~refind_cli.contract.SearchRequest` in
its mode — BM25 alone (``search.search``) or the LLM planner (``planner.plan``, its trace stored here by
``planner.record_search``).

Every surface calls it: ``refind search`` (bm25 and agent), the server's search route, ``refind eval`` and the
Python API / MCP server (``refind_cli.api``). So the choice between the modes, the date bounds and the cut to
``top_k`` are written once, here. The planner and litellm are imported only when a request is in agent mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import settings
from .contract import SearchRequest

if TYPE_CHECKING:
    from .blocks import Block
    from .model import Complete
    from .planner import AgentResult
    from .search import SearchConfig
    from .store import Store
    from .trace import Event


@dataclass(frozen=True)
class Planner:
    """How agent mode runs: the model (the ``complete`` seam; ``None``: litellm from REFIND_MODEL /
    REFIND_API_BASE), its budget and deadline, a live trace callback, and whether the trace is stored."""

    model: Complete | None = None
    model_name: str | None = None
    max_actions: int = settings.DEFAULT_MAX_ACTIONS
    deadline_s: float = settings.DEFAULT_AGENT_DEADLINE_S  # the whole search's limit (seconds)
    # when the search was asked (time.perf_counter()): its deadline counts from then, so loading the model's library
    # (litellm's import: seconds in a new process) or a server's queue counts too; None: when the planner starts
    asked_at: float | None = None
    on_event: Callable[[Event], None] | None = None
    record: bool = True
    skip: str | None = None  # what later searches skip: "session" | "turn" (None: the search config's, session)

    def ends_at(self) -> float | None:
        """When the search must end (``time.monotonic()``), counted from ``asked_at``; None before it was asked (the
        planner counts from its own start). The CLI opens the database by it (``Store(until=)``)."""
        if self.asked_at is None:
            return None
        from .planner import ends_at

        return ends_at(self.asked_at, self.deadline_s)


@dataclass(frozen=True)
class Retrieval:
    """What one search found: at most ``top_k`` evidence blocks, best first; in agent mode also the planner's
    result (trace, stats, stored search id)."""

    blocks: list[Block]
    agent: AgentResult | None = None


@dataclass(frozen=True)
class NoMatch:
    """Why a search found nothing, when that is known (``refind search`` says it beside "no match"): the user has
    no message stored (``none``) or none this search may see (``hidden``); the query holds no word a search matches
    (``no_words``: only stop words); or a date range left out ``undated`` turns without a said-at that match it."""

    reason: str  # none | hidden | no_words | undated
    undated: int = 0


def no_match(store: Store, request: SearchRequest, *, config: SearchConfig | None = None) -> NoMatch | None:
    """Why ``request`` (a search that found nothing) found nothing, when refind can tell; None when it cannot."""
    from .search import undated_matches
    from .tokenize import analyze

    if not store.has_messages(request.user_id, as_of=request.as_of):
        return NoMatch("hidden" if store.has_messages(request.user_id, hidden_too=True) else "none")
    if not any(analyze(text) for text in (request.query, *request.options)):
        return NoMatch("no_words")
    if request.date_from is not None or request.date_to is not None:
        n = undated_matches(
            store, request.user_id, request.query, options=request.options, as_of=request.as_of, config=config
        )
        if n:
            return NoMatch("undated", n)
    return None


def retrieve(
    store: Store,
    request: SearchRequest,
    *,
    planner: Planner | None = None,
    config: SearchConfig | None = None,
) -> Retrieval:
    """Answer ``request`` over its user's memory in ``request.mode``; never more than ``request.top_k`` blocks.

    ``config`` overrides the retrieval variant (the evaluator's ``--variant``); ``planner`` configures agent mode
    (default: litellm from the environment, budget ``REFIND_MAX_ACTIONS``' default, trace stored).
    """
    if request.mode == "agent":
        from .planner import agent_search

        p = planner or Planner()
        if p.skip is not None:
            from .search import DEFAULTS

            config = (config or DEFAULTS).with_(skip=p.skip)
        result = agent_search(  # the planner never writes: agent_search stores the trace (a failed run's too)
            store,
            request.user_id,
            request.query,
            top_k=request.top_k,
            options=request.options,
            model=p.model,
            model_name=p.model_name,
            max_actions=p.max_actions,
            deadline_s=p.deadline_s,
            asked_at=p.asked_at,
            as_of=request.as_of,
            config=config,
            date_from=request.date_from,
            date_to=request.date_to,
            on_event=p.on_event,
            record=p.record,
        )
        return Retrieval(result.blocks[: request.top_k], result)
    from .search import search

    blocks = search(
        store,
        request.user_id,
        request.query,
        top_k=request.top_k,
        date_from=request.date_from,
        date_to=request.date_to,
        options=request.options,
        as_of=request.as_of,
        config=config,
    )
    return Retrieval(blocks[: request.top_k])
