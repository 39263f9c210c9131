"""The server's log of requests refused by a storage fault, kept readable through a flood.

A full disk refuses every Add: one warning per refused request (563 lines in 0.3 s in a probe of round 28) hid
everything else in the operator's log. Now the first refusal of a kind (no_space, locked, read_only, storage, corrupt)
is logged as it comes, the ones after it are counted and said in one line at most every ``EVERY_S`` seconds, and the
first request of the same sort (a write, or a read) that succeeds after them says the fault is over and how many
requests it refused. Every request is still answered its own status: only the log is summarised.
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


def sort_of(method: object, path: object) -> str:
    """``read`` or ``write``: the sort of request whose success ends a run of faults."""
    return "read" if method in ("GET", "HEAD") or path in READS else "write"


@dataclass
class _Run:
    began: float
    said: float  # when a line about it was last logged
    refused: int = 1  # requests refused in all
    unsaid: int = 0  # refused since that line


class FaultLog:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._runs: dict[tuple[str, str], _Run] = {}  # (sort, kind) → the run of refusals
        self._lock = threading.Lock()

    def refused(self, kind: str, method: str, path: str) -> None:
        """A request refused by a storage fault of ``kind`` (its method and path as a log line may show them)."""
        key, now = (sort_of(method, path), kind), self.clock()
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                self._runs[key] = _Run(now, now)
                log.warning(
                    "storage fault on %s %s: %s (more %ss refused by it are counted: one line every %g s)",
                    method,
                    path,
                    kind,
                    key[0],
                    EVERY_S,
                )
                return
            run.refused += 1
            run.unsaid += 1
            if now - run.said >= EVERY_S:
                log.warning(
                    "storage fault: %d more %s%s refused in the last %.0f s: %s (%d since it began %.0f s ago)",
                    run.unsaid,
                    key[0],
                    "" if run.unsaid == 1 else "s",
                    now - run.said,
                    kind,
                    run.refused,
                    now - run.began,
                )
                run.said, run.unsaid = now, 0

    def succeeded(self, method: object, path: object) -> None:
        """A request answered without error: the runs of faults of its sort are over."""
        if not self._runs:  # (every request comes here: no lock while nothing failed)
            return
        sort = sort_of(method, path)
        with self._lock:
            for key in [k for k in self._runs if k[0] == sort]:
                run = self._runs.pop(key)
                log.warning(
                    "storage fault over: %ss succeed again, after %d refused (%s) over %.1f s",
                    sort,
                    run.refused,
                    key[1],
                    self.clock() - run.began,
                )
