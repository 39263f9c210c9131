"""What one character is folded to before words are read (analyzers 7 and 8): spellings of one word that a reader takes
for the same word, so that a message and a question written the other way find each other.

* **Traditional Chinese characters to Simplified**, one character for one (電費 → 电费, 護照 → 护照, 臺北 → 台北),
  as search engines index Chinese (Elasticsearch's STConvert, Lucene's ICU transforms). The table
  (``data/han_t2s.txt``, 4,117 characters) is OpenCC's character dictionary (Apache License 2.0,
  ``data/OPENCC-LICENSE``), one character at a time: OpenCC's phrase tables, which choose among a character's
  readings by its neighbours, are left out, so the analyzer stays one character at a time (a few characters with two
  Simplified forms take OpenCC's first, 乾 → 干 in 乾隆 too: a word can match a little more than it should, never less).
  Japanese kanji in their old forms fold too (車 → 车 in a Japanese message and in a Japanese question alike).
* **Every decimal digit to its ASCII digit** (Unicode category Nd: ٣٥٠ → 350, ५ → 5, ๑๒ → 12; NFKC folds only the
  full-width ones).
* **Arabic and Persian**, as Lucene's Arabic and Persian normalizers: vowel marks (harakat), the superscript alef and
  the tatweel are dropped; آ أ إ ٱ are ا; ى, Persian ی and ي are one letter, Persian ک and ك another (ة stays: the
  Arabic stemmer takes it off a word's end, which it does not do to ه after it took off ال).
* **Hebrew**: vowel points (niqqud) and cantillation marks dropped (פָּרָשַׁת is פרשת).
* **Devanagari**, as Lucene's Hindi normalizer: the nukta dropped (ज़रूरी is जरूरी) and chandrabindu read as
  anusvara (पहुँच is पहुंच).
* **Cyrillic** ё is е (ёлка is елка), as Russian search does; the modifier apostrophe ʼ (Ukrainian мʼясо) is the ASCII
  one, so both spellings split alike.
* **Malayalam**'s atomic chillu letters (ൽ, ൻ, ർ …) are the consonant and virama that the older spelling writes
  before a zero-width joiner (ല്‍), which the analyzer drops inside a word (analyzer 8): കൊച്ചിയിൽ is കൊച്ചിയില്‍.
* The Arabic thousands and decimal separators (٬ ٫) are the ASCII comma and point, so ١٬٤٥٠ is read as 1,450
  (analyzer 8).

Accents of Latin letters are not folded here: the analyzer gives a Latin word with accents its own token and the
token of the word without them (``tokenize._latin``), so that a question with the accents prefers it.

Rebuilding the Han table (after an OpenCC release), in a virtual environment of its own, refind not depending on it::

    python3 -m venv /tmp/occ && /tmp/occ/bin/pip install opencc
    /tmp/occ/bin/python -m refind_cli.folding refind_cli/data/han_t2s.txt   # from the repository root
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path

HAN_TABLE = Path(__file__).resolve().parent / "data" / "han_t2s.txt"

# the blocks of Han characters the table is read from: unified ideographs, extensions A–I, compatibility ideographs
HAN_BLOCKS = (
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2EE5F),
    (0x30000, 0x323AF),
)

_ARABIC_MARKS = [*range(0x064B, 0x0660), 0x0670, 0x0640]  # harakat (fathatan … sukun, …), superscript alef, tatweel
_ARABIC_LETTERS = {
    "\u0622": "\u0627",  # آ → ا
    "\u0623": "\u0627",  # أ → ا
    "\u0625": "\u0627",  # إ → ا
    "\u0671": "\u0627",  # ٱ → ا
    "\u0649": "\u064a",  # ى → ي
    "\u06cc": "\u064a",  # Persian ی → ي
    "\u06a9": "\u0643",  # Persian ک → ك
}
_HEBREW_MARKS = [*range(0x0591, 0x05BE), 0x05BF, 0x05C1, 0x05C2, 0x05C4, 0x05C5, 0x05C7]  # not maqaf or sof pasuq
_DEVANAGARI = {"\u093c": None, "\u0901": "\u0902"}  # nukta dropped; chandrabindu → anusvara
_CYRILLIC = {"\u0451": "\u0435", "\u02bc": "'"}  # ё → е (after case folding: Ё is ё); ʼ → '
_ARABIC_SEPARATORS = {"\u066c": ",", "\u066b": "."}  # ٬ thousands separator, ٫ decimal separator (١٬٤٥٠ is 1,450)
# Malayalam's atomic chillu letters (Unicode 5.1 on) as the consonant and virama that the older spelling writes before
# a zero-width joiner, which a word loses (step 2): ൽ and ല്‍ are one letter
_MALAYALAM = {
    "\u0d54": "\u0d2e\u0d4d",  # ൔ മ്
    "\u0d55": "\u0d2f\u0d4d",  # ൕ യ്
    "\u0d56": "\u0d34\u0d4d",  # ൖ ഴ്
    "\u0d7a": "\u0d23\u0d4d",  # ൺ ണ്
    "\u0d7b": "\u0d28\u0d4d",  # ൻ ന്
    "\u0d7c": "\u0d30\u0d4d",  # ർ ര്
    "\u0d7d": "\u0d32\u0d4d",  # ൽ ല്
    "\u0d7e": "\u0d33\u0d4d",  # ൾ ള്
    "\u0d7f": "\u0d15\u0d4d",  # ൿ ക്
}


@lru_cache(maxsize=1)
def table() -> dict[int, int | str | None]:
    """The ``str.translate`` table of every fold above (loaded once per process, on the first non-ASCII text)."""
    folds: dict[int, int | str | None] = {}
    for line in HAN_TABLE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            traditional, simplified = line.split()
            folds[ord(traditional)] = simplified
    for cp in range(0x80, sys.maxunicode + 1):
        if unicodedata.category(chr(cp)) == "Nd":
            folds[cp] = str(unicodedata.decimal(chr(cp)))
    folds.update(dict.fromkeys(_ARABIC_MARKS + _HEBREW_MARKS))
    for mapping in (_ARABIC_LETTERS, _ARABIC_SEPARATORS, _DEVANAGARI, _CYRILLIC, _MALAYALAM):
        folds.update({ord(k): v for k, v in mapping.items()})
    return folds


def fold_characters(text: str) -> str:
    """``text`` with every character of :func:`table` folded (a text already NFKC-normalised and case-folded). Most
    texts hold none, which a regular expression tells at a fraction of a µs, where ``translate`` looks every
    character up in a dict (3 µs for 38 Chinese characters: a Chinese message was analysed 1.5× slower)."""
    return text.translate(table()) if _foldable().search(text) else text


@lru_cache(maxsize=1)
def _foldable() -> re.Pattern[str]:
    """A character class of every character below U+10000 that :func:`table` folds, and of every character above:
    a class of BMP characters is a bitmap to the regex engine, one with astral ranges a list it walks (7× slower
    than ``translate``), and astral characters are rare (emoji, Han extensions)."""
    points = sorted(cp for cp in table() if cp <= 0xFFFF)
    ranges: list[str] = []
    start = prev = points[0]
    for cp in [*points[1:], -1]:
        if cp != prev + 1:
            ranges.append(re.escape(chr(start)) + ("" if start == prev else "-" + re.escape(chr(prev))))
            start = cp
        prev = cp
    return re.compile(f"[{''.join(ranges)}\U00010000-\U0010ffff]")


def build_han(convert: object) -> dict[str, str]:
    """Each Han character that ``convert`` (an ``opencc.OpenCC("t2s").convert``) turns into one other character,
    followed to its end (薴 → 苧 → 苎), without those NFKC changes first (they never reach the table)."""
    pairs: dict[str, str] = {}
    for lo, hi in HAN_BLOCKS:
        for cp in range(lo, hi + 1):
            ch = chr(cp)
            out = convert(ch)  # type: ignore[operator]
            if out != ch and len(out) == 1 and unicodedata.normalize("NFKC", ch) == ch:
                pairs[ch] = out
    for ch, out in pairs.items():
        while out in pairs and pairs[out] != out:
            out = pairs[out]
        pairs[ch] = out
    return pairs


def main(argv: list[str]) -> int:
    import opencc  # type: ignore[import-not-found]  # only in the builder's environment

    out = Path(argv[0])
    pairs = build_han(opencc.OpenCC("t2s").convert)
    lines = [
        f"# Traditional → Simplified Chinese, one character for one: OpenCC {getattr(opencc, '__version__', '')} t2s",
        "# (Apache License 2.0: data/OPENCC-LICENSE), built by `python -m refind_cli.folding` (folding.py).",
        *(f"{t} {s}" for t, s in sorted(pairs.items())),
    ]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(pairs)} characters → {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
