"""Days a question names ("on 29 Dec 2023", "on 10.01.2024", "October 13, 2023"), and the boost they give the turns
said on those days.

Each stage is a small function so it can be tested on a toy corpus ranked by hand:

* :func:`named_days` — the calendar days written in a query, each as a UTC day (days since the epoch). Forms: day
  month year ("29 Dec 2023", "the 31st of December, 2023"), month day year ("January 6 2024", "October 13, 2023"),
  numeric day.month.year ("10.01.2024", as written where the dotted form is used), month/day/year ("1/10/2024") and
  ISO ("2024-01-10"). A month or a year alone names no day (the index already holds each turn's month and year as
  words); an impossible date ("31.02.2024") is ignored;
* :func:`date_boost` — the scores with every matching turn (positive score) said within ``window_days`` of a named
  day multiplied by ``1 + boost``: the turns that match the question's words and were said that day rise, and no
  turn that shares no word with the question is added.
"""

from __future__ import annotations

import functools
import re
from datetime import date
from typing import TYPE_CHECKING

from .tokenize import fold

if TYPE_CHECKING:
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


@functools.cache
def _patterns() -> tuple[re.Pattern[str], ...]:
    month = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
    day = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
    year = r"(?P<year>\d{4})"
    return (
        re.compile(rf"\b{day}\s+(?:of\s+)?{month},?\s+{year}\b", re.IGNORECASE),
        re.compile(rf"\b{month}\s+{day},?\s+{year}\b", re.IGNORECASE),
        re.compile(r"\b(?P<day>\d{1,2})\.(?P<month>\d{1,2})\.(?P<year>\d{4})\b"),
        re.compile(r"\b(?P<month>\d{1,2})/(?P<day>\d{1,2})/(?P<year>\d{4})\b"),
        re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b"),
    )


def named_days(query: str) -> list[int]:
    """The UTC days (days since 1970-01-01) of the dates written in ``query``, in order, without repeats."""
    out: dict[int, None] = {}  # (in order, each once: a list's "not in" made 10**6 characters of dates quadratic)
    if not any(c.isdecimal() for c in query):  # every form has a year (\d matches what isdecimal() does): without a
        return []  # digit, nothing to find, and the patterns are not compiled (~5 ms of a cold process's search)
    for pattern in _patterns():
        for m in pattern.finditer(query):
            raw = m.group("month")
            # a name is folded as the analyzer folds words; IGNORECASE also matches "ſ" for "s" and "ı" for "i",
            # which folding turns into a month name ("Auguſt") or not ("Aprıl": no day named)
            month = int(raw) if raw.isdigit() else _MONTHS.get(fold(raw), 0)
            try:
                day = date(int(m.group("year")), month, int(m.group("day")))
            except ValueError:
                continue
            out[(day - date(1970, 1, 1)).days] = None
    return list(out)


def date_boost(
    index: TurnIndex, scores: np.ndarray, days: list[int], *, boost: float, window_days: int = 0
) -> np.ndarray:
    """``scores`` with each positive score of a turn said within ``window_days`` of one of ``days`` multiplied by
    ``1 + boost`` (a new array; ``scores`` itself when there is nothing to boost)."""
    if not days or boost <= 0 or not len(index):
        return scores
    matching = (scores > 0).nonzero()[0]  # (only these can change: the said-at of the rest is never read)
    said = index.said_at[matching]
    near = None
    for d in days:  # said within the window (NaN, an unknown said-at, never is: it compares false)
        within = (said >= (d - window_days) * DAY_MS) & (said <= (d + 1 + window_days) * DAY_MS - 1)
        near = within if near is None else near | within
    if near is None or not near.any():
        return scores
    boosted = matching[near]
    out = scores.copy()
    out[boosted] = scores[boosted] * (1.0 + boost)
    return out
