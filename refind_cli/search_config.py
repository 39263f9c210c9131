"""Every retrieval variant as one frozen dataclass (:class:`SearchConfig`), and how a turn becomes tokens under it.

Its own module so that the index, the blocks renderer and the search all read it without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from .errors import InvalidInput
from .index_store import DATE_WORDS
from .tokenize import analyze
from .turns import TURN_UNITS, Turn

SKIP_MODES = ("session", "turn")
OVERLAP_POLICIES = ("repeat", "trim")
NEIGHBOUR_ROLES = ("all", "same")


@dataclass(frozen=True)
class SearchConfig:
    """Every retrieval variant, one field each. The defaults are the ones chosen by measurement (BENCHMARKS.md)."""

    # index (changing these builds another index)
    turn_unit: str = "message"  # "message" | "pair"
    index_labels: bool = True  # index a leading "Name: " speaker label (False strips it before tokenizing)
    index_dates: bool = True  # also index each turn's said-at month and year as words ("June 2023")
    k1: float = 1.2
    b: float = 0.75
    # ranking
    session_fusion: bool = True  # RRF of turn rank and session rank; False = plain BM25 order
    rrf_k: int = 60
    session_top: int | None = None  # session score = sum of its best N turn scores (None: of all its turns)
    options_in_query: bool = True  # append the multiple-choice options to the query
    strip_instructions: bool = True  # drop appended instruction sentences ("Answer in one word.") from the query
    common_df: float | None = None  # drop query words found in more than this share of turns (unless all are)
    # rendering
    neighbours: int = 2  # ±N turns of context within the session
    neighbours_before: int | None = None  # turns shown before the anchor (None: as neighbours)
    context_blocks: int | None = 6  # only the first N blocks get `neighbours`, later ones `late_neighbours`
    late_neighbours: int = 1
    neighbour_roles: str = "all"  # "all" | "same" (only neighbours whose role is the anchor's)
    neighbour_chars: int | None = None  # cut each neighbour message to this many characters (None: whole)
    neighbour_max_chars: int | None = 400  # leave out neighbour messages longer than this (None: keep all)
    anchor_chars: int | None = 800  # cut each anchor message to this many characters, "…" marks a cut (None: whole)
    full_anchors: int = 1  # the first N blocks show their anchor whole, whatever anchor_chars says
    block_chars: int | None = None  # add neighbours (nearest first) only while the block's text stays within this
    overlap: str = "trim"  # "repeat": every block shows its whole context; "trim": a message is shown once
    skip: str = "session"  # the default skip mode for planner rounds: "session" | "turn"

    def __post_init__(self) -> None:
        _check("turn_unit", self.turn_unit, TURN_UNITS)
        _check("neighbour_roles", self.neighbour_roles, NEIGHBOUR_ROLES)
        _check("overlap", self.overlap, OVERLAP_POLICIES)
        _check("skip", self.skip, SKIP_MODES)
        if self.neighbours < 0:
            raise InvalidInput(f"neighbours must be 0 or more, got {self.neighbours}")

    def index_key(self) -> tuple[Any, ...]:
        """The fields that shape the index (the rest only change how it is queried and rendered)."""
        return (self.turn_unit, self.index_labels, self.index_dates, self.k1, self.b)

    def with_(self, **changes: Any) -> SearchConfig:
        return replace(self, **changes)


def _check(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise InvalidInput(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _strip_label(content: str) -> str:
    """Content without a leading speaker label such as 'Caroline: ' (up to 40 characters, no newline)."""
    head, sep, rest = content.partition(": ")
    if sep and 0 < len(head) <= 40 and "\n" not in head:
        return rest
    return content


def turn_tokenizer(config: SearchConfig) -> Callable[[Turn], list[str]]:
    def tokenize(turn: Turn) -> list[str]:
        parts = [m.content if config.index_labels else _strip_label(m.content) for m in turn.messages]
        if config.index_dates and turn.said_at is not None:
            parts.append(datetime.fromtimestamp(turn.said_at / 1000, tz=UTC).strftime(DATE_WORDS))
        return analyze("\n".join(parts))

    return tokenize
