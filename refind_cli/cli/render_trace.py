"""Rich rendering of planner trace events — the same function live (``refind search --trace``) and later
(``refind inspect search ID``), so a stored trace looks exactly as it did when it ran."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from rich.console import Console, Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ..trace import Event, StoredSearch
from .render import plain_id, printable

LINE_CHARS = 220  # a hit's line is cut here in the rendering (the stored trace keeps it whole)
REPLY_CHARS = 400
FINISH_REASONS = {  # a provider's finish_reason other than "stop" / "tool_calls", as the trace says it
    "length": "cut at the output token limit",
    "content_filter": "cut by the provider's content filter",
}
FORMS = {"json": "a JSON object", "react": "ReAct text", "tool_call": "a tool call"}  # how a reply was parsed


def counted(n: object, word: str) -> str:
    """``n word``, the word plural unless n is 1 ("1 action", "4 actions", "1 LLM call")."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s" if isinstance(n, int) else f"{n} {word}s"


def _cut(text: str, n: int) -> str:
    text = printable(text.replace("\r", ""))
    return text if len(text) <= n else text[: n - 1] + "…"


def _day(ms: int | None) -> str:
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def _cost(cost: float | None) -> str:
    return "cost unknown" if cost is None else f"${cost:.5f}"


def event(ev: Event) -> RenderableType:
    """One trace event as a rich renderable."""
    d: dict[str, Any] = ev.data
    k = ev.kind
    if k == "start":
        head = Text()
        head.append("question ", style="bold").append(printable(d.get("question", "")))
        for i, o in enumerate(d.get("options") or []):
            head.append(f"\n  ({chr(65 + i) if i < 26 else i + 1}) {printable(str(o))}")
        head.append(
            f"\nuser {plain_id(str(d.get('user_id')))} · model {plain_id(str(d.get('model') or '?'))} · budget "
            f"{counted(d.get('max_actions'), 'action')} · {counted(d.get('hits_per_search'), 'hit')} per search · "
            f"skip seen {d.get('skip')}s · top_k {d.get('top_k')} · {counted(d.get('turns', 0), 'turn')}"
            + (f" · latest {d['latest']}" if d.get("latest") else "")
            + (
                f" · only dates {d.get('date_from') or '…'} → {d.get('date_to') or '…'}"
                if d.get("date_from") or d.get("date_to")
                else ""
            )
            + (f" · stored by {d['as_of']}" if d.get("as_of") else "")
            + (f" · deadline {d['deadline_s']:g} s" if isinstance(d.get("deadline_s"), int | float) else ""),
            style="dim",
        )
        return Group(Rule("agent search", align="left"), head)
    if k == "model_call":
        line = (
            f"step {ev.step} · model call · {d.get('prompt_tokens', 0):,} prompt + "
            f"{d.get('completion_tokens', 0):,} completion tokens · {d.get('latency_ms', 0):,.0f} ms · "
            f"{_cost(d.get('cost'))}"
        )
        if d.get("attempts", 1) > 1:
            line += f" · {d['attempts']} attempts"
        if d.get("finish_reason"):  # the provider ended the reply before the model did
            line += " · " + FINISH_REASONS.get(d["finish_reason"], printable(f"finish_reason {d['finish_reason']}"))
        return Group(Rule(f"step {ev.step}", align="left", style="cyan"), Text(line, style="dim"))
    if k == "action":
        t = Text()
        if d.get("thought"):
            t.append("thought ", style="bold").append(printable(d["thought"]), style="italic").append("\n")
        t.append("action ", style="bold").append(printable(str(d.get("name", ""))), style="bold magenta")
        if d.get("form", "json") != "json":  # the JSON protocol is the norm; other forms are named
            t.append(f"  (parsed from {FORMS.get(d['form'], d['form'])})", style="dim")
        args = d.get("args") or {}
        if "keywords" in args:
            t.append(f"  keywords {args['keywords']!r}")
        if args.get("date_from") or args.get("date_to"):
            t.append(printable(f"  dates {args.get('date_from') or '…'} → {args.get('date_to') or '…'}"))
        if "results" in args:
            t.append(f"  results {', '.join(map(str, args['results']))}")
        if d.get("more"):
            n = d["more"]
            t.append(
                f"\n{n} more action{'s' if n != 1 else ''} in the same reply not carried out (one per reply)",
                style="yellow",
            )
        if d.get("ignored"):
            ignored = ", ".join(printable(str(name)) for name in d["ignored"])  # (the model's own keys)
            t.append(f"\nignored fields the planner may not set: {ignored}", style="yellow")
        return t
    if k == "search":
        hits = d.get("hits") or []
        title = f"{len(hits)} hit{'s' if len(hits) != 1 else ''} for {d.get('keywords')!r}"
        if d.get("date_from") or d.get("date_to"):
            title += printable(f" · dates {d.get('date_from') or '…'} → {d.get('date_to') or '…'}")
        if d.get("asked_from") or d.get("asked_to"):  # (the planner's own, as it wrote them)
            title += printable(
                f" (narrowed to the search's bounds from the planner's "
                f"{d.get('asked_from') or '…'} → {d.get('asked_to') or '…'})"
            )
        if d.get("skipped"):
            title += f" · {d['skipped']} seen {d.get('skip', 'session')}s skipped"
        if d.get("fallback_skip"):  # every hit was in a seen session: the seen turns were skipped instead
            title += f" — every hit in one, so {d.get('fallback_skipped')} seen {d['fallback_skip']}s skipped instead"
        table = Table(title=Text(title), title_justify="left", show_lines=True, expand=False)
        table.add_column("#", justify="right", style="bold")
        table.add_column("session / said")
        table.add_column("context (▶ = the hit)")
        for h in hits:
            start, end = (h.get("anchor_lines") or [0, 0])[:2]
            body = Text()
            if h.get("forgotten"):
                body.append("forgotten (or expired) since the planner was shown it", style="yellow")
            elif h.get("content") is None and "chars" in h:
                body.append(f"withheld from the planner: {h['chars']:,} characters (never shown cut)", style="yellow")
            for i, line in enumerate(h["content"].split("\n") if h.get("content") is not None else []):
                anchor = start <= i < end
                body.append(
                    ("▶ " if anchor else "  ") + _cut(line, LINE_CHARS) + "\n", style="bold yellow" if anchor else "dim"
                )
            if h.get("left_out_lines"):
                body.append(f"({h['left_out_lines']} context lines left out of the planner's view)", style="dim")
            body.rstrip()
            table.add_row(
                str(h.get("n")), Text(f"{plain_id(str(h.get('session_id')))}\n{_day(h.get('said_at'))}"), body
            )
        if not hits:
            return Text(title + " — nothing found", style="yellow")
        return table
    if k == "note":
        return Text(
            f"kept result{'s' if len(d.get('results', [])) != 1 else ''} "
            f"{', '.join(map(str, d.get('results', [])))} ({d.get('kept')} kept in all)",
            style="green",
        )
    if k == "correction":
        t = Text(printable(f"correction: {d.get('reason')}"), style="red")
        if d.get("form"):
            t.append(f"  (read as {FORMS.get(d['form'], d['form'])})", style="dim")
        if d.get("reply") is not None:
            t.append("\nthe reply was: ", style="bold").append(_cut(d["reply"], REPLY_CHARS))
        return t
    if k == "budget":
        return Text(f"budget of {counted(d.get('max_actions'), 'action')} used up", style="yellow")
    if k == "deadline":
        secs = d.get("deadline_s")
        secs = f"{secs:g}" if isinstance(secs, int | float) else printable(str(secs))
        asked = d.get("retry_after_s")
        t = Text(
            f"the provider asked to wait {asked:g} s, past the deadline of {secs} s: the planner stopped"
            if isinstance(asked, int | float)
            else f"deadline of {secs} s passed: the planner stopped",
            style="bold yellow",
        )
        if d.get("message"):
            t.append(printable(f" (during a model call: {d['message']})"), style="yellow")
        if isinstance(d.get("ready_ms"), int | float):
            t.append(
                f" (it began {d['ready_ms'] / 1000:.1f} s after the question: loading the model, reading the index)"
            )
        return t
    if k == "interrupted":
        t = Text(printable(f"interrupted ({d.get('reason')}): the planner stopped"), style="bold yellow")
        if d.get("message"):
            t.append(printable(f" (during a model call: {d['message']})"), style="yellow")
        return t
    if k == "refused":
        return Text(printable(f"the model refused: {d.get('refusal')} — the planner stopped"), style="bold yellow")
    if k == "forgotten":
        return Text(
            "a hit the model was shown was forgotten while the search ran: the planner stopped, the model is not "
            "asked again (its replies could quote it)",
            style="bold yellow",
        )
    if k == "withheld":
        where = "the planner's view of this search" if d.get("at") == "search" else "the evidence"
        return Text(
            printable(
                f"withheld from {where}: {d.get('messages')} message(s), {d.get('blocks')} block(s) whole — "
                f"{d.get('reason')}"
            ),
            style="bold yellow",
        )
    if k == "finish":
        return Text("the planner finished", style="green")
    if k == "fallback":
        return Text(f"fallback: {d.get('reason')} → {d.get('path')}", style="bold yellow")
    if k == "evidence":
        s = d.get("stats") or {}
        ids = d.get("ids") or []
        body = Text(
            f"{len(ids)} block{'s' if len(ids) != 1 else ''} via {d.get('path')} (limit {d.get('limit')}) · "
            f"{counted(s.get('llm_calls', 0), 'LLM call')} · {s.get('prompt_tokens', 0):,} + "
            f"{s.get('completion_tokens', 0):,} tokens · {_cost(s.get('cost'))} · "
            f"{s.get('duration_ms', 0):,.0f} ms ({s.get('model_ms', 0):,.0f} ms in the model)"
        )
        if d.get("left_out"):
            n = len(d["left_out"])
            body.append(
                f"\n{n} kept note{'s' if n != 1 else ''} left out (limit {d.get('limit')}): the best-ranked hits of "
                "each search were kept first",
                style="yellow",
            )
        for i, (bid, sid) in enumerate(zip(ids, d.get("sessions") or []), 1):
            body.append(f"\n  {i}. {plain_id(str(bid))}  session {plain_id(str(sid))}", style="dim")
        return Group(Rule("evidence", align="left"), body)
    if k == "error":
        return Text(printable(f"error ({d.get('type')}): {d.get('message')}"), style="bold red")
    return Text(f"{k}: {d}")


def print_event(console: Console, ev: Event) -> None:
    console.print(event(ev))


def print_trace(console: Console, events: Iterable[Event]) -> None:
    for ev in events:
        print_event(console, ev)


NARROW = 120  # below this many columns the searches table keeps only what a row is found by


def searches_table(rows: list[StoredSearch], *, width: int = NARROW) -> Table:
    """The stored searches, one a row. On a terminal narrower than :data:`NARROW`, ten columns left each a few
    letters wide (a query read two letters a line): the id, time, query, calls and tokens only, and a caption saying
    what was left out."""
    narrow = width < NARROW
    caption = (
        "narrow terminal: user, model, cost, ms and returned left out (--json lists every field)" if narrow else None
    )
    table = Table(
        title="stored agent searches (newest first)", title_justify="left", caption=caption, caption_justify="left"
    )
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("id", "left"),
        ("when (UTC)", "left"),
        ("user", "left"),
        ("query", "left"),
        ("model", "left"),
        ("calls", "right"),
        ("tokens", "right"),
        ("cost", "right"),
        ("ms", "right"),
        ("returned", "right"),
    )
    kept = [i for i, (name, _) in enumerate(columns) if not narrow or name in _NARROW_COLUMNS]
    for i in kept:
        name, justify = columns[i]
        table.add_column(
            name,
            justify=justify,
            no_wrap=name in ("id", "when (UTC)"),
            overflow="fold",
            ratio=2 if name == "query" else None,
        )
    for r in rows:
        cells = (
            Text(plain_id(r.id)),
            _day(r.at),
            Text(plain_id(r.user_id)),
            Text(printable(_cut(r.query, 60))),
            Text(printable(r.model or "")),
            str(r.llm_calls),
            f"{r.prompt_tokens + r.completion_tokens:,}",
            "" if r.cost is None else f"${r.cost:.5f}",
            f"{r.duration_ms:,.0f}",
            str(len(r.returned_ids)),
        )
        table.add_row(*(cells[i] for i in kept))
    return table


_NARROW_COLUMNS = frozenset({"id", "when (UTC)", "query", "calls", "tokens"})


def search_header(s: StoredSearch) -> Text:
    return Text(
        f"search {plain_id(s.id)} · user {plain_id(s.user_id)} · {_day(s.at)} UTC · model {plain_id(s.model or '?')}",
        style="bold",
    )
