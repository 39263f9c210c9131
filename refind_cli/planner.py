"""Agent mode: an LLM planner searches one user's raw chat log, the way a person scrolls a chat app.

The loop (PAPER.md): the planner sees the question (and the answer options, when given) and has a :class:`Budget`
of ``max_actions`` replies. Each reply is one action — ``search_chatrecord`` (keywords, optional date range; shows
the top ``hits_per_search`` blocks with their context, skipping what earlier searches showed), ``take_note`` (keep
results of the last search by number) or ``finish_search``. A malformed reply, an unknown result number or a bad
date is answered with a correction message and still costs its action.

**Reply protocol: one strict JSON object per reply, as plain text** (see ``prompts/planner.md``), not native tool
calls. Every chat model behind litellm can emit text, while tool calling is missing or unreliable on many local
OpenAI-compatible servers (llama.cpp, small ollama models) and differs in shape between providers; a text protocol
also lets the trace show exactly what the model said, and a parse failure becomes a correction the model can act
on instead of a provider error. The parser (:mod:`refind_cli.reply`) also accepts the paper's ReAct text and tool
calls, and the trace records which form each action was parsed from.

**The pieces**: :mod:`~refind_cli.reply` reads a reply; :class:`Budget` says what a run may spend;
:class:`PlannerRun` runs the loop over an index built beforehand; :func:`plan` builds the index and runs it;
:func:`record_search` stores a run (failed ones too) — the planner never writes: its caller records what it
returns (``retrieval.retrieve`` does, for every surface). :func:`agent_search` does both in one call (the earlier
entry point, kept with its signature).

**Evidence policy** (one rule for every path, so a failing planner never returns more than a succeeding one):

* ``notes`` — the planner kept something: the kept blocks (deduplicated), grouped by session, sessions in
  chronological order, blocks chronological inside each; at most ``min(top_k, hits_per_search × searches that
  showed hits)``, since a note can only keep hits of the last search. When more were kept, those that make the limit
  are chosen by rank, not by date: the first result of every search, then the second, … (ties in the order kept);
  the ``evidence`` event lists the rest in ``left_out``. A note forgotten or expired while the planner ran is
  withheld before the limit is applied, so the best note left out takes its place;
* ``last_search`` — nothing kept: the hits of the last search that showed any, at most
  ``min(top_k, hits_per_search)``;
* ``direct_bm25`` — no search showed any hit (or none ran, or the user has nothing stored): BM25 on the question
  itself (with the options), at most ``min(top_k, hits_per_search)``.

So a fallback returns at most ``min(top_k, hits_per_search)`` blocks: what ONE fully kept search returns. Scores
are ``1 − i/n`` by final rank (strictly decreasing). The same policy applies when ``Budget.deadline_s`` passes (a
``deadline`` event: each model call is bounded by the time left, :func:`refind_cli.model.deadline`): the planner stops
and returns what it has — an answer in time, not an error. Whatever a forget or expire removed while the planner ran
is withheld from each search's hits before the model sees them and from the evidence before it is returned
(:mod:`refind_cli.withhold`; a ``withheld`` event says how much and why). Fallbacks are recorded in the trace; a model failure is never
turned into a silent bm25 answer — it is carried in the result and raised by :func:`record_search` once the trace
is stored (a :class:`~refind_cli.errors.ModelError`).

This module never prints; ``on_event`` receives each trace event as it happens (the CLI renders it live).
"""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from string import Template
from typing import TYPE_CHECKING, Any

from . import settings, trace
from .contract import date_bound
from .errors import (
    CorruptDatabase,
    DeadlineReached,
    FileReplaced,
    Interrupted,
    InvalidInput,
    LockWaitInterrupted,
    ModelError,
    RefindError,
    StorageError,
)
from .model import Complete, Reply, ToolCall, deadline, interruption
from .redact import redact, redact_data
from .reply import ACTIONS, Action, ReplyError, parse_reply, unicode
from .trace import Event

if TYPE_CHECKING:
    from .blocks import Block
    from .search import UserIndex
    from .search_config import SearchConfig
    from .store import Store
    from .withhold import Withheld

__all__ = [
    "ACTIONS",
    "Action",
    "AgentResult",
    "Budget",
    "PlannerRun",
    "ReplyError",
    "Stats",
    "agent_search",
    "parse_reply",
    "plan",
    "record_search",
]

DEFAULT_MAX_ACTIONS = settings.DEFAULT_MAX_ACTIONS
DEFAULT_HITS_PER_SEARCH = settings.DEFAULT_HITS_PER_SEARCH
DEFAULT_HIT_CHARS = 4000  # a hit is fitted to this by leaving out context lines; its anchor is never cut
DEFAULT_DEADLINE_S = settings.DEFAULT_AGENT_DEADLINE_S
MAX_REPLY_CHARS = 64_000  # a reply the planner reads (one JSON action is ~200 characters; 4,096 tokens ~16,000)


@dataclass(frozen=True)
class Budget:
    """What one planner run may spend and show: replies, hits per search, characters per hit shown, and seconds in
    all (``deadline_s``, from the start of the search: past it the planner stops and returns what it has)."""

    max_actions: int = DEFAULT_MAX_ACTIONS
    hits_per_search: int = DEFAULT_HITS_PER_SEARCH
    hit_chars: int = DEFAULT_HIT_CHARS
    deadline_s: float = DEFAULT_DEADLINE_S

    def __post_init__(self) -> None:
        if self.max_actions < 1 or self.hits_per_search < 1:
            raise InvalidInput("max_actions and hits_per_search must be at least 1")
        if self.hit_chars < 1:
            raise InvalidInput(f"hit_chars must be at least 1, got {self.hit_chars}")
        if not 0 < self.deadline_s <= settings.MAX_AGENT_DEADLINE_S:  # (nan too)
            raise InvalidInput(
                f"deadline_s must be above 0 and at most {settings.MAX_AGENT_DEADLINE_S:,g} seconds, "
                f"got {self.deadline_s!r}"
            )


@dataclass
class Stats:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None  # None while no call reported a price
    duration_ms: float = 0.0
    model_ms: float = 0.0  # time spent waiting for the model (the rest is the planner's own overhead)
    actions: int = 0
    searches: int = 0

    def add(self, reply: Reply) -> None:
        self.llm_calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.model_ms += reply.latency_ms
        if reply.cost is not None:
            self.cost = (self.cost or 0.0) + reply.cost

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AgentResult:
    """One planner run: the evidence and the trace, with what :func:`record_search` stores beside them. A failed run
    has no blocks, an ``error`` event last and the error in ``error``."""

    blocks: list[Block]
    events: list[Event]
    stats: Stats
    path: str  # "notes" | "last_search" | "direct_bm25" ("" when the run failed)
    user_id: str = ""
    query: str = ""
    at: int = 0  # Unix ms when it started
    model: str | None = None  # the model that answered (as configured, else as the provider named it)
    error: RefindError | None = None  # what ended a failed run (raised by record_search once the trace is stored)
    search_id: str | None = None  # the stored search (None when not recorded)
    withheld: Withheld | None = None  # what the evidence left out: no longer stored when the search returned
    as_of: int | None = None  # the search read only what was stored by then (Unix ms)
    deadline_at: float | None = None  # when the search must end (time.monotonic()); its trace waits no longer
    unrecorded: str | None = None  # why its trace was not stored, when record_search did not store it
    seqs: dict[str, set[int]] = field(default_factory=dict)  # message id → the seqs its searches showed (withhold)

    @property
    def interrupted(self) -> str | None:
        """Why the process's end stopped the planner (``model.interrupt``; its evidence is what it had by then), or
        None when it did not."""
        event = next((e for e in self.events if e.kind == "interrupted"), None)
        return None if event is None else str(event.data.get("reason") or "interrupted")

    @property
    def refused(self) -> str | None:
        """What the model said declining the search (OpenAI's ``message.refusal``; clipped and redacted as its trace
        event), or None when it did not decline."""
        event = next((e for e in self.events if e.kind == "refused"), None)
        return None if event is None else str(event.data.get("refusal") or "refused")

    @property
    def deadline_passed(self) -> bool:
        """The deadline stopped the planner (its evidence is what it had by then)."""
        return any(e.kind == "deadline" for e in self.events)

    def stopped(self, deadline_s: float) -> str | None:
        """Why the deadline stopped the planner, for a summary line (None: it did not): its deadline passed, or a
        provider asked to wait past it (a Retry-After longer than the time left)."""
        event = next((e for e in self.events if e.kind == "deadline"), None)
        if event is None:
            return None
        asked = event.data.get("retry_after_s")
        if isinstance(asked, int | float):
            return f"stopped: the provider asked to wait {asked:g} s, past its {deadline_s:g} s deadline"
        return f"stopped at its {deadline_s:g} s deadline"

    @property
    def llm_calls(self) -> int:
        return self.stats.llm_calls

    @property
    def tokens(self) -> int:
        return self.stats.prompt_tokens + self.stats.completion_tokens

    def trace_dicts(self) -> list[dict[str, Any]]:
        return [e.as_dict() for e in self.events]

    def raise_error(self) -> AgentResult:
        """The result itself, or the error that ended the run."""
        if self.error is not None:
            raise self.error
        return self


# A reply the provider ended before the model did (its finish_reason) is carried out only when its action is a
# whole JSON object (which a cut cannot have left in part): else the model is told why, not that its JSON was bad,
# and a ReAct input — which runs to the end of the text, where it was cut — is never searched or kept cut short.
CUT_REPLIES = {
    "length": "the reply was cut off at the output token limit before it ended, so it may be incomplete; reply "
    "with one short JSON object and nothing else",
    "content_filter": "the provider's content filter cut the reply off before it ended, so it may be incomplete; "
    "reply with one short JSON object",
}


SKIP_RULES = {
    "session": "Sessions already shown by an earlier search are skipped, so a later search always shows new "
    "conversations; when every hit is in a session already shown, the hits not shown before are shown instead.",
    "turn": "Hits already shown by an earlier search are skipped, so a later search always shows new messages.",
}


def system_prompt(*, max_actions: int, hits_per_search: int, skip: str = "session") -> str:
    text = resources.files("refind_cli").joinpath("prompts/planner.md").read_text(encoding="utf-8")
    return Template(text).safe_substitute(
        actions=_actions(max_actions), hits_per_search=hits_per_search, skip_rule=SKIP_RULES[skip]
    )


def _actions(n: int) -> str:
    return f"{n} action{'s' if n != 1 else ''}"


def agent_search(
    store: Store,
    user_id: str,
    question: str,
    *,
    top_k: int,
    options: Sequence[str] = (),
    model: Complete | None = None,
    model_name: str | None = None,
    max_actions: int = DEFAULT_MAX_ACTIONS,
    hits_per_search: int = DEFAULT_HITS_PER_SEARCH,
    hit_chars: int = DEFAULT_HIT_CHARS,
    deadline_s: float = DEFAULT_DEADLINE_S,
    asked_at: float | None = None,
    as_of: int | None = None,
    config: SearchConfig | None = None,
    date_from: str | int | None = None,
    date_to: str | int | None = None,
    on_event: Callable[[Event], None] | None = None,
    record: bool = True,
    clock: Callable[[], int] | None = None,
) -> AgentResult:
    """Run the planner for one question over ONE user's memory and return the evidence blocks with the trace.

    ``model`` is the seam (``None``: litellm from REFIND_MODEL / REFIND_API_BASE). ``date_from``/``date_to`` bound
    every search (the planner's own dates narrow inside them). With ``record`` the search and its trace are stored
    in the ``searches`` table by :func:`record_search` (also when it fails; then the error is raised after storing);
    without it a failure is raised unstored. :func:`plan` + :func:`record_search` are the two halves.
    """
    result = plan(
        store,
        user_id,
        question,
        top_k=top_k,
        options=options,
        model=model,
        model_name=model_name,
        budget=Budget(
            max_actions=max_actions, hits_per_search=hits_per_search, hit_chars=hit_chars, deadline_s=deadline_s
        ),
        asked_at=asked_at,
        as_of=as_of,
        config=config,
        date_from=date_from,
        date_to=date_to,
        on_event=on_event,
        clock=clock,
    )
    return record_search(store, result) if record else _checked(store, result).raise_error()


def plan(
    store: Store,
    user_id: str,
    question: str,
    *,
    top_k: int,
    options: Sequence[str] = (),
    model: Complete | None = None,
    model_name: str | None = None,
    budget: Budget | None = None,
    asked_at: float | None = None,
    as_of: int | None = None,
    config: SearchConfig | None = None,
    date_from: str | int | None = None,
    date_to: str | int | None = None,
    on_event: Callable[[Event], None] | None = None,
    clock: Callable[[], int] | None = None,
) -> AgentResult:
    """Build the user's index and run the planner over it; store nothing. Bad arguments raise InvalidInput before
    any model call; a failure during the run (a ModelError, say) is returned in ``result.error`` with its trace, for
    the caller to record (:func:`record_search`) and raise. The evidence holds only messages still stored (and within
    retention) when the run ends (:mod:`refind_cli.withhold`); ``budget.deadline_s`` counts from ``asked_at`` (a
    ``time.perf_counter()`` reading: when the search was asked) or else from this call, the trace's times too."""
    from . import search as retrieval
    from .withhold import forgotten_hits, gone, present

    t0 = time.perf_counter() if asked_at is None else asked_at
    if top_k < 1:
        raise InvalidInput(f"top_k must be at least 1, got {top_k}")
    budget = budget or Budget()
    bounds = (date_bound(date_from, end=False), date_bound(date_to, end=True))
    if model is None:
        from .model import from_env

        model, model_name = from_env()
    started_at = (clock or store.clock)()
    try:
        index = retrieval.user_index(store, user_id, as_of=as_of, config=config)
    except RefindError as exc:  # nothing was asked yet: the trace is the error alone
        data = {"message": exc.message, "type": exc.kind}
        event = Event(kind="error", step=0, t_ms=round((time.perf_counter() - t0) * 1000, 3), data=data)
        if on_event is not None:
            on_event(event)
        stats = Stats(duration_ms=event.t_ms)
        return AgentResult([], [event], stats, "", user_id, question, started_at, model_name, error=exc, as_of=as_of)
    seqs: dict[str, set[int]] = {}  # every message a search showed: its seqs (filled by the run, read by the checks)
    run = PlannerRun(
        index,
        question,
        user_id=user_id,
        model=model,
        model_name=model_name,
        top_k=top_k,
        options=tuple(options),
        budget=budget,
        bounds=bounds,
        as_of=as_of,
        on_event=on_event,
        started_at=started_at,
        t0=t0,
        present=functools.partial(present, store, user_id, as_of=as_of, seqs=seqs),
        reread=functools.partial(_reread, store, user_id, as_of=as_of, config=config),
        forgotten=functools.partial(forgotten_hits, store, user_id, as_of=as_of, seqs=seqs),
        gone=functools.partial(gone, store, user_id, as_of=as_of, seqs=seqs),
        seqs=seqs,
    )
    return run.run()


def _reread(store: Store, user_id: str, *, as_of: int | None, config: SearchConfig | None) -> UserIndex:
    """The user's index read again (a forget or expire changed the messages since the planner read it)."""
    from . import index_cache
    from . import search as retrieval

    index_cache.drop_state(store, user_id)
    return retrieval.user_index(store, user_id, as_of=as_of, config=config)


def record_search(store: Store, result: AgentResult) -> AgentResult:
    """Store one planner run — a failed one too — in the ``searches`` table, set its ``search_id`` and return it;
    a failed run's error is raised once its trace is stored. The one helper every caller of :func:`plan` records
    with (the planner itself never writes, as llm's CLI logs a response, not the model)."""
    search_id = trace.new_search_id(result.at)
    s = result.stats
    record = functools.partial(
        trace.save,
        store,
        trace.StoredSearch(
            id=search_id,
            user_id=result.user_id,
            at=result.at,
            query=result.query,
            mode="agent",
            model=result.model,
            duration_ms=s.duration_ms,
            llm_calls=s.llm_calls,
            prompt_tokens=s.prompt_tokens,
            completion_tokens=s.completion_tokens,
            cost=s.cost,
            returned_ids=[b.id for b in result.blocks],
            events=result.events,
        ),
        seqs=result.seqs,
    )
    try:
        # waits for another process's write lock no longer than the search may still take (at least a moment), and
        # not at all once SIGTERM or Ctrl-C interrupted it (the process is ending: a kill would follow)
        with store.busy_timeout(settings.lock_wait_s(result.deadline_at), stop=interruption):
            stored = record()
    except (sqlite3.Error, StorageError) as exc:
        from .store import storage_error

        fault = exc if isinstance(exc, StorageError) else storage_error(exc, store.path)
        if not isinstance(fault, StorageError) or isinstance(fault, FileReplaced | CorruptDatabase):
            raise fault from exc  # the file itself is gone or damaged: nothing of it can be trusted to answer
        # A record of the search, not the search: the evidence was found (and the model paid), so it is returned.
        if isinstance(fault, LockWaitInterrupted):
            result.unrecorded = "interrupted while waiting for another process's lock"
        else:
            result.unrecorded = _UNRECORDED.get(fault.kind, "the database could not store it")
        result.events.append(
            Event(
                "unrecorded",
                result.events[-1].step if result.events else 0,
                result.stats.duration_ms,
                {"type": fault.kind, "reason": redact(fault.message)},
            )
        )
        stored = False
    else:
        if not stored:
            result.unrecorded = "a forget or expire removed what it quotes while it ran"
    result.search_id = search_id if stored else None
    result = _checked(store, result)
    if result.error is not None:  # named by the error, so that a caller it is raised to can show the stored trace
        result.error.search_id = result.search_id
    return result.raise_error()


def ends_at(t0: float, deadline_s: float) -> float:
    """When a search asked at ``t0`` (``time.perf_counter()``) with ``deadline_s`` seconds must end, on
    ``time.monotonic()``'s clock (the one lock waits and model calls are bounded by)."""
    return time.monotonic() - (time.perf_counter() - t0) + deadline_s


_UNRECORDED = {
    "locked": "the database is locked by another process",
    "no_space": "the disk is full",
    "read_only": "the database cannot be written",
}


def _checked(store: Store, result: AgentResult) -> AgentResult:
    """The result without what a forget or expire (or retention) removed since the planner checked its evidence and
    trace: checked again as it is returned, stored or not (a stored trace need not quote all the evidence shows: a
    fallback's neighbours)."""
    from .withhold import forgotten_hits, present

    events = forgotten_hits(store, result.user_id, result.events, as_of=result.as_of, seqs=result.seqs)
    if events is not result.events and result.error is not None:
        # a provider's error can quote the prompt it refused (a content filter's, a validation's): with a hit it was
        # sent now forgotten, its message is withheld — in the error and in the trace's error event alike
        result.error = type(result.error)(
            f"the search failed ({result.error.kind} error); its message is withheld: it may quote memory forgotten "
            "while it ran"
        )
        events = [
            replace(e, data={**e.data, "message": result.error.message}) if e.kind == "error" else e for e in events
        ]
    result.events[:] = events
    if result.blocks:
        blocks, withheld = present(store, result.user_id, result.blocks, as_of=result.as_of, seqs=result.seqs)
        if withheld is not None:
            result.blocks = _ranked(blocks)
            result.withheld = withheld if result.withheld is None else result.withheld + withheld
            result.events.append(
                Event(
                    "withheld",
                    result.events[-1].step,
                    result.stats.duration_ms,
                    {"at": "evidence", **withheld.as_dict()},
                )
            )
    return result


REREADS = 3  # times a planner's search reads its index again after forgets changed it under the search


class PlannerRun:
    """One planner run over an index built beforehand: the conversation, the last hits, the skip set, what was kept.
    :meth:`run` returns the evidence with its trace; it stores nothing."""

    def __init__(
        self,
        index: UserIndex,
        question: str,
        *,
        user_id: str,
        model: Complete,
        model_name: str | None = None,
        top_k: int,
        options: tuple[str, ...] = (),
        budget: Budget | None = None,
        bounds: tuple[int | None, int | None] = (None, None),
        as_of: int | None = None,
        on_event: Callable[[Event], None] | None = None,
        started_at: int,
        t0: float | None = None,
        present: Callable[[list[Block]], tuple[list[Block], Withheld | None]] | None = None,
        reread: Callable[[], UserIndex] | None = None,
        forgotten: Callable[[list[Event]], list[Event]] | None = None,
        gone: Callable[[list[tuple[str, ...]]], bool] | None = None,
        seqs: dict[str, set[int]] | None = None,
    ) -> None:
        self.index, self.question, self.user_id = index, question, user_id
        self.model, self.model_name = model, model_name
        self.top_k, self.options = top_k, options
        self.budget = budget = budget or Budget()
        self.max_actions, self.hits_per_search, self.hit_chars = (
            budget.max_actions,
            budget.hits_per_search,
            budget.hit_chars,
        )
        self.outer, self.as_of, self.on_event = bounds, as_of, on_event
        self.started_at = started_at
        self.t0 = time.perf_counter() if t0 is None else t0
        self.ready_ms = (time.perf_counter() - self.t0) * 1000  # the model loaded and the index read, since asked
        self.deadline_at = ends_at(self.t0, budget.deadline_s)  # when the run must end (time.monotonic())
        self.present = present  # the evidence as still stored (None: as the index held it)
        self.reread = reread  # the index read again, when what it holds changed under it (None: the error stands)
        self.forgotten = forgotten  # the trace without the text of hits removed since (None: as it ran)
        self.gone = gone  # whether a hit shown (its message ids) lost a message since (None: never asked)
        self.shown: list[tuple[str, ...]] = []  # each hit the model was sent: its message ids
        # message id → each seq a search showed under it: an id is reused when its request is stored again (withhold)
        self.seqs: dict[str, set[int]] = {} if seqs is None else seqs
        self.withheld: Withheld | None = None
        self.events: list[Event] = []
        self.stats = Stats()
        self.step = 0
        self.messages: list[dict[str, str]] = []
        self.sent = 0  # messages already recorded in a model_call event
        self.last_hits: list[Block] = []
        self.last_shown: list[Block] = []  # the last search that showed any hit
        self.searches_with_hits = 0
        self.seen_sessions: set[str] = set()
        self.seen_turns: set[str] = set()
        self.kept: dict[str, Block] = {}
        self.kept_rank: dict[str, int] = {}  # each kept block's result number in the search it was kept from

    def run(self) -> AgentResult:
        """The loop, then the evidence. A RefindError (a model failure) ends the run: it is traced and returned in
        the result's ``error``, never raised from here."""
        try:
            self.loop()
            return self.result()
        except RefindError as exc:
            self.emit("error", message=exc.message, type=exc.kind)
            return self._result([], "", error=exc)

    # ---- events ------------------------------------------------------------------------------------------
    def emit(self, kind: str, **data: Any) -> Event:
        # redacted as the stored trace is: a provider echoing its key printed it in --trace, --json and Memory's trace
        data = {k: redact_data(v) for k, v in data.items()}
        event = Event(kind=kind, step=self.step, t_ms=round((time.perf_counter() - self.t0) * 1000, 3), data=data)
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)
        return event

    # ---- the loop ----------------------------------------------------------------------------------------
    def loop(self) -> None:
        index = self.index
        skip_mode = index.config.skip
        latest = _latest_said(index)
        self.emit(
            "start",
            question=self.question,
            options=list(self.options),
            user_id=self.user_id,
            model=self.model_name,
            max_actions=self.max_actions,
            hits_per_search=self.hits_per_search,
            top_k=self.top_k,
            skip=skip_mode,
            turns=len(index),
            latest=latest,
            date_from=None if self.outer[0] is None else _when(self.outer[0]),  # the caller's bounds on every search
            date_to=None if self.outer[1] is None else _when(self.outer[1]),
            as_of=None if self.as_of is None else _when(self.as_of),  # only what was stored by then is searched
            deadline_s=self.budget.deadline_s,
        )
        self.messages = [
            {
                "role": "system",
                "content": system_prompt(
                    max_actions=self.max_actions, hits_per_search=self.hits_per_search, skip=skip_mode
                ),
            },
            {"role": "user", "content": self._opening(latest)},
        ]
        if len(index) == 0:  # nothing to search: asking the model would only cost money
            return
        while self.step < self.max_actions:
            if (why := interruption()) is not None:  # the process is ending: what it has is the evidence
                self._interrupted(why)
                return
            if time.monotonic() >= self.deadline_at:
                self._stop(None)
                return
            if self._forgotten_since_shown():
                return
            self.step += 1
            try:
                reply = self._call()
            except Interrupted as exc:  # the model call was abandoned: it may answer, but nobody waits for it
                self._interrupted(interruption() or "interrupted", exc.message)
                return
            except DeadlineReached as exc:  # the deadline cut the call short: what was kept so far is the evidence
                if exc.gave_up is not None and not self.stats.llm_calls:
                    # … but a provider that has answered this search nothing but errors is a model failure, as it is
                    # once its retries are spent: a 502, not BM25 on the question under a 200 (a probe of round 23:
                    # the same outage answered both ways, by the deadline alone)
                    raise ModelError(exc.gave_up) from None
                self._stop(exc.message, exc.retry_after)
                return
            if reply.refusal.strip() and not reply.content.strip() and not reply.tool_calls:
                # the model declined (OpenAI's message.refusal, content null): said as such, and the search ends
                # with what it has — an empty reply's "not valid JSON" correction asked it again, up to the budget
                self.emit("refused", refusal=_clipped(reply.refusal), llm_calls=self.stats.llm_calls)
                return
            said = _said(reply)
            if len(said) > MAX_REPLY_CHARS:  # not read: a reply of megabytes held the search past its deadline
                self._correct(
                    f"the reply is {len(said):,} characters, over the limit of {MAX_REPLY_CHARS:,}; reply with one "
                    "short JSON object",
                    reply=_clipped(said),
                )
                continue
            cut = CUT_REPLIES.get(reply.finish_reason)  # the provider ended the reply before the model did
            try:
                action = parse_reply(reply.content, reply.tool_calls)
            except ReplyError as exc:
                self._correct(cut or str(exc), reply=said, form=exc.form)
                continue
            if cut is not None and action.form == "react":  # its input runs to the end of the text: where it was cut
                self._correct(cut, reply=said, form=action.form)
                continue
            self.emit(
                "action",
                name=action.name,
                thought=action.thought,
                args=action.args,
                ignored=list(action.ignored),
                form=action.form,
                **({"more": action.more} if action.more else {}),  # actions after it in the reply: not carried out
            )
            if action.name == "finish_search":
                self.emit("finish")
                return
            try:
                if action.name == "search_chatrecord":
                    self._search(action, skip_mode)
                else:
                    self._note(action)
            except ReplyError as exc:
                self._correct(str(exc))
            if action.more:  # else it takes the rest as done: a note of results it has not seen, a finish
                n = action.more
                self.messages[-1]["content"] += (
                    f" Only the first action of your reply was carried out; the {n} after it "
                    f"{'were' if n != 1 else 'was'} not: send one action per reply."
                )
        self.emit("budget", max_actions=self.max_actions)

    def _stop(self, cut: str | None, retry_after: float | None = None) -> None:
        """The deadline passed: between actions (``cut`` None) or during a model call (``cut``: what the model
        seam said; ``retry_after``: the seconds a provider asked to wait, past the deadline, before a retry)."""
        data: dict[str, Any] = {"deadline_s": self.budget.deadline_s, "llm_calls": self.stats.llm_calls}
        if cut is not None:
            data["message"] = cut
        if retry_after is not None:
            data["retry_after_s"] = retry_after
        if self.ready_ms >= 100:  # what the deadline spent before the planner began (litellm's import: seconds)
            data["ready_ms"] = round(self.ready_ms)
        self.emit("deadline", **data)

    def _interrupted(self, why: str, cut: str | None = None) -> None:
        """The process is ending (``model.interrupt``: SIGTERM, Ctrl-C): between actions (``cut``
        None) or during a model call (``cut``: what the model seam said). The evidence follows the deadline's policy;
        the trace, stored by the caller as ever, says so."""
        data: dict[str, Any] = {"reason": why, "llm_calls": self.stats.llm_calls}
        if cut is not None:
            data["message"] = cut
        self.emit("interrupted", **data)

    def _opening(self, latest: str | None) -> str:
        lines = [f"Question: {self.question}"]
        if self.options:
            lines.append("Answer options (one of them is right; find the evidence that decides):")
            lines += [f"  ({chr(65 + i) if i < 26 else i + 1}) {o}" for i, o in enumerate(self.options)]
        if latest:
            lines.append(f"The latest message in this chat log was said on {latest}.")
        lines.append(f"You have {_actions(self.max_actions)}. Reply with one JSON object.")
        return "\n".join(lines)

    def _forgotten_since_shown(self) -> bool:
        """Whether a hit the model was shown is gone since (a forget or expire while the search ran): then the model
        is not asked again. A placeholder for the hit's text is not enough — the model's replies, and the keywords
        it searched with after, can quote it (a probe sent "user has jackcanary syndrome" back to the provider)."""
        if self.gone is None or not self.shown or not self.gone(self.shown):
            return False
        self.emit("forgotten", llm_calls=self.stats.llm_calls)
        return True

    def _call(self) -> Reply:
        new = self.messages[self.sent :]
        with deadline(self.deadline_at):  # litellm's timeout and retries end by it (model.deadline)
            reply: Reply = _unicode(self.model(list(self.messages)))
        self.stats.add(reply)
        self.stats.actions = self.step
        self.messages.append({"role": "assistant", "content": _clipped(_said(reply))})  # (sent back: never megabytes)
        self.sent = len(self.messages)
        if self.model_name is None and reply.model:
            self.model_name = reply.model
        extra: dict[str, Any] = {}
        if reply.finish_reason not in ("", "stop", "tool_calls"):  # ("length": cut at the output token limit)
            extra["finish_reason"] = reply.finish_reason
        if reply.refusal:  # (only when the model refused: a text reply's event is unchanged)
            extra["refusal"] = _clipped(reply.refusal)
        if reply.tool_calls:  # only when the provider sent any, so a text reply's event is unchanged
            extra["tool_calls"] = [
                {"name": _clipped(c.name), "arguments": _clipped(c.arguments)} for c in reply.tool_calls
            ]
        self.emit(
            "model_call",
            messages=new,
            reply=_clipped(reply.content),  # the trace keeps what the limit lets the planner read
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cost=reply.cost,
            latency_ms=round(reply.latency_ms, 3),
            attempts=reply.attempts,
            **extra,
        )
        return reply

    def _say(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def _left(self) -> str:
        left = self.max_actions - self.step
        return f"{left} action{'s' if left != 1 else ''} left." if left else "No actions left."

    def _correct(self, reason: str, *, reply: str | None = None, form: str | None = None) -> None:
        message = f"Your reply was not carried out: {reason}. {self._left()}"
        extra = {"form": form} if form is not None else {}
        self.emit("correction", reason=reason, reply=reply, message=message, **extra)
        self._say(message)

    def _search(self, action: Action, skip_mode: str) -> None:
        from .contract import parse_when
        from .search import Skip

        keywords = action.args["keywords"]  # (under MAX_REPLY_CHARS with its reply: below a query's limit over HTTP)
        bounds: list[int | None] = []
        for key, end in (("date_from", False), ("date_to", True)):
            value = action.args.get(key)
            if value is None:
                bounds.append(None)
                continue
            try:
                bounds.append(parse_when(value, key, end=end))
            except InvalidInput as exc:
                raise ReplyError(exc.message) from None
        lo = _max(bounds[0], self.outer[0])
        hi = _min(bounds[1], self.outer[1])
        if lo is not None and hi is not None and lo > hi:  # name each bound as the planner gave it, or whence it came
            raise ReplyError(_empty_range(action.args, lo, hi, bounds))
        ids = frozenset(self.seen_sessions if skip_mode == "session" else self.seen_turns)
        search = functools.partial(
            self._index_search,
            keywords,
            top_k=self.hits_per_search,
            date_from=lo,
            date_to=hi,
            config=self.index.config.with_(lead_chars=0, backfill=False),  # a planner search shows what matched
        )
        hits = search(skip=Skip(skip_mode, ids))
        fallback: dict[str, Any] = {}
        if not hits and skip_mode == "session" and ids:
            # every hit is in a session shown before (a user with one session: every search after the first): the
            # hits not shown before are shown instead, where skipping whole sessions showed nothing at all
            hits = search(skip=Skip("turn", frozenset(self.seen_turns)))
            if hits:
                fallback = {"fallback_skip": "turn", "fallback_skipped": len(self.seen_turns)}
        hits, _ = self._still_stored(hits, "search")  # neither the model nor the trace sees what was forgotten since
        self.stats.searches += 1
        shown = views(hits, self.hit_chars, self.hits_per_search)
        self.last_hits = hits
        if hits:
            self.last_shown = hits
            self.searches_with_hits += 1
        searched, asked = _searched_dates(action.args, bounds, lo, hi)
        self.emit(
            "search",
            keywords=keywords,
            **searched,  # what was searched: the planner's dates, or the caller's bound that narrowed them
            **asked,  # the planner's own dates, when a caller's bound narrowed them
            skipped=len(ids),
            skip=skip_mode,
            **fallback,  # every hit was in a session shown before: the turns shown before were skipped instead
            hits=[_hit(i, b, v) for i, (b, v) in enumerate(zip(hits, shown), 1)],
        )
        self.seen_sessions.update(b.session_id for b in hits)
        self.seen_turns.update(b.id for b in hits)
        self.shown += [b.message_ids for b, v in zip(hits, shown) if v.text is not None]
        said = _results_message(keywords, hits, len(ids), skip_mode, shown, bool(fallback)) + " " + self._left()
        if asked:  # the planner is told, as it is when the caller's bounds leave its range no day
            said = _narrowed(asked, searched) + "\n" + said
        self._say(said)

    def _note(self, action: Action) -> None:
        if not self.last_hits:
            raise ReplyError(
                "take_note keeps results of the last search, and "
                + ("it showed none" if self.stats.searches else "no search has run yet")
            )
        numbers = list(dict.fromkeys(action.args["results"]))
        good = [n for n in numbers if 1 <= n <= len(self.last_hits)]
        bad = [n for n in numbers if n not in good]
        problem = (
            (
                f"result number{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} "
                f"{'do' if len(bad) > 1 else 'does'} not exist: the last search showed results "
                f"1 to {len(self.last_hits)}"
            )
            if bad
            else ""
        )
        if not good:
            raise ReplyError(problem)
        ids = []
        for n in good:
            block = self.last_hits[n - 1]
            self.kept.setdefault(block.id, block)
            self.kept_rank[block.id] = min(n, self.kept_rank.get(block.id, n))
            ids.append(block.id)
        self.emit("note", results=good, ids=ids, kept=len(self.kept))
        said = f"Kept {len(ids)} result{'s' if len(ids) != 1 else ''} ({len(self.kept)} in all)."
        if bad:  # the valid numbers are kept; the unknown ones are corrected
            message = f"{said} Not kept: {problem}. {self._left()}"
            self.emit("correction", reason=problem, reply=None, message=message)
            self._say(message)
            return
        self._say(f"{said} {self._left()}")

    # ---- the evidence ------------------------------------------------------------------------------------
    def result(self) -> AgentResult:
        per_search = min(self.top_k, self.hits_per_search)
        left_out: list[str] = []
        checked = False  # whether the blocks were checked against what is still stored
        if self.kept:
            path = "notes"
            limit = min(self.top_k, self.hits_per_search * max(1, self.searches_with_hits))
            # every kept note is checked before the limit is applied: one a forget or expire took while the planner
            # ran leaves its place to the best-ranked note left out, as if it had never been kept
            still, self.withheld = self._still_stored(list(self.kept.values()), "evidence")
            checked = True
            chosen, left_out = _best_kept({b.id: b for b in still}, self.kept_rank, limit)
            blocks = _chronological(chosen)
        elif self.last_shown:
            path, limit = "last_search", per_search
            self.emit("fallback", reason="the planner kept nothing", path=path)
            blocks = self.last_shown[:limit]
        else:
            path, limit = "direct_bm25", per_search
            reason = (
                "the user has no stored turns"
                if len(self.index) == 0
                else "no search ran"
                if not self.stats.searches
                else "no search showed any hit"
            )
            self.emit("fallback", reason=reason, path=path)
            blocks = self._index_search(
                self.question, top_k=limit, options=self.options, date_from=self.outer[0], date_to=self.outer[1]
            )
        if not checked:
            blocks, self.withheld = self._still_stored(blocks, "evidence")
        if self.forgotten is not None:  # what it prints and returns beside the evidence quotes none of it either
            self.events[:] = self.forgotten(self.events)
        blocks = _ranked(blocks)
        self.stats.duration_ms = round((time.perf_counter() - self.t0) * 1000, 3)
        self.emit(
            "evidence",
            path=path,
            limit=limit,
            ids=[b.id for b in blocks],
            sessions=[b.session_id for b in blocks],
            stats=self.stats.as_dict(),
            **({"left_out": left_out} if left_out else {}),
        )
        return self._result(blocks, path)

    def _index_search(self, query: str, **kw: Any) -> list[Block]:
        """``self.index.search``; when a forget or expire deleted text the index still points at (IndexChanged: it
        reads a turn's text when it shows it), the index is read again and searched again — up to REREADS times, as
        a BM25 search reads it again (forgets in a row, each landing between a read and its search, failed an agent
        search "search again" after one)."""
        from .index_store import IndexChanged

        for reread in range(REREADS + 1):
            try:
                blocks = self.index.search(query, **kw)
                break
            except IndexChanged:
                if self.reread is None or reread == REREADS:
                    raise
                self.index = self.reread()
        trace.note_seqs(self.seqs, blocks)
        return blocks

    def _still_stored(self, blocks: list[Block], at: str) -> tuple[list[Block], Withheld | None]:
        """The blocks without what a forget or expire removed since the index was read (traced when anything was):
        a search's hits before the planner sees them, ``at="search"``, and the evidence before it is returned."""
        if self.present is None:
            return blocks, None
        blocks, withheld = self.present(blocks)
        if withheld is not None:
            self.emit("withheld", at=at, **withheld.as_dict())
        return blocks, withheld

    def _result(self, blocks: list[Block], path: str, *, error: RefindError | None = None) -> AgentResult:
        self.stats.duration_ms = round((time.perf_counter() - self.t0) * 1000, 3)
        return AgentResult(
            blocks=blocks,
            events=self.events,
            stats=self.stats,
            path=path,
            user_id=self.user_id,
            query=self.question,
            at=self.started_at,
            model=self.model_name,
            error=error,
            withheld=self.withheld,
            as_of=self.as_of,
            deadline_at=self.deadline_at,
            seqs=self.seqs,
        )


def _ranked(blocks: list[Block]) -> list[Block]:
    """The blocks scored ``1 − i/n`` by their final rank."""
    n = len(blocks)
    return [b._replace(score=round(1 - i / n, 6)) for i, b in enumerate(blocks)]


def _unicode(reply: Reply) -> Reply:
    """The reply with each unpaired UTF-16 surrogate (a provider's JSON may escape one: "\\ud800") as U+FFFD: text
    holding one is not Unicode, and its trace could not be stored (a UnicodeEncodeError lost the search)."""
    calls = tuple(ToolCall(unicode(c.name), unicode(c.arguments)) for c in reply.tool_calls)
    return replace(reply, content=unicode(reply.content), model=unicode(reply.model), tool_calls=calls)


def _clipped(text: str) -> str:
    """A reply as the trace and the conversation keep it: whole up to :data:`MAX_REPLY_CHARS`, else its start and
    its length (a trace held a 30 MB reply four times: 120 MB written while other Adds waited)."""
    if len(text) <= MAX_REPLY_CHARS:
        return text
    return f"{text[:MAX_REPLY_CHARS]}… ({len(text):,} characters; the rest not kept)"


def _said(reply: Reply) -> str:
    """The reply as the conversation keeps it: its text, and any native tool call written out as JSON (the
    conversation has no tool messages: the planner speaks the text protocol)."""
    calls = [json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False) for c in reply.tool_calls]
    return "\n".join(part for part in [reply.content, *calls] if part)


@dataclass(frozen=True)
class HitView:
    """A hit as the planner sees it: the anchor's lines always whole; ``text`` None when withheld."""

    text: str | None
    left_out: int  # neighbour lines left out of the view
    chars: int  # the whole hit's length


def fit(content: str, anchor_lines: tuple[int, int], limit: int, starts: Sequence[int] = ()) -> tuple[str, int]:
    """A hit in at most ``limit`` characters by leaving out neighbour messages, farthest from the anchor first, each
    whole (``starts``: the line each message starts on; without them a line counts as a message); the anchor's
    lines are never cut or left out (so a longer anchor makes a longer view). Returns (text, lines left out)."""
    if len(content) <= limit:
        return content, 0
    lines = content.split("\n")
    a, b = anchor_lines
    if b <= a:
        return content, 0
    bounds = sorted({0, *starts, a, b, len(lines)} if starts else set(range(len(lines) + 1)))
    units = [(s, e) for s, e in zip(bounds, bounds[1:]) if not a <= s < b]  # the neighbour messages
    keep = set(range(a, b))
    size = sum(len(lines[i]) + 1 for i in keep)
    for s, e in sorted(units, key=lambda u: (a - u[1] + 1 if u[1] <= a else u[0] - b + 1, u[0])):
        grown = sum(len(lines[i]) + 1 for i in range(s, e))
        if size + grown > limit:
            break  # nearest first: a farther message is left out whenever a nearer one is
        keep.update(range(s, e))
        size += grown
    return "\n".join(lines[i] for i in sorted(keep)), len(lines) - len(keep)


def views(hits: Sequence[Block], hit_chars: int, per_search: int = 0) -> list[HitView]:
    """What the planner is shown of one search's hits: each fitted to ``hit_chars`` by leaving out neighbours; a hit
    whose anchor alone is longer is shown whole while the search's views stay within ``hit_chars × per_search``
    characters (what a search of ``per_search`` hits may show; at least ``hit_chars × len(hits)``), and withheld past
    that (the planner is told its size and may still keep it by number). Real logs hold pasted pages of tens of
    thousands of characters; five such hits would overflow a planner's context window. (The room was ``hit_chars ×
    len(hits)``: a search finding one 6,000-character message withheld it — the planner never read what it found.)"""
    budget, used, out = hit_chars * max(len(hits), per_search), 0, []
    for b in hits:
        text, left_out = fit(b.content, b.anchor_lines, hit_chars, b.message_lines)
        if len(text) > hit_chars and used + len(text) > budget:
            out.append(HitView(None, left_out, len(b.content)))
            continue
        used += len(text)
        out.append(HitView(text, left_out, len(b.content)))
    return out


def _shown(view: HitView) -> str:
    if view.text is None:
        return (
            f"(withheld: {view.chars:,} characters, longer than this search may show; its messages are never shown "
            "cut — keep it with take_note to return it)"
        )
    if view.left_out:
        return f"{view.text}\n({view.left_out} line{'s' if view.left_out != 1 else ''} of context left out)"
    return view.text


def _results_message(
    keywords: str, hits: list[Block], skipped: int, skip_mode: str, shown: list[HitView], fallback: bool = False
) -> str:
    unit = "session" if skip_mode == "session" else "result"
    seen = (
        (f" ({skipped} {unit}{'s' if skipped != 1 else ''} shown before {'were' if skipped != 1 else 'was'} skipped)")
        if skipped
        else ""
    )
    if fallback:  # (skip mode session: every hit was in a session shown before)
        seen = (
            " in sessions shown before (no other session holds a hit; results shown before were skipped — try other "
            "keywords to find other conversations)"
        )
    if not hits:
        return (
            f"Search {json.dumps(keywords, ensure_ascii=False)} found nothing{seen}. Try other keywords, a "
            "wider date range, or finish."
        )
    parts = [
        f"Search {json.dumps(keywords, ensure_ascii=False)} found {len(hits)} result"
        f"{'s' if len(hits) != 1 else ''}{seen}:"
    ]
    for i, (b, view) in enumerate(zip(hits, shown), 1):
        parts.append(f"\n[{i}] session {b.session_id}\n{_shown(view)}")
    parts.append("\nKeep the useful ones with take_note (by number), search again, or finish.")
    return "\n".join(parts)


def _hit(n: int, b: Block, view: HitView) -> dict[str, Any]:
    """A hit in the trace: as the planner saw it (``content``; None when withheld), what was left out, its ids."""
    return {
        "n": n,
        "id": b.id,
        "session_id": b.session_id,
        "said_at": b.said_at,
        "score": round(b.score, 6),
        "content": view.text,
        "left_out_lines": view.left_out,
        "chars": view.chars,
        "anchor_lines": _view_anchor(b, view) if view.text is not None and view.left_out else list(b.anchor_lines),
        "message_ids": list(b.message_ids),
    }


def _view_anchor(b: Block, view: HitView) -> list[int]:
    """The anchor's [start, end) lines inside the fitted view (neighbour lines before it may have been left out)."""
    a, e = b.anchor_lines
    lines = b.content.split("\n")
    shown = (view.text or "").split("\n")
    start = next(i for i in range(len(shown)) if shown[i : i + (e - a)] == lines[a:e])
    return [start, start + (e - a)]


def _best_kept(kept: dict[str, Block], rank: dict[str, int], limit: int) -> tuple[list[Block], list[str]]:
    """The kept blocks that make the limit by the planner's judgement, not by date: the best-ranked hits of every
    search first (rank 1 of each search, then rank 2, …; ties in the order they were kept). Returns those chosen (in
    the order kept) and the ids of those left out."""
    ids = list(kept)  # in the order kept
    chosen = set(sorted(ids, key=lambda k: rank[k])[:limit])  # (a stable sort: ties stay in the order kept)
    return [kept[k] for k in ids if k in chosen], [k for k in ids if k not in chosen]


def _chronological(blocks: list[Block]) -> list[Block]:
    """Group by session; sessions ordered by their earliest kept block, blocks chronological inside each."""

    def when(b: Block) -> float:
        return b.said_at if b.said_at is not None else float("inf")

    by_session: dict[str, list[Block]] = {}
    for b in blocks:
        by_session.setdefault(b.session_id, []).append(b)
    groups = [sorted(g, key=when) for g in by_session.values()]
    groups.sort(key=lambda g: when(g[0]))
    return [b for g in groups for b in g]


def _latest_said(index: UserIndex) -> str | None:
    """The day of the latest said-at in the user's log (YYYY/MM/DD), so the planner can resolve "last week"."""
    import numpy as np

    from .blocks import format_time

    said = index.index.said_at
    if said.size == 0 or bool(np.isnan(said).all()):
        return None
    return format_time(int(np.nanmax(said)))[:10].replace("-", "/")


def _empty_range(args: dict[str, Any], lo: int, hi: int, own: list[int | None]) -> str:
    """Why a search's dates hold no day: the planner's own two dates, or one of them against its caller's bound."""
    caller = "date this search may cover (its caller set it)"
    if lo == own[0] and hi == own[1]:
        return f"date_from {args['date_from']} is after date_to {args['date_to']}"
    if lo == own[0]:
        return f"date_from {args['date_from']} is after {_when(hi)}, the latest {caller}"
    if hi == own[1]:
        return f"date_to {args['date_to']} is before {_when(lo)}, the earliest {caller}"
    return f"the dates this search may cover (its caller set them) hold no day: {_when(lo)} to {_when(hi)}"


def _searched_dates(
    args: dict[str, Any], own: list[int | None], lo: int | None, hi: int | None
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """The dates a search covered (each the planner's own as it gave it, or the caller's bound that replaced or
    narrowed it), and the planner's own (``asked_from``/``asked_to``) when a caller's bound narrowed either."""
    searched: dict[str, str | None] = {}
    for key, mine, bound in (("date_from", own[0], lo), ("date_to", own[1], hi)):
        searched[key] = args.get(key) if bound == mine else _when(bound) if bound is not None else None
    narrowed = any(mine is not None and mine != bound for mine, bound in ((own[0], lo), (own[1], hi)))
    asked = {"asked_from": args.get("date_from"), "asked_to": args.get("date_to")} if narrowed else {}
    return searched, asked


def _narrowed(asked: dict[str, str | None], searched: dict[str, str | None]) -> str:
    """What the planner is told when a caller's bound narrowed its dates."""
    return (
        f"Your dates {asked['asked_from'] or '…'} to {asked['asked_to'] or '…'} were narrowed to "
        f"{searched['date_from'] or '…'} to {searched['date_to'] or '…'}, the dates this search may cover (its "
        "caller set them)."
    )


def _when(ms: int) -> str:
    """A date bound (Unix ms) as a planner reads one, or its milliseconds when no calendar holds it."""
    from .blocks import iso_utc

    try:
        return iso_utc(ms)
    except (OverflowError, OSError, ValueError):
        return f"{ms} (Unix ms)"


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)
