"""Evidence blocks: an anchor turn with its neighbours, rendered one message per line.

Which messages a block shows (the anchor's, always whole; neighbours nearest first, subject to the role, filter,
length, overlap and block-size rules of the SearchConfig), which blocks make the list (a long anchor after the lead
blocks is deferred behind the shorter ones, never cut), and how each line reads: ``[YYYY-MM-DD HH:MM] role: content``,
the block's other lines without the day and role they share with the lines next to them (``[HH:MM] content``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from .index import TurnIndex, neighbours
from .turns import speaker_label

if TYPE_CHECKING:
    import numpy as np

    from .search_config import SearchConfig
    from .store import StoredMessage
    from .turns import Turn


class Block(NamedTuple):  # a NamedTuple, not a frozen dataclass: a third of the cost to make (top_k 100 make 100)
    """One evidence block: an anchor turn and its neighbours, rendered one message per line, chronological. (A tuple:
    JSON takes it as a list of its values, so it is written through :meth:`as_contract` or ``_asdict()``.)"""

    id: str  # the anchor turn's stable id
    content: str  # lines "[YYYY-MM-DD HH:MM] role: content" (none when unknown); others "[HH:MM] content" (block_lines)
    score: float  # strictly decreasing with rank
    created_at: str  # ISO 8601 UTC recorded-at of the anchor turn
    session_id: str
    said_at: int | None  # the anchor's said-at (Unix ms)
    message_ids: tuple[str, ...]  # every message shown in the block, chronological
    anchor_ids: tuple[str, ...]  # the anchor turn's message ids
    anchor_lines: tuple[int, int] = (0, 0)  # [start, end) of the anchor's lines in content (for highlighting)
    message_lines: tuple[int, ...] = ()  # the line each message of message_ids starts on (a message may span lines)
    message_seqs: tuple[int, ...] = ()  # each message's seq (a message id is reused when its request is stored again)

    def as_contract(self) -> dict[str, Any]:
        """The contract's search item."""
        return {"id": self.id, "content": self.content, "score": self.score, "created_at": self.created_at}


def format_time(ms: int | None, *, seconds: bool = False) -> str:
    if ms is None:
        return ""
    return _stamp(ms, seconds)


# A search's lines and blocks repeat their times (a session's messages share a recorded-at, a question asked again
# shows the same turns): each text is made once and remembered (typed: an int and a float of one value may differ).
STAMPS = 4_096  # times remembered by each of the two caches below (~1.2 MB each when full, by tracemalloc)


@lru_cache(maxsize=STAMPS, typed=True)
def _stamp(ms: int, seconds: bool) -> str:
    """``format_time`` of a known said-at."""
    if type(ms) is int and FAST_TIME_MS[0] <= ms < FAST_TIME_MS[1]:
        days, rem = divmod(ms // 1000, 86_400)
        hm = f"{_day(days)} {_TWO[rem // 3600]}:{_TWO[rem % 3600 // 60]}"
        return f"{hm}:{_TWO[rem % 60]}" if seconds else hm
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


@lru_cache(maxsize=STAMPS, typed=True)
def iso_utc(ms: int) -> str:
    if type(ms) is int and FAST_TIME_MS[0] <= ms < FAST_TIME_MS[1]:
        secs, milli = divmod(ms, 1000)
        days, rem = divmod(secs, 86_400)
        return f"{_day(days)}T{_TWO[rem // 3600]}:{_TWO[rem % 3600 // 60]}:{_TWO[rem % 60]}.{milli:03d}Z"
    # whole milliseconds, not the float ms / 1000: past 2100 it is a millisecond early for ~6% of values (…58.566Z)
    dt = _EPOCH + timedelta(milliseconds=int(ms))
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Every block line and block carries a time: datetime's fromtimestamp + strftime/isoformat cost ~10-20 µs a pair
# (measured on the 2 shared cores; about a third of rendering a top_k 100 search). For int Unix ms from 2000 to 2100
# (UTC) the same text comes from arithmetic (whole ms are exact in the float ``ms / 1000`` at these magnitudes, so
# the fields are the ones datetime has); any other value takes the datetime path.
FAST_TIME_MS = (946_684_800_000, 4_102_444_800_000)  # 2000-01-01 ≤ ms < 2100-01-01
_TWO = [f"{i:02d}" for i in range(60)]
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=65_536)
def _day(days: int) -> str:
    """YYYY-MM-DD of a day counted from the Unix epoch."""
    return date.fromordinal(days + _EPOCH_ORDINAL).isoformat()


# ---- the per-user index ----------------------------------------------------------------------------------------


def render_blocks(
    idx: TurnIndex,
    order: np.ndarray,
    fused: np.ndarray,
    *,
    top_k: int,
    cfg: SearchConfig,
    scores: np.ndarray | None = None,
    match: np.ndarray | None = None,
) -> list[Block]:
    """The first ``top_k`` blocks of the ranked anchors ``order``. An anchor's text is never cut: a block is made
    shorter only by leaving neighbours out, and the list only by leaving later blocks out — an anchor longer than
    ``cfg.defer_chars`` after the first ``cfg.lead_blocks`` blocks goes after every shorter one. ``scores`` (each
    turn's BM25 score for the query) lets ``cfg.neighbour_filter`` keep the neighbours that share a query word.
    With ``cfg.fill_chars``, a list shorter than that with a block shorter than ``cfg.block_floor`` that starts past
    ``cfg.fill_after`` characters of it is made again, such blocks grown, best first, into what it left
    (:func:`_grow`); the text before ``fill_after`` is the same in both passes, so the second starts where the first
    reached it (:class:`Resume`)."""
    spare = None if cfg.fill_chars is None else Spare(0, probe=True)  # (the first pass finds whether a block is short)
    blocks = _render(idx, order, fused, top_k=top_k, cfg=cfg, scores=scores, match=match, spare=spare)
    if spare is not None and spare.short and cfg.fill_chars is not None:
        total = _text_chars(blocks)
        if total < cfg.fill_chars:
            again = Spare(cfg.fill_chars - total)
            return _render(
                idx, order, fused, top_k=top_k, cfg=cfg, scores=scores, match=match, spare=again, start=spare.resume
            )
    return blocks


def within_fill(blocks: Sequence[Block], filled: set[str], chars: int) -> list[Block]:
    """The blocks less those anchored on a turn that only fills the list (backfill; ``filled`` holds their ids) and
    would start once the list holds ``chars`` characters (as a reader counts them): past ``chars`` nothing is left out
    that matched the query, and nothing before it moves."""
    out: list[Block] = []
    used = 0
    for block in blocks:
        if used >= chars and block.id in filled:
            continue
        out.append(block)
        used += len(block.content) + 2
    return out


class Spare:
    """What a short list leaves of ``fill_chars``: the characters its blocks may still grow by, best block first."""

    def __init__(self, chars: int, *, probe: bool = False) -> None:
        self.chars = chars
        self.short = False  # whether a block was shorter than ``block_floor``
        self.used = 0  # characters of the list before the block being made
        self.probe = probe  # the first pass: it keeps where a second one may start (``resume``)
        self.resume: Resume | None = None


class Resume(NamedTuple):
    """Where a pass reached its first block that starts past ``fill_after``: every block before it is the same in
    the pass that grows blocks, so that pass starts here. The first pass's lists only grow, so their first ``made``
    / ``waiting`` items are what it held then; the rest of its state follows from its blocks (:func:`_render`)."""

    phase: int  # 0: the ranked anchors; 1: the deferred ones
    at: int  # the anchor's place in that phase's sequence
    blocks: list[Block]  # the first pass's blocks …
    made: int  # … of which this many were made
    deferred: list[tuple[int, float]]  # the first pass's deferred anchors …
    waiting: int  # … of which this many were deferred


def _text_chars(blocks: Sequence[Block]) -> int:
    """The characters of the blocks' contents joined as a reader counts them (two between blocks, two after)."""
    return sum(len(b.content) + 2 for b in blocks)


def _render(
    idx: TurnIndex,
    order: np.ndarray,
    fused: np.ndarray,
    *,
    top_k: int,
    cfg: SearchConfig,
    scores: np.ndarray | None,
    match: np.ndarray | None,
    spare: Spare | None,
    start: Resume | None = None,
) -> list[Block]:
    """One pass of :func:`render_blocks`; ``spare``: what short blocks may grow by (:func:`compose`); ``start``: a
    first pass's state to go on from (its blocks before it are this pass's too)."""
    blocks: list[Block] = []
    deferred: list[tuple[int, float]] = []
    shown: set[str] = set()  # message ids already shown (overlap="trim")
    last_score = float("inf")
    used = 0  # characters of the joined contents so far (each block and a two-character separator)
    plain = _plain_order(scores, top_k) if cfg.interleave_chars and scores is not None else []
    plain_next = 0
    interleaved: set[str] = set()  # message ids shown alone by the interleave
    # a second pass may start where the first reached fill_after only when every block comes from the two loops below
    resumable = spare is not None and spare.probe and not cfg.lead_chars and not cfg.interleave_chars
    phase, index = 0, 0  # where the loops below are
    if start is not None:  # (every message a block showed is shown: no lead or interleave when resumable)
        blocks, deferred, phase = start.blocks[: start.made], start.deferred[: start.waiting], start.phase
        shown = {i for b in blocks for i in b.message_ids}
        last_score = blocks[-1].score if blocks else last_score
        used = _text_chars(blocks)

    def add(pos: int, score: float, *, bare: bool = False, remember: bool = False, anchor: Turn | None = None) -> None:
        nonlocal last_score, used
        anchor = idx.turns[pos] if anchor is None else anchor
        n = cfg.neighbours
        alone = bare or len(blocks) < cfg.bare_blocks  # (shown alone by design: a lead, an interleaved or a bare block)
        if alone:
            n = 0
        elif cfg.context_blocks is not None and len(blocks) >= cfg.context_blocks:
            n = cfg.late_neighbours
        if spare is not None:
            spare.used = used
            if resumable and spare.resume is None and used >= cfg.fill_after:
                spare.resume = Resume(phase, index, blocks, len(blocks), deferred, len(deferred))
        grows = None if alone else spare  # (a block shown alone never grows)
        chosen = compose(idx, pos, cfg, shown, scores if match is None else match, n=n, anchor=anchor, spare=grows)
        messages: list[StoredMessage] = []  # chronological; the anchor's are chosen[pos], all of them
        lead = 0  # how many come before the anchor's first
        if len(chosen) == 1:  # (most blocks past the first few: the anchor alone)
            messages = chosen[pos]
        else:
            for j in sorted(chosen):
                if j < pos:
                    lead += len(chosen[j])
                messages += chosen[j]
        texts = block_lines(messages, lead, cfg)
        ids = [m.id for m in messages]
        starts: list[int] = []  # each message's first line in the block
        count = 0  # (lines counted, not split and joined again: a message's text is most of a block)
        for text in texts:
            starts.append(count)
            count += text.count("\n") + 1
        after = lead + len(anchor.messages)
        anchor_lines = (starts[lead], starts[after] if after < len(starts) else count)
        if not bare or remember:
            shown.update(ids)  # a lead turn is shown again later, in its block; an interleaved one is not
        score = min(score, _below(last_score))
        last_score = score
        content = "\n".join(texts)
        used += len(content) + 2 if texts else 1  # = the sum of len(line) + 1 over the lines, + 1
        blocks.append(
            Block(
                id=anchor.id,
                content=content,
                score=score,
                created_at=iso_utc(anchor.recorded_at),
                session_id=anchor.session_id,
                said_at=anchor.said_at,
                message_ids=tuple(ids),
                anchor_ids=tuple(ids[lead:after]),
                anchor_lines=anchor_lines,
                message_lines=tuple(starts),
                message_seqs=tuple([m.seq for m in messages]),
            )
        )

    def interleave(score: float) -> None:
        """After a block, while the text is within ``cfg.interleave_chars``: the next ``cfg.interleave_turns`` best
        turns by plain BM25 not shown yet, each alone."""
        nonlocal plain_next
        added = 0
        while added < cfg.interleave_turns and used < cfg.interleave_chars and plain_next < len(plain):
            if len(blocks) >= top_k:
                return
            pos = plain[plain_next]
            plain_next += 1
            turn = idx.turns[pos]
            if all(m.id in shown for m in turn.messages):
                continue
            if cfg.interleave_max_chars is not None and turn_chars(turn) > cfg.interleave_max_chars:
                continue
            interleaved.update(m.id for m in turn.messages)
            add(pos, score, bare=True, remember=True, anchor=turn)
            added += 1

    if cfg.lead_chars and scores is not None and fused.size and start is None:
        for pos in _lead(idx, scores, cfg.lead_chars, top_k):
            add(pos, float(fused[0]), bare=True)

    def shown_in_full(anchor: Turn) -> bool:
        """Whether a better block already showed every message of ``anchor`` (a turn shown alone by the interleave is
        shown again, in context)."""
        if cfg.overlap != "trim":
            return False
        if len(anchor.messages) == 1:  # (most turns: no generator to make)
            only = anchor.messages[0].id
            return only in shown and only not in interleaved
        return all(m.id in shown and m.id not in interleaved for m in anchor.messages)

    first = start.at if start is not None else 0
    for index, (pos, score) in enumerate(_ranked(order, fused, 4 * top_k + 16) if phase == 0 else ()):
        if index < first:
            continue  # (shown by the first pass, before its blocks grew)
        if len(blocks) >= top_k:
            break
        anchor = idx.turns[pos]
        if shown_in_full(anchor):
            continue
        if len(blocks) >= cfg.lead_blocks and defers(anchor, cfg):
            deferred.append((pos, score))
            continue
        add(pos, score, anchor=anchor)
        interleave(score)
    first = start.at if start is not None and phase == 1 else 0
    phase = 1
    for index, (pos, score) in enumerate(deferred):
        if index < first:
            continue
        if len(blocks) >= top_k:
            break
        anchor = idx.turns[pos]
        if shown_in_full(anchor):
            continue
        add(pos, score, anchor=anchor)
        interleave(score)
    return blocks


def _ranked(order: np.ndarray, fused: np.ndarray, first: int) -> Iterator[tuple[int, float]]:
    """The ranked anchors with their scores as Python numbers: the first ``first`` at once, the rest only if asked
    for (a top_k 10 search reads a few dozen of what may be thousands)."""
    yield from zip(order[:first].tolist(), fused[:first].tolist())
    yield from zip(order[first:].tolist(), fused[first:].tolist())


def turn_chars(turn: Turn) -> int:
    """The length of a turn's text."""
    messages = turn.messages
    return len(messages[0].content) if len(messages) == 1 else sum(len(m.content) for m in messages)


# a Chinese, Japanese or Korean character (Hangul Jamo, CJK radicals to ideographs with kana, Hangul syllables,
# compatibility ideographs, the supplementary ideographs): what one holds, 2–3 Latin letters of English do
_WIDE = re.compile("[\u1100-\u11ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003ffff]")


def is_long(turn: Turn, cfg: SearchConfig) -> bool:
    """Whether ``turn`` is longer than ``cfg.defer_chars``, each of its wide characters counted ``cfg.defer_wide``
    times (counted only when that can decide it)."""
    limit = cfg.defer_chars
    assert limit is not None
    chars = turn_chars(turn)
    if chars > limit or cfg.defer_wide <= 1 or chars * cfg.defer_wide <= limit:
        return chars > limit
    wide = sum(0 if m.content.isascii() else len(_WIDE.findall(m.content)) for m in turn.messages)
    return chars + wide * (cfg.defer_wide - 1) > limit


ROLE_LABELS = frozenset({"user", "assistant", "system"})  # a label naming a role, not a person


def defers(turn: Turn, cfg: SearchConfig) -> bool:
    """Whether ``turn``, as an anchor after the lead blocks, goes after the shorter ones: longer than
    ``cfg.defer_chars`` (:func:`is_long`) and — unless ``cfg.defer_people`` — not said by a named person (an
    assistant's turn, or one labelled by a role or by nothing, is)."""
    if cfg.defer_chars is None or not is_long(turn, cfg):
        return False
    if cfg.defer_people:
        return True
    first = turn.messages[0]  # (turn.voice, its label read only when the role leaves it to decide)
    return first.role == "assistant" or not _a_name(speaker_label(first.content))


@lru_cache(maxsize=4_096)  # (a user's turns have a few labels: their speakers' names)
def _a_name(label: str | None) -> bool:
    """Whether a turn's ``Name: `` label names a person: not a role, at most four words, no sentence punctuation
    ("Kate", "Fahim Khan", "李雷" — not "user", nor "Our trip, the whole story" of "Our trip, the whole story: …")."""
    if label is None:
        return False
    words = label.split()
    return 0 < len(words) <= 4 and label.strip().lower() not in ROLE_LABELS and not _SENTENCE.search(label)


_SENTENCE = re.compile(r"[,.;!?，。；！？]")


def _plain_order(scores: np.ndarray, top_k: int) -> list[int]:
    """The turns with a positive score, best first by plain BM25 (ties: the earlier first), at most ``4 × top_k``."""
    import numpy as np

    positive = np.flatnonzero(scores > 0)
    best: list[int] = positive[np.lexsort((positive, -scores[positive]))][: 4 * top_k].tolist()
    return best


def _lead(idx: TurnIndex, scores: np.ndarray, chars: int, top_k: int) -> list[int]:
    """The best turns by plain BM25 (ties: the earlier first) whose whole text fits, in order, in ``chars``."""
    out: list[int] = []
    used = 0
    for pos in _plain_order(scores, top_k):
        turn = idx.turns[pos]
        size = sum(len(render_line(m.said_at, m.role, m.content)) + 1 for m in turn.messages) + 1
        if used + size > chars:
            if used:
                break
            continue  # a first turn longer than the lead: the lead stays empty rather than cut it
        used += size
        out.append(pos)
        if len(out) >= top_k:
            break
    return out


def compose(
    idx: TurnIndex,
    pos: int,
    cfg: SearchConfig,
    shown: set[str],
    scores: np.ndarray | None = None,
    *,
    n: int | None = None,
    anchor: Turn | None = None,
    spare: Spare | None = None,
) -> dict[int, list[StoredMessage]]:
    """Which messages a block shows, by turn index: the anchor's (``anchor``: the turn at ``pos``, when the caller
    has it), whole, then neighbours (±``n``, default ``cfg.neighbours``) nearest first, each kept only if it passes
    the role, filter, length, overlap and block-size rules; then, with ``spare``, :func:`_grow`'s. Returns {turn
    index: [message]}."""
    n = cfg.neighbours if n is None else n
    anchor = idx.turns[pos] if anchor is None else anchor
    chosen = {pos: list(anchor.messages)}
    size = turn_chars(anchor)
    if n == 0:
        return _grow(idx, pos, cfg, shown, chosen, size, spare)
    role = anchor.messages[0].role
    window = neighbours(idx, pos, n)
    before = n if cfg.neighbours_before is None else cfg.neighbours_before
    lowest = max(window.start, pos - before)
    # nearest first, the earlier of two at one distance first
    reach = max(pos - lowest, window.stop - 1 - pos)  # (the session's bounds: never more steps than it has turns)
    nearest = [j for d in range(1, reach + 1) for j in (pos - d, pos + d) if lowest <= j < window.stop]
    only_matching = cfg.neighbour_filter == "match"
    for j in nearest:
        matches = scores is not None and bool(scores[j] > 0)
        if only_matching and not matches:
            continue  # (before the turn is fetched: most neighbours share no query word)
        turn = idx.turns[j]
        if cfg.neighbour_roles == "same" and turn.messages[0].role != role:
            continue
        if not _passes_filter(turn, cfg, matches):
            continue
        kept = []
        for m in turn.messages:
            if cfg.overlap == "trim" and m.id in shown:
                continue
            if cfg.neighbour_max_chars is not None and len(m.content) > cfg.neighbour_max_chars:
                continue
            if cfg.block_chars is not None and size + len(m.content) > cfg.block_chars:
                continue
            size += len(m.content)
            kept.append(m)
        if kept:
            chosen[j] = kept
    return _grow(idx, pos, cfg, shown, chosen, size, spare)


def _grow(
    idx: TurnIndex,
    pos: int,
    cfg: SearchConfig,
    shown: set[str],
    chosen: dict[int, list[StoredMessage]],
    size: int,
    spare: Spare | None,
) -> dict[int, list[StoredMessage]]:
    """``chosen`` (a block of ``size`` characters) with the nearest turns within ±``cfg.fill_reach`` of ``pos`` not
    in it yet — any, sharing a query word or not; their messages not shown by a better block, each at most
    ``cfg.neighbour_max_chars`` — while it is shorter than ``cfg.block_floor`` and ``spare`` lasts (none: as is)."""
    if spare is None or size >= cfg.block_floor or spare.used < cfg.fill_after:
        return chosen  # (a block before ``fill_after`` is the same in both passes: only a later one asks for another)
    spare.short = True
    if spare.chars <= 0:
        return chosen
    window = neighbours(idx, pos, cfg.fill_reach)
    reach = max(pos - window.start, window.stop - 1 - pos)
    for j in (j for d in range(1, reach + 1) for j in (pos - d, pos + d) if window.start <= j < window.stop):
        if size >= cfg.block_floor or spare.chars <= 0:
            break
        if j in chosen:
            continue
        kept = [
            m
            for m in idx.turns[j].messages
            if not (cfg.overlap == "trim" and m.id in shown)
            and (cfg.neighbour_max_chars is None or len(m.content) <= cfg.neighbour_max_chars)
        ]
        if kept:
            chosen[j] = kept
            added = sum(len(m.content) for m in kept)
            size += added
            spare.chars -= added
    return chosen


def _passes_filter(turn: Turn, cfg: SearchConfig, matches: bool) -> bool:
    """The neighbour filter: ``all``; ``match`` (the turn shares a query word); ``short`` (every message of it is
    at most ``short_chars`` long); ``match_or_short``."""
    if cfg.neighbour_filter == "all":
        return True
    if cfg.neighbour_filter == "match":
        return matches
    short = all(len(m.content) <= cfg.short_chars for m in turn.messages)
    if cfg.neighbour_filter == "short":
        return short
    return matches or short


def _below(x: float) -> float:
    """The largest float below x (keeps scores strictly decreasing even when fused scores tie)."""
    return math.nextafter(x, float("-inf"))


def block_lines(messages: Sequence[StoredMessage], anchor: int, cfg: SearchConfig) -> list[str]:
    """Each message of a block (chronological; ``anchor``: the position of the anchor's first message) as its line.
    The anchor's first message names its day and role; with ``cfg.stamps == "day"`` every other line gives only the
    time when it was said on the day of the line above it and of its neighbour toward the anchor (the line below it,
    above the anchor), and with ``cfg.roles == "change"`` no role when the role is theirs — "[2023-05-01 14:00] user:
    a" then "[14:02] b". So a block reads top down (nothing in its text says which line is the anchor's), and any run
    of lines around the anchor, which is what the planner's view of a hit keeps (``planner.fit``), reads whole. A
    line without a said-at keeps its role (with no stamp, it would read as more of the message before). The text
    itself is never touched."""
    if len(messages) == 1:  # (most blocks: an anchor of one message, no neighbour sharing a query word)
        return [render_line(messages[0].said_at, messages[0].role, messages[0].content)]
    stamps = [format_time(m.said_at) for m in messages]
    days = [stamp.rpartition(" ")[0] for stamp in stamps]
    out: list[str] = []
    for k, m in enumerate(messages):
        stamp = stamps[k]
        if k == anchor or not stamp:
            out.append(render_line(m.said_at, m.role, m.content, stamp=stamp))
            continue
        # the lines next to it toward the anchor: the one above it (below the anchor), else the one below it and the
        # one above it, if any (written out, not as all(… for j in near): a generator costs more than the test)
        toward = k - 1 if k > anchor else k + 1
        above = k - 1 if 0 < k < anchor else toward
        if cfg.stamps == "day" and days[toward] == days[k] == days[above]:
            stamp = stamp[len(days[k]) + 1 :]
        if cfg.roles == "change" and messages[toward].role == m.role == messages[above].role:
            out.append(f"[{stamp}] {m.content}")
        else:
            out.append(f"[{stamp}] {m.role}: {m.content}")
    return out


def render_line(said_at: int | None, role: str, content: str, *, stamp: str | None = None) -> str:
    """A message as a line of its own: ``[YYYY-MM-DD HH:MM] role: content`` (``stamp``: its time, if formatted)."""
    if stamp is None:
        stamp = format_time(said_at)
    return f"[{stamp}] {role}: {content}" if stamp else f"{role}: {content}"
