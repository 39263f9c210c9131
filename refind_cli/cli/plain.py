"""Output that does not need rich: JSON for scripts, and the progress report of a one-time re-index (which imports
rich only when there is something to draw). `refind search --json` prints through here alone, so it never imports
rich (~90 ms of a cold process)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no rich markup, no wrapping): what scripts parse."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def index_progress() -> Callable[[int, int], None]:
    """A progress report for a one-time re-index of an upgraded database: a bar on stderr on a terminal, nothing
    elsewhere. The bar (and rich) is made on the first report, so opening a database that needs no indexing —
    every open but the first after an upgrade — imports nothing."""
    bar: Any = None
    task: Any = None
    looked = False  # whether stderr was checked for a terminal (on the first report)

    def report(done: int, total: int) -> None:
        nonlocal bar, task, looked
        if not looked:
            looked = True
            from rich.console import Console

            err = Console(stderr=True)
            if err.is_terminal:
                from rich.progress import Progress

                bar = Progress(console=err, transient=True)
                task = bar.add_task("indexing messages for search", total=None)
        if bar is None:
            return
        bar.start()
        bar.update(task, completed=done, total=total)
        if done >= total:
            bar.stop()

    return report
