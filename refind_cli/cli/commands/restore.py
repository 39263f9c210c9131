"""`refind restore BACKUP`: a backup put back into the database, safe while `refind serve` has it open."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ...errors import InvalidInput
from .. import render
from ..options import DbOption, JsonOption

RESTORE_HELP = """\
Replace everything in the database with BACKUP (a copy made by `refind backup`), through SQLite's online backup API:
one write transaction, so `refind serve` or a replay that has the database open waits meanwhile and then sees the
restored content — no need to stop them. It brings back whatever the backup held, messages forgotten or expired
since included, and drops everything stored since it was taken. BACKUP is checked first (a refind database, sound);
asks for confirmation on a terminal unless --yes.

  refind restore backups/refind-2026-01-01.db --yes
"""


def on_terminal() -> bool:
    """Whether a confirmation can be asked (stdin is a terminal)."""
    return sys.stdin.isatty()


def register(app: typer.Typer) -> None:
    app.command("restore", help=RESTORE_HELP, no_args_is_help=True)(restore)


def restore(
    backup: Annotated[Path, typer.Argument(metavar="BACKUP", help="The copy to restore (made by refind backup).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: DbOption = Path("refind.db"),
    as_json: JsonOption = False,
) -> None:
    from ... import restore as restoring
    from ..options import refuse_memory_db, remember_db

    remember_db(db)
    refuse_memory_db(db)
    info = restoring.check_backup(db, backup)
    if not yes:
        if not on_terminal():
            raise InvalidInput(
                f"refusing to replace everything in {db} with backup {backup} without confirmation: pass --yes"
            )
        typer.confirm(render.restore_question(info.as_dict()), abort=True, err=True)
    result = restoring.restore(db, backup, info)
    if as_json:
        render.print_json(result)
    else:
        render.console().print(render.restore_result(result), markup=False, highlight=False, soft_wrap=True)
