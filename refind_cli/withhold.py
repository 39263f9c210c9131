"""Evidence checked against the store as a search returns it: no message that is no longer stored — or is past
retention, or stored after the search's ``as_of`` — leaves a search.

An agent search reads the user's index once, then spends seconds (minutes) on model calls; a ``refind forget`` or
``refind expire`` that completes meanwhile deletes messages the planner's blocks still hold in memory. Before the
planner returns, :func:`present` reads which of the blocks' messages are still visible (one indexed query per 500
ids) and leaves out the rest: a block whose anchor turn lost a message goes; a neighbour that is gone leaves its block,
which is rendered again from the stored rows of the messages it keeps (each whole, as ``blocks.render_blocks`` renders
them: a kept message's text is never cut). What it left out, and why, is a :class:`Withheld`.

A BM25 search needs no such check: ``search.search`` reads the version, the index and every text it shows in one
read snapshot (``Store.reading``), so its answer is the memory at one instant, taken while it ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .blocks import Block, render_line
from .trace import note_seqs, stored_again

if TYPE_CHECKING:
    from .store import Store
    from .trace import Event, Seqs

CHUNK = 500  # ids per query (SQLite's default limit of variables is 32,766; older builds 999)


@dataclass(frozen=True)
class Withheld:
    """What a search left out of its evidence because it was no longer stored when the search returned."""

    blocks: int  # blocks left out whole: a message of their anchor turn is gone
    messages: int  # messages left out (from those blocks and, as neighbours, from blocks kept)
    removed: int  # of them: deleted (forgotten, or expired and swept) while the search ran
    past_retention: int  # of them: still stored, but past retention by the time the search returned

    def __add__(self, other: Withheld) -> Withheld:
        return Withheld(
            self.blocks + other.blocks,
            self.messages + other.messages,
            self.removed + other.removed,
            self.past_retention + other.past_retention,
        )

    @property
    def reason(self) -> str:
        why = []
        if self.removed:
            why.append(f"{self.removed} forgotten or expired while the search ran")
        if self.past_retention:
            why.append(f"{self.past_retention} past retention by the time it returned")
        return " and ".join(why)

    def as_dict(self) -> dict[str, Any]:
        return {
            "blocks": self.blocks,
            "messages": self.messages,
            "removed": self.removed,
            "past_retention": self.past_retention,
            "reason": self.reason,
        }

    def line(self) -> str:
        """One line for a person: what was withheld, and why."""
        n, m = self.blocks, self.messages
        return (
            f"withheld {m} message{'s' if m != 1 else ''}"
            + (f" ({n} block{'s' if n != 1 else ''} whole)" if n else "")
            + f": {self.reason}"
        )


def present(
    store: Store, user_id: str, blocks: Sequence[Block], *, as_of: int | None = None, seqs: Seqs | None = None
) -> tuple[list[Block], Withheld | None]:
    """``blocks`` holding only messages still visible to a search of ``user_id`` at ``as_of`` (and still the messages
    the search showed: ``seqs``, :func:`_rows`), and what was left out (None, and the blocks themselves, when nothing
    was)."""
    wanted = {i for b in blocks for i in b.message_ids} | {i for b in blocks for i in b.anchor_ids}
    shown = shown_seqs(blocks, seqs)
    rows, gone = _gone(store, user_id, wanted, as_of, shown)
    if not gone:
        return list(blocks), None
    kept: list[Block] = []
    dropped = 0
    for b in blocks:
        if any(i in gone for i in b.anchor_ids):
            dropped += 1
        elif any(i in gone for i in b.message_ids):
            kept.append(_without(b, gone, rows))
        else:
            kept.append(b)
    removed = sum(1 for i in gone if i not in rows)
    return kept, Withheld(dropped, len(gone), removed, len(gone) - removed)


def forgotten_hits(
    store: Store, user_id: str, events: list[Event], *, as_of: int | None = None, seqs: Seqs | None = None
) -> list[Event]:
    """The trace's events without the text of each hit that shows a message no longer visible: the hit's ``content``
    is None (``forgotten``: true), and every word of the planner's after it was shown such a hit (the model's
    replies, thoughts, keywords; the messages that repeat them) is :data:`WORDS_WITHHELD`: they can quote it (a
    probe's model replied "user has jackcanary syndrome"). ``events`` itself when nothing is gone. A trace quoting
    removed messages is never stored (``trace.save``); this is what its caller prints."""
    wanted = {str(i) for e in events if e.kind == "search" for h in _hits(e) for i in h.get("message_ids") or ()}
    _, gone = _gone(store, user_id, wanted, as_of, seqs)
    if not gone:
        return events
    shown = False  # whether a forgotten hit was shown before this event
    out = []
    for e in events:
        if shown:
            e = _without_words(e)
        if e.kind == "search":
            hits = []
            for h in _hits(e):
                if any(str(i) in gone for i in h.get("message_ids") or ()):
                    shown = shown or bool(h.get("content"))
                    h = {**h, "content": None, "forgotten": True}
                hits.append(h)
            e = replace(e, data={**e.data, "hits": hits})
        out.append(e)
    return out


WORDS_WITHHELD = "(withheld: the planner's words after it was shown a message forgotten since)"


def _without_words(e: Event) -> Event:
    """An event after the planner was shown a hit forgotten since, without its words that could quote it."""
    data = e.data
    if e.kind == "model_call":
        messages = [{**m, "content": WORDS_WITHHELD} for m in data.get("messages") or () if isinstance(m, dict)]
        data = {**data, "messages": messages, "reply": WORDS_WITHHELD}
        data.pop("tool_calls", None)
    elif e.kind == "action":
        args = data.get("args")
        if isinstance(args, dict) and "keywords" in args:
            data = {**data, "args": {**args, "keywords": WORDS_WITHHELD}}
        data = {**data, "thought": None if data.get("thought") is None else WORDS_WITHHELD}
    elif e.kind == "search":
        data = {**data, "keywords": WORDS_WITHHELD}
    elif e.kind == "correction" and data.get("reply") is not None:
        data = {**data, "reply": WORDS_WITHHELD}
    else:
        return e
    return replace(e, data=data)


def gone(
    store: Store, user_id: str, shown: Sequence[Sequence[str]], *, as_of: int | None = None, seqs: Seqs | None = None
) -> bool:
    """Whether a hit the planner was ``shown`` (each its message ids) shows a message no longer visible: a forget or
    expire since, after which the planner asks the model nothing more (its replies could quote what was removed)."""
    _, missing = _gone(store, user_id, {i for ids in shown for i in ids}, as_of, seqs)
    return bool(missing)


def _hits(event: Event) -> list[dict[str, Any]]:
    return [h for h in event.data.get("hits") or () if isinstance(h, dict)]


def _gone(
    store: Store, user_id: str, ids: set[str], as_of: int | None, seqs: Seqs | None = None
) -> tuple[dict[str, tuple[Any, ...]], set[str]]:
    """The stored rows of ``ids`` (:func:`_rows`), and which of them a search at ``as_of`` can no longer see."""
    rows = _rows(store, user_id, ids, as_of, seqs)
    return rows, {i for i in ids if i not in rows or not rows[i][3]}


def _rows(
    store: Store, user_id: str, ids: set[str], as_of: int | None, seqs: Seqs | None = None
) -> dict[str, tuple[Any, ...]]:
    """id → (role, content, said_at, visible to a search at ``as_of`` now) of each of these messages still stored.

    A stored message whose seq is not the one the search showed under its id (``seqs``, :func:`trace.note_seqs`) is
    not the message the search showed — its request was stored again since — and counts as removed."""
    wanted = sorted(ids)
    predicate, params = store.visible(as_of=as_of)
    rows: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        for mid, seq, role, content, said_at, shown in store.conn.execute(
            f"SELECT id, seq, role, content, said_at, ({predicate}) FROM messages "
            f"WHERE user_id = ? AND id IN ({','.join('?' * len(chunk))})",
            [*params, user_id, *chunk],
        ):
            if seqs is not None and stored_again(seqs, mid, seq):
                continue
            rows[mid] = (role, content, said_at, bool(shown))
    return rows


def shown_seqs(blocks: Iterable[Block], seqs: Seqs | None = None) -> dict[str, set[int]]:
    """``seqs`` (a copy) with the seq of each message these blocks show."""
    out: dict[str, set[int]] = {i: set(s) for i, s in (seqs or {}).items()}
    note_seqs(out, blocks)
    return out


def _without(block: Block, gone: set[str], rows: dict[str, tuple[Any, ...]]) -> Block:
    """The block rendered again from the stored rows of the messages it keeps (its anchor's among them)."""
    lines: list[str] = []
    ids: list[str] = []
    starts: list[int] = []
    seqs = dict(zip(block.message_ids, block.message_seqs, strict=False))
    anchor = set(block.anchor_ids)
    start = end = 0
    for mid in block.message_ids:
        if mid in gone:
            continue
        role, content, said_at, _ = rows[mid]
        if mid in anchor and not any(i in anchor for i in ids):
            start = len(lines)
        starts.append(len(lines))
        lines.extend(render_line(said_at, role, content).split("\n"))
        ids.append(mid)
        if mid in anchor:
            end = len(lines)
    return block._replace(
        content="\n".join(lines),
        message_ids=tuple(ids),
        anchor_lines=(start, end),
        message_lines=tuple(starts),
        message_seqs=tuple(seqs[i] for i in ids) if block.message_seqs else (),
    )
