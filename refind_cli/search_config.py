"""Every retrieval variant as one frozen dataclass (:class:`SearchConfig`), and how a turn becomes tokens under it.

Its own module so that the index, the blocks renderer and the search all read it without importing each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from .errors import InvalidInput
from .index_store import DATE_WORDS
from .kinds import MAX_KINDS, MAX_SENSES
from .settings import SKIP_MODES as SKIP_MODES  # (named where the planner's --skip is read too)
from .tokenize import analyze
from .turns import TURN_UNITS, Turn, speaker_label

OVERLAP_POLICIES = ("repeat", "trim")
NEIGHBOUR_ROLES = ("all", "same")
STAMPS = ("full", "day")
ROLES = ("every", "change")
NEIGHBOUR_FILTERS = ("all", "match", "short", "match_or_short")


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
    session_top: int | None = 3  # session score = sum of its best N turn scores (None: of all its turns)
    session_weight: float = 0.5  # the session rank's weight in the fusion (the turn rank's is 1)
    options_in_query: bool = True  # append the multiple-choice options to the query
    strip_instructions: bool = True  # drop appended instruction sentences ("Answer in one word.") from the query
    common_df: float | None = None  # drop query words found in more than this share of turns (unless all are)
    common_weight: float = 0.0  # … or weigh them this much instead of dropping them (a rarer word weighs 1)
    flat_df: float | None = 0.2  # query words in more than this share of turns count by presence (None: plain BM25)
    flat_names: bool = True  # … only when such a word is a speaker's name (a word of most of its turns' labels; the
    # label read is a turn's first message's, and with index_labels off a name counts only where it is written)
    # … and a turn holding such a name scores this much more of its other words' score: the named speaker's own turns
    # first among those saying the same (index.flat_and_rarer_scores; 0: off)
    name_lift: float = 0.15
    shared_ranks: bool = True  # turns of equal score share a rank, so their sessions order them (False: earlier first)
    answer_weight: float = 0.35  # adjacent turns of two speakers that both match lift each other this much (0: off)
    answer_max_chars: int | None = 1000  # … except that a turn longer than this is not lifted (None: any length)
    fuzzy: bool = True  # a query word the user's vocabulary lacks also matches its nearest words (expand.py)
    fuzzy_expansions: int = 3  # at most this many words per such query word
    fuzzy_categories: bool = False  # … also a question's category word that has kinds (False: its kinds alone)
    compound_tails: int = 3  # such a word also matches up to this many compounds ending in it ("Arzt": Hausarzt)
    compound_tails_weight: float = 1.0  # … each weighted len(word) / len(compound) times this (0: off)
    inflections: int = 3  # … and up to this many words that are it with Turkish suffixes ("bilet": biletlerini)
    inflections_weight: float = 1.0  # … each weighted len(word) / len(inflected) times this (0: off)
    variants: bool = True  # compounds joined or split, glued numbers, dates, clitic prefixes, loanword vowels, as the
    # user wrote them (variants.py)
    lone_units: bool = True  # a lone CJK character of a query also matches the bigrams holding it (expand.py)
    pair_units_df: float | None = 0.02  # … and so do the units of a query bigram no turn holds, unless in more than
    # this share of the turns (None: off; 0.1 until round 19: BENCHMARKS.md, "Chats written blind")
    rm3_terms: int = 0  # pseudo-relevance feedback (feedback.py): add this many words of the best turns (0: off)
    rm3_docs: int = 10  # … read from this many best turns
    rm3_weight: float = 0.3  # … the best feedback word weighs this much (a query word weighs 1)
    kinds_weight: float = 0.15  # a question's category words also match their kinds (kinds.py), this much (0: off)
    kinds_senses: int = 1  # … the kinds of this many of a word's most frequent senses
    kinds_depth: int | None = None  # … down to this many levels (None: all)
    kinds_df: float = 0.02  # … each kind found in at most this share of the user's turns
    kinds_max: int = MAX_KINDS  # … at most this many kinds per word, the nearest the user wrote
    date_boost: float = 1.0  # a matching turn said on a day the query names scores (1 + this) times more
    date_window_days: int = 1  # … or said within this many days of it
    # … and, before that, scores as if it held the day's month and year words the query holds (query_dates.py: "31 Dec
    # 2023" is also 1 January 2024's turns, indexed "january 2024"; False: only the turns holding them match them)
    date_words_near: bool = True
    # a day written in a Chinese, Japanese or Korean form ("3月12日": no word of it is one of the month and year words
    # each turn is indexed with) is also a word every turn said within the window holds, weighing this much (0: off)
    cjk_day_weight: float = 1.0
    yearless_dates: bool = True  # a day named without its year ("11月18日") is that day of each year the turns were
    # said in (False: it names no day)
    # a turn where two words adjacent in the question stand within proximity_window tokens of each other scores up to
    # this much more of its rarer words' score (proximity.py; 0: off — 1 was the best measured, and it is not taken:
    # BENCHMARKS.md, "Ideas measured and not taken (round 26)"), read on the proximity_pool best turns (200 ranked
    # every set as 50 did, at 3× the cost) …
    proximity_weight: float = 0.0
    proximity_window: int = 5
    proximity_pool: int = 50
    proximity_max_chars: int | None = 1000  # … of at most this many characters (None: any length)
    session_cap: int | None = None  # at most N anchors of one session before every other session's (None: any)
    backfill: bool = True  # fewer than top_k turns matched: fill with the matched sessions' other turns, then latest
    # … but a block of such a turn that would start once the list holds this many characters is left out (None: fill
    # to top_k whatever the size): a session of 37 KB pages filled 99 blocks past one match, 3.9 MB of text that
    # matches nothing, past what the platform's answer model reads (~118k tokens)
    backfill_chars: int | None = 32_000
    # rendering
    neighbours: int = 2  # ±N turns of context within the session
    neighbours_before: int | None = None  # turns shown before the anchor (None: as neighbours)
    lead_chars: int = 0  # the list opens with the best turns by plain BM25, alone, while they fit in this many chars
    interleave_chars: int = 0  # while the text is within this many chars, each block is followed by plain turns
    interleave_turns: int = 1  # … this many: the best turns by plain BM25 not shown yet, each alone
    interleave_max_chars: int | None = None  # … each at most this long (None: any length)
    bare_blocks: int = 0  # the first N blocks show their anchor alone (no neighbours)
    context_blocks: int | None = 6  # only the first N blocks get `neighbours`, later ones `late_neighbours`
    late_neighbours: int = 1
    neighbour_roles: str = "all"  # "all" | "same" (only neighbours whose role is the anchor's)
    neighbour_max_chars: int | None = 250  # leave out neighbour messages longer than this (None: keep all)
    neighbour_filter: str = "match"  # "all" | "match" (shares a query word) | "short" | "match_or_short"
    neighbour_match_df: float | None = None  # "match" ignores query words found in more than this share of turns
    # a name the user's turns call a speaker by is searched as their label ("Kate" → "Emi": aliases.py)
    aliases: bool = True
    kin_aliases: bool = True  # … and a Chinese kinship word a speaker is called by (妈妈 for the one called "妈，…")
    # True: a neighbour sharing no query word but a month or year word joins "match" (every turn of the anchor's
    # session was said in its month: indexed with its date words, each shares them)
    date_neighbours: bool = False
    short_chars: int = 80  # a "short" neighbour: every message of it at most this long
    defer_chars: int | None = 800  # after the lead blocks, anchors longer than this go after the others (never cut)
    # … each Chinese, Japanese or Korean character of it counted this many times (one holds about what three Latin
    # letters do); 1: every character once. 3 won on one blind Chinese assistant set and lost on the next: 1
    # (BENCHMARKS.md, "A second Chinese assistant set, written blind")
    defer_wide: float = 1.0
    # False: a long anchor a named person said ("Kate: …", not "user: …" or an assistant's) is not deferred — in a chat
    # between people a long message is its writer's own account, where an assistant's long reply or a pasted text is
    # rarely the answer (True: deferred as any other; BENCHMARKS.md, "A person's long message keeps its place")
    defer_people: bool = False
    lead_blocks: int = 1  # the first N blocks are never deferred
    # False: a question about what was said to the user ("what was the third tip you gave me?", search.recalls_a_reply)
    # defers nothing — its answer is a reply, long or not (True: it defers as any other)
    defer_recalled: bool = False
    # … and its blocks show this many neighbours (None: as any other question's): the reply is the answer, the
    # request before it and the thanks after it say what the question already knows
    recalled_neighbours: int | None = 0
    # a list whose text is shorter than this grows (None: off): each block that starts past fill_after characters of
    # the list, best first, adds the nearest turns around its anchor — sharing a query word or not, within
    # ±fill_reach turns, each message at most neighbour_max_chars — while it is shorter than block_floor characters
    # and the list stays within this. A chat of short messages (texting, Chinese) fills 100 blocks with ~5,000
    # characters: the rest of a reader's budget went unused. The first 2,000 characters (what the planner reads of its
    # hits) are never changed: growing them cost up to 3.5 points at 2k (BENCHMARKS.md, "Short lists filled")
    fill_chars: int | None = 8000
    block_floor: int = 100
    fill_reach: int = 5
    fill_after: int = 2000  # (at or past fill_chars: nothing grows; a block shown alone by design never grows)
    block_chars: int | None = None  # add neighbours (nearest first) only while the block's text stays within this
    stamps: str = "day"  # "full": each line [YYYY-MM-DD HH:MM]; "day": [HH:MM] on its neighbours' day (blocks.py)
    roles: str = "change"  # "every": each line names its role; "change": only where a neighbour's differs
    overlap: str = "trim"  # "repeat": every block shows its whole context; "trim": a message is shown once
    skip: str = "session"  # the default skip mode for planner rounds: "session" | "turn"

    def __post_init__(self) -> None:
        _check("turn_unit", self.turn_unit, TURN_UNITS)
        _check("neighbour_roles", self.neighbour_roles, NEIGHBOUR_ROLES)
        _check("neighbour_filter", self.neighbour_filter, NEIGHBOUR_FILTERS)
        _check("stamps", self.stamps, STAMPS)
        _check("roles", self.roles, ROLES)
        _check("overlap", self.overlap, OVERLAP_POLICIES)
        _check("skip", self.skip, SKIP_MODES)
        # BM25's own ranges: inside them every term a turn holds adds a positive score (``index.holders`` reads the
        # turns a word scores in from its postings on that ground); outside, a short or long turn's score is negative
        if not self.k1 >= 0:  # (NaN too)
            raise InvalidInput(f"k1 must be 0 or more, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise InvalidInput(f"b must be from 0 to 1, got {self.b}")
        if self.neighbours < 0:
            raise InvalidInput(f"neighbours must be 0 or more, got {self.neighbours}")
        if not 1 <= self.kinds_senses <= MAX_SENSES:
            raise InvalidInput(
                f"kinds_senses must be 1 to {MAX_SENSES} (the table keeps a word's {MAX_SENSES} most frequent), "
                f"got {self.kinds_senses}"
            )
        if self.session_cap is not None and self.session_cap < 1:
            raise InvalidInput(f"session_cap must be 1 or more (or none), got {self.session_cap}")
        for name in (
            "recalled_neighbours",
            "fill_reach",
            "block_floor",
            "fill_chars",
            "fill_after",
            "proximity_pool",
            "proximity_window",
        ):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidInput(f"{name} must be 0 or more, got {value}")
        if not self.defer_wide >= 1:  # (NaN too)
            raise InvalidInput(
                f"defer_wide must be 1 or more (a wide character counts at least once), got {self.defer_wide}"
            )
        for name in ("name_lift", "cjk_day_weight", "proximity_weight"):  # (infinity would score a turn NaN: 0 × inf)
            weight = getattr(self, name)
            if not 0 <= weight < math.inf:
                raise InvalidInput(f"{name} must be a number 0 or more, got {weight}")

    def index_key(self) -> tuple[Any, ...]:
        """The fields that shape the index (the rest only change how it is queried and rendered)."""
        return (self.turn_unit, self.index_labels, self.index_dates, self.k1, self.b)

    def with_(self, **changes: Any) -> SearchConfig:
        return replace(self, **changes)


def _check(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise InvalidInput(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _strip_label(content: str) -> str:
    """Content without a leading speaker label such as 'Caroline: '."""
    label = speaker_label(content)
    return content if label is None else content[len(label) + 2 :]


def turn_tokenizer(config: SearchConfig) -> Callable[[Turn], list[str]]:
    def tokenize(turn: Turn) -> list[str]:
        parts = [m.content if config.index_labels else _strip_label(m.content) for m in turn.messages]
        if config.index_dates and turn.said_at is not None:
            parts.append(datetime.fromtimestamp(turn.said_at / 1000, tz=UTC).strftime(DATE_WORDS))
        return analyze("\n".join(parts))

    return tokenize
