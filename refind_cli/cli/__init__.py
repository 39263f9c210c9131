"""The command line: the Typer app, its error handling and entry point (root.py), one module per command
(commands/), the shared options (options.py), plain JSON output (plain.py) and everything that draws rich output
(render.py, render_trace.py). Nothing here holds domain logic; each command calls one domain function and renders
what it returns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .root import main

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # built on first use: a process running one command builds that command alone (root.main)
        from .root import full_app

        return full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
