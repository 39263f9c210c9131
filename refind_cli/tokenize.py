"""One tokenizer for corpus and query, in every language the contest sends.

``analyze(text)``:

0. drop the invisible characters that only say where a line may break or must not (:func:`visible`): a soft hyphen
   (U+00AD, in text pasted from web pages and PDFs: "doc\u00adu\u00adment" is "document"), a zero-width space
   (U+200B), a word joiner (U+2060), a zero-width no-break space (U+FEFF), and a zero-width non-joiner (U+200C)
   but after an Arabic-script letter, where Persian, Urdu and Kurdish write it between a word's parts and it keeps
   splitting them (Lucene's Persian analyzer reads it as a space) — as ICU and Lucene fold default-ignorable
   characters away. A reader sees one word where one of them stands; in Thai, Lao, Khmer or Myanmar a zero-width
   space marks a word's end, but those runs become bigrams (step 3), so the text without it gives every token the
   text with it gave (and a lone cluster's unigram, which a query's matches in the bigrams holding it);
1. NFKC-normalise (full-width Latin letters and digits become ASCII) and fold case with Unicode case folding
   (``str.casefold``, as search engines do: "Straße" matches "STRASSE", a final "ς" matches "σ"), then drop the
   combining dot above that folding leaves after an ``i`` (Turkish "İ" folds to "i" + U+0307): "İstanbul" matches
   "istanbul"; NFKC again where folding left a decomposed sequence (a few letters such as Greek "ΐ" or "ǰ"). ASCII text
   is only lowercased (the same thing for ASCII). Then one character is
   folded for another where a reader takes both spellings for one word (``folding.py``): Traditional Chinese
   characters to Simplified (電費 is 电费), every decimal digit to ASCII (٣٥٠ is 350), Arabic and Persian letter forms
   and vowel marks, Hebrew points, the Devanagari nukta, Cyrillic ё;
2. each emoji sequence (with its skin tone, ZWJ sequence, flag or keycap: "👍🏽", "👩‍❤️‍👨", "🇯🇵", "1️⃣") is a token
   where it stands, as Lucene's StandardTokenizer and ICU keep emoji, but without its variation selectors ("❤️" is
   "❤") and skin tone ("👍🏽" is "👍"), which only choose how it looks — a zero-width-joiner sequence also gives its
   first emoji's token ("🏃‍♂️" gives "🏃‍♂" and "🏃"); the rest is split on whitespace and
   punctuation (a token is a run of letters, combining marks — every one Unicode has, of any script — and digits;
   ``_`` splits too; a zero-width joiner inside a word is dropped from it);
3. inside a token, runs of CJK characters (Han, Hiragana, Katakana, Hangul) become overlapping character bigrams,
   a lone CJK character a unigram — as Lucene's CJK analyzer does, so ``我去北京`` gives ``我去 去北 北京``; runs of a
   script written without spaces between words (Thai, Lao, Khmer, Myanmar, the Tai scripts, Javanese, Balinese)
   become overlapping bigrams of grapheme clusters (a letter and its marks), a lone cluster a unigram — the
   dictionary-free n-gram indexing of Thai, so the query ``ข้าวผัด`` matches inside ``ฉันชอบกินข้าวผัด`` and never
   half a cluster;
   a Chinese numeral before what it counts (a date, a time, an age, money…) also gives its value in digits
   (十二月二十五号 gives 12 and 25, as 12月25号 does);
4. Latin-script words (ASCII and accented Latin letters, possibly with digits) lose English stop-words and are
   stemmed with the full Snowball English stemmer (PyStemmer) — a word with a letter only Turkish writes (ı ğ ş) with
   the Turkish one; a word with accents also gives the token of the word without them ("café" gives "café" and
   "cafe": a question typed without accents finds it, one with them prefers it);
5. a word wholly of Cyrillic, Greek, Arabic, Devanagari, Tamil or Armenian letters is stemmed with the Snowball
   stemmer of that script's main language (Russian, Greek, Arabic, Hindi, Tamil, Armenian: "Москву" finds "Москва",
   "κινητό" finds "κινητο", "السيارة" finds "سيارة"), without stop-words; numbers and words of any other script
   (Hebrew, Tibetan, Sinhala, Georgian, …) are kept intact;
6. an ASCII word that changes case inside it — camelCase, PascalCase, an acronym before a word — also gives the
   tokens of its parts, after the text's other tokens ("getUserProfile" gives getuserprofil, get, user, profil;
   "RPGs", "5K" and "USA" give no parts);
7. a number written in groups of three digits with commas, points or spaces ("$1,450", "1.450,00 €", "2,500,000",
   "10 000"), or in India's groups (12,50,000), also gives the token of its digits, after those ("1450"), so a question
   typing the number without its separators finds it.

``plain_tokenize(text)`` is the English-only word splitter that the evaluation compares against: the same steps
without 3 (a run of Han characters stays one token), without emoji (dropped, as every analyzer before 5 did), without
step 1's character folds and without step 5's stemmers (as before analyzer 7).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache, lru_cache
from typing import Any

from .folding import fold_characters
from .folding import table as character_folds

# Bump whenever analyze() changes what it emits: persisted search indexes built by another version are then rebuilt.
# 2: Unicode case folding (casefold, "i" + U+0307 → "i") instead of lower().
# 3: NFKC again where case folding left a decomposed sequence.
# 4: every combining mark inside words; bigrams of grapheme clusters for Thai, Lao, Khmer, Myanmar and the Tai scripts.
# 5: emoji sequences are tokens (a keycap no longer leaves a stray U+20E3); Javanese and Balinese are spaceless.
# 6: an emoji's skin tone is left out of its token, as its variation selectors are ("👍🏽" is "👍").
# 7: character folds (Traditional Chinese → Simplified, digits, Arabic/Persian/Hebrew/Devanagari/Cyrillic forms),
#    Snowball stemmers for Cyrillic, Greek, Arabic, Devanagari, Tamil and Armenian words, a Latin word's accent-free
#    token, the parts of a camelCase word, a counting Chinese numeral's value, a ZWJ sequence's first emoji.
# 8: a number written in groups ("1,450", "1.450.000", "10 000", "12,50,000") also gives its digits ("1450");
#    Malayalam's atomic chillu letters fold to the older spelling's; the Arabic thousands and decimal separators fold
#    to ASCII; a Latin word with ı, ğ or ş is stemmed by the Turkish stemmer.
# 9: a soft hyphen, zero-width space, word joiner, zero-width no-break space, and a zero-width non-joiner but after an
#    Arabic-script letter, no longer split a word: they are dropped (step 0).
ANALYZER_VERSION = 9

# Han (incl. extensions and compatibility ideographs), Hiragana, Katakana (+ phonetic extensions, half-width forms),
# Hangul syllables and jamo, CJK symbols such as 々 and 〆.
_CJK_CLASS = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303b\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31bf"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
# Written out by bench/unicode_classes.py (computed at import they would cost ~160 ms of every cold process, and
# the tokens would depend on the Python that indexes); tests/test_tokenize_scripts.py checks them against unicodedata.
# _MARKS (BMP and astral apart, see _WORD): every combining mark (Mn, Mc, Me), which ``\w`` leaves out, but the
# variation selectors (they choose an emoji's presentation and stay outside words, as the emoji does).
# _SPACELESS: the letters and marks of the scripts written without spaces between words (Unicode's line-break class
# SA): Thai, Lao, Myanmar, Khmer, Tai Le, New Tai Lue, Tai Tham, Tai Viet, Ahom; and Javanese and Balinese (class AL,
# but written without spaces all the same).
# _EMOJI_BMP and _EMOJI_ASTRAL: the characters that are an emoji by themselves (Unicode's Emoji property, from the
# regex package: unicodedata has none) but digits, "#", "*", regional indicators and © ® ™ 〰 〽 (see _EMOJI_SEQUENCE).
UNICODE_VERSION = "14.0.0"  # of the classes below (bench/unicode_classes.py)
_MARKS_BMP = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a\u064b-\u065f\u0670"
    "\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed\u0711\u0730-\u074a\u07a6-\u07b0\u07eb-\u07f3\u07fd"
    "\u0816-\u0819\u081b-\u0823\u0825-\u0827\u0829-\u082d\u0859-\u085b\u0898-\u089f\u08ca-\u08e1\u08e3-\u0903"
    "\u093a-\u093c\u093e-\u094f\u0951-\u0957\u0962\u0963\u0981-\u0983\u09bc\u09be-\u09c4\u09c7\u09c8\u09cb-\u09cd"
    "\u09d7\u09e2\u09e3\u09fe\u0a01-\u0a03\u0a3c\u0a3e-\u0a42\u0a47\u0a48\u0a4b-\u0a4d\u0a51\u0a70\u0a71\u0a75"
    "\u0a81-\u0a83\u0abc\u0abe-\u0ac5\u0ac7-\u0ac9\u0acb-\u0acd\u0ae2\u0ae3\u0afa-\u0aff\u0b01-\u0b03\u0b3c"
    "\u0b3e-\u0b44\u0b47\u0b48\u0b4b-\u0b4d\u0b55-\u0b57\u0b62\u0b63\u0b82\u0bbe-\u0bc2\u0bc6-\u0bc8\u0bca-\u0bcd"
    "\u0bd7\u0c00-\u0c04\u0c3c\u0c3e-\u0c44\u0c46-\u0c48\u0c4a-\u0c4d\u0c55\u0c56\u0c62\u0c63\u0c81-\u0c83\u0cbc"
    "\u0cbe-\u0cc4\u0cc6-\u0cc8\u0cca-\u0ccd\u0cd5\u0cd6\u0ce2\u0ce3\u0d00-\u0d03\u0d3b\u0d3c\u0d3e-\u0d44"
    "\u0d46-\u0d48\u0d4a-\u0d4d\u0d57\u0d62\u0d63\u0d81-\u0d83\u0dca\u0dcf-\u0dd4\u0dd6\u0dd8-\u0ddf\u0df2\u0df3"
    "\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ecd\u0f18\u0f19\u0f35\u0f37\u0f39\u0f3e\u0f3f"
    "\u0f71-\u0f84\u0f86\u0f87\u0f8d-\u0f97\u0f99-\u0fbc\u0fc6\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064"
    "\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u135d-\u135f\u1712-\u1715\u1732-\u1734\u1752\u1753"
    "\u1772\u1773\u17b4-\u17d3\u17dd\u180b-\u180d\u180f\u1885\u1886\u18a9\u1920-\u192b\u1930-\u193b\u1a17-\u1a1b"
    "\u1a55-\u1a5e\u1a60-\u1a7c\u1a7f\u1ab0-\u1ace\u1b00-\u1b04\u1b34-\u1b44\u1b6b-\u1b73\u1b80-\u1b82\u1ba1-\u1bad"
    "\u1be6-\u1bf3\u1c24-\u1c37\u1cd0-\u1cd2\u1cd4-\u1ce8\u1ced\u1cf4\u1cf7-\u1cf9\u1dc0-\u1dff\u20d0-\u20f0"
    "\u2cef-\u2cf1\u2d7f\u2de0-\u2dff\u302a-\u302f\u3099\u309a\ua66f-\ua672\ua674-\ua67d\ua69e\ua69f\ua6f0\ua6f1"
    "\ua802\ua806\ua80b\ua823-\ua827\ua82c\ua880\ua881\ua8b4-\ua8c5\ua8e0-\ua8f1\ua8ff\ua926-\ua92d\ua947-\ua953"
    "\ua980-\ua983\ua9b3-\ua9c0\ua9e5\uaa29-\uaa36\uaa43\uaa4c\uaa4d\uaa7b-\uaa7d\uaab0\uaab2-\uaab4\uaab7\uaab8"
    "\uaabe\uaabf\uaac1\uaaeb-\uaaef\uaaf5\uaaf6\uabe3-\uabea\uabec\uabed\ufb1e\ufe20-\ufe2f"
)
_MARKS_ASTRAL = (
    "\U000101fd\U000102e0\U00010376-\U0001037a\U00010a01-\U00010a03\U00010a05\U00010a06\U00010a0c-\U00010a0f"
    "\U00010a38-\U00010a3a\U00010a3f\U00010ae5\U00010ae6\U00010d24-\U00010d27\U00010eab\U00010eac"
    "\U00010f46-\U00010f50\U00010f82-\U00010f85\U00011000-\U00011002\U00011038-\U00011046\U00011070"
    "\U00011073\U00011074\U0001107f-\U00011082\U000110b0-\U000110ba\U000110c2\U00011100-\U00011102"
    "\U00011127-\U00011134\U00011145\U00011146\U00011173\U00011180-\U00011182\U000111b3-\U000111c0"
    "\U000111c9-\U000111cc\U000111ce\U000111cf\U0001122c-\U00011237\U0001123e\U000112df-\U000112ea"
    "\U00011300-\U00011303\U0001133b\U0001133c\U0001133e-\U00011344\U00011347\U00011348\U0001134b-\U0001134d"
    "\U00011357\U00011362\U00011363\U00011366-\U0001136c\U00011370-\U00011374\U00011435-\U00011446\U0001145e"
    "\U000114b0-\U000114c3\U000115af-\U000115b5\U000115b8-\U000115c0\U000115dc\U000115dd\U00011630-\U00011640"
    "\U000116ab-\U000116b7\U0001171d-\U0001172b\U0001182c-\U0001183a\U00011930-\U00011935\U00011937\U00011938"
    "\U0001193b-\U0001193e\U00011940\U00011942\U00011943\U000119d1-\U000119d7\U000119da-\U000119e0\U000119e4"
    "\U00011a01-\U00011a0a\U00011a33-\U00011a39\U00011a3b-\U00011a3e\U00011a47\U00011a51-\U00011a5b"
    "\U00011a8a-\U00011a99\U00011c2f-\U00011c36\U00011c38-\U00011c3f\U00011c92-\U00011ca7\U00011ca9-\U00011cb6"
    "\U00011d31-\U00011d36\U00011d3a\U00011d3c\U00011d3d\U00011d3f-\U00011d45\U00011d47\U00011d8a-\U00011d8e"
    "\U00011d90\U00011d91\U00011d93-\U00011d97\U00011ef3-\U00011ef6\U00016af0-\U00016af4\U00016b30-\U00016b36"
    "\U00016f4f\U00016f51-\U00016f87\U00016f8f-\U00016f92\U00016fe4\U00016ff0\U00016ff1\U0001bc9d\U0001bc9e"
    "\U0001cf00-\U0001cf2d\U0001cf30-\U0001cf46\U0001d165-\U0001d169\U0001d16d-\U0001d172\U0001d17b-\U0001d182"
    "\U0001d185-\U0001d18b\U0001d1aa-\U0001d1ad\U0001d242-\U0001d244\U0001da00-\U0001da36\U0001da3b-\U0001da6c"
    "\U0001da75\U0001da84\U0001da9b-\U0001da9f\U0001daa1-\U0001daaf\U0001e000-\U0001e006\U0001e008-\U0001e018"
    "\U0001e01b-\U0001e021\U0001e023\U0001e024\U0001e026-\U0001e02a\U0001e130-\U0001e136\U0001e2ae"
    "\U0001e2ec-\U0001e2ef\U0001e8d0-\U0001e8d6\U0001e944-\U0001e94a"
)
_SPACELESS = (
    "\u0e01-\u0e3a\u0e40-\u0e4e\u0e81\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0ebd\u0ec0-\u0ec4\u0ec6"
    "\u0ec8-\u0ecd\u0edc-\u0edf\u1000-\u103f\u1050-\u108f\u109a-\u109d\u1780-\u17d3\u17d7\u17dc\u17dd\u1950-\u196d"
    "\u1970-\u1974\u1980-\u19ab\u19b0-\u19c9\u1a20-\u1a5e\u1a60-\u1a7c\u1a7f\u1aa7\u1b00-\u1b4c\u1b6b-\u1b73"
    "\ua980-\ua9c0\ua9cf\ua9e0-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a-\uaac2\uaadb-\uaadd\U00011700-\U0001171a"
    "\U0001171d-\U0001172b\U00011740-\U00011746"
)
EMOJI_SOURCE = "regex 2026.11.19"  # of the two emoji classes below (bench/unicode_classes.py)
_EMOJI_BMP = (
    "\u203c\u2049\u2139\u2194-\u2199\u21a9\u21aa\u231a\u231b\u2328\u23cf\u23e9-\u23f3\u23f8-\u23fa\u24c2\u25aa\u25ab"
    "\u25b6\u25c0\u25fb-\u25fe\u2600-\u2604\u260e\u2611\u2614\u2615\u2618\u261d\u2620\u2622\u2623\u2626\u262a"
    "\u262e\u262f\u2638-\u263a\u2640\u2642\u2648-\u2653\u265f\u2660\u2663\u2665\u2666\u2668\u267b\u267e\u267f"
    "\u2692-\u2697\u2699\u269b\u269c\u26a0\u26a1\u26a7\u26aa\u26ab\u26b0\u26b1\u26bd\u26be\u26c4\u26c5\u26c8"
    "\u26ce\u26cf\u26d1\u26d3\u26d4\u26e9\u26ea\u26f0-\u26f5\u26f7-\u26fa\u26fd\u2702\u2705\u2708-\u270d\u270f\u2712"
    "\u2714\u2716\u271d\u2721\u2728\u2733\u2734\u2744\u2747\u274c\u274e\u2753-\u2755\u2757\u2763\u2764\u2795-\u2797"
    "\u27a1\u27b0\u27bf\u2934\u2935\u2b05-\u2b07\u2b1b\u2b1c\u2b50\u2b55\u3297\u3299"
)
_EMOJI_ASTRAL = (
    "\U0001f004\U0001f0cf\U0001f170\U0001f171\U0001f17e\U0001f17f\U0001f18e\U0001f191-\U0001f19a\U0001f201\U0001f202"
    "\U0001f21a\U0001f22f\U0001f232-\U0001f23a\U0001f250\U0001f251\U0001f300-\U0001f321\U0001f324-\U0001f393"
    "\U0001f396\U0001f397\U0001f399-\U0001f39b\U0001f39e-\U0001f3f0\U0001f3f3-\U0001f3f5\U0001f3f7-\U0001f4fd"
    "\U0001f4ff-\U0001f53d\U0001f549-\U0001f54e\U0001f550-\U0001f567\U0001f56f\U0001f570\U0001f573-\U0001f57a"
    "\U0001f587\U0001f58a-\U0001f58d\U0001f590\U0001f595\U0001f596\U0001f5a4\U0001f5a5\U0001f5a8\U0001f5b1\U0001f5b2"
    "\U0001f5bc\U0001f5c2-\U0001f5c4\U0001f5d1-\U0001f5d3\U0001f5dc-\U0001f5de\U0001f5e1\U0001f5e3\U0001f5e8"
    "\U0001f5ef\U0001f5f3\U0001f5fa-\U0001f64f\U0001f680-\U0001f6c5\U0001f6cb-\U0001f6d2\U0001f6d5-\U0001f6d9"
    "\U0001f6dc-\U0001f6e5\U0001f6e9\U0001f6eb\U0001f6ec\U0001f6f0\U0001f6f3-\U0001f6fc\U0001f7e0-\U0001f7eb"
    "\U0001f7f0\U0001f90c-\U0001f93a\U0001f93c-\U0001f945\U0001f947-\U0001f9ff\U0001fa70-\U0001fa7c"
    "\U0001fa80-\U0001fac6\U0001fac8\U0001facc-\U0001fadd\U0001fadf-\U0001faeb\U0001faef-\U0001fafa"
)
_MARKS = _MARKS_BMP + _MARKS_ASTRAL
# An emoji sequence (UTS #51), one token as Lucene's StandardTokenizer and ICU's make it: an emoji character — or
# © ® 〰 〽 that a variation selector U+FE0F asks to show as one — with its variation selectors, skin tone (a
# Fitzpatrick modifier) and the tag characters of a subdivision flag (Scotland's); a keycap (a digit, "#" or "*", U+FE0F,
# U+20E3: "1️⃣"); a flag (two regional indicators: "🇯🇵"); and any of these joined by zero-width joiners ("👩‍❤️‍👨").
# Its token is the sequence without its variation selectors, which only choose a glyph, text or emoji, and without
# its skin tones (_PRESENTATION): "❤" and "❤️" are one token, "👍" and "👍🏽" another, "🧑🏽‍💼" is "🧑‍💼". No other
# step touches it (no stemming; case folding and NFKC leave emoji as they are).
_EMOJI_ELEMENT = (
    "(?:[\U0001f1e6-\U0001f1ff]{2}|[#*0-9]\ufe0f?\u20e3"
    f"|(?:[{_EMOJI_BMP}{_EMOJI_ASTRAL}]|[\u00a9\u00ae\u3030\u303d]\ufe0f)"
    "[\ufe0e\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]*)"
)
_EMOJI_SEQUENCE = f"{_EMOJI_ELEMENT}(?:\u200d{_EMOJI_ELEMENT})*"
# A character that starts every emoji sequence but a keycap, or ends a keycap (_EMOJI_ASTRAL lies in U+1F000–U+1FAFF,
# so one astral range): a text without one holds no emoji; in one that does, sequences are looked for only where
# there is one (:func:`_emoji_matches`). re tests a class's astral ranges one by one (see _WORD): finditer of the
# sequences themselves made a LongMemEval text that holds an emoji ~3.5x as slow to analyse, this ~1.2x.
_EMOJI_HINT = f"[{_EMOJI_BMP}\u00a9\u00ae\u3030\u303d\u20e3\U0001f000-\U0001faff]"
_KEYCAP_BASE = frozenset("#*0123456789")
# str.translate table: what an emoji's token leaves out, the variation selectors and the five skin tones (Fitzpatrick
# modifiers, U+1F3FB–U+1F3FF). Both only choose how the emoji looks: a thumbs-up is one word in any colour, as a word
# is one in any case, so "👍" finds "👍🏽" and a planner's query in the default yellow finds the user's own tone.
_PRESENTATION = dict.fromkeys((0xFE0E, 0xFE0F, *range(0x1F3FB, 0x1F400)))
# A word is a run of letters, marks and digits: ``\w`` (letters, digits, ``_``) plus the marks, once every ``_`` has
# been replaced by a space (one character class: faster than the alternation ``(?:[^\W_]|[marks])+``, same words),
# and the zero-width joiner, which only shapes a conjunct (Sinhala "ශ්‍රී") and is then dropped from the word.
# _WORD takes every character beyond the BMP (emoji, astral letters and marks) as one range: re tests a class's
# astral ranges one by one for each character that is not a word character (the 126 of the marks made step 2 ~2.5x
# slower on punctuation); a run that holds one is split again by _EXACT_WORD (_uncommon_tokens), which gives the
# same words.
_ZWJ = "\u200d"
# Step 0: the invisible characters dropped from a text (:func:`visible`); a ZWNJ after a letter or mark of the Arabic
# script (its blocks and presentation forms, as the raw text holds them) is kept.
_DROPPED = re.compile(
    "[\u00ad\u200b\u2060\ufeff]|(?<![\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufefc])\u200c"
)
_WORD = re.compile(f"[\\w{_MARKS_BMP}{_ZWJ}\U00010000-\U0010ffff]+")
_EXACT_WORD = f"[\\w{_MARKS}{_ZWJ}]+"
# A grapheme cluster of a spaceless script: a character and the marks after it, and the consonant that a Myanmar
# virama, Khmer coeng or Tai Tham sakot stacks below it. (Thai and Lao "am", U+0E33 and U+0EB3, a mark in Unicode's
# clusters, are no longer there: NFKC made them a mark and a vowel letter.) A Javanese pangkon or Balinese adeg adeg
# stays with the consonant it kills, as in Unicode's clusters, though the consonant after it is written below (a
# pasangan): a word's last consonant takes it, so the word "ꦩꦔꦤ꧀" (mangan, eat) keeps its clusters in "ꦲꦏꦸꦩꦔꦤ꧀ꦱꦼꦒ".
_CLUSTER = f".[{_MARKS}]*(?:(?<=[\u1039\u17d2\u1a60]).[{_MARKS}]*)*"
_UNCOMMON = re.compile(f"[{_SPACELESS}\U00010000-\U0010ffff]")  # where a word needs more than the common steps


# The large classes, compiled when a first word needs them (at import they would cost every cold process that reads
# only ASCII, an English query's; the spaceless scripts' ~3 ms only a process that reads them).
@lru_cache(maxsize=1)
def _exact_words() -> re.Pattern[str]:
    return re.compile(_EXACT_WORD)


@lru_cache(maxsize=1)
def _emoji_hint() -> re.Pattern[str]:
    return re.compile(_EMOJI_HINT)


@lru_cache(maxsize=1)
def _emoji_sequences() -> re.Pattern[str]:
    return re.compile(f"({_EMOJI_SEQUENCE})")  # one group: split() keeps the sequences


@lru_cache(maxsize=1)
def _cjk_runs() -> re.Pattern[str]:
    return re.compile(f"([{_CJK_CLASS}]+)")


@lru_cache(maxsize=1)
def _spaceless_letter() -> re.Pattern[str]:
    return re.compile(f"[{_SPACELESS}]")


@lru_cache(maxsize=1)
def _spaceless_runs() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Runs of a spaceless script's letters and the marks after them; grapheme clusters."""
    return re.compile(f"([{_SPACELESS}][{_SPACELESS}{_MARKS}]*)"), re.compile(_CLUSTER)


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
    """A non-CJK word: stop-word removal and stemming when Latin-script (step 4), stemming when wholly of a script
    with a stemmer (step 5), else kept as is."""
    if _LATIN.fullmatch(piece):
        _latin(piece, _stem, out)
    elif (script := _STEMMED_SCRIPTS.fullmatch(piece)) is not None:
        out.append(script_stem(script.lastgroup or "", piece))
    else:
        out.append(piece)


def _latin(word: str, stem: Callable[[str], str], out: list[str]) -> None:
    """Step 4 on a Latin-script word: its stem unless a stop-word, and for a word with accents the stem of the word
    without them too ("phở" gives "phở" and "pho"), so a query typed without accents finds it, and one typed with
    them prefers it."""
    if word in STOPWORDS_EN:
        own = None
    else:
        own = script_stem("turkish", word) if _TURKISH_LETTERS.search(word) else stem(word)
    if own is not None:
        out.append(own)
    if not word.isascii():
        bare = unaccented(word)
        if bare and bare != word and bare not in STOPWORDS_EN and (bare_stem := stem(bare)) != own:
            out.append(bare_stem)


# Letters that only Turkish (and Azerbaijani) writes among the Latin alphabets: a word holding one is Turkish to the
# stemmer ("kirasını" is "kira", "biletlerini" is "bilet"); its accent-free twin is stemmed as English words are
_TURKISH_LETTERS = re.compile("[ığş]")


# Latin letters that carry their mark in their shape (no decomposition takes it off), as ASCII folding reads them
_UNMARKED = str.maketrans(
    {
        "đ": "d",
        "ð": "d",
        "ł": "l",
        "ø": "o",
        "ħ": "h",
        "ı": "i",
        "ŧ": "t",
        "ƀ": "b",
        "ɨ": "i",
        "ʉ": "u",
        "æ": "ae",
        "œ": "oe",
        "þ": "th",
        "ĳ": "ij",
        "ŀ": "l",
    }
)


def unaccented(word: str) -> str:
    """A Latin-script word without its accents: its combining marks taken off after canonical decomposition, and
    the letters of :data:`_UNMARKED` read as the ASCII letters they carry ("Đà Nẵng" → "Da Nang", "łódź" → "lodz")."""
    stripped = "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))
    return stripped.translate(_UNMARKED)


def _plain_word(piece: str, out: list[str]) -> None:
    """plain_tokenize's step 4: a Latin-script word loses stop-words and is stemmed; any other word is kept."""
    if _LATIN.fullmatch(piece):
        if piece not in STOPWORDS_EN:
            out.append(_stem(piece))
    else:
        out.append(piece)


# Step 5: a word wholly of one of these scripts (its letters and marks) → the Snowball stemmer named by its group.
_STEMMED_SCRIPTS = re.compile(
    "(?P<russian>[\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f\u0300-\u036f]+)"  # Cyrillic
    "|(?P<greek>[\u0370-\u03ff\u1f00-\u1fff\u0300-\u036f]+)"
    "|(?P<arabic>[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff]+)"
    "|(?P<hindi>[\u0900-\u097f]+)"  # Devanagari
    "|(?P<tamil>[\u0b80-\u0bff]+)"
    "|(?P<armenian>[\u0530-\u058f]+)"
)


def script_stem(language: str, word: str) -> str:
    """``word``'s stem by the ``language`` stemmer, or, where the stemmer leaves nothing, the word without its accents
    (as the stemmer reads it): Snowball's Greek stemmer takes all of "όταν" (when) or "ίδια" (same) away, and an empty
    token would be no word at all — the index drops it and a check of the index reads it as damage."""
    return _script_stemmer(language).stemWord(word) or unaccented(word)


@cache
def _script_stemmer(language: str) -> Any:  # a Stemmer.Stemmer
    import Stemmer

    stemmer = Stemmer.Stemmer(language)
    stemmer.maxCacheSize = 0  # words are remembered by _WORD_CACHE
    return stemmer


def _cjk(run: str, out: list[str]) -> None:
    """Step 3 on a run of CJK characters: its bigrams, then the value of each Chinese numeral in it that counts
    something (before a unit: 十二月 → "12", 两千块 → "2000"), as the digits of "12月" or "2000块" are a token."""
    _bigrams(run, out)
    if _NUMERAL_CHARS.isdisjoint(run):
        return
    for match in _counted_numerals().finditer(run):
        if (value := chinese_number(match.group(1))) is not None:
            out.append(str(value))


_NUMERAL_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_NUMERAL_UNITS = {"十": 10, "百": 100, "千": 1_000, "万": 10_000, "亿": 100_000_000}
_NUMERAL_CHARS = frozenset(_NUMERAL_DIGITS) | frozenset(_NUMERAL_UNITS)
MAX_NUMERAL_CHARS = 24  # a longer run of numeral characters is read as no number
# what a numeral counts when it stands before one of these: a date or time, an age, money, a number of things
_COUNTERS = "月日号点时分秒岁年块元个次天周楼层人本张件"


@lru_cache(maxsize=1)
def _counted_numerals() -> re.Pattern[str]:
    return re.compile(f"([{''.join(_NUMERAL_CHARS)}]+)(?=[{_COUNTERS}])")


def chinese_number(numeral: str) -> int | None:
    """The value of a Chinese numeral: 十二 12, 二十五 25, 一百零五 105, 两千 2000, 三万五千 35000, or read digit by digit
    when it has no unit (三零五 305, 二〇二四 2024); None where two digits stand together among units (二三十: twenty
    or thirty) and for a run longer than any number a message counts (past Python's limit on an int's digits, a text
    of 5,000 一 before 个 made its Add fail)."""
    if len(numeral) > MAX_NUMERAL_CHARS:
        return None
    if not any(c in _NUMERAL_UNITS for c in numeral):
        return int("".join(str(_NUMERAL_DIGITS[c]) for c in numeral))
    total, section, digit = 0, 0, None
    for c in numeral:
        if c in _NUMERAL_DIGITS:
            if digit is not None and _NUMERAL_DIGITS[c] != 0:
                return None  # two digits in a row inside a numeral with units: no numeral
            digit = _NUMERAL_DIGITS[c] or None
            continue
        unit = _NUMERAL_UNITS[c]
        if unit >= 10_000:
            section = (section + (digit or 0)) * unit if (section or digit) else unit
            total += section
            section = 0
        else:
            section += (1 if digit is None else digit) * unit
        digit = None
    return total + section + (digit or 0)


def _bigrams(run: Sequence[str], out: list[str]) -> None:
    """Overlapping bigrams of a run's units (characters, or grapheme clusters); a lone unit is a unigram."""
    if len(run) == 1:
        out.append(run[0])
    else:
        out.extend(map(str.__add__, run[:-1], run[1:]))


_I_DOT = "i\u0307"  # what case folding makes of Turkish "İ": an "i" and a combining dot above


def _normalise(text: str) -> str:
    """Step 1. ASCII text is only lowercased: NFKC, case folding and the character folds do nothing more to it."""
    if text.isascii():
        return text.lower()
    return fold_characters(_case_folded(text))


def _case_folded(text: str) -> str:
    """Step 1 without its character folds (what analyzers before 7, and plain_tokenize, read)."""
    folded = fold(unicodedata.normalize("NFKC", text))
    # Folding can leave a sequence NFKC composes ("ΐ" folds to ι + two marks): normalised again, "ΠΡΩΤΕΪ́ΝΗ" and
    # "πρωτεΐνη" give one token. The check costs ~0.2 µs; the second pass runs for those few letters only.
    return folded if unicodedata.is_normalized("NFKC", folded) else unicodedata.normalize("NFKC", folded)


def normalise(text: str) -> str:
    """Steps 0 and 1 (invisible characters, NFKC and case folding): what another reader of a text's words
    (kinds.category_words, the query-time variants) applies first, so that it reads the words the analyzer reads."""
    return _normalise(text if text.isascii() else visible(text))


def fold(text: str) -> str:
    """Step 1's case folding alone (no NFKC): what a word matched against a fixed list of lower-case words (month
    names, say) is folded with, so it matches whatever case the analyzer would match it in."""
    return text.lower() if text.isascii() else text.casefold().replace(_I_DOT, "i")


def _words(text: str) -> list[str]:
    """Step 2 on a normalised text."""
    return _WORD.findall(text.replace("_", " "))


def _spaceless(piece: str, out: list[str]) -> None:
    """A non-CJK piece of a word that holds letters of a spaceless script: its runs of them become bigrams of
    grapheme clusters; what lies between is a Latin or other word."""
    runs, cluster = _spaceless_runs()
    for i, part in enumerate(runs.split(piece)):
        if not part:
            continue
        if i % 2:
            _bigrams(cluster.findall(part), out)
        else:
            _latin_or_other(part, out)


def _word_tokens(word: str) -> tuple[str, ...]:
    """All tokens of one run of :data:`_WORD` in a normalised text (steps 3–5)."""
    if word.isascii():
        return () if word in STOPWORDS_EN else (_stem(word),)
    if _ZWJ in word:
        word = word.replace(_ZWJ, "")
    if _UNCOMMON.search(word):
        return _uncommon_tokens(word)
    out: list[str] = []
    for i, piece in enumerate(_cjk_runs().split(word)):
        if not piece:
            continue
        if i % 2:  # the capturing group: a CJK run
            _cjk(piece, out)
        else:
            _latin_or_other(piece, out)
    return tuple(out)


def units(token: str) -> list[str] | None:
    """The units a bigram token is made of — CJK characters, or grapheme clusters of a spaceless script — when
    ``token`` is one or two of them (a unigram or a bigram of :func:`_bigrams`); None for any other token."""
    if not token or token.isascii() or len(token) > 16:
        return None
    if _cjk_runs().fullmatch(token):
        return list(token) if len(token) <= 2 else None
    if _spaceless_letter().match(token):
        found = _spaceless_runs()[1].findall(token)
        if 1 <= len(found) <= 2 and "".join(found) == token and all(_spaceless_letter().match(u) for u in found):
            return found
    return None


def _uncommon_tokens(word: str) -> tuple[str, ...]:
    """:func:`_word_tokens` of a run that holds an astral character or a letter of a spaceless script."""
    if max(word) > "\uffff":  # _WORD's run holds an astral character: its words (an emoji is none, nor part of one)
        words = _exact_words().findall(word)
        if words != [word]:
            return tuple(token for w in words for token in _word_tokens(w))
    out: list[str] = []
    for i, piece in enumerate(_cjk_runs().split(word)):
        if not piece:
            continue
        if i % 2:
            _cjk(piece, out)
        elif _spaceless_letter().search(piece):
            _spaceless(piece, out)
        else:
            _latin_or_other(piece, out)
    return tuple(out)


def visible(text: str) -> str:
    """Step 0: ``text`` without the invisible characters that only say where a line may break or must not (see the
    module docstring); most texts hold none, which five substring searches tell (a character class's ``re.search``
    read a long reply 20× slower)."""
    if "\u00ad" in text or "\u200b" in text or "\u200c" in text or "\u2060" in text or "\ufeff" in text:
        return _DROPPED.sub("", text)
    return text


def analyze(text: str) -> list[str]:
    """The tokens of ``text``, as indexed and as queried (see the module docstring)."""
    if not text.isascii():
        text = visible(text)  # (what remains may be ASCII: "key\u200bboard" is analysed as "keyboard" is)
    if text.isascii():
        raw = text.encode("ascii")
        raw += _camel_parts(raw) + _grouped_numbers(raw)
        return list(filter(None, map(_ASCII_CACHE.__getitem__, raw.translate(_ASCII_TABLE).split())))
    out: list[str] = []
    normalised = _normalise(text)
    if _emoji_hint().search(normalised) is None:
        _analyze_words(normalised, out)
    else:
        at = 0
        for match in _emoji_matches(normalised):  # step 2's emoji, each a token where it stands
            _analyze_words(normalised[at : match.start()], out)
            if token := match.group().translate(_PRESENTATION):  # a skin tone alone ("🏽") is no word
                _emoji(token, out)
            at = match.end()
        _analyze_words(normalised[at:], out)
    if parts := _camel_parts(text.encode("utf-8", "surrogatepass")):
        out.extend(filter(None, map(_ASCII_CACHE.__getitem__, parts.split())))
    if _GROUPED_HINT.search(normalised):  # (a pattern that starts with a character scans fast; step 7's does not)
        out.extend(grouped_numbers(normalised))
    return out


# Step 6: a word whose letters change case inside it — camelCase, PascalCase, an acronym before a word — also gives
# the tokens of its parts, after the text's other tokens ("getUserProfile" gives getuserprofil, get, user, profil; so
# "user profile" or "get_user_profile" finds it, and "parseJSONResponse" is found by "parse json response"). Told
# from the bytes of the text before case folding: each byte read as its class, "a" a lower-case letter or digit, "A"
# a capital, then a substring search for "aA" or "AAa" — a tenth of a µs for a chat message, where a regular
# expression took as long as the whole analysis (3.7 µs).
_CASE_CLASSES = bytes(
    ord("a") if 97 <= c <= 122 else ord("A") if 65 <= c <= 90 else ord("0") if 48 <= c <= 57 else 32 for c in range(256)
)  # (a digit is a class of its own: "5K" or "2D" is no camel)
# a part: an acronym's plural ("RPGs", one part), an acronym before a word ("JSON" of "JSONResponse"), a word, capitals,
# digits
_CAMEL_PART = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _has_camel(raw: bytes) -> bool:
    """Whether some ASCII word of the text (its UTF-8 bytes) changes case inside it as step 6 reads it."""
    return _camel_classes(raw.translate(_CASE_CLASSES))


def _camel_classes(classes: bytes) -> bool:
    """:func:`_has_camel` of a text's case classes. Most texts have capitals only where words start, which two counts
    tell (a needle whose bytes the text's letters are not is skipped through in strides); only the others are searched
    for "aA" or "AAa" (a byte at a time)."""
    capitals = classes.count(b"A")
    if capitals == classes.count(b" A") + classes.count(b"0A") + classes.startswith(b"A"):
        return False
    return b"aA" in classes or b"AAa" in classes


def _camel_parts(raw: bytes) -> bytes:
    """Step 6: the parts of each ASCII word of a text (its UTF-8 bytes) that changes case inside it, lower-cased, each
    after a space, in the text's order — words for the ASCII path to read after the text's own. The words are found
    from the case classes' hits, not by a scan of every word (a reply of 2,000 characters of code held hundreds), at
    most :data:`MAX_CAMEL_WORDS` of them (the first); a word joined to a letter of another alphabet ("ÉcoleNormale",
    "MüllerStraße") is no ASCII word and gives none. Empty (at the cost of one translate) for a text without one."""
    classes = raw.translate(_CASE_CLASSES)
    if not _camel_classes(classes):
        return b""
    spans: set[tuple[int, int]] = set()
    for needle in (b"aA", b"AAa"):
        at, found = classes.find(needle), 0
        while at >= 0 and found < MAX_CAMEL_WORDS:
            end = classes.find(b" ", at)
            end = len(classes) if end < 0 else end
            spans.add((classes.rfind(b" ", 0, at) + 1, end))
            found += 1
            at = classes.find(needle, end)
    out = []
    for start, end in sorted(spans)[:MAX_CAMEL_WORDS]:
        if _joined_to_a_letter(raw, start, end):
            continue
        parts = _CAMEL_PART.findall(raw[start:end].decode("ascii"))
        if len(parts) >= 2:  # ("RPGs": one acronym, already the word's own token)
            out.append(" ".join(parts).lower().encode("ascii"))
    return b" " + b" ".join(out) if out else b""


MAX_CAMEL_WORDS = 1_000  # a text's words whose parts are read: 1 MiB of "aB " words took 1.1 s, and an Add's write lock


# Step 7: a number in groups of three digits, all its separators commas, all points or all spaces (NFKC reads a
# no-break space as one), or in India's groups of two before the last three (12,50,000); neither a digit nor a digit
# and a separator before it, nor another separated digit after it ("1,450.00" is 1,450 and its cents; "1,45",
# "3.30pm" or "2023 100" no grouped number).
_GROUPED = (
    r"(?<![0-9])(?<![0-9][,. ])[0-9]{1,3}(?:(?:,[0-9]{3})+(?![0-9]|,[0-9])|(?:\.[0-9]{3})+(?![0-9]|\.[0-9])"
    r"|(?: [0-9]{3})+(?![0-9]| [0-9])|(?:,[0-9]{2})+,[0-9]{3}(?![0-9]|,[0-9]))"
)
_GROUPED_TEXT = re.compile(_GROUPED, re.ASCII)
_GROUPED_HINT = re.compile("[0-9][,. ][0-9]{2}")
_GROUPED_BYTES = re.compile(_GROUPED.encode("ascii"))
_SEPARATORS = str.maketrans("", "", ",. ")
_NUMBER_CLASSES = bytes(
    48 if 48 <= c <= 57 else 44 if c in (32, 44, 46) else 120 for c in range(256)
)  # digit, separator


def _grouped_numbers(raw: bytes) -> bytes:
    """Step 7 on an ASCII text's bytes: each grouped number's digits, each after a space (words for the ASCII path to
    read after the text's own); empty for a text without one, which one translate and a substring search tell."""
    if b"0,0" not in raw.translate(_NUMBER_CLASSES):
        return b""
    return b"".join(b" " + m.translate(None, b",. ") for m in _GROUPED_BYTES.findall(raw))


def grouped_numbers(text: str) -> list[str]:
    """Step 7 on a normalised text: the digits of each number written in groups, in order."""
    return [m.translate(_SEPARATORS) for m in _GROUPED_TEXT.findall(text)]


def _joined_to_a_letter(raw: bytes, start: int, end: int) -> bool:
    """Whether the ASCII run ``raw[start:end]`` is part of a word with a letter of an alphabet beyond ASCII (Latin,
    Greek, Cyrillic … below U+2E80) just before or after it; a CJK character, a space or punctuation ends a word."""
    if (start == 0 or raw[start - 1] < 0x80) and (end == len(raw) or raw[end] < 0x80):
        return False  # ASCII on both sides (a separator: the run ends there)
    # a character is at most 4 bytes: the last one before the run and the first after, whole ("ignore" drops the
    # pieces of the characters beyond them)
    near = (
        raw[max(0, start - 4) : start].decode("utf-8", "ignore")[-1:] + raw[end : end + 4].decode("utf-8", "ignore")[:1]
    )
    return any(_alphabet_letter(c) for c in near)


def _alphabet_letter(char: str) -> bool:
    return char.isalpha() and ord(char) < 0x2E80


def _emoji(token: str, out: list[str]) -> None:
    """An emoji's token, and for a zero-width-joiner sequence also its first emoji's ("🏃‍♂" gives "🏃‍♂" and "🏃",
    "👩‍💻" gives "👩": a question asking for the runner finds the man running), as a word with accents gives the word
    without them."""
    out.append(token)
    if _ZWJ in token and (first := token.split(_ZWJ, 1)[0]) and first != token:
        out.append(first)


def _emoji_matches(text: str) -> Iterator[re.Match[str]]:
    """``_emoji_sequences().finditer(text)``, but tried only where :func:`_emoji_hint` finds a character: a sequence
    starts at one, or, a keycap, one or two characters before its U+20E3 (its base, perhaps a U+FE0F)."""
    sequence, hints = _emoji_sequences(), _emoji_hint()
    at = 0
    while (hint := hints.search(text, at)) is not None:
        start = hint.start()
        if text[start] == "\u20e3":  # the end of a keycap: its base is the character before, or the one before that
            back = start - 2 if start - 2 >= at and text[start - 1] == "\ufe0f" else start - 1
            start = back if back >= at and text[back] in _KEYCAP_BASE else start
        match = sequence.match(text, start)
        if match is None:
            at = hint.end()
            continue
        yield match
        at = match.end()


def _analyze_words(normalised: str, out: list[str]) -> None:
    """Steps 2–5 on a normalised text that holds no emoji: its words' tokens added to ``out``."""
    cached = _WORD_CACHE.get
    for word in _words(normalised):
        tokens = cached(word)
        if tokens is None:
            tokens = _word_tokens(word)
            if len(word) <= _WORD_CACHE_MAX_LEN:
                if len(_WORD_CACHE) > _CACHE_MAX:
                    _WORD_CACHE.clear()
                _WORD_CACHE[word] = tokens
        out.extend(tokens)


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
            raw = text.encode("ascii")
            run.append(raw + _camel_parts(raw) + _grouped_numbers(raw))
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
    raw = joined.encode("ascii")
    if _has_camel(raw) or b"0,0" in raw.translate(_NUMBER_CLASSES):  # steps 6 and 7 after a text's words, as analyze
        parts = (t.encode("ascii") for t in texts)
        raw = b" \x00 ".join(r + _camel_parts(r) + _grouped_numbers(r) for r in parts)
    words = raw.translate(_ASCII_SEPARATED).split()
    words.append(_ASCII_DOC_END)
    return words


ascii_stems: Mapping[bytes, str] = _ASCII_CACHE  # ASCII word → stem, "" for a stop-word (computed on a miss)


@lru_cache(maxsize=1)
def _reference_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """reference_analyze's patterns: step 2 as first written; step 3's pieces (a CJK run, a spaceless run, or what lies
    between them); grapheme clusters."""
    return (
        re.compile(f"(?:[^\\W_]|[{_MARKS}{_ZWJ}])+"),
        re.compile(f"([{_CJK_CLASS}]+)|([{_SPACELESS}][{_SPACELESS}{_MARKS}]*)|((?:(?![{_CJK_CLASS}{_SPACELESS}]).)+)"),
        re.compile(_CLUSTER),
    )


def reference_analyze(text: str, *, stem: Callable[[str], str] | None = None) -> list[str]:
    """:func:`analyze` without its caches and fast paths: the steps of the module docstring, one by one. Slow; tests
    and ``bench/analyzer.py`` check that :func:`analyze` returns exactly this. ``stem`` replaces the Snowball call
    (the benchmark passes the stem cache to time the analyzer as it was before its fast paths)."""
    stem = stem or _stemmer().stemWord
    out: list[str] = []
    text = re.sub("[\u00ad\u200b\u2060\ufeff]", "", text)  # step 0
    text = "".join(c for i, c in enumerate(text) if c != "\u200c" or (i and _arabic_script(text[i - 1])))
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold().replace("i\u0307", "i"))
    folded = folded.translate(character_folds())
    words, pieces, cluster = _reference_patterns()
    for i, part in enumerate(_emoji_sequences().split(folded)):  # a capturing split: odd parts are emoji
        if i % 2:
            if token := part.translate(_PRESENTATION):
                _emoji(token, out)
            continue
        _reference_words(words.findall(part), pieces, cluster, stem, out)
    camel = [m for m in re.finditer(r"[A-Za-z0-9]+", text) if re.search(r"[a-z][A-Z]|[A-Z][A-Z][a-z]", m.group())]
    for m in camel[:MAX_CAMEL_WORDS]:  # step 6, by regular expressions
        near = text[m.start() - 1 : m.start()] + text[m.end() : m.end() + 1]
        parts = _CAMEL_PART.findall(m.group())
        if len(parts) >= 2 and not any(_alphabet_letter(c) for c in near):
            out.extend(stem(w) for w in map(str.lower, parts) if w not in STOPWORDS_EN)
    out.extend(grouped_numbers(folded))  # step 7
    return out


def _arabic_script(char: str) -> bool:
    """Whether ``char`` is of the Arabic script's blocks or presentation forms (reference_analyze's step 0)."""
    return any(low <= char <= high for low, high in _ARABIC_BLOCKS)


_ARABIC_BLOCKS = (
    ("\u0600", "\u06ff"),
    ("\u0750", "\u077f"),
    ("\u08a0", "\u08ff"),
    ("\ufb50", "\ufdff"),
    ("\ufe70", "\ufefc"),
)


def _reference_words(
    found: list[str], pieces: re.Pattern[str], cluster: re.Pattern[str], stem: Callable[[str], str], out: list[str]
) -> None:
    """:func:`reference_analyze`'s steps 3–5 on the words of a text without emoji."""
    for word in found:
        for match in pieces.finditer(word.replace(_ZWJ, "")):
            cjk, spaceless, piece = match.groups()
            if cjk:
                _cjk(cjk, out)
            elif spaceless:
                _bigrams(cluster.findall(spaceless), out)
            elif _LATIN.fullmatch(piece):
                _latin(piece, stem, out)
            elif script := _STEMMED_SCRIPTS.fullmatch(piece):
                out.append(script_stem(script.lastgroup or "", piece))
            else:
                out.append(piece)


def plain_tokenize(text: str) -> list[str]:
    """The English-only baseline: words split on whitespace/punctuation, stop-words, stemming; no CJK bigrams."""
    out: list[str] = []
    normalised = text.lower() if text.isascii() else _case_folded(text)
    for word in _exact_words().findall(normalised.replace("_", " ")):
        if _ZWJ in word:
            word = word.replace(_ZWJ, "")
        if word:
            _plain_word(word, out)
    return out
