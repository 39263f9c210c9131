"""The server's log of storage faults met by requests, kept readable through a flood.

A full disk refuses every Add: one warning per refused request (563 lines in 0.3 s in a probe of round 28) hid
everything else in the operator's log; so did one line per agent search whose trace could not be stored. Now the
first fault of a kind (no_space, locked, read_only, storage, corrupt, file_replaced) is logged as it comes, the ones
after it are counted and said in one line at most every ``EVERY_S`` seconds, and the first request of the same sort
(a write, a read, a trace stored) that succeeds after them says the fault is over and how many it met. Every request
is still answered its own status: only the log is summarised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("refind.server")

EVERY_S = 10.0
READS = frozenset({"/search", "/v1/memories/search"})  # POSTs that only read: a write's fault is not theirs
WHAT = {"write": "writes refused", "read": "reads refused", "trace": "agent search traces not stored"}


UNSTORED = frozenset({"GET", "HEAD"})  # /health, the API docs: they read nothing stored, so their success ends no run


def sort_of(method: object, path: object) -> str:
    """``read`` or ``write``: the sort of request whose success ends a run of faults. A search's path with a trailing
    slash is the same route (routes.ContractRoutes): a read."""
    if isinstance(path, str) and path.endswith("/") and path[:-1] in READS:
        path = path[:-1]
    return "read" if method in UNSTORED or path in READS else "write"


@dataclass
class _Run:
    began: float
    said: float  # when a line about it was last logged
    met: int = 1  # faults met in all
    unsaid: int = 0  # met since that line


class FaultLog:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._runs: dict[tuple[str, str], _Run] = {}  # (sort, kind) → the run of faults
        self._lock = threading.Lock()

    def refused(self, kind: str, method: str, path: str) -> None:
        """A request refused by a storage fault of ``kind`` (its method and path as a log line may show them)."""
        self._met(sort_of(method, path), kind, f"storage fault on {method} {path}: {kind}")

    def unrecorded(self, kind: str) -> None:
        """An agent search answered, but its trace not stored: a storage fault of ``kind``."""
        self._met("trace", kind, f"agent search (not stored): trace not stored ({kind})")

    def _met(self, sort: str, kind: str, first: str) -> None:
        now = self.clock()
        with self._lock:
            run = self._runs.get((sort, kind))
            if run is None:
                self._runs[sort, kind] = _Run(now, now)
                log.warning("%s (more %s by it are counted: one line every %g s)", first, WHAT[sort], EVERY_S)
                return
            run.met += 1
            run.unsaid += 1
            if now - run.said >= EVERY_S:
                log.warning(
                    "storage fault: %d more %s in the last %.0f s: %s (%d since it began %.0f s ago)",
                    run.unsaid,
                    WHAT[sort],
                    now - run.said,
                    kind,
                    run.met,
                    now - run.began,
                )
                run.said, run.unsaid = now, 0

    def succeeded(self, method: object, path: object) -> None:
        """A request answered without error: the runs of faults of its sort are over. A GET or HEAD (a supervisor's
        /health every few seconds while every search failed) reads nothing stored: it ends none."""
        if method in UNSTORED:
            return
        self._over(sort_of(method, path))

    def recorded(self) -> None:
        """An agent search's trace was stored: a run of traces not stored is over."""
        self._over("trace")

    def _over(self, sort: str) -> None:
        if not self._runs:  # (every request comes here: no lock while nothing failed)
            return
        with self._lock:
            for key in [k for k in self._runs if k[0] == sort]:
                run = self._runs.pop(key)
                log.warning(
                    "storage fault over: %s again, after %d %s (%s) over %.1f s",
                    "traces are stored" if sort == "trace" else f"{sort}s succeed",
                    run.met,
                    "not stored" if sort == "trace" else "refused",
                    key[1],
                    self.clock() - run.began,
                )
