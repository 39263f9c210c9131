"""SIGTERM handled as Ctrl-C while refind writes something a kill must not leave half-done.

Python's default for SIGTERM (``timeout``, systemd, ``docker stop``) ends the process at once: no ``finally`` runs,
so a replay left no summary and a zombie reader, and ``export --output`` / ``backup`` left their hidden partial file
beside the target — a copy of a user's messages that a later ``forget`` never reaches. While a block runs under
:func:`sigterm_as_ctrl_c`, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``), and every cleanup runs.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while a block under :func:`sigterm_as_ctrl_c` ran: handled as Ctrl-C is (exit status 143)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while the block runs — in the main thread, where Python runs signal
    handlers; elsewhere, or in a process that handles SIGTERM itself (a server, an embedding program), nothing
    changes. Nested blocks keep the outer one's handler."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) not in (
        signal.SIG_DFL,
        None,
    ):
        yield
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def signals_ignored() -> Iterator[None]:
    """Ctrl-C and SIGTERM ignored while the block runs (in the main thread; elsewhere nothing changes): for the end of
    a change already committed, which must be recorded and said rather than reported as stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def stopping(stop: Callable[[str], None]) -> Iterator[list[str]]:
    """Ctrl-C and SIGTERM call ``stop`` with the signal's name ("Ctrl-C", "SIGTERM") while the block runs, instead of
    ending it where it is: for work that can stop early and keep what it did (an agent search stores its trace). The
    list yielded holds the name of the first that came; after it each signal is its own again (a second Ctrl-C raises
    KeyboardInterrupt). In the main thread, for the handlers Python starts with (elsewhere nothing changes)."""
    caught: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    saved: dict[int, Any] = {}

    def restore() -> None:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        saved.clear()

    def on_signal(signum: int, _frame: Any) -> None:
        restore()
        caught.append("SIGTERM" if signum == signal.SIGTERM else "Ctrl-C")
        stop(caught[0])

    for signum, own in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(signum) is own:
            saved[signum] = signal.signal(signum, on_signal)
    try:
        yield caught
    finally:
        restore()
