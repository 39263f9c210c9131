"""`refind eval`: evidence recall inside context budgets on a labelled set, against a plain BM25 baseline."""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from rich.table import Table

from ...errors import InvalidInput
from ...settings import EVAL_BUDGETS as BUDGETS
from ...settings import EVAL_TOP_K as DEFAULT_TOP_K
from .. import render
from ..options import (
    ApiBaseOption,
    DeadlineOption,
    JsonOption,
    MaxActionsOption,
    ModelOption,
    QuietOption,
    SkipOption,
)

if TYPE_CHECKING:
    from ...misses import Miss

MISSES_AT = 8000  # the budget --misses explains unless --misses-at says another

EVAL_HELP = """\
Measure retrieval quality on a labelled set: evidence recall inside context budgets, refind vs plain BM25.

  refind eval ../shared/datasets/locomo10.json --limit 200

PATH is a LoCoMo file, a LongMemEval file (.json or .json.gz), a MemDaily folder (or one MemDaily file) or a
REALTALK folder (or one chat); the format is detected from its shape unless --format says it. The set is
replayed contest-style into a temporary database (deleted afterwards): one user per sample, every message role 'user' with the speaker's
name in the content, one Add per session split at 20 messages. Every question is asked through the same
search as `refind search` (MemDaily's choices passed as options) and of a plain BM25 baseline (one document
per message, same tokenizer, no fusion, no neighbours, top_k messages) in the same run.

A labelled message is found within budget B when its text lies entirely within the first B characters of the
returned contents joined by a blank line; recall is averaged over questions, for B = 2,000 / 8,000 / 32,000.
"""


def register(app: typer.Typer) -> None:
    app.command("eval", help=EVAL_HELP, no_args_is_help=True)(eval_command)


def eval_command(
    path: Annotated[str, typer.Argument(help="The labelled set: a file or a MemDaily folder.")],
    fmt: Annotated[
        str | None, typer.Option("--format", help="locomo, longmemeval, memdaily or realtalk (default: detected).")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Ask at most N questions.")] = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Blocks (baseline: messages) per search.")] = (
        DEFAULT_TOP_K
    ),
    mode: Annotated[str, typer.Option("--mode", help="bm25, or agent (the LLM planner).")] = "bm25",
    role_faithful: Annotated[
        bool, typer.Option("--role-faithful", help="Keep LongMemEval's user/assistant roles (no labels).")
    ] = False,
    variant: Annotated[
        list[str] | None,
        typer.Option("--variant", "-V", help="Override a SearchConfig field, KEY=VALUE (repeatable)."),
    ] = None,
    no_options: Annotated[
        bool, typer.Option("--no-options", help="Do not pass multiple-choice options to the searches.")
    ] = False,
    append: Annotated[
        str, typer.Option("--append", help="Text appended to every question (e.g. an instruction).")
    ] = "",
    tokenizer: Annotated[
        str, typer.Option("--baseline-tokenizer", help="analyze (refind's), or plain (English-only splitter).")
    ] = "analyze",
    misses: Annotated[
        Path | None,
        typer.Option(
            "--misses",
            help="Write each labelled message refind missed within --misses-at characters to this file, one JSON "
            "line each with why (bm25 mode), and print the recall each reason cost.",
        ),
    ] = None,
    misses_at: Annotated[
        int | None,
        typer.Option("--misses-at", min=1, help="The budget --misses explains, in characters (default 8,000)."),
    ] = None,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
    max_actions: MaxActionsOption = None,
    deadline: DeadlineOption = None,
    skip: SkipOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    from ...evaluate import EvalSettings, evaluate, parse_variants, systems_for
    from ...model import from_env
    from ...settings import parse_agent_deadline, parse_agent_skip, parse_max_actions

    if misses_at is not None and misses is None:
        raise InvalidInput("--misses-at sets the budget --misses explains: give --misses FILE too")

    settings = EvalSettings(
        top_k=top_k,
        limit=limit,
        mode=mode,
        role_faithful=role_faithful,
        options=not no_options,
        query_suffix=append,
        tokenizer=tokenizer,
        variants=parse_variants(variant or ()),
        misses_at=None if misses is None else (misses_at or MISSES_AT),
    )
    planner = (  # agent mode reads them
        {
            "max_actions": parse_max_actions(max_actions),
            "deadline_s": parse_agent_deadline(deadline),
            "skip": parse_agent_skip(skip),
        }
        if mode == "agent"
        else {}
    )
    # checks mode, variants and tokenizer, then (agent mode) the model, as `search` does, before anything is replayed
    systems = systems_for(settings, model_from=functools.partial(from_env, model, api_base), **planner)
    err = render.error_console()
    progress = task = None
    if not quiet and not as_json and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        progress = Progress(
            TextColumn("asking"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=err, transient=True
        )
        task = progress.add_task("eval", total=None)
        progress.start()

    def on_progress(done: int, total: int) -> None:
        if progress is not None and task is not None:
            progress.update(task, completed=done, total=total)

    try:
        with contextlib.ExitStack() as stack:
            on_miss = None
            if misses is not None:  # (whole or not at all: written beside it, renamed into place when the run ends)
                from ...files import whole_file

                _not_the_set(misses, path)
                out = stack.enter_context(whole_file(misses, option="--misses", example="misses.jsonl"))
                on_miss = functools.partial(_write_miss, out)
            report = evaluate(
                path, fmt=fmt, settings=settings, systems=systems, on_progress=on_progress, on_miss=on_miss
            )
    finally:
        if progress is not None:
            progress.stop()
    if as_json:
        render.print_json(report)
        return
    console = render.console()
    console.print(summary_table(report))
    console.print(category_table(report))
    if report.get("misses", {}).get("by_reason"):
        console.print(misses_table(report))
    elif "misses" in report:
        console.print(f"refind missed no labelled message within {report['misses']['budget']:,} characters")
    skipped = ", ".join(f"{n} {reason}" for reason, n in report["skipped"].items())
    console.print(
        f"{report['users']} users · {report['messages']:,} messages · {report['questions']} questions · "
        f"{report['seconds']} s"
        + (f"\nleft out (whole file): {skipped}" if skipped else "")
        + (f"\nmisses written to {misses} (one JSON line per missed message)" if misses is not None else ""),
        markup=False,
    )


def _not_the_set(misses: Path, path: str) -> None:
    """Refuse a --misses file that is the labelled set or inside its folder: the run would replace what it reads."""
    if str(misses) == "-":  # (export's stdout: here stdout is the report's)
        raise InvalidInput("--misses: name a file to write (stdout prints the report), e.g. misses.jsonl")
    target, source = misses.resolve(), Path(path).resolve()
    if target == source or (source.is_dir() and source in target.parents):
        raise InvalidInput(
            f"--misses: {misses} is {'the labelled set itself' if target == source else 'inside the labelled set'}; "
            "name a file outside it, e.g. misses.jsonl"
        )


def _write_miss(out: TextIO, miss: Miss) -> None:
    out.write(json.dumps(miss.as_dict(), ensure_ascii=False) + "\n")


def _pct(x: float) -> str:
    return f"{x:.3f}"


def summary_table(report: dict[str, Any]) -> Table:
    systems = report["systems"]
    agent = any("llm_calls" in s for s in systems.values())
    settings = report["settings"]
    notes = [report["format"], f"top_k {settings['top_k']}", f"mode {settings['mode']}"]
    if settings["tokenizer"] != "analyze":
        notes.append(f"baseline tokenizer {settings['tokenizer']}")
    notes += [f"{k}={v}" for k, v in settings["variants"].items()]
    if not settings["options"]:
        notes.append("no options")
    if settings["query_suffix"]:
        notes.append(f"appended {settings['query_suffix']!r}")
    title = f"Evidence recall · {report['dataset']} ({', '.join(notes)})"
    # as wide as its title where the terminal allows (a title wraps at the table's width: "top_k" / "100")
    table = Table(title=title, title_justify="left", min_width=len(title))
    table.add_column("system", style="bold")
    for b in BUDGETS:
        table.add_column(f"R@{b // 1000}k", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    if agent:
        table.add_column("LLM calls", justify="right")
        table.add_column("tokens", justify="right")
    for name, s in systems.items():
        row = [name, *(_pct(s["recall"][str(b)]) for b in BUDGETS), f"{s['p50_ms']:.1f}", f"{s['p95_ms']:.1f}"]
        if agent:
            row += [f"{s.get('llm_calls', 0):,}", f"{s.get('tokens', 0):,}"]
        table.add_row(*row)
    return table


def category_table(report: dict[str, Any]) -> Table:
    systems = report["systems"]
    table = Table(title="By category", title_justify="left")
    table.add_column("category", style="bold")
    table.add_column("n", justify="right")
    table.add_column("system")
    for b in BUDGETS:
        table.add_column(f"R@{b // 1000}k", justify="right")
    categories = sorted({c for s in systems.values() for c in s["by_category"]})
    for i, cat in enumerate(categories):
        for j, (name, s) in enumerate(systems.items()):
            row = s["by_category"].get(cat)
            if row is None:
                continue
            table.add_row(
                cat if j == 0 else "",
                str(row["questions"]) if j == 0 else "",
                name,
                *(_pct(row["recall"][str(b)]) for b in BUDGETS),
                end_section=j == len(systems) - 1 and i < len(categories) - 1,
            )
    return table


def misses_table(report: dict[str, Any]) -> Table:
    """The recall each reason cost refind within the budget --misses explains (they sum to 1 − its recall there)."""
    misses = report["misses"]
    budget = misses["budget"]
    table = Table(title=f"Why refind missed labelled messages within {budget:,} characters", title_justify="left")
    table.add_column("reason", style="bold")
    table.add_column("recall lost", justify="right")
    table.add_column("messages", justify="right")
    table.add_column("plain BM25 found", justify="right")
    rows = misses["by_reason"].values()
    for reason, row in misses["by_reason"].items():
        plain = "—" if row["plain_found"] is None else f"{row['plain_found']:,}"
        table.add_row(reason, _pct(row["recall"]), f"{row['messages']:,}", plain)
    found = [r["plain_found"] for r in rows if r["plain_found"] is not None]
    table.add_section()
    table.add_row(  # = 1 − refind's recall at this budget
        "all",
        _pct(sum(r["recall"] for r in rows)),
        f"{sum(r['messages'] for r in rows):,}",
        f"{sum(found):,}" if found else "—",
        style="dim",
    )
    return table
