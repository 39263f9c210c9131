"""One tokenizer for corpus and query, in every language the contest sends.

``analyze(text)``:

1. NFKC-normalise (full-width Latin letters and digits become ASCII) and fold case with Unicode case folding
   (``str.casefold``, as search engines do: "Straße" matches "STRASSE", a final "ς" matches "σ"), then drop the
   combining dot above that folding leaves after an ``i`` (Turkish "İ" folds to "i" + U+0307): "İstanbul" matches
   "istanbul"; NFKC again where folding left a decomposed sequence (a few letters such as Greek "ΐ" or "ǰ"). Accents are
   kept ("café" is not "cafe"); ASCII text is only lowercased (the same thing for ASCII);
2. split on whitespace and punctuation (a token is a run of letters, marks and digits; ``_`` splits too);
3. inside a token, runs of CJK characters (Han, Hiragana, Katakana, Hangul) become overlapping character bigrams,
   a lone CJK character a unigram — as Lucene's CJK analyzer does, so ``我去北京`` gives ``我去 去北 北京``;
4. Latin-script words (ASCII and accented Latin letters, possibly with digits) lose English stop-words and are
   stemmed with the full Snowball English stemmer (PyStemmer);
5. numbers and words of any other script (Cyrillic, Greek, Arabic, Devanagari, …) are kept intact.

``plain_tokenize(text)`` is the English-only word splitter that the evaluation compares against: the same steps
without 3 (a run of Han characters stays one token).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

# Bump whenever analyze() changes what it emits: persisted search indexes built by another version are then rebuilt.
# 2: Unicode case folding (casefold, "i" + U+0307 → "i") instead of lower().
# 3: NFKC again where case folding left a decomposed sequence.
ANALYZER_VERSION = 3

# Han (incl. extensions and compatibility ideographs), Hiragana, Katakana (+ phonetic extensions, half-width forms),
# Hangul syllables and jamo, CJK symbols such as 々 and 〆.
_CJK_CLASS = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303b\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31bf"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
# Combining marks (which ``\w`` leaves out) of the scripts that need them inside words: Latin/Greek/Cyrillic
# diacritics, Hebrew and Arabic points, the Indic scripts (Devanagari … Malayalam, minus the danda punctuation), Thai.
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a\u064b-\u065f"
    "\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed\u0900-\u0963\u0966-\u0d7f\u0e00-\u0e7f"
    "\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
)
# A word is a run of letters, marks and digits: ``\w`` (letters, digits, ``_``) plus the marks, once every ``_`` has
# been replaced by a space (one character class: faster than the alternation ``(?:[^\W_]|[marks])+``, same words).
_WORD = re.compile(f"[\\w{_MARKS}]+")
_REFERENCE_WORD = re.compile(f"(?:[^\\W_]|[{_MARKS}])+")  # step 2 as first written (reference_analyze)
_CJK_SPLIT = re.compile(f"([{_CJK_CLASS}]+)")
_LATIN = re.compile(r"[0-9a-z\u00c0-\u024f\u1e00-\u1eff\u0300-\u036f]+")

# English stop-words (the NLTK list, which bm25s also uses), applied to lowercased Latin words before stemming.
STOPWORDS_EN = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "ain",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "couldn",
        "couldn't",
        "d",
        "did",
        "didn",
        "didn't",
        "do",
        "does",
        "doesn",
        "doesn't",
        "doing",
        "don",
        "don't",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn",
        "hadn't",
        "has",
        "hasn",
        "hasn't",
        "have",
        "haven",
        "haven't",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "isn",
        "isn't",
        "it",
        "it's",
        "its",
        "itself",
        "just",
        "ll",
        "m",
        "ma",
        "me",
        "mightn",
        "mightn't",
        "more",
        "most",
        "mustn",
        "mustn't",
        "my",
        "myself",
        "needn",
        "needn't",
        "no",
        "nor",
        "not",
        "now",
        "o",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "re",
        "s",
        "same",
        "shan",
        "shan't",
        "she",
        "she's",
        "should",
        "should've",
        "shouldn",
        "shouldn't",
        "so",
        "some",
        "such",
        "t",
        "than",
        "that",
        "that'll",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "ve",
        "very",
        "was",
        "wasn",
        "wasn't",
        "we",
        "were",
        "weren",
        "weren't",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "won",
        "won't",
        "wouldn",
        "wouldn't",
        "y",
        "you",
        "you'd",
        "you'll",
        "you're",
        "you've",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)


@lru_cache(maxsize=1)
def _stemmer() -> Any:  # a Stemmer.Stemmer (PyStemmer ships no type stubs)
    import Stemmer  # PyStemmer: C Snowball stemmers

    stemmer = Stemmer.Stemmer("english")
    stemmer.maxCacheSize = 0  # its own cache keeps 10,000 words of any length; ours keep only short ones
    return stemmer


# Speed (the analyzer runs on every Add since the index is maintained on write): a text's words repeat, so each
# distinct word is analysed once and its tokens remembered. The caches only remember what the steps above produce —
# the tokens are exactly those of the uncached steps — and are cleared when they grow past _CACHE_MAX words.
_CACHE_MAX = 200_000
_STEM_CACHE: dict[str, str] = {}
DOC_END = "\x00"  # ends each text's tokens in analyze_each's output: never a token (no word holds it)
_ASCII_DOC_END = (
    b"\xff"  # joins ASCII texts: survives the translate table (bytes >= 128 map to themselves), never split
)
# An ASCII text takes a bytes path: one C-level translate lower-cases and turns every character that is not a letter
# or digit (``_`` included) into a space — for ASCII that is exactly steps 1–2 — then bytes.split() finds the words.
# Each maps to its stem, or to "" when it is a stop-word (a Snowball stem of a non-empty word is never empty).


class _AsciiStems(dict[bytes, str]):
    """word → stem ("" for a stop-word) of ASCII words; a missing word is analysed on lookup, so a text's words
    are looked up in one C-level ``map`` (a miss calls ``__missing__``) without a second pass for the new ones."""

    def __missing__(self, word: bytes) -> str:
        """The stem of an ASCII word (step 4), or "" for a stop-word; remembered."""
        if len(self) > _CACHE_MAX:
            self.clear()
        if word == _ASCII_DOC_END:  # analyze_each's separator between texts
            self[word] = DOC_END
            return DOC_END
        text = word.decode("ascii")
        stem = "" if text in STOPWORDS_EN else _stem(text)
        if len(word) <= _WORD_CACHE_MAX_LEN:  # a long "word" (base64, a pasted blob) would stay in memory for good
            self[word] = stem
        return stem


_ASCII_CACHE = _AsciiStems()
_ASCII_TABLE = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 else 32 if c < 128 else c for c in range(256)
)
# A non-ASCII word (step 2's run) maps to all of its tokens (CJK bigrams included); long runs are not remembered.
_WORD_CACHE: dict[str, tuple[str, ...]] = {}
_WORD_CACHE_MAX_LEN = 64


def _stem(word: str) -> str:
    stem = _STEM_CACHE.get(word)
    if stem is None:
        stem = _stemmer().stemWord(word)
        if len(word) <= _WORD_CACHE_MAX_LEN:  # the caches hold at most _CACHE_MAX short words, never a blob
            if len(_STEM_CACHE) > _CACHE_MAX:
                _STEM_CACHE.clear()
            _STEM_CACHE[word] = stem
    return stem


def _latin_or_other(piece: str, out: list[str]) -> None:
    """A non-CJK word: stop-word removal and stemming when Latin-script, else kept as is."""
    if _LATIN.fullmatch(piece):
        if piece not in STOPWORDS_EN:
            out.append(_stem(piece))
    else:
        out.append(piece)


def _bigrams(run: str, out: list[str]) -> None:
    if len(run) == 1:
        out.append(run)
    else:
        out.extend(run[i : i + 2] for i in range(len(run) - 1))


_I_DOT = "i\u0307"  # what case folding makes of Turkish "İ": an "i" and a combining dot above


def _normalise(text: str) -> str:
    """Step 1. ASCII text is only lowercased: NFKC and case folding do nothing more to it."""
    if text.isascii():
        return text.lower()
    folded = fold(unicodedata.normalize("NFKC", text))
    # Folding can leave a sequence NFKC composes ("ΐ" folds to ι + two marks): normalised again, "ΠΡΩΤΕΪ́ΝΗ" and
    # "πρωτεΐνη" give one token. The check costs ~0.2 µs; the second pass runs for those few letters only.
    return folded if unicodedata.is_normalized("NFKC", folded) else unicodedata.normalize("NFKC", folded)


def normalise(text: str) -> str:
    """Step 1 (NFKC and case folding): what another reader of a text's words (kinds.category_words) applies first,
    so that it reads the words the analyzer reads."""
    return _normalise(text)


def fold(text: str) -> str:
    """Step 1's case folding alone (no NFKC): what a word matched against a fixed list of lower-case words (month
    names, say) is folded with, so it matches whatever case the analyzer would match it in."""
    return text.lower() if text.isascii() else text.casefold().replace(_I_DOT, "i")


def _words(text: str) -> list[str]:
    """Step 2 on a normalised text."""
    return _WORD.findall(text.replace("_", " "))


def _word_tokens(word: str) -> tuple[str, ...]:
    """All tokens of one word of a normalised text (steps 3–5)."""
    if word.isascii():
        return () if word in STOPWORDS_EN else (_stem(word),)
    out: list[str] = []
    for i, piece in enumerate(_CJK_SPLIT.split(word)):
        if not piece:
            continue
        if i % 2:  # the capturing group: a CJK run
            _bigrams(piece, out)
        else:
            _latin_or_other(piece, out)
    return tuple(out)


def analyze(text: str) -> list[str]:
    """The tokens of ``text``, as indexed and as queried (see the module docstring)."""
    if text.isascii():
        return list(filter(None, map(_ASCII_CACHE.__getitem__, text.encode("ascii").translate(_ASCII_TABLE).split())))
    out: list[str] = []
    cached = _WORD_CACHE.get
    for word in _words(_normalise(text)):
        tokens = cached(word)
        if tokens is None:
            tokens = _word_tokens(word)
            if len(word) <= _WORD_CACHE_MAX_LEN:
                if len(_WORD_CACHE) > _CACHE_MAX:
                    _WORD_CACHE.clear()
                _WORD_CACHE[word] = tokens
        out.extend(tokens)
    return out


def analyze_each(texts: Iterable[str]) -> list[str]:
    """``analyze(text)`` of every text, each followed by :data:`DOC_END`, in one list. Runs of ASCII texts are
    joined and analysed as one (a byte that no ASCII text holds between them, kept as a word of its own), so a batch
    of short messages pays the per-text steps once; stop-words are left in as ``""`` — the caller skips them."""
    out: list[str] = []
    run: list[bytes] = []

    def flush() -> None:
        words = (b" " + _ASCII_DOC_END + b" ").join(run).translate(_ASCII_TABLE).split()
        words.append(_ASCII_DOC_END)
        out.extend(map(_ASCII_CACHE.__getitem__, words))
        run.clear()

    for text in texts:
        if text.isascii():
            run.append(text.encode("ascii"))
            continue
        if run:
            flush()
        out.extend(analyze(text))
        out.append(DOC_END)
    if run:
        flush()
    return out


_ASCII_SEPARATED = bytes(0xFF if c == 0 else b for c, b in enumerate(_ASCII_TABLE))  # NUL → _ASCII_DOC_END


def ascii_words(texts: Sequence[str]) -> list[bytes] | None:
    """The words of the texts, each text's followed by the separator that :data:`ascii_stems` maps to
    :data:`DOC_END` — so ``list(map(ascii_stems.__getitem__, ascii_words(texts)))`` is ``analyze_each(texts)`` —
    when every text is ASCII and holds no NUL; None otherwise. One join, one encode, one translate for them all."""
    joined = " \x00 ".join(texts)
    if not joined.isascii() or joined.count("\x00") != len(texts) - 1:
        return None
    words = joined.encode("ascii").translate(_ASCII_SEPARATED).split()
    words.append(_ASCII_DOC_END)
    return words


ascii_stems: Mapping[bytes, str] = _ASCII_CACHE  # ASCII word → stem, "" for a stop-word (computed on a miss)


def reference_analyze(text: str, *, stem: Callable[[str], str] | None = None) -> list[str]:
    """:func:`analyze` without its caches and fast paths: the steps of the module docstring, one by one. Slow; tests
    and ``bench/analyzer.py`` check that :func:`analyze` returns exactly this. ``stem`` replaces the Snowball call
    (the benchmark passes the stem cache to time the analyzer as it was before its fast paths)."""
    stem = stem or _stemmer().stemWord
    out: list[str] = []
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold().replace("i\u0307", "i"))
    for word in _REFERENCE_WORD.findall(folded):
        for i, piece in enumerate(_CJK_SPLIT.split(word)):
            if not piece:
                continue
            if i % 2:
                _bigrams(piece, out)
            elif _LATIN.fullmatch(piece):
                if piece not in STOPWORDS_EN:
                    out.append(stem(piece))
            else:
                out.append(piece)
    return out


def plain_tokenize(text: str) -> list[str]:
    """The English-only baseline: words split on whitespace/punctuation, stop-words, stemming; no CJK bigrams."""
    out: list[str] = []
    for word in _words(_normalise(text)):
        _latin_or_other(word, out)
    return out
