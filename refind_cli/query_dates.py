"""Days a question names ("on 29 Dec 2023", "on 10.01.2024", "October 13, 2023"), and the boost they give the turns
said on those days.

Each stage is a small function so it can be tested on a toy corpus ranked by hand:

* :func:`named_days` — the calendar days written in a query, each as a UTC day (days since the epoch). Forms: day
  month year ("29 Dec 2023", "the 31st of December, 2023"), month day year ("January 6 2024", "October 13, 2023"),
  numeric day.month.year ("10.01.2024", as written where the dotted form is used), month/day/year ("1/10/2024"),
  year first ("2024-01-10", "2024-1-10", "2024/1/10") and the Chinese, Japanese and Korean forms ("2024年1月10日",
  "2024年1月10号", "2024년 1월 10일"). A month or a year alone names no day (the index already holds each turn's month and year as
  words); an impossible date ("31.02.2024") is ignored;
* :func:`date_boost` — the scores with every matching turn (positive score) said within ``window_days`` of a named
  day multiplied by ``1 + boost``: the turns that match the question's words and were said that day rise, and no
  turn that shares no word with the question is added. Before the boost, such a turn that lacks a month or year
  word of the named day the query holds (:func:`day_words`: each turn is indexed with its own) scores as if it held
  it, as the median turn holding it does: "on 31 Dec 2023" is also 1 January 2024, whose turns hold "january 2024",
  and a day's neighbour across a month's or a year's end must not rank below the turns of that month that were said
  weeks away.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from .tokenize import analyze, fold

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable

    import numpy as np

    from .index import TurnIndex

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
DAY_MS = 86_400_000
MAX_YEARS = 20  # a date without its year names its day in at most this many years: the last ones said in


@functools.cache
def _yearless_patterns() -> tuple[re.Pattern[str], ...]:
    """A day and month without a year: "11月18日" / "11月18号", "11월 18일", "December 29th", "29 December" (an English
    month name capitalised, as a date is written: "may 5" is rather a verb)."""
    names = "|".join(sorted({n.capitalize() for n in _MONTHS}, key=len, reverse=True))
    month = f"(?P<month>{names})\\.?"
    day = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
    return (
        re.compile(r"(?<!\d)(?P<month>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*[日号號]"),
        re.compile(r"(?<!\d)(?P<month>\d{1,2})\s*월\s*(?P<day>\d{1,2})\s*일"),
        re.compile(rf"\b{day}\s+(?:of\s+)?{month}\b(?!\.?,?\s*\d)"),
        re.compile(rf"\b{month}\s+{day}\b(?!,?\s*\d)"),
    )


@functools.cache
def _patterns() -> tuple[re.Pattern[str], ...]:
    month = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
    day = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
    year = r"(?P<year>\d{4})"
    return (
        re.compile(rf"\b{day}\s+(?:of\s+)?{month},?\s+{year}\b", re.IGNORECASE),
        re.compile(rf"\b{month}\s+{day},?\s+{year}\b", re.IGNORECASE),
        # (a number's edges are no \b beside a Han character, "在2024/3/12": not a longer number's digits instead)
        re.compile(r"(?<!\d)(?P<day>\d{1,2})\.(?P<month>\d{1,2})\.(?P<year>\d{4})(?!\d)"),
        re.compile(r"(?<!\d)(?P<month>\d{1,2})/(?P<day>\d{1,2})/(?P<year>\d{4})(?!\d)"),
        re.compile(r"(?<!\d)(?P<year>\d{4})([-/])(?P<month>\d{1,2})\2(?P<day>\d{1,2})(?!\d)"),
        # 2024年3月12日 / 12号 (Chinese, Japanese), 2024년 3월 12일 (Korean)
        re.compile(r"(?<!\d)(?P<year>\d{4})\s*年\s*(?P<month>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*[日号號]"),
        re.compile(r"(?<!\d)(?P<year>\d{4})\s*년\s*(?P<month>\d{1,2})\s*월\s*(?P<day>\d{1,2})\s*일"),
    )


def named_days(query: str, years: Callable[[], Iterable[int]] | None = None) -> list[int]:
    """The UTC days (days since 1970-01-01) of the dates written in ``query``, in order, without repeats. A date
    without its year ("11月18日", "December 29th") names that day of each of ``years()`` (called only then; None:
    such a date names no day)."""
    out: dict[int, None] = {}  # (in order, each once: a list's "not in" made 10**6 characters of dates quadratic)
    if not any(c.isdecimal() for c in query):  # every form has a day's number (\d matches what isdecimal() does):
        return []  # without a digit, nothing to find, and the patterns are not compiled (~5 ms of a cold search)
    taken = bytearray(len(query)) if years is not None else None  # where a date with its year is written
    for pattern in _patterns():
        for m in pattern.finditer(query):
            if taken is not None:
                taken[m.start() : m.end()] = b"\1" * (m.end() - m.start())
            day = _day(m.group("month"), m.group("day"), int(m.group("year")))
            if day is not None:
                out[day] = None
    if years is None or taken is None:
        return list(out)
    found: dict[tuple[str, str], None] = {}  # each (month, day) once, in order: a long query repeats them
    for pattern in _yearless_patterns():
        for m in pattern.finditer(query):
            if not any(taken[m.start() : m.end()]):  # (not a year's date's own day and month: "2024年3月12日")
                found[m.group("month"), m.group("day")] = None
    if found:
        for year in years():
            for month, day_of in found:
                day = _day(month, day_of, year)
                if day is not None:
                    out[day] = None
    return list(out)


def _day(raw: str, day: str, year: int) -> int | None:
    """The day (since the epoch) of a date written with the month ``raw`` (a number or a name) and ``day`` in
    ``year``; None when there is no such day."""
    # a name is folded as the analyzer folds words; IGNORECASE also matches "ſ" for "s" and "ı" for "i", which
    # folding turns into a month name ("Auguſt") or not ("Aprıl": no day named)
    month = int(raw) if raw.isdigit() else _MONTHS.get(fold(raw), 0)
    try:
        return (date(year, month, int(day)) - date(1970, 1, 1)).days
    except ValueError:
        return None


def said_years(index: TurnIndex) -> range:
    """The years the turns of ``index`` were said in, first to last (at most the last :data:`MAX_YEARS`)."""
    import numpy as np

    said = index.said_at[~np.isnan(index.said_at)]
    if not said.size:
        return range(0)
    try:
        first, last = (datetime.fromtimestamp(float(t) / 1000, tz=UTC).year for t in (said.min(), said.max()))
    except (OverflowError, OSError, ValueError):  # a said-at past what a date holds (year 1–9999)
        return range(0)
    return range(max(first, last - MAX_YEARS + 1), last + 1)


_CJK_DAY = re.compile(r"\d\s*[月월]\s*\d{1,2}\s*[日号號일]")


def cjk_day(query: str) -> bool:
    """Whether ``query`` writes a day in a Chinese, Japanese or Korean form ("3月12日", "2024년 1월 5일"), which holds
    none of the month and year words each turn is indexed with ("March 2024")."""
    return _CJK_DAY.search(query) is not None


def day_words(days: list[int]) -> frozenset[str]:
    """The tokens of the month and year words each of ``days`` is indexed with (``index_store.date_words``)."""
    from .index_store import date_words

    return frozenset(t for d in days for t in analyze(date_words(d)))


def date_boost(
    index: TurnIndex,
    scores: np.ndarray,
    days: list[int],
    *,
    boost: float,
    window_days: int = 0,
    words: Collection[str] = (),
    day_weight: float = 0.0,
) -> np.ndarray:
    """``scores`` with each positive score of a turn said within ``window_days`` of one of ``days`` multiplied by
    ``1 + boost`` (a new array; ``scores`` itself when there is nothing to boost). ``words``: the query's tokens that
    are a named day's month or year words (:func:`day_words`); each such turn lacking one first gains the median
    BM25 score of that word over the turns holding it (a turn holds the words of its said-at day, ``index_dates``; a
    word its text holds too is credited all the same). ``day_weight``: the named days are also a word that every turn
    said within the window holds — matching or not — scoring BM25's idf of it (as a word of average length's turn
    would: ``log(1 + (n − held + 0.5) / (held + 0.5))``) times this, before the boost (0: only matching turns
    change)."""
    if not days or boost <= 0 or not len(index):
        return scores
    import numpy as np

    matching = np.arange(len(index)) if day_weight else (scores > 0).nonzero()[0]  # (only these can change)
    said = index.said_at[matching]
    near = None
    for d in days:  # said within the window (NaN, an unknown said-at, never is: it compares false)
        within = (said >= (d - window_days) * DAY_MS) & (said <= (d + 1 + window_days) * DAY_MS - 1)
        near = within if near is None else near | within
    if near is None or not near.any():
        return scores
    boosted = matching[near]
    out = scores.copy()
    if day_weight:  # the named day as a word every turn said within its window holds: BM25's idf of it
        n, held = len(index), len(boosted)
        out[boosted] += np.float32(day_weight * np.log(1 + (n - held + 0.5) / (held + 0.5)))
    if words:
        from .index import bm25_scores

        # which month and year words each boosted turn is indexed with: its said-at day's (a few days at most)
        said_days = (index.said_at[boosted] // DAY_MS).astype(np.int64)
        held_by_day = {int(d): day_words([int(d)]) for d in np.unique(said_days)}
        for word in dict.fromkeys(words):  # (a word twice in the query was scored twice: credited once, a median)
            lacks = [word not in held for held in held_by_day.values()]
            if not any(lacks):  # (most often: a named day's turns hold its month and year; nothing is scored)
                continue
            lacking = boosted[np.isin(said_days, [d for d, no in zip(held_by_day, lacks, strict=True) if no])]
            one = bm25_scores(index, [word])
            if (one > 0).any():
                out[lacking] += np.float32(np.median(one[one > 0]))
    out[boosted] = out[boosted] * (1.0 + boost)
    return out
