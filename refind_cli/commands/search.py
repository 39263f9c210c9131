"""`refind search` — not built yet (see the issue that owns it)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's command(s) to the app."""
