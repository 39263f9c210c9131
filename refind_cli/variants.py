"""Spellings of a question's words that the user wrote another way: compounds, glued numbers, dates' leading zeros,
clitic prefixes and loanword vowels.

Search engines handle these with a language's dictionary (Lucene's compound-word filters, Hebrew and Arabic
morphological analyzers); refind asks the user's own vocabulary instead, at query time, so the index is unchanged and
a language nobody configured is served alike. Each is a small function of the question and the vocabulary, tested on
a toy corpus ranked by hand:

* :func:`joined` — two adjacent words of the question that the user wrote as one, directly or with a linking s
  ("Zahnarzt Termin" finds "Zahnarzttermin", "verjaardag feest" finds "verjaardagsfeest", "kitchen ware" finds
  "kitchenware"): the joined word's token, at weight 1. Words of at least 3 letters, neither a stop-word, in a script
  written with spaces; or such a word and an English particle beside it ("log in" finds "login", "on going"
  "ongoing"), at weight 1/2; and, when the user never wrote one of the two, two such words in the other order or with
  one word between ("Termin beim Zahnarzt" finds "Zahnarzttermin"), at weight 1; a word the user never wrote that
  types an umlaut as ae, oe or ue is joined with it too ("Steuer Erklaerung" finds "Steuererklärung");
* :func:`initial_umlauts` — such a word that starts with one ("Aepfel", "Oel", "Uebung"), which fuzzy matching never
  reaches (it keeps a word's first two letters), also matches its spellings with that umlaut written ä, ö, ü, weighted
  as a one-edit fuzzy match ("aepfel" finds "Äpfel");
* :func:`glued` — a number and a word beside it in the question that the user wrote as one ("at 3 pm" finds "3pm",
  "iphone 15" finds "iphone15"), at weight 1; and :func:`number_cuts` the other way: a question's glued token that no
  turn holds, its number and its word in the turns holding both, at weight 1/2 each ("3pm" finds "3 pm");
* :func:`padded` — a date's day or month written without its leading zero ("1.3.2024", "3/1/2024") also asks it
  with one ("01.03.2024"), at weight 1;
* :func:`split` — a question word the user never wrote that is two words they wrote together in a turn
  ("Zahnarzttermin" finds "Termin beim Zahnarzt"; a German linking s goes with the stemmer: "Geburtstagsfeier"
  finds "Geburtstag … Feier"): each part at weight 1/2 in the turns holding both, the most even such cut into two
  words of at least 3 letters (in Devanagari, between whole clusters: "नोटबुक" finds "नोट बुक");
* :func:`clitics` — Hebrew writes "and", "the", "in", "to", "from", "that", "as" as letters before a word, stacked
  (בגן "in the kindergarten", לאילת "to Eilat", החשבון "the bill", ומהחנות "and from the shop"), and Arabic writes
  و ف ب ك ل and ال so (بالبريد "by the mail"): a Hebrew or Arabic word also matches the user's words that are it
  with such a prefix, without one, or with another (הגן "the garden" finds בגן "in the garden"), at weight 1/2 (a
  prefix is a guess: מספר "number" is also מ + ספר "from a book");
* :func:`pronoun_suffixes` — Persian writes "my", "your", "his / her" (and their plurals) as letters after a word,
  glued (گوشیم "my phone") or apart (گوشی‌ام): an Arabic-script word the user never wrote also matches the word
  without such an ending, at weight 1/2;
* :func:`loan_vowels` — Hindi writes the English "o" of a loanword as ॉ or as ा (डॉक्टर and डाक्टर, doctor): a
  Devanagari word the user never wrote matches the other spelling, weighted as a one-edit fuzzy match.

:func:`variant_terms` gathers the single words, each the user wrote (a visible turn holds it) once, and never a term
the question already asks; :func:`variant_scores` turns them and the splits into BM25 scores as the fuzzy expansions
do (expand.py).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from . import expand
from .index import TurnIndex, bm25_scores, weighted_scores
from .tokenize import STOPWORDS_EN, analyze, ascii_stems, normalise, script_stem, unaccented, units

if TYPE_CHECKING:
    import numpy as np

Present = Callable[[Iterable[str]], "set[str]"]  # which of these tokens some visible turn of the user holds

LINKS = ("", "s")  # what may join two words into one: nothing, or the linking s of German, Dutch, Swedish …
MIN_PART = 3  # letters of each word a join or a split is made of
MAX_WORDS = 64  # words of a question read for joins and splits, and tokens per script for the others (a pasted
# page is no question)
MAX_WORD_CHARS = 40  # a longer word is not joined, split or given prefixes (a URL's letters, a blob): each costs
# the analyzer a pass over it, and remembered, memory
# English particles, stop-words that a phrasal verb or a compound writes beside a word ("log in" and "login", "set
# up" and "setup", "on going" and "ongoing"): joined to the word next to them at half weight (another stop-word is
# never joined); "in" only after one ("in San Francisco" is no "insane")
PARTICLES = frozenset(("in", "on", "up", "out", "off", "down", "over"))
PARTICLES_BEFORE = PARTICLES - {"in"}
PARTICLE_WEIGHT = 0.5
APART = 2  # two words joined though not adjacent: at most this many words apart (one between; the code reads no
# more), nothing but spaces or hyphens between them, without a linking s
APART_WEIGHT = 1.0
# German's umlauts typed as two letters, as a keyboard without them writes them: a join of two words also asks its
# spellings with them ("Steuer Erklaerung" finds "Steuererklärung"; a single word's is fuzzy matching's, one edit from
# its accent-free twin), for at most this many such pairs of letters in the join
UMLAUTS = {"ae": "ä", "oe": "ö", "ue": "ü"}
MAX_TYPED_UMLAUTS = 3
SPLIT_WEIGHT = 0.5  # each part of a split word: together they weigh one word
CLITIC_WEIGHT = 0.5

# a word of an ASCII text (lower-case, as normalise leaves it) of at most MAX_WORD_CHARS letters, as _WORD_WITH_MARKS
# and _SPACED read it there (a longer run of letters gives no word)
_ASCII_WORD = re.compile(f"(?<![a-zA-Z])[a-z]{{1,{MAX_WORD_CHARS}}}(?![a-zA-Z])")
_DIGIT = re.compile("[0-9]")
_TYPED_UMLAUT = re.compile("[aou]e")
# a number or a word (letters) at the end of a text or at its start, a whole word of it
_LAST_RUN = re.compile(r"(?<![^\W_])(?:[0-9]+|[^\W\d_]+)$")
_FIRST_RUN = re.compile(r"(?:[0-9]+|[^\W\d_]+)(?![^\W_])")
# a date in figures: day and month (either first) and a year, or a year, month and day, one separator between them
_DATE = re.compile(
    r"(?<![0-9])(?<![0-9][./-])(?:(?P<a>[0-9]{1,2})(?P<s>[./-])(?P<b>[0-9]{1,2})(?P=s)(?:[0-9]{4}|[0-9]{2})"
    r"|[0-9]{4}(?P<t>[./-])(?P<c>[0-9]{1,2})(?P=t)(?P<d>[0-9]{1,2}))(?![0-9])(?![./-][0-9])"
)
_DATE_HINT = re.compile("[0-9][./-][0-9]")
_NUMBER_WORD = re.compile("([0-9]+)([^\\W\\d_]+)|([^\\W\\d_]+)([0-9]+)")  # a token of a number glued to a word
# the scripts whose words are joined and split: alphabets, abjads and Devanagari, written with spaces (not CJK or
# Thai, whose words are bigrams); a Devanagari word is read with its vowel signs, virama and nukta, which are marks
_SCRIPTS = f"{expand.ALPHABETS}\u05d0-\u05ea\u0620-\u06ff\u0900-\u0963\u0971-\u097f"
_ANY_SPACED = re.compile(f"[A-Za-z\uff21-\uff3a\uff41-\uff5a{_SCRIPTS}]")  # (before NFKC and case folding)
_SPACED = re.compile(f"[a-z{_SCRIPTS}]+")
_MARKS = "\u0900-\u0903\u093a-\u093c\u093e-\u094f\u0951-\u0957\u0962\u0963"  # Devanagari's marks
_WORD_WITH_MARKS = re.compile(f"(?:[^\\W\\d_]|[{_MARKS}])+")  # (a word of the non-ASCII questions)
_MARK = re.compile(f"[{_MARKS}]")
_VIRAMA = "\u094d"  # (a consonant after it is of the same cluster: क्ट)
_JOINER = re.compile("[ \t\u00a0\u200c\u2010\u2011-]+")  # what may stand between two words written as one elsewhere
_HEBREW = re.compile("[\u05d0-\u05ea]+")
_ARABIC = re.compile("[\u0620-\u064a\u066e-\u06d3]+")
# Hebrew's prefixes, in the order they stack: and (ו), that / when (ש כש), in / to / from / as (ב ל מ כ), the (ה) —
# "ומהחנות" is ו + מ + ה + חנות, "and from the shop"; any of each slot, in order, at least one
HEBREW_PREFIXES = tuple(
    "".join(slots)
    for slots in itertools.product(("", "ו"), ("", "ש", "כש"), ("", "ב", "ל", "מ", "כ"), ("", "ה"))
    if any(slots)
)
# Arabic's proclitics and the article (after analyzer 7's folds: no hamza forms), alone and together
ARABIC_PREFIXES = tuple("و ف ب ك ل ال وال فال بال كال لل وبال ولل".split())  # noqa: SIM905 (a list of right-to-left strings reads worse)
# Persian's possessive pronouns written glued to a word (my, your, his / her; our, your, their): گوشیم "my phone",
# which is also written گوشی‌ام, گوشی my phone's word and ام apart; the longest first
PERSIAN_SUFFIXES = tuple("شان تان مان ش ت م".split())  # noqa: SIM905 (as ARABIC_PREFIXES)
_LOAN_VOWELS = {"\u093e": "\u0949", "\u0949": "\u093e", "\u0906": "\u0911", "\u0911": "\u0906"}  # ा ॉ, आ ऑ
_LOAN_VOWEL = re.compile("[\u093e\u0949\u0906\u0911]")


@lru_cache(maxsize=8192)  # (a question's words are mostly words of earlier questions: names, common words)
def _spaced_token(word: str) -> str | None:
    """The one token of a word of a script written with spaces (not CJK or Thai, whose words are bigrams), or None
    (a stop-word, or a word that gives more or other tokens)."""
    if word.isascii() and word.isalpha() and word.islower():  # (most: its stem, as analyze's ASCII path reads it)
        return ascii_stems[word.encode("ascii")] or None
    tokens = analyze(word)
    if not tokens or units(tokens[0]) is not None:
        return None
    if len(tokens) == 1 or (len(tokens) == 2 and tokens[1:] == analyze(unaccented(word))):  # (and its accent-free twin)
        return tokens[0]
    return None


def words(text: str) -> list[re.Match[str]]:
    """The words of ``text`` (normalised as the analyzer reads it) that :func:`joined` and :func:`split` read: the
    first :data:`MAX_WORDS`, of the scripts of :data:`_SPACED` (a Chinese question has none)."""
    if not _ANY_SPACED.search(text):
        return []
    normalised = normalise(text)
    if normalised.isascii():  # (most questions: one pattern finds them, no word read twice)
        return list(itertools.islice(_ASCII_WORD.finditer(normalised), MAX_WORDS))
    found = (
        w
        for w in _WORD_WITH_MARKS.finditer(normalised)
        if len(w.group()) <= MAX_WORD_CHARS and _SPACED.fullmatch(w.group())
    )
    return list(itertools.islice(found, MAX_WORDS))


def word_tokens(found: Sequence[re.Match[str]]) -> list[str | None]:
    """Each of ``words``' token as joins and splits read it: None for a word under :data:`MIN_PART` letters, a
    stop-word, or a word of more tokens than one."""
    return [_spaced_token(w[0]) if w.end() - w.start() >= MIN_PART else None for w in found]


def joined(
    found: Sequence[re.Match[str]], held: Collection[str], owns: Sequence[str | None]
) -> list[tuple[str, float]]:
    """The tokens of two ``words`` written as one (each word's own token is a query word), with their weights: two
    adjacent words, in their order; a word and a particle beside it; and two words at most :data:`APART` words apart,
    nothing but spaces or hyphens between them, in either order, when the user never wrote one of them (a compound's
    parts, asked apart; ``held``: the words' tokens the user wrote; ``owns``: their :func:`word_tokens`)."""
    out: list[tuple[str, float]] = []
    words = [w[0] for w in found]
    tokens = owns
    joints: list[bool] = []  # whether words i and i + 1 are written as two words of one (read when first needed)

    def joint(i: int) -> bool:
        if not joints:
            joints.extend(_written_apart(a, b) for a, b in itertools.pairwise(found))
        return joints[i]

    for i, (a, b) in enumerate(itertools.pairwise(tokens)):
        if a and b:
            if joint(i):
                for link in LINKS:
                    if token := _spaced_token(words[i] + link + words[i + 1]):
                        out.append((token, 1.0))
        elif (
            ((a and words[i + 1] in PARTICLES) or (b and words[i] in PARTICLES_BEFORE))
            and joint(i)
            and (token := _spaced_token(words[i] + words[i + 1]))  # (a particle has no token: a stop-word)
        ):
            out.append((token, PARTICLE_WEIGHT))
    unheld = [i for i, token in enumerate(tokens) if token and token not in held]
    # a word the user never wrote with an "ae", "oe" or "ue": its joins also with umlauts (typed_umlauts), in order
    typed = [i for i in unheld if _TYPED_UMLAUT.search(words[i])]
    for low in sorted({low for i in typed for low in (i - 1, i) if 0 <= low < len(words) - 1}) if typed else ():
        if tokens[low] and tokens[low + 1] and joint(low):
            for link in LINKS:
                word = words[low] + link + words[low + 1]
                out.extend(_umlaut_tokens(word, _spaced_token(word), 1.0))
    pairs: dict[tuple[int, int], None] = {}
    for i in unheld:
        for j in range(max(0, i - APART), min(len(words), i + APART + 1)):
            low, high = (i, j) if i < j else (j, i)
            if low != high and tokens[j] and joint(low) and (high == low + 1 or joint(low + 1)):
                pairs[high, low] = None  # (in their order, two adjacent words are joined above)
                if high > low + 1:
                    pairs[low, high] = None
    for i, j in pairs:
        word = words[i] + words[j]
        if token := _spaced_token(word):
            out.append((token, APART_WEIGHT))
        if typed and (i in typed or j in typed):
            out.extend(_umlaut_tokens(word, token, APART_WEIGHT))
    return out


def _umlaut_tokens(word: str, token: str | None, weight: float) -> list[tuple[str, float]]:
    """The tokens of a join's spellings with typed umlauts (:func:`typed_umlauts`) but its own ``token``."""
    return [(own, weight) for other in typed_umlauts(word) if (own := _spaced_token(other)) and own != token]


def typed_umlauts(word: str) -> list[str]:
    """``word`` with some of its "ae", "oe", "ue" written ä, ö, ü — German typed on a keyboard without them
    ("erklaerung" for "erklärung") — each choice of them, since not every one is an umlaut ("steuer"'s "ue" is
    none); none for a word of more than :data:`MAX_TYPED_UMLAUTS`."""
    at = [m.start() for m in _TYPED_UMLAUT.finditer(word)]
    if len(at) > MAX_TYPED_UMLAUTS:
        return []
    out: list[str] = []
    for chosen in range(1, 1 << len(at)):
        pieces: list[str] = []
        last = 0
        for bit, i in enumerate(at):
            if chosen >> bit & 1:
                pieces += (word[last:i], UMLAUTS[word[i : i + 2]])
                last = i + 2
        out.append("".join((*pieces, word[last:])))
    return out


def initial_umlauts(
    found: Sequence[re.Match[str]], held: Collection[str], owns: Sequence[str | None]
) -> list[tuple[str, float]]:
    """The tokens of the spellings with typed umlauts (:func:`typed_umlauts`) that write the first two letters as
    one, of each of ``words`` whose own token the user never wrote (not in ``held``; ``owns``: their
    :func:`word_tokens`) and that starts with "ae", "oe" or "ue" ("aepfel" → "äpfel", "uebergroesse" → "übergroesse"
    and "übergrösse"): fuzzy matching finds an umlaut typed further in, one edit from the word's accent-free twin, but
    keeps the first two letters. Each is asked only where the user wrote it, as every variant is, so an English word
    ("aerobic", "oedema") asks spellings nobody wrote. Each weighs what fuzzy matching gives one edit of the word's
    token."""
    out: list[tuple[str, float]] = []
    for w, own in zip(found, owns, strict=True):
        word = w[0]
        if own and own not in held and word[1:2] == "e" and word[:1] in "aou":
            weight = 1.0 - 1.0 / len(own)
            for other in typed_umlauts(word):
                if other[0] in "äöü" and (token := _spaced_token(other)) and token != own:
                    out.append((token, weight))
    return out


def _written_apart(a: re.Match[str], b: re.Match[str]) -> bool:
    """Whether only spaces, hyphens or a ZWNJ stand between two words of a text (one word, perhaps, written apart)."""
    between = a.string[a.end() : b.start()]
    return between == " " or _JOINER.fullmatch(between) is not None  # (most: one space)


def glued(text: str) -> list[tuple[str, float]]:
    """The token of each number and word next to it in ``text`` (normalised) written as one, "3 pm" as "3pm", "iphone
    15" as "iphone15", at weight 1: :func:`words` reads letters only, and a word of the analyzer is letters and digits
    together."""
    out: list[tuple[str, float]] = []
    for x, y in itertools.islice(itertools.pairwise(text.split()), MAX_WORDS * 2):
        if x[-1].isdigit() == y[0].isdigit() or not (x[-1].isalnum() and y[0].isalnum()):
            continue  # (most pairs, told by two characters)
        left, right = _last_run(x), _first_run(y)
        if left is None or right is None or len(word := left + right) > MAX_WORD_CHARS:
            continue
        if (right if left[0].isdigit() else left) in STOPWORDS_EN:
            continue  # ("on 12", "at 3": no word)
        if token := _spaced_token(word):
            out.append((token, 1.0))
    return out


def _last_run(text: str) -> str | None:
    """The number or the word (letters) that ends ``text``, a whole word of it, or None."""
    if text.isascii() and (text.isalpha() or text.isdigit()):  # (most: the whole text, no pattern tried)
        return text
    run = _LAST_RUN.search(text)
    return None if run is None else run[0]


def _first_run(text: str) -> str | None:
    """The number or the word (letters) that starts ``text``, a whole word of it, or None."""
    if text.isascii() and (text.isalpha() or text.isdigit()):
        return text
    run = _FIRST_RUN.match(text)
    return None if run is None else run[0]


def split(
    found: Sequence[re.Match[str]],
    present: Present,
    held_owns: Collection[str] | None = None,
    owns: Sequence[str | None] | None = None,
) -> list[list[tuple[str, str]]]:
    """For each of ``words`` that no turn holds, its cuts into two words that some turns hold (their tokens), the
    most even first (the shorter part longest). ``held_owns``: the words' tokens the user wrote, when known;
    ``owns``: their :func:`word_tokens`, when known."""
    out: list[list[tuple[str, str]]] = []
    if owns is None:
        owns = word_tokens(found)
    if held_owns is None:
        held_owns = present(filter(None, owns))  # (one look for the question's words: most are the user's)
    unheld: dict[str, None] = {}  # (each word once)
    for m, own in zip(found, owns, strict=True):
        if own and own not in held_owns and MIN_PART * 2 <= len(m[0]) <= MAX_WORD_CHARS:
            unheld[m[0]] = None
    for word in unheld:
        cuts: list[tuple[int, int, str, str]] = []
        for at in cut_points(word):
            left, right = _spaced_token(word[:at]), _spaced_token(word[at:])
            if left and right:
                cuts.append((min(at, len(word) - at), -at, left, right))
        held = present({t for cut in cuts for t in cut[2:]})
        if held_cuts := sorted((cut for cut in cuts if cut[2] in held and cut[3] in held), reverse=True):
            out.append([(left, right) for _, _, left, right in held_cuts])
    return out


def cut_points(word: str) -> Sequence[int]:
    """Where a split may cut ``word``: :data:`MIN_PART` characters or more from either end, and between two grapheme
    clusters of Devanagari (never before a vowel sign or after a virama: नोट|बुक, not न|ोटबुक)."""
    points = range(MIN_PART, len(word) - MIN_PART + 1)
    if word.isascii() or not _MARK.search(word):
        return points
    return [at for at in points if not _MARK.match(word, at) and word[at - 1] != _VIRAMA]


def padded(text: str) -> list[tuple[str, float]]:
    """The day and month of each date of ``text`` (normalised) in figures, "1.3.2024", "3/1/2024" or "2024-3-1", with
    the leading zero they lack ("01.03.2024"), at weight 1: the analyzer reads a date's numbers as tokens, and 1 is no
    01. (Not the other way: "1" is in most chats, and "before 10.01.2024" would prefer every turn with a 1 in it.)"""
    if not _DATE_HINT.search(text):
        return []
    out: list[tuple[str, float]] = []
    for date in itertools.islice(_DATE.finditer(text), MAX_WORDS):
        for part in (date["a"], date["b"]) if date["a"] else (date["c"], date["d"]):
            if len(part) == 1:
                out.append(("0" + part, 1.0))
    return out


def number_cuts(tokens: Sequence[str], present: Present) -> list[list[tuple[str, str]]]:
    """For each query token of a number glued to a word ("3pm", "iphone15") that no turn holds, its number and its
    word as tokens (the number first), when some turns hold both: "3pm" finds "3 pm"."""
    found: dict[str, tuple[str, str]] = {}
    glued_tokens = (t for t in dict.fromkeys(tokens) if not (t.isalpha() or t.isdigit()) and len(t) <= MAX_WORD_CHARS)
    for token in itertools.islice(glued_tokens, MAX_WORDS):
        if (glue := _NUMBER_WORD.fullmatch(token)) is not None:
            number, word = (glue[1], glue[2]) if glue[1] else (glue[4], glue[3])
            if own := _spaced_token(word):
                found[token] = (number, own)
    if not found:
        return []
    held = present({*found, *(part for cut in found.values() for part in cut)})  # (one look for all of them)
    return [[cut] for token, cut in found.items() if token not in held and cut[0] in held and cut[1] in held]


def _tokens_of(tokens: Sequence[str], low: str, high: str) -> list[str]:
    """The question's distinct tokens that start with a character from ``low`` to ``high``, each at most
    :data:`MAX_WORD_CHARS` long, the first :data:`MAX_WORDS` of them: a variant is a copy of its token, and a question
    of 100,000 characters (a token as long, or 11,000 distinct ones) asked for gigabytes of them."""
    found = (t for t in dict.fromkeys(tokens) if low <= t[0] <= high and len(t) <= MAX_WORD_CHARS)
    return list(itertools.islice(found, MAX_WORDS))


def clitics(tokens: Sequence[str]) -> list[str]:
    """Each Hebrew or Arabic query token without a prefix of its language that it starts with (the rest two letters or
    more), then it and those with each prefix before them (הגן "the garden": גן, then בגן "in the garden" …)."""
    out: list[str] = []
    for token in _tokens_of(tokens, "\u05d0", "\u06d3"):  # (Hebrew to Arabic: most tokens are neither, told at once)
        if _HEBREW.fullmatch(token):
            prefixes: Sequence[str] = HEBREW_PREFIXES
        elif _ARABIC.fullmatch(token):
            prefixes = ARABIC_PREFIXES
        else:
            continue
        bare = [token[len(p) :] for p in prefixes if token.startswith(p) and len(token) - len(p) >= 2]
        out.extend(bare)
        out.extend(p + word for word in (token, *bare) for p in prefixes)
        if prefixes is ARABIC_PREFIXES:
            # Snowball's Arabic stemmer strips a suffix or not by the prefix it found: الشاورما → شاورما, but
            # شاورما → شاورم, and it keeps و or ف before ا: والشاورما → والشاورم. The word, and it after "and the",
            # are also looked for as the stemmer gives them (the other prefixes it strips, or keeps as written)
            forms = (*(token, *bare), *(p + word for word in (token, *bare) for p in ("وال", "فال")))
            out.extend(stem for form in forms if (stem := script_stem("arabic", form)) != form)
    return out


def pronoun_suffixes(tokens: Sequence[str], present: Present) -> list[str]:
    """Each Arabic-script query token that no turn holds without a Persian possessive pronoun it ends in (the rest two
    letters or more), as the analyzer reads the rest (گوشیم "my phone" → گوشی, stemmed as the turns' گوشی‌ام is)."""
    out: list[str] = []
    unheld = [t for t in _tokens_of(tokens, "\u0620", "\u06d3") if _ARABIC.fullmatch(t)]
    if not unheld or not (unheld := [t for t in unheld if t not in present(unheld)]):
        return out
    for token in unheld:
        for suffix in PERSIAN_SUFFIXES:
            if token.endswith(suffix) and len(token) - len(suffix) >= 2:
                rest = analyze(token[: -len(suffix)])
                if len(rest) == 1:
                    out.append(rest[0])
                break  # (one suffix: "ـمان" is not also "ـن" + "ـم")
    return out


def loan_vowels(tokens: Sequence[str], present: Present) -> list[str]:
    """Each Devanagari query token that no turn holds with one of its ा / ॉ (आ / ऑ) written as the other."""
    out: list[str] = []
    for token in _tokens_of(tokens, "\u0900", "\u097f"):  # (Devanagari)
        if not _LOAN_VOWEL.search(token):
            continue
        at = [i for i, c in enumerate(token) if c in _LOAN_VOWELS]
        if not present([token]):
            out.extend(token[:i] + _LOAN_VOWELS[token[i]] + token[i + 1 :] for i in at)
    return out


def variant_terms(index: TurnIndex, text: str, tokens: Sequence[str]) -> list[tuple[str, float]]:
    """The terms that joins, glued numbers, dates, clitics and loanword vowels add to a search of a question (its
    ``text``, its ``tokens``) over ``index``, with their weights: only terms some visible turn holds, each once (its
    first variant's weight), none the question already asks."""
    return _variant_terms(_Question.of(index, text), tokens)


class _Question(NamedTuple):
    """What the variants read of a question's text, over one user's index."""

    found: Sequence[re.Match[str]]  # its words
    owns: Sequence[str | None]  # each word's token, None where a word is no one token
    held: Collection[str]  # the tokens of ``owns`` the user wrote
    normalised: str
    digits: bool  # whether it holds a digit
    present: Present

    @classmethod
    def of(cls, index: TurnIndex, text: str) -> _Question:
        found = words(text)
        normalised = found[0].string if found else normalise(text)
        owns = word_tokens(found)
        # the question's words the user wrote, as the term dictionaries tell (a word only forgotten turns hold is
        # taken for one: it is neither joined apart nor split, which a visible turn's count per word would cost)
        held = expand.present(index, dict.fromkeys(filter(None, owns), 0))
        return cls(found, owns, held, normalised, _DIGIT.search(normalised) is not None, present_in(index))


def _variant_terms(q: _Question, tokens: Sequence[str]) -> list[tuple[str, float]]:
    present = q.present
    candidates = joined(q.found, q.held, q.owns)
    candidates.extend(initial_umlauts(q.found, q.held, q.owns))
    if q.digits:
        candidates.extend((*glued(q.normalised), *padded(q.normalised)))
    if max(tokens, default="")[:1] >= "\u05d0":  # (a token of Hebrew, Arabic or Devanagari: the greatest first letter)
        candidates.extend((term, CLITIC_WEIGHT) for term in clitics(tokens))
        candidates.extend((term, CLITIC_WEIGHT) for term in pronoun_suffixes(tokens, present))
        candidates.extend((term, 1.0 - 1.0 / len(term)) for term in loan_vowels(tokens, present))
    if not candidates:
        return []
    asked = set(tokens)
    weighted: dict[str, float] = {}
    for term, weight in candidates:
        if term and term not in asked:
            weighted.setdefault(term, weight)
    held_terms = present(weighted)
    return [(term, weight) for term, weight in weighted.items() if term in held_terms]


def variant_scores(index: TurnIndex, text: str, tokens: Sequence[str]) -> np.ndarray | None:
    """The BM25 scores the variants of a search of ``text`` (analysed as ``tokens``) add, None when none: each of
    :func:`variant_terms` its own scores times its weight; a split word, the first of its cuts whose two parts some
    turn holds together, the parts' scores times :data:`SPLIT_WEIGHT` in those turns only (a word is both its parts:
    "cartoon" is no "car" and "toon" said apart, nor is a turn with "back" alone about a "background")."""
    q = _Question.of(index, text)
    total = weighted_scores(index, _variant_terms(q, tokens))
    cuts = split(q.found, q.present, q.held, q.owns)
    if q.digits:
        cuts.extend(number_cuts(tokens, q.present))
    for word_cuts in cuts:
        if (both := _cut_scores(index, word_cuts)) is not None:
            total = both if total is None else total + both
    return total


def _cut_scores(index: TurnIndex, word_cuts: Sequence[tuple[str, str]]) -> np.ndarray | None:
    """A split word's scores: its first cut whose two parts some turn holds together, their scores times
    :data:`SPLIT_WEIGHT` in those turns only; None when no turn holds both parts of any cut."""
    import numpy as np

    for left, right in word_cuts:
        left_scores, right_scores = bm25_scores(index, [left]), bm25_scores(index, [right])
        both = (left_scores > 0) & (right_scores > 0)
        if both.any():
            return np.where(both, (left_scores + right_scores) * SPLIT_WEIGHT, 0).astype(np.float32)
    return None


def present_in(index: TurnIndex) -> Present:
    """:data:`Present` over a user's index: a word some visible turn holds. Its term dictionaries are asked first, for
    all the words at once (an intersection of keys: most variants are words nobody wrote), then the count of visible
    turns for those they hold."""
    vocabulary = expand.vocabulary(index)

    def present(tokens: Iterable[str]) -> set[str]:
        return {t for t in expand.present(index, dict.fromkeys(tokens, 0)) if t in vocabulary}

    return present
