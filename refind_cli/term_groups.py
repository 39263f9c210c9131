"""What query expansion derives from a user's words, kept per immutable piece of the index (a *source*): a segment,
or a view of the segments, or an index built from scratch — so an Add costs only its new segment's words.

:class:`SourceCache` holds values computed from a source (``expand``'s fuzzy buckets and lone-unit bigram groups of a
segment, a view's most frequent bigrams of a character) for as long as the source lives and the budget allows:

* keyed by the source's identity, held **weakly**: a value never keeps its source (nor the source's words) alive,
  and goes when the source is collected;
* bounded in **bytes** (each value's estimated size; least recently used first): one source's values range from a
  few words (an Add's segment) to hundreds of thousands (a merged one), so a count of entries would bound nothing.
  The budget, a quarter of the index cache's (``REFIND_INDEX_CACHE_MB``), holds the groups of every segment the
  index cache can hold: 5.2 MB of groups (as estimated; Python allocates 1.0–1.8× that) beside 21.3 MB of index
  cache for a user of 10,000 messages of Chinese and Latin words (``bench/first_after_add.py``), as a bigram is
  grouped under both its characters;
* when ``forget`` or ``expire`` evicts a user, the index cache calls :meth:`SourceCache.discard` with what it held
  of the user — their values go at once, and none is kept again (a search still holding them builds without
  caching) — and :meth:`SourceCache.keep_only` with what it still holds: an index it held before (an older view of
  the user, a segment merged away) may linger until the garbage collector breaks its cycles, its groups do not.

This module imports nothing of refind's but its settings: the index cache (below ``expand``) calls it on eviction.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar, cast

from . import settings

T = TypeVar("T")
ENTRY_BYTES = 120  # what an entry costs besides its value (its key, the OrderedDict's node, a weak reference)


class SourceCache:
    """Values computed from immutable sources, by (kind, source): held while the source lives, at most ``budget``
    bytes in all (an entry bigger than the budget is not kept). Thread-safe."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self._items: OrderedDict[tuple[Hashable, int], tuple[Any, int]] = OrderedDict()  # (kind, id) → value, bytes
        self._kinds: dict[int, set[Hashable]] = {}  # source id → the kinds held of it
        self._refs: dict[int, weakref.ref[Any]] = {}  # source id → the source (values held, or discarded)
        self._gone: set[int] = set()  # discarded sources, still alive: their values are not kept again
        self._dead: list[int] = []  # ids of sources collected since (a weakref callback only appends: it may run
        # inside any allocation, this cache's lock held or not)
        self._lock = threading.Lock()

    def get(self, kind: Hashable, source: object, build: Callable[[], tuple[T, int]]) -> T:
        """The value of ``kind`` for ``source``: the held one, or ``build()``'s (value, its size in bytes), kept."""
        key = (kind, id(source))
        with self._lock:
            self._purge()
            ref = self._refs.get(id(source))
            if ref is not None and ref() is source:
                item = self._items.get(key)
                if item is not None:
                    self._items.move_to_end(key)
                    return cast(T, item[0])
        value, nbytes = build()  # (outside the lock: another thread may build the same, the last one is kept)
        if nbytes + ENTRY_BYTES > self.budget:
            return value
        with self._lock:
            self._purge()
            if not self._track(source) or id(source) in self._gone:
                return value
            old = self._items.pop(key, None)
            if old is not None:
                self.used -= old[1]
            self._items[key] = (value, nbytes + ENTRY_BYTES)
            self._kinds[id(source)].add(kind)
            self.used += nbytes + ENTRY_BYTES
            while self.used > self.budget:
                (old_kind, i), (_, n) = self._items.popitem(last=False)
                self.used -= n
                kinds = self._kinds.get(i)
                if kinds is not None:
                    kinds.discard(old_kind)
                    if not kinds and i not in self._gone:  # nothing of it held: stop following it
                        del self._kinds[i]
                        self._refs.pop(i, None)
            return value

    def discard(self, sources: Iterable[object]) -> None:
        """Drop every value of these sources now, and keep none of theirs again while they live."""
        with self._lock:
            self._purge()
            for source in sources:
                if self._track(source):
                    self._drop_values(id(source))
                    self._gone.add(id(source))

    def keep_only(self, sources: Iterable[object]) -> None:
        """Drop the values of every source but these (what the index cache still holds): an index it no longer
        holds may live on until the garbage collector breaks its cycles, but not its groups of words."""
        keep = {id(source) for source in sources}
        with self._lock:
            self._purge()
            for i in [i for i in self._kinds if i not in keep and i not in self._gone]:
                self._forget(i)

    def values(self) -> list[Any]:
        """Every value held (for tests and measurements)."""
        with self._lock:
            self._purge()
            return [v for v, _ in self._items.values()]

    def __len__(self) -> int:
        with self._lock:
            self._purge()
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._kinds.clear()
            self._refs.clear()
            self._gone.clear()
            self.used = 0

    def _track(self, source: object) -> bool:
        """Follow ``source`` (weakly); False when it cannot be referenced weakly (then nothing of it is kept)."""
        i = id(source)
        ref = self._refs.get(i)
        if ref is not None and ref() is source:
            return True
        if ref is not None:  # a collected source's id, reused before its callback was seen
            self._forget(i)
        dead = self._dead

        def collected(_: object) -> None:
            dead.append(i)

        try:
            self._refs[i] = weakref.ref(source, collected)
        except TypeError:
            return False
        self._kinds[i] = set()
        return True

    def _purge(self) -> None:
        while self._dead:
            i = self._dead.pop()
            ref = self._refs.get(i)
            if ref is not None and ref() is None:
                self._forget(i)

    def _drop_values(self, i: int) -> None:
        for kind in self._kinds.get(i, ()):
            item = self._items.pop((kind, i), None)
            if item is not None:
                self.used -= item[1]
        self._kinds[i] = set()

    def _forget(self, i: int) -> None:
        self._drop_values(i)
        self._kinds.pop(i, None)
        self._refs.pop(i, None)
        self._gone.discard(i)


GROUPS = SourceCache(settings.index_cache_bytes_from_env() // 4)
