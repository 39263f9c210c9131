"""`refind backup PATH`: a consistent copy of the database, safe to take while `refind serve` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import render
from ..options import DbOption, JsonOption

BACKUP_HELP = """\
Copy the database to PATH with SQLite's online backup API: the copy is the database as of one moment, also while
`refind serve` or `refind add` write to it (they are not blocked). PATH must not exist; the copy is checked
(integrity_check) before it appears under its name.

  refind backup backups/refind-2026-01-01.db
"""


def register(app: typer.Typer) -> None:
    app.command("backup", help=BACKUP_HELP, no_args_is_help=True)(backup)


def backup(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="Where to write the copy (a new file).")],
    db: DbOption = Path("refind.db"),
    as_json: JsonOption = False,
) -> None:
    from ... import health
    from ..options import remember_db

    remember_db(db)
    result = health.backup(db, path)
    if as_json:
        render.print_json(result)
    else:
        render.console().print(
            f"backed up {result['db']} to {result['backup']}: {result['requests']:,} requests, "
            f"{result['messages']:,} messages, {result['bytes']:,} bytes",
            markup=False,
        )
