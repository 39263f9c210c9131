"""Writes out the character classes that `refind_cli/tokenize.py` keeps as constants, from this Python's
`unicodedata` (computing them at import would cost ~160 ms of every cold process, and would make the tokens
depend on the Python version that indexes):

    .venv/bin/python bench/unicode_classes.py      # prints the constants; paste them over tokenize.py's

- ``_MARKS_BMP`` and ``_MARKS_ASTRAL`` (apart: see tokenize's ``_WORD``): every combining mark (general categories Mn, Mc, Me) except the variation selectors, which only
  choose a glyph (an emoji's colour presentation) and so stay outside words like the emoji they follow;
- ``_SPACELESS``: the letters and marks of the scripts written without spaces between words (Unicode gives their
  letters line-break class SA, "complex context": Thai, Lao, Myanmar, Khmer, Tai Le, New Tai Lue, Tai Tham,
  Tai Viet, Ahom; and Javanese and Balinese, written without spaces too though Unicode leaves them class AL),
  found by their blocks;
- ``_EMOJI_BMP`` and ``_EMOJI_ASTRAL``: the characters that are an emoji by themselves (Unicode's ``Emoji`` property) but the digits, "#",
  "*", the regional indicators (a flag is two of them) and the few that are text unless a variation selector asks
  for the emoji (© ® ™ 〰 〽) — Lucene's StandardTokenizer's choice. ``unicodedata`` has no emoji properties: this
  class comes from the ``regex`` package (installed with litellm's tiktoken), whose Unicode is newer than Python's,
  so emoji newer than ``unicodedata`` are kept too.

`tests/test_tokenize_scripts.py` checks the first two against `unicodedata` for every code point, the third against
`regex`.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache

VARIATION_SELECTORS = ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
SPACELESS_BLOCKS = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x1950, 0x197F),  # Tai Le
    (0x1980, 0x19DF),  # New Tai Lue
    (0x1A20, 0x1AAF),  # Tai Tham
    (0xA9E0, 0xA9FF),  # Myanmar Extended-B
    (0xAA60, 0xAA7F),  # Myanmar Extended-A
    (0xAA80, 0xAADF),  # Tai Viet
    (0x11700, 0x1174F),  # Ahom
    (0xA980, 0xA9DF),  # Javanese
    (0x1B00, 0x1B7F),  # Balinese
)
EMOJI_TEXT_DEFAULT = frozenset(map(ord, "#*0123456789\u00a9\u00ae\u2122\u3030\u303d"))  # emoji with FE0F / U+20E3 only
REGIONAL_INDICATORS = (0x1F1E6, 0x1F1FF)


def is_mark(c: int) -> bool:
    return unicodedata.category(chr(c))[0] == "M" and not any(lo <= c <= hi for lo, hi in VARIATION_SELECTORS)


def is_spaceless(c: int) -> bool:
    return any(lo <= c <= hi for lo, hi in SPACELESS_BLOCKS) and unicodedata.category(chr(c))[0] in "LM"


@lru_cache(maxsize=1)
def _emoji_property() -> frozenset[int]:
    import regex  # the ``regex`` package: unicodedata has no emoji properties

    pattern = regex.compile(r"\p{Emoji}")
    return frozenset(c for c in range(sys.maxunicode + 1) if pattern.match(chr(c)))


def is_emoji(c: int) -> bool:
    lo, hi = REGIONAL_INDICATORS
    return c in _emoji_property() and c not in EMOJI_TEXT_DEFAULT and not lo <= c <= hi


def ranges(points: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for c in points:
        if out and out[-1][1] == c - 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


def escape(c: int) -> str:
    return f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"


def character_class(test: Callable[[int], bool]) -> list[str]:
    """The code points that pass ``test``, as the pieces (ranges) of a regular-expression character class."""
    return [
        escape(lo) if lo == hi else f"{escape(lo)}{escape(hi)}" if hi == lo + 1 else f"{escape(lo)}-{escape(hi)}"
        for lo, hi in ranges(c for c in range(sys.maxunicode + 1) if test(c))
    ]


def constant(name: str, pieces: list[str], width: int = 112) -> str:
    lines, line = [], ""
    for piece in pieces:
        if len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    lines.append(line)
    return f"{name} = (\n" + "".join(f'    "{line}"\n' for line in lines) + ")"


def main() -> None:
    print(f'UNICODE_VERSION = "{unicodedata.unidata_version}"  # of the two classes below (bench/unicode_classes.py)')
    print(constant("_MARKS_BMP", character_class(lambda c: c <= 0xFFFF and is_mark(c))))
    print(constant("_MARKS_ASTRAL", character_class(lambda c: c > 0xFFFF and is_mark(c))))
    print(constant("_SPACELESS", character_class(is_spaceless)))
    import regex

    print(f'EMOJI_SOURCE = "regex {regex.__version__}"  # of the class below (bench/unicode_classes.py)')
    print(constant("_EMOJI_BMP", character_class(lambda c: c <= 0xFFFF and is_emoji(c))))
    print(constant("_EMOJI_ASTRAL", character_class(lambda c: c > 0xFFFF and is_emoji(c))))


if __name__ == "__main__":
    main()
