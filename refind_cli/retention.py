"""The retention policy a database remembers (the ``settings`` row, migration m007).

A writer given a retention explicitly — ``--retention-days`` or ``REFIND_RETENTION_DAYS`` to ``add``, ``serve`` or
``mcp``, ``Memory(retention_days=...)`` — stores it (``refind add`` once it stored something); a command or Memory given none applies the stored one, else the
default (30 days). So ``refind expire`` run plainly after ``refind serve --retention-days 90`` applies 90 days, and
deletes nothing the server still serves. An explicit value always wins for the process that was given it; an expiry
nobody asked for at that moment (the server's sweep, ``Memory.expire``) never deletes what the policy stored now keeps
(:func:`unasked_window`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from . import settings

if TYPE_CHECKING:
    from .store import Store


class Unset(enum.Enum):
    UNSET = "unset"


UNSET: Literal[Unset.UNSET] = Unset.UNSET  # no retention given (None means "off", given explicitly)
Given = float | Literal[Unset.UNSET] | None


def given(value: str | None) -> Given:
    """A flag's or variable's raw value as a retention given explicitly, or UNSET when it is absent or empty."""
    if value is None or not value.strip():
        return UNSET
    return settings.parse_retention(value)


@dataclass(frozen=True)
class Stored:
    days: float | None  # None: retention off
    set_by: str
    set_at: int  # Unix ms


@dataclass(frozen=True)
class Policy:
    """The retention a process applies, where it came from, and what the database remembers."""

    days: float | None
    source: Literal["given", "stored", "default"]
    stored: Stored | None

    @property
    def shorter_than_stored(self) -> bool:
        """An explicit window shorter than the stored one: it hides (and expire deletes) what the policy keeps."""
        if self.source != "given" or self.stored is None:
            return False
        return longer(self.days, self.stored.days) != self.days

    def as_dict(self) -> dict[str, Any]:
        stored = self.stored
        return {
            "retention_days": self.days,
            "source": self.source,
            "stored": None
            if stored is None
            else {"days": stored.days, "set_by": stored.set_by, "set_at": stored.set_at},
            "shorter_than_stored": self.shorter_than_stored,
        }


def stored(store: Store) -> Stored | None:
    """The retention the database remembers, or None when no writer was ever given one."""
    row = store.conn.execute("SELECT retention_days, set_by, set_at FROM settings WHERE id = 1").fetchone()
    return None if row is None else Stored(row[0], row[1], row[2])


@dataclass(frozen=True)
class Change:
    """What a writer's retention did to the stored policy: ``before`` None when none was stored."""

    before: Stored | None
    after: Stored

    @property
    def changed(self) -> bool:
        return self.before is None or self.before.days != self.after.days

    def describe(self) -> str:
        """``90 days → 7 days``."""
        return f"{'none' if self.before is None else days_text(self.before.days)} → {days_text(self.after.days)}"


def days_text(days: float | None) -> str:
    return "off" if days is None else f"{days:g} days"


def longer(a: float | None, b: float | None) -> float | None:
    """The longer of two windows; None (off, keeps everything) is longer than any number."""
    return None if a is None or b is None else max(a, b)


def unasked_window(store: Store) -> float | None:
    """The window of an expiry nobody asked for at this moment (the server's sweep, ``Memory.expire``): the longer of
    the process's own (``store.retention_days``) and the policy stored now, read at the time (one row), so it never
    deletes what another writer's newer policy keeps."""
    kept = stored(store)
    return store.retention_days if kept is None else longer(store.retention_days, kept.days)


def remember(store: Store, days: float | None, *, by: str) -> Change:
    """Store ``days`` as the database's retention (a write, skipped when it is the stored value already: compared
    before the write lock is taken, so a value already stored never waits on another writer)."""
    current = stored(store)
    if current is not None and current.days == days:
        return Change(current, current)
    with store.write():
        current = stored(store)  # again, under the lock: another writer may have stored it meanwhile
        if current is not None and current.days == days:
            return Change(current, current)
        now = store.clock()
        store.conn.execute(
            "INSERT INTO settings (id, retention_days, set_by, set_at) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE "
            "SET retention_days = excluded.retention_days, set_by = excluded.set_by, set_at = excluded.set_at",
            (days, by, now),
        )
        return Change(current, Stored(days, by, now))


def apply(store: Store, days: Given, *, writer: str | None = None) -> Policy:
    """Set ``store.retention_days`` to the retention given, else the stored one, else the default; a ``writer``
    (``"refind add"``, ``"Memory"``…) given one explicitly stores it first. Returns what was applied and why."""
    if days is not UNSET:
        kept = remember(store, days, by=writer).after if writer is not None else stored(store)
        policy = Policy(days, "given", kept)
    else:
        kept = stored(store)
        policy = (
            Policy(kept.days, "stored", kept)
            if kept is not None
            else Policy(settings.DEFAULT_RETENTION_DAYS, "default", None)
        )
    store.retention_days = policy.days
    return policy
