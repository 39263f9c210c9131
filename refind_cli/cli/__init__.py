"""The command line: the Typer app and its error handling (app.py), one module per command (commands/), the shared
options (options.py) and everything that draws rich output (render.py, render_trace.py). Nothing here holds domain
logic; each command calls one domain function and renders what it returns."""

from .app import app, main

__all__ = ["app", "main"]
