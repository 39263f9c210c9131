"""Warm indexes: after an Add commits, its user's index is brought into the process's cache in the background.

A user's first search otherwise pays for reading that user's segments into the index cache
(``index_cache.live_index``), for decoding their term dictionaries and for reading the text of the turns it shows — for a LongMemEval user (~500 long turns) more
than the search itself. The contest sends all of a user's Adds before (most of) that user's questions, so the
server can do that work between the Add and the question, off the search path.

One daemon thread takes the users whose Adds committed, oldest first, each once however many Adds it had meanwhile
(``touch`` is a set insertion), and refreshes each user's index exactly as a default search would
(``search.user_index``), on a store borrowed from the server's pool. A user is warmed at most once per
``MIN_INTERVAL_S``: the first load (every message read) is what a first question would pay dearly for; a refresh
after a few more Adds reads only those, so a search that comes within the interval does that little itself, and an
Add burst does not pay a refresh per Add (~2 ms each, a third of an Add's CPU). Nothing here changes what a search answers:
a warmed index is the one the search would have built, and a search that comes first builds it itself. Memory
stays within the index cache's byte budget (``REFIND_INDEX_CACHE_MB``): warming only fills the same LRU sooner.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager

from ..store import Store
from .asgi import failure

log = logging.getLogger("refind.server")

MAX_PENDING = 4096  # users waiting to be warmed; past this the oldest are dropped (their first search warms them)
MIN_INTERVAL_S = 0.5  # a user is warmed again no sooner than this after its last warming began


def warm_user(store: Store, user_id: str) -> None:
    """Bring ``user_id``'s maintained index (as the default search sees it now) into the index cache, with each of
    its segments' term dictionaries decoded and, when it fits the per-user bound, its turns' text read."""
    from ..index_cache import LivePostings
    from ..search import user_index

    index = user_index(store, user_id).index
    postings = index.postings
    if isinstance(postings, LivePostings):
        for segment in postings.segments.values():
            segment.vocab  # noqa: B018 — decoded on first use: use it now
    preload = getattr(index.turns, "preload", None)
    if preload is not None:
        preload()  # the turns' text, when it fits the per-user bound: a first question reads none


class Warmer:
    """The background thread that warms users' indexes after their Adds. ``touch`` is thread-safe and never
    blocks on the work."""

    def __init__(
        self,
        lend: Callable[[], AbstractContextManager[Store]],
        *,
        warm: Callable[[Store, str], None] = warm_user,
        max_pending: int = MAX_PENDING,
        min_interval_s: float = MIN_INTERVAL_S,
    ) -> None:
        self._lend = lend  # StorePool.store
        self._warm = warm
        self._max_pending = max_pending
        self._interval = min_interval_s
        self._pending: OrderedDict[str, float] = OrderedDict()  # user → when it may be warmed (time.monotonic)
        self._last: OrderedDict[str, float] = OrderedDict()  # user → when its last warming began (bounded)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._busy = False  # warming one user now
        self.warmed = 0  # users warmed, for benchmarks and tests

    def touch(self, user_id: str) -> None:
        """Warm ``user_id`` soon (once, however often it is touched before its turn)."""
        with self._wake:
            if self._stopped or user_id in self._pending:
                return
            self._pending[user_id] = self._last.get(user_id, -math.inf) + self._interval
            if len(self._pending) > self._max_pending:
                self._pending.popitem(last=False)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="refind-warmer", daemon=True)
                self._thread.start()
            self._wake.notify()

    def idle(self, timeout: float | None = None) -> bool:
        """Wait until nobody is waiting to be warmed (tests and benchmarks); True when that happened in time."""
        with self._wake:
            return self._wake.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Stop: users not yet warmed are left cold (their first search warms them)."""
        with self._wake:
            self._stopped = True
            self._pending.clear()
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _next(self) -> str | None:
        """The next user due (the earliest due, ties in arrival order), waiting for one; None once stopped."""
        while not self._stopped:
            if not self._pending:
                self._wake.wait()
                continue
            user_id, due = min(self._pending.items(), key=lambda item: item[1])
            wait = due - time.monotonic()
            if wait <= 0:
                del self._pending[user_id]
                return user_id
            self._wake.wait(wait)
        return None

    def _run(self) -> None:
        while True:
            with self._wake:
                self._busy = False
                self._wake.notify_all()
                user_id = self._next()
                if user_id is None:
                    return
                self._busy = True
                self._last[user_id] = time.monotonic()
                self._last.move_to_end(user_id)
                if len(self._last) > 4 * self._max_pending:  # forgetting one only lets it be warmed sooner
                    self._last.popitem(last=False)
            try:
                with self._lend() as store:
                    self._warm(store, user_id)
                self.warmed += 1
            except Exception as exc:  # only an optimisation: the user's first search does the work instead
                log.warning("warming an index failed: %s", failure(exc, None))
