"""Rich renderings of refind's results. The only module (with cli/commands) that knows about rich."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table


def console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def error_console() -> Console:
    return Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no rich markup, no wrapping): what scripts parse."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def replay_summary(summary: dict[str, Any]) -> Table:
    table = Table(title=f"Replayed {summary['source']}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("lines read", f"{summary['lines']:,}")
    table.add_row("requests added", f"{summary['requests_added']:,}")
    table.add_row("messages added", f"{summary['messages_added']:,}")
    table.add_row("identical replays skipped", f"{summary['duplicates']:,}")
    table.add_row("conflicts", _bad(summary["conflicts"]))
    table.add_row("invalid lines", _bad(summary["invalid_lines"]))
    return table


def _bad(n: int) -> str:
    return f"[red]{n:,}[/red]" if n else "0"



def print_blocks(blocks, *, query: str) -> None:
    """Evidence blocks as panels: rank, score, session, dates; the anchor turn's lines highlighted."""
    from rich.panel import Panel
    from rich.text import Text

    out = console()
    if not blocks:
        out.print(f"no match for {query!r}", markup=False)
        return
    for rank, block in enumerate(blocks, 1):
        body = Text()
        start, end = block.anchor_lines
        for i, line in enumerate(block.content.split("\n")):
            body.append(line + "\n", style="bold yellow" if start <= i < end else "")
        body.rstrip()
        title = f"#{rank}  score {block.score:.4f}  session {block.session_id}"
        said = f"said {_minute(block.said_at)} · " if block.said_at is not None else ""
        subtitle = f"{said}recorded {block.created_at} · id {block.id}"
        out.print(Panel(body, title=title, title_align="left", subtitle=subtitle, subtitle_align="right"))


def _minute(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
