"""`refind inspect searches` and `refind inspect search ID`: stored planner traces — not built yet."""

from __future__ import annotations

import typer


def register(inspect_app: typer.Typer) -> None:
    """Add the trace commands to the `inspect` sub-app."""
