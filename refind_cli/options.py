"""Options shared by several commands, defined once as ``Annotated`` aliases with their REFIND_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import settings

DbOption = Annotated[
    Path,
    typer.Option("--db", envvar=settings.ENV_DB, help="SQLite database file.", show_default=True),
]
UserOption = Annotated[str, typer.Option("--user", "-u", help="The user whose memory to use (the isolation key).")]
OptionalUserOption = Annotated[Optional[str], typer.Option("--user", "-u", help="Limit to this user.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of rich output.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
RetentionOption = Annotated[
    Optional[str],
    typer.Option(
        "--retention-days",
        envvar=settings.ENV_RETENTION_DAYS,
        help="Hide and expire messages recorded more than this many days ago (default 30; 'off' keeps everything).",
    ),
]


def open_store(db: Path, retention: str | None):
    """Open the store named by --db with the retention from --retention-days / REFIND_RETENTION_DAYS."""
    from .store import Store

    return Store(db, retention_days=settings.parse_retention(retention))
