"""Every script is searchable: combining marks stay inside words, the scripts written without spaces between words
are bigrams of grapheme clusters (as CJK is of characters), and each emoji sequence is a token."""

from __future__ import annotations

import importlib.util
import sys
import unicodedata

import pytest
from conftest import ROOT

from refind_cli import tokenize
from refind_cli.tokenize import analyze, plain_tokenize

_spec = importlib.util.spec_from_file_location("unicode_classes", ROOT / "bench" / "unicode_classes.py")
assert _spec is not None and _spec.loader is not None
unicode_classes = importlib.util.module_from_spec(_spec)  # the script that writes the classes out
_spec.loader.exec_module(unicode_classes)


def _class_points(body: str) -> set[int]:
    """The code points of a character class body as tokenize writes it ("\\u0300-\\u036f\\u0483…", decoded)."""
    points: set[int] = set()
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            points.update(range(ord(body[i]), ord(body[i + 2]) + 1))
            i += 3
        else:
            points.add(ord(body[i]))
            i += 1
    return points


@pytest.mark.parametrize(
    ("constant", "test"),
    [("_MARKS", unicode_classes.is_mark), ("_SPACELESS", unicode_classes.is_spaceless)],
)
def test_the_written_out_classes_are_what_unicodedata_says_for_every_code_point(constant, test):
    held = _class_points(getattr(tokenize, constant))
    wanted = {c for c in range(sys.maxunicode + 1) if test(c)}
    if unicodedata.unidata_version == tokenize.UNICODE_VERSION:
        assert held == wanted, f"regenerate with bench/unicode_classes.py: {sorted(held ^ wanted)[:10]}"
    else:  # a newer Python knows more marks: the class stays the one the index was built with, and still true
        assert held <= wanted


def test_the_emoji_class_is_what_the_regex_package_says_for_every_code_point():
    regex = pytest.importorskip("regex")  # (unicodedata has no emoji properties)
    held = _class_points(tokenize._EMOJI_BMP + tokenize._EMOJI_ASTRAL)
    wanted = {c for c in range(sys.maxunicode + 1) if unicode_classes.is_emoji(c)}
    if f"regex {regex.__version__}" == tokenize.EMOJI_SOURCE:
        assert held == wanted, f"regenerate with bench/unicode_classes.py: {sorted(held ^ wanted)[:10]}"
    else:  # another regex may know newer emoji: the class stays the one the index was built with, and still true
        assert held <= wanted
    assert {0x1F382, 0x2764, 0x1F44D, 0x1F3FD, 0x1FAE8} <= held  # 🎂 ❤ 👍, a skin tone, an emoji newer than Python's
    assert not {ord("1"), ord("#"), 0xA9, 0x2122, 0x1F1EF} & held  # keycap bases, ©, ™, a regional indicator
    assert all(0x1F000 <= c <= 0x1FAFF for c in _class_points(tokenize._EMOJI_ASTRAL))  # what _EMOJI_HINT assumes


def test_every_combining_mark_but_the_variation_selectors_is_in_the_class():
    marks = _class_points(tokenize._MARKS)
    assert {0x0301, 0x0E49, 0x0EC9, 0x17D2, 0x102F, 0x0F7C, 0x0DCA, 0x1B34, 0xA9B3, 0x20E3} <= marks
    assert not {0xFE0F, 0xE0100} & marks


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        # Thai: "I like eating fried rice" — one token before, so "ข้าวผัด" (fried rice) never matched
        (
            "ฉันชอบกินข้าวผัด",
            ["ฉัน", "นช", "ชอ", "อบ", "บกิ", "กิน", "นข้", "ข้า", "าว", "วผั", "ผัด"],
        ),
        ("ข้าวผัด", ["ข้า", "าว", "วผั", "ผัด"]),
        ("กิ", ["กิ"]),  # a lone cluster (a letter and its vowel mark) is a unigram
        ("น้ำ", ["น\u0e49\u0e4d\u0e32"]),  # NFKC makes "am" (U+0E33) a mark and a letter: two clusters
        # Lao, Khmer (the coeng stacks the next consonant into the cluster), Myanmar (the asat, medials)
        ("ຂ້ອຍມັກກິນເຂົ້າ", ["ຂ້ອ", "ອຍ", "ຍມັ", "ມັກ", "ກກິ", "ກິນ", "ນເ", "ເຂົ້", "ຂົ້າ"]),
        ("ខ្ញុំចូលចិត្ត", ["ខ្ញុំចូ", "ចូល", "លចិ", "ចិត្ត"]),
        ("ကျွန်တော်", ["ကျွန်", "န်တော်"]),
        # Javanese "aku mangan sega" (I eat rice) and Balinese "tiang ngajeng nasi" (the same), written without
        # spaces; a pangkon / adeg adeg stays with the consonant it kills, as in Unicode's grapheme clusters
        ("ꦲꦏꦸꦩꦔꦤ꧀ꦱꦼꦒ", ["ꦲꦏꦸ", "ꦏꦸꦩ", "ꦩꦔ", "ꦔꦤ꧀", "ꦤ꧀ꦱꦼ", "ꦱꦼꦒ"]),
        ("ꦩꦔꦤ꧀", ["ꦩꦔ", "ꦔꦤ꧀"]),
        ("ᬢᬶᬬᬂᬗᬚᬾᬂᬦᬲᬶ", ["ᬢᬶᬬᬂ", "ᬬᬂᬗ", "ᬗᬚᬾᬂ", "ᬚᬾᬂᬦ", "ᬦᬲᬶ"]),
        ("ꦲꦏ꧀ꦱꦫ ꧑꧒", ["ꦲꦏ꧀", "ꦏ꧀ꦱ", "ꦱꦫ", "12"]),  # Javanese digits are a number (in ASCII digits)
        # Tibetan splits into syllables at its tsheg (punctuation); Sinhala is spaced: words kept whole
        ("བོད་ཡིག", ["བོད", "ཡིག"]),
        ("මම ලංකාවේ ජීවත් වෙමි", ["මම", "ලංකාවේ", "ජීවත්", "වෙමි"]),
        # Thai digits are a number (in ASCII digits); a spaceless run next to Latin letters and CJK
        ("ปี๒๕๖๖ Bangkok北京ไทย", ["ปี", "2566", "bangkok", "北京", "ไท", "ทย"]),
    ],
)
def test_scripts_without_spaces_are_bigrams_of_grapheme_clusters_and_others_whole_words(text, tokens):
    assert analyze(text) == tokens
    assert tokenize.reference_analyze(text) == tokens


def test_a_query_inside_a_sentence_matches_and_half_a_cluster_does_not():
    sentence = set(analyze("ฉันชอบกินข้าวผัด"))
    assert set(analyze("ข้าวผัด")) <= sentence
    assert not set(analyze("ข")) & sentence  # the bare consonant of "ข้": half a cluster
    assert set(analyze("ចូលចិត្ត")) <= set(analyze("ខ្ញុំចូលចិត្តញ៉ាំបាយ"))
    assert set(analyze("ꦩꦔꦤ꧀")) <= set(analyze("ꦲꦏꦸꦩꦔꦤ꧀ꦱꦼꦒ"))  # Javanese "mangan" (eat) in "aku mangan sega"
    assert set(analyze("ᬦᬲᬶ")) <= set(analyze("ᬢᬶᬬᬂᬗᬚᬾᬂᬦᬲᬶ"))  # Balinese "nasi" (rice)


def test_a_zero_width_joiner_inside_a_word_is_dropped():
    # Sinhala writes "ශ්‍රී" (Sri) with a ZWJ that only shapes the conjunct: with or without it, one word
    assert analyze("ශ්\u200dරී ලංකා") == analyze("ශ්රී ලංකා") == ["ශ්රී", "ලංකා"]
    assert plain_tokenize("ශ්\u200dරී") == ["ශ්රී"]
    assert plain_tokenize("🧑\u200d💼") == []  # the English-only baseline drops emoji


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("when did I send 🎂?", ["send", "🎂"]),
        ("🎉party🎉", ["🎉", "parti", "🎉"]),  # an emoji is a token of its own, even against a word
        ("🎂🎉", ["🎂", "🎉"]),  # two emoji, two tokens
        ("i ❤ tokyo, ☕ at 9", ["❤", "tokyo", "☕", "9"]),  # emoji of the BMP alone in a text
        # U+FE0F (a mark, Mn) after an emoji asks for its colour form: it is part of no word, and left out of the
        # emoji's token, so "❤️" and "❤" (U+FE0E: the text form) are one token
        ("🛍️and ❤️ running ❤ ❤︎", ["🛍", "❤", "run", "❤", "❤"]),
        # a skin tone, as a variation selector, only chooses how the emoji looks: left out of its token (analyzer 6)
        ("👍🏽 👍 👍🏿", ["👍", "👍", "👍"]),
        ("🧑🏽‍💼 👩🏻‍❤️‍👨🏿", ["🧑‍💼", "🧑", "👩‍❤‍👨", "👩"]),
        ("a swatch 🏽 alone", ["swatch", "alon"]),  # a skin tone alone is no word
        ("🇯🇵 🇫🇷", ["🇯🇵", "🇫🇷"]),  # a flag: two regional indicators
        (
            "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
            ["🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"],
        ),
        # zero-width joiner sequences are one token, and their first emoji another (analyzer 7: "🏃" finds
        # "🏃‍♂️"); without the joiners, one token each
        ("🧑\u200d💼 👩\u200d🦱", ["🧑\u200d💼", "🧑", "👩\u200d🦱", "👩"]),
        ("👩\u200d❤️\u200d👨", ["👩\u200d❤\u200d👨", "👩"]),
        ("🏃\u200d♂️ 🏃", ["🏃\u200d♂", "🏃", "🏃"]),
        ("🧑💼", ["🧑", "💼"]),
        # © ® are text unless U+FE0F asks for the emoji; ™ is "tm" by NFKC; a full-width keycap base is a digit
        ("©️ © ®", ["©"]),
        ("１️⃣", ["1⃣"]),
    ],
)
def test_each_emoji_sequence_is_a_token(text, tokens):
    assert analyze(text) == tokens
    assert tokenize.reference_analyze(text) == tokens


def test_a_keycap_is_one_token_and_leaves_no_stray_mark():
    # "1️⃣" is "1", U+FE0F, U+20E3 (an enclosing mark): analyzer 4 gave "1" and a lone "⃣" that every keycap shares
    assert analyze("1️⃣ 2️⃣ #️⃣ *⃣") == ["1⃣", "2⃣", "#⃣", "*⃣"]
    assert not set(analyze("1️⃣ pick")) & set(analyze("2️⃣ pass"))
    assert analyze("1️⃣") == analyze("1⃣")  # with or without the variation selector


def test_symbols_and_punctuation_of_indic_blocks_split_words_as_elsewhere():
    # the hand-kept class took whole blocks: a currency sign or an abbreviation sign was part of a word
    assert analyze("৳500 ฿100 क॰") == ["500", "100", "क"]
