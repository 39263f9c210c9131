"""Messages → turns: the units BM25 ranks, each with an id that never changes when other turns arrive.

Input is one user's messages from ``Store.user_messages`` (arrival order). Per session, messages are ordered by
said-at, then arrival (``seq``), then their index inside the Add request.

A message without a said-at sorts where it arrived: it takes the said-at of the message that arrived just before it
in the same session (none before it: it sorts first), then arrival order breaks the tie. So an undated message sent
after a dated one stays after it, and a session with no said-at at all keeps its arrival order.

Two turn units:

* ``"message"`` — one message per turn (real contest traffic is 100 % role ``user``, so pairing degenerates there);
* ``"pair"`` — the paper's turn: a user (or system) message plus the assistant replies that follow it; assistant
  messages opening a session make a turn of their own.

A turn's id is its first message's stable id (derived from user, request id and index), so it does not change when
messages arrive later in other sessions — or later in the same session, unless a new message sorts before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .store import StoredMessage

TURN_UNITS = ("message", "pair")


class Turn(NamedTuple):  # a NamedTuple, not a dataclass: 100k of them are built per index
    id: str  # the first message's stable id
    session_id: str
    messages: tuple[StoredMessage, ...]  # chronological

    @property
    def said_at(self) -> int | None:
        """When the turn was said: its first message's said-at (None when unknown)."""
        return self.messages[0].said_at

    @property
    def recorded_at(self) -> int:
        """When the store received the turn's first message."""
        return self.messages[0].recorded_at

    @property
    def latest_recorded_at(self) -> int:
        return max(m.recorded_at for m in self.messages)

    @property
    def message_ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.messages)

    @property
    def voice(self) -> tuple[str, str | None]:
        """Who says the turn: its first message's role and speaker label ("Caroline" of "Caroline: …")."""
        first = self.messages[0]
        return first.role, speaker_label(first.content)


LABEL_MAX = 40  # characters of a speaker label at most


def speaker_label(content: str) -> str | None:
    """The leading speaker label of a message, 'Caroline' of 'Caroline: …' (up to 40 characters, no newline)."""
    head, sep, _ = content.partition(": ")
    return head if sep and 0 < len(head) <= LABEL_MAX and "\n" not in head else None


def session_order(messages: Sequence[StoredMessage]) -> dict[str, list[StoredMessage]]:
    """Messages grouped by session (sessions in order of first arrival), each in chronological order."""
    sessions: dict[str, list[StoredMessage]] = {}
    for m in messages:
        sessions.setdefault(m.session_id, []).append(m)
    for sid, group in sessions.items():
        group.sort(key=lambda m: m.seq)
        keyed = []
        last_said: float = float("-inf")
        ordered = True
        for m in group:
            said: float = last_said if m.said_at is None else m.said_at
            if said < last_said:
                ordered = False
            last_said = said
            keyed.append((said, m.seq, m.idx, m))
        if not ordered:
            keyed.sort(key=lambda k: k[:3])
            sessions[sid] = [k[3] for k in keyed]
    return sessions


def build_turns(messages: Sequence[StoredMessage], unit: str = "message") -> list[Turn]:
    """The user's turns: session by session (first arrival order), chronological within each session."""
    if unit not in TURN_UNITS:
        raise ValueError(f"turn unit must be one of {TURN_UNITS}, got {unit!r}")
    turns: list[Turn] = []
    for sid, ordered in session_order(messages).items():
        if unit == "message":
            turns.extend(Turn(m.id, sid, (m,)) for m in ordered)
            continue
        current: list[StoredMessage] = []
        for m in ordered:
            if current and m.role != "assistant":
                turns.append(Turn(current[0].id, sid, tuple(current)))
                current = []
            current.append(m)  # assistant replies join the turn before them (or the session's opening turn)
        if current:
            turns.append(Turn(current[0].id, sid, tuple(current)))
    return turns
