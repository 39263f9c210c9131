"""Every script is searchable: combining marks stay inside words, and the scripts written without spaces between
words are bigrams of grapheme clusters (as CJK is of characters)."""

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
        # Tibetan splits into syllables at its tsheg (punctuation); Sinhala and Javanese are spaced: words kept whole
        ("བོད་ཡིག", ["བོད", "ཡིག"]),
        ("මම ලංකාවේ ජීවත් වෙමි", ["මම", "ලංකාවේ", "ජීවත්", "වෙමි"]),
        ("ꦲꦏ꧀ꦱꦫ ꦗꦮ", ["ꦲꦏ꧀ꦱꦫ", "ꦗꦮ"]),
        # Thai digits are a number; a spaceless run next to Latin letters and CJK
        ("ปี๒๕๖๖ Bangkok北京ไทย", ["ปี", "๒๕๖๖", "bangkok", "北京", "ไท", "ทย"]),
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


def test_a_zero_width_joiner_inside_a_word_is_dropped():
    # Sinhala writes "ශ්‍රී" (Sri) with a ZWJ that only shapes the conjunct: with or without it, one word
    assert analyze("ශ්\u200dරී ලංකා") == analyze("ශ්රී ලංකා") == ["ශ්රී", "ලංකා"]
    assert plain_tokenize("ශ්\u200dරී") == ["ශ්රී"]
    assert analyze("🧑\u200d💼 👩\u200d🦱") == plain_tokenize("🧑\u200d💼") == []  # an emoji sequence: no word


def test_variation_selectors_stay_outside_words_as_emoji_do():
    # U+FE0F (a mark, Mn) after an emoji asks for its colour form: it is no word, nor part of the next one
    assert analyze("🛍️and ❤️ running") == ["run"]
    assert analyze("🎉") == []  # emoji are no words (see BENCHMARKS.md: what searching them would cost)


def test_symbols_and_punctuation_of_indic_blocks_split_words_as_elsewhere():
    # the hand-kept class took whole blocks: a currency sign or an abbreviation sign was part of a word
    assert analyze("৳500 ฿100 क॰") == ["500", "100", "क"]
