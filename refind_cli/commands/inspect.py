"""`refind inspect …`: the review surface (a Typer sub-app; the planner's trace commands live in traces.py)."""

from __future__ import annotations

import typer

inspect_app = typer.Typer(help="Look into the database: users, sessions, turns, events and stored planner searches.",
                          no_args_is_help=False)


def register(app: typer.Typer) -> None:
    from . import traces

    traces.register(inspect_app)
    app.add_typer(inspect_app, name="inspect")
