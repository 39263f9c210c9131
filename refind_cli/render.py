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
