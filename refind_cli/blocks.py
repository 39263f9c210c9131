"""Evidence blocks: an anchor turn with its neighbours, rendered one message per line.

Which messages a block shows (the anchor's; neighbours nearest first, subject to the role, length, overlap and
block-size rules of the SearchConfig) and how each line reads: ``[YYYY-MM-DD HH:MM] role: content``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .index import TurnIndex, neighbours

if TYPE_CHECKING:
    import numpy as np

    from .search_config import SearchConfig


@dataclass(frozen=True)
class Block:
    """One evidence block: an anchor turn and its neighbours, rendered one message per line, chronological."""

    id: str  # the anchor turn's stable id
    content: str  # lines "[YYYY-MM-DD HH:MM] role: content" (no date part when unknown)
    score: float  # strictly decreasing with rank
    created_at: str  # ISO 8601 UTC recorded-at of the anchor turn
    session_id: str
    said_at: int | None  # the anchor's said-at (Unix ms)
    message_ids: tuple[str, ...]  # every message shown in the block, chronological
    anchor_ids: tuple[str, ...]  # the anchor turn's message ids
    anchor_lines: tuple[int, int] = (0, 0)  # [start, end) of the anchor's lines in content (for highlighting)

    def as_contract(self) -> dict[str, Any]:
        """The contract's search item."""
        return {"id": self.id, "content": self.content, "score": self.score, "created_at": self.created_at}


def format_time(ms: int | None, *, seconds: bool = False) -> str:
    if ms is None:
        return ""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def iso_utc(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---- the per-user index ----------------------------------------------------------------------------------------


def render_blocks(
    idx: TurnIndex, order: np.ndarray, fused: np.ndarray, *, top_k: int, cfg: SearchConfig
) -> list[Block]:
    blocks: list[Block] = []
    shown: set[str] = set()  # message ids already shown (overlap="trim")
    last_score = float("inf")
    for pos, score in zip(order.tolist(), fused.tolist()):
        if len(blocks) >= top_k:
            break
        anchor = idx.turns[pos]
        if cfg.overlap == "trim" and all(m.id in shown for m in anchor.messages):
            continue  # already shown in full by a better block
        block_cfg = cfg
        if cfg.context_blocks is not None and len(blocks) >= cfg.context_blocks:
            block_cfg = block_cfg.with_(neighbours=cfg.late_neighbours)
        if len(blocks) < cfg.full_anchors:
            block_cfg = block_cfg.with_(anchor_chars=None)
        chosen = _compose(idx, pos, block_cfg, shown)
        lines: list[str] = []
        ids: list[str] = []
        anchor_lines = (0, 0)
        for j in sorted(chosen):
            first_line = len(lines)
            for m, text in chosen[j]:
                lines.extend(render_line(m.said_at, m.role, text).split("\n"))
                ids.append(m.id)
            if j == pos:
                anchor_lines = (first_line, len(lines))
        shown.update(ids)
        score = min(score, _below(last_score))
        last_score = score
        blocks.append(
            Block(
                id=anchor.id,
                content="\n".join(lines),
                score=score,
                created_at=iso_utc(anchor.recorded_at),
                session_id=anchor.session_id,
                said_at=anchor.said_at,
                message_ids=tuple(ids),
                anchor_ids=anchor.message_ids,
                anchor_lines=anchor_lines,
            )
        )
    return blocks


def _cut(text: str, cap: int | None) -> str:
    return text if cap is None or len(text) <= cap else text[:cap].rstrip() + " …"


def _compose(idx: TurnIndex, pos: int, cfg: SearchConfig, shown: set[str]) -> dict[int, list[Any]]:
    """Which messages a block shows, by turn index: the anchor's, then neighbours nearest first, each kept only if
    it passes the role, length, overlap and block-size rules. Returns {turn index: [(message, text)]}."""
    anchor = idx.turns[pos]
    chosen = {pos: [(m, _cut(m.content, cfg.anchor_chars)) for m in anchor.messages]}
    size = sum(len(t) for _, t in chosen[pos])
    role = anchor.messages[0].role
    window = neighbours(idx, pos, cfg.neighbours)
    before = cfg.neighbours if cfg.neighbours_before is None else cfg.neighbours_before
    nearest = sorted((j for j in window if j != pos and j >= pos - before), key=lambda j: (abs(j - pos), j))
    for j in nearest:
        turn = idx.turns[j]
        if cfg.neighbour_roles == "same" and turn.messages[0].role != role:
            continue
        kept = []
        for m in turn.messages:
            if cfg.overlap == "trim" and m.id in shown:
                continue
            if cfg.neighbour_max_chars is not None and len(m.content) > cfg.neighbour_max_chars:
                continue
            text = _cut(m.content, cfg.neighbour_chars)
            if cfg.block_chars is not None and size + len(text) > cfg.block_chars:
                continue
            size += len(text)
            kept.append((m, text))
        if kept:
            chosen[j] = kept
    return chosen


def _below(x: float) -> float:
    """The largest float below x (keeps scores strictly decreasing even when fused scores tie)."""
    return math.nextafter(x, float("-inf"))


def render_line(said_at: int | None, role: str, content: str) -> str:
    stamp = format_time(said_at)
    return f"[{stamp}] {role}: {content}" if stamp else f"{role}: {content}"
