"""Shared by the lifecycle tests: an injectable clock and a one-line Add."""

from __future__ import annotations

from refind_cli.contract import parse_add
from refind_cli.store import Store

T0 = 1_750_000_000_000  # a recorded-at to start the clock from (Unix ms)


class Clock:
    """The store's clock, moved by hand: ``clock.now = …``."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def add(store: Store, request_id: str, user: str, session: str, *contents: str, ts: int | None = 1_700_000_000_000):
    """One Add request of ``contents`` (user, assistant, user, … roles; said-at ts, ts+1, … or None)."""
    return store.add(
        parse_add(
            {
                "request_id": request_id,
                "user_id": user,
                "session_id": session,
                "messages": [
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": c,
                        "timestamp": None if ts is None else ts + i,
                    }
                    for i, c in enumerate(contents)
                ],
            }
        )
    )
