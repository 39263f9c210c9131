"""The one tokenizer: English stemming and stop-words, CJK bigrams, other scripts intact."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refind_cli import tokenize
from refind_cli.tokenize import analyze, plain_tokenize


def test_english_words_are_lowercased_stemmed_and_stopped():
    assert analyze("Where did Caroline go HIKING? I don't know!") == ["carolin", "go", "hike", "know"]
    assert analyze("running runs") == ["run", "run"]


def test_snowball_not_porter_step1_only():
    # full Snowball English: derivational suffixes go too ("generously" → "generous", Porter step 1 would keep -ly)
    assert analyze("generously relational") == ["generous", "relat"]


def test_only_stop_words_give_no_tokens():
    assert analyze("what is the, of it?") == []
    assert analyze("   ") == []


def test_han_runs_become_overlapping_bigrams():
    assert analyze("我去北京旅游了") == ["我去", "去北", "北京", "京旅", "旅游", "游了"]


def test_lone_cjk_character_is_a_unigram_and_punctuation_splits_runs():
    assert analyze("我。你好") == ["我", "你好"]


def test_kana_and_hangul_are_bigrammed():
    assert analyze("東京に") == ["东京", "京に"]  # 東 is folded to its Simplified form (analyzer 7)
    assert analyze("서울에서") == ["서울", "울에", "에서"]


def test_mixed_latin_and_han_in_one_word():
    assert analyze("iPhone手机") == ["iphon", "手机", "phone"]  # (and "iPhone"'s parts, after: step 6)


def test_words_of_scripts_with_a_stemmer_are_stemmed_and_others_kept_intact_and_lowercased():
    # Russian, Greek and Hindi Snowball stemmers (analyzer 7): "Москву" (to Moscow) is "Москва", accents go in Greek
    assert analyze("Привет, Мир! Ελληνικά नमस्ते") == ["привет", "мир", "ελλην", "नमस्त"]
    assert analyze("Москву") == analyze("Москва") == analyze("МОСКВЫ") == ["москв"]
    assert analyze("κινητό") == analyze("κινητο") == analyze("ΚΙΝΗΤΟ")
    # a word the Greek stemmer takes wholly away (when, same) stays itself: never an empty token (review of analyzer 7)
    assert analyze("όταν ίδια") == tokenize.reference_analyze("όταν ίδια") == ["οταν", "ιδια"]
    # Georgian and Hebrew have no stemmer: kept whole (Hebrew without its vowel points)
    assert analyze("გამარჯობა שָׁלוֹם") == ["გამარჯობა", "שלום"]


def test_a_latin_word_with_a_letter_only_turkish_writes_is_stemmed_as_turkish():
    # ı ğ ş (analyzer 8): "kira" finds "kirasını" (its rent); the accent-free twin is the English stem, as before
    assert analyze("Ev kirasını ödüyorum") == ["ev", "kira", "kirasini", "ödüyorum", "oduyorum"]
    assert analyze("arkadaşımla") == ["arkadaş", "arkadasimla"] and analyze("kira") == ["kira"]
    assert analyze("çocuk über") == ["çocuk", "cocuk", "über", "uber"]  # ç ö ü are other languages' letters too


def test_case_is_folded_as_search_engines_fold_it():
    # lower() made "İ" an "i" with a combining dot above ("i̇stanbul"), kept "ß" while "SS" became "ss", and kept a
    # word-final "ς" apart from "σ" (a "Σ" before "." lowers to "σ")
    assert analyze("İstanbul") == analyze("istanbul") == analyze("ISTANBUL") == ["istanbul"]
    assert analyze("Straße") == analyze("STRASSE") == analyze("strasse") == analyze("STRAẞE") == ["strass"]
    assert analyze("ΟΔΟΣ.ΑΘΗΝΑ") == analyze("οδος αθηνα") == analyze("οδοσ Αθηνα") == ["οδ", "αθην"]  # stemmed
    # folding "ΐ" leaves ι + two combining marks, which NFKC composes again: one token for both cases
    assert analyze("ΠΡΩΤΕΪ́ΝΗ") == analyze("πρωτεΐνη") == ["πρωτεην"]


def test_a_latin_word_with_accents_also_gives_its_token_without_them():
    # "cafe" finds "café" and "café" prefers it (two tokens match); a word without accents gives one token
    assert analyze("café") == ["café", "cafe"] and analyze("cafe") == ["cafe"]
    assert analyze("Đà Nẵng phở") == ["đà", "da", "nẵng", "nang", "phở", "pho"]  # đ carries its mark in its shape
    assert analyze("łódź Ærø") == ["łódź", "lodz", "ærø", "aero"]
    assert analyze("à") == ["à"]  # "a" is a stop-word: the word keeps its own token only
    assert analyze("\u0304") == ["\u0304"]  # a mark alone: nothing is left without it, and no empty token is made
    # case folding takes off only the dot it leaves after "i"; the others are accents, their words kept too
    assert analyze("İzmir ċ Ż Q\u0307") == ["izmir", "ċ", "c", "ż", "z", "q\u0307", "q"]


def test_characters_are_folded_where_a_reader_takes_both_spellings_for_one_word():
    assert analyze("這個月的電費") == analyze("这个月的电费")  # Traditional Chinese is Simplified
    assert analyze("臺北") == analyze("台北") == ["台北"]
    assert analyze("٣٥٠ ५ ๑๒ ꧑") == ["350", "5", "12", "1"]  # every decimal digit is ASCII
    assert analyze("أحمد") == analyze("احمد") and analyze("سُورَةَ") == analyze("سورة")  # alef forms, vowel marks
    assert analyze("مـحـمـد") == analyze("محمد")  # tatweel
    assert analyze("يك كتاب") == analyze("یک کتاب")  # Arabic-keyboard Persian
    assert analyze("פָּרָשַׁת") == analyze("פרשת")  # Hebrew points
    assert analyze("ज़रूरी पहुँच") == analyze("जरूरी पहुंच")  # nukta, chandrabindu
    assert analyze("ёлку Ёлка") == analyze("елку елка")
    assert analyze("мʼясо") == analyze("м'ясо")
    # analyzer 8: Malayalam's atomic chillu and the older spelling (a virama and a zero-width joiner); ٬ and ٫
    assert analyze("കൊച്ചിയിൽ അവൻ") == analyze("കൊച്ചിയില്\u200d അവന്\u200d") == ["കൊച്ചിയില്", "അവന്"]
    assert analyze("١٬٤٥٠ ٣٫٥") == analyze("1,450 3.5") == ["1", "450", "3", "5", "1450"]


def test_invisible_characters_inside_a_word_are_dropped_but_a_persian_zwnj():
    # a soft hyphen, zero-width space, word joiner, zero-width no-break space, zero-width non-joiner (analyzer 9):
    # a reader sees one word, and so does the analyzer, on either path ("keyboard" is then ASCII)
    for invisible in "\u00ad\u200b\u2060\ufeff\u200c":
        assert analyze(f"a new key{invisible}board") == analyze("a new keyboard") == ["new", "keyboard"]
        assert analyze(f"Schlüssel{invisible}bund") == analyze("Schlüsselbund")
    assert analyze("super\u00adcali\u00adfragilistic") == ["supercalifragilist"]
    assert analyze("\ufeffhello") == ["hello"]  # a byte-order mark before a text
    # a ZWNJ in an Indic word only keeps a conjunct from forming: the word is one either way
    assert analyze("क्\u200cष") == analyze("क्ष")
    # after an Arabic-script letter a ZWNJ parts a Persian word's pieces, as Lucene's Persian analyzer reads it: the
    # plural ending and the compound's parts stay tokens ("کتاب" finds "کتاب‌ها", books, and "کتاب‌خانه", library)
    assert analyze("کتاب\u200cخانه") == analyze("کتاب خانه") == ["كتاب", "خان"]
    assert analyze("کتاب\u200cها")[0] == analyze("کتاب")[0]
    # a Thai run with a zero-width space at a word's end gives every bigram the run without it gives
    assert analyze("ฉันชอบกิน\u200bข้าวผัด") == analyze("ฉันชอบกินข้าวผัด")
    # the camelCase parts are read from the visible word
    assert analyze("get\u200bUserProfile") == analyze("getUserProfile")


def test_the_plain_baseline_folds_and_stems_nothing_more_than_before():
    assert plain_tokenize("電費 ٣٥٠ café Москву") == ["電費", "٣٥٠", "café", "москву"]


def test_fold_is_the_analyzer_s_case_folding():
    assert [tokenize.fold(w) for w in ("AUGUST", "Auguſt", "APRİL", "Aprıl")] == ["august", "august", "april", "aprıl"]


def test_numbers_are_kept_and_full_width_forms_normalised():
    assert analyze("ＧＰＴ４ 2023 12.5") == ["gpt4", "2023", "12", "5"]


def test_plain_tokenize_leaves_han_runs_whole():
    assert plain_tokenize("我去北京旅游了 hiking") == ["我去北京旅游了", "hike"]


def test_query_and_corpus_share_the_tokenizer():
    corpus = analyze("我们昨天在北京见面")
    query = analyze("北京")
    assert set(query) <= set(corpus)


# ---- the cached fast paths return exactly the reference steps ----------------------------------------------------

_ALPHABET = (
    "aAbBzZ09 _-.,'\n\tÉéñßẞſİıiΣσςŉΐᾼ\u0307\u0301ＧＰＴ４ﬁ我去北京東京にタワーﾊﾝ서울ПриветΕλληνικάनमस्ते🙂"
    "ข้าวเำ๑ຂ້ອຳខ្ញុំကျွန်္བོད་ශ්\u200dරී\ufe0f\u20e3"  # Thai, Lao, Khmer, Myanmar, Tibetan, Sinhala, ZWJ, VS16, keycap
    "\u00ad\u200b\u200c\u2060\ufeffکتﻙ"  # the invisible characters of step 0, Persian letters (one a presentation form)
    "\U0001e900\U0001e944\U00011103\U00011127\U00020000"  # beyond the BMP: Adlam and Chakma letters and marks, Han
    "ꦲꦏ꧀ꦶᬓ᭄ᬾ#*❤©🎂\U0001f1ef\U0001f1f5\U0001f3fd\U0001f3f4\U000e0067\U000e007f\ufe0e"  # Javanese, Balinese, emoji parts
)
_WORDS_SEEN = [
    "the",
    "Running",
    "hiking",
    "don't",
    "IPHONE手机",
    "北京",
    "naïve",
    "a_b",
    "ＡＢＣ",
    "ฉันชอบกินข้าวผัด",
    "ខ្ញុំចូលចិត្ត",
    "ကျွန်တော်",
    "1\ufe0f\u20e3",
    "👩\u200d❤\ufe0f\u200d👨",
    "🇯🇵",
    "👍🏽",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.text(alphabet=_ALPHABET, max_size=12), st.sampled_from(_WORDS_SEEN)), max_size=12))
def test_analyze_equals_the_uncached_reference_steps(pieces):
    text = " ".join(pieces)
    assert analyze(text) == tokenize.reference_analyze(text)
    assert analyze(text) == tokenize.reference_analyze(text)  # the second time from the caches


def test_ascii_and_unicode_paths_give_the_same_tokens_for_the_same_words():
    text = "Where did Caroline go HIKING? I don't know_really 2023!"
    assert analyze(text) == analyze(text + " ’") == tokenize.reference_analyze(text)
    assert analyze(text) == ["carolin", "go", "hike", "know", "realli", "2023"]


def test_the_word_caches_stay_bounded(monkeypatch):
    monkeypatch.setattr(tokenize, "_CACHE_MAX", 50)
    for cache in (tokenize._ASCII_CACHE, tokenize._WORD_CACHE, tokenize._STEM_CACHE):
        cache.clear()
    for i in range(300):
        for text in (f"word{i} runs{i}", f"wörd{i} 北京{i} walks{i}"):  # the ASCII path, the Unicode path
            assert analyze(text) == tokenize.reference_analyze(text)
    for cache in (tokenize._ASCII_CACHE, tokenize._WORD_CACHE, tokenize._STEM_CACHE):
        assert 0 < len(cache) <= 51


def test_a_long_word_is_analysed_but_kept_in_no_cache():
    # a base64 blob or a pasted file is one "word" of megabytes: every cache, PyStemmer's own included, would keep
    # each such word for good (a server grew by ~50 MB per Add of one 8 MB word, past its index cache's bound)
    for text in ("blob " + "running" * 20_000, "blöb " + "walking" * 20_000):  # the ASCII path, the Unicode path
        assert analyze(text) == tokenize.reference_analyze(text)
        assert tokenize.analyze_each([text]) == [*tokenize.reference_analyze(text), tokenize.DOC_END]
    for cache in (tokenize._ASCII_CACHE, tokenize._WORD_CACHE, tokenize._STEM_CACHE):
        assert max(map(len, cache), default=0) <= tokenize._WORD_CACHE_MAX_LEN
    assert tokenize._stemmer().maxCacheSize == 0


def test_every_folded_character_is_folded_however_the_text_is_checked_first():
    # fold_characters skips translate for texts its regex finds nothing to fold in: the regex must see every one
    from refind_cli import folding

    table = folding.table()
    assert len(table) > 4_000
    for cp, folded in table.items():
        assert folding.fold_characters(f"ab{chr(cp)}") == "ab" + ("" if folded is None else str(folded))


def test_the_han_table_is_built_one_character_at_a_time_and_followed_to_its_end():
    from refind_cli import folding

    converter = {
        "薴": "苧",
        "苧": "苎",
        "車": "车",
        "\uf900": "岂",
        "乾": "干",
        "後來": "后来",
    }  # U+F900: NFKC folds it
    pairs = folding.build_han(lambda text: converter.get(text, text))
    assert pairs == {"薴": "苎", "苧": "苎", "車": "车", "乾": "干"}
    shipped = folding.HAN_TABLE.read_text(encoding="utf-8").splitlines()
    assert shipped[0].startswith("# Traditional → Simplified") and "車 车" in shipped and "臺 台" in shipped


def test_a_word_that_changes_case_inside_it_also_gives_its_parts():
    # camelCase, PascalCase and an acronym before a word: "user profile" or "get_user_profile" finds getUserProfile
    assert analyze("getUserProfile()") == ["getuserprofil", "get", "user", "profil"]
    assert analyze("parseJSONResponse") == ["parsejsonrespons", "pars", "json", "respons"]
    assert analyze("#ThrowbackThursday pics") == ["throwbackthursday", "pic", "throwback", "thursday"]
    assert analyze("报错 ModuleNotFoundError") == ["报错", "modulenotfounderror", "modul", "found", "error"]
    # not parts: an acronym's plural, a number before a letter, capitals only, a word's capital first letter
    assert analyze("RPGs 5K USA OK Caroline") == ["rpgs", "5k", "usa", "ok", "carolin"]
    assert analyze("get_user_profile") == ["get", "user", "profil"]


def test_texts_with_such_words_are_read_with_their_parts_in_a_batch_too():
    texts = ["plain text", "getUserProfile here", "another one"]
    every = [t for text in texts for t in (*analyze(text), tokenize.DOC_END)]
    assert [t for t in tokenize.analyze_each(texts) if t] == every  # (its batch leaves stop-words in as "")
    words = tokenize.ascii_words(texts)
    assert words is not None and [t for w in words if (t := tokenize.ascii_stems[w])] == every


def test_a_number_written_in_groups_also_gives_its_digits():
    # step 7 (analyzer 8): "1450" finds "$1,450" (and 四千五百块 finds 4,500块); the digits follow the text's own tokens
    assert analyze("The rent is $1,450 a month") == ["rent", "1", "450", "month", "1450"]
    assert analyze("1.450,00 and 2,500,000") == ["1", "450", "00", "2", "500", "000", "1450", "2500000"]
    assert "4500" in analyze("房租4,500块") and "4500" in analyze("房租四千五百块")
    tokens = ["10", "000", "feet", "3", "999", "kr", "12", "50", "000", "10000", "3999", "1250000"]
    assert analyze("10 000 feet, 3\u00a0999 kr, ₹12,50,000") == tokens  # spaces (a no-break one too), India's groups
    # not a number in groups: a time, a decimal, groups of other sizes, mixed separators, a group too many, a year
    # beside a number, a date, a phone number
    for text in (
        "3.30pm",
        "1,45",
        "12.5",
        "1,4500",
        "1,450,0",
        "1.45.000",
        "v1.2.3",
        "2023 100",
        "May 8 2023",
        "555 123 4567",
    ):
        apart = re.sub("[,. \u00a0]", ";", text)  # each separator one no grouping reads
        assert not set(analyze(text)) - set(analyze(apart)), text


def test_texts_with_numbers_in_groups_are_read_with_their_digits_in_a_batch_too():
    texts = ["plain text", "paid $1,450 for getUserProfile", "another 2,000", "12.500 Euro"]
    every = [t for text in texts for t in (*analyze(text), tokenize.DOC_END)]
    assert [t for t in tokenize.analyze_each(texts) if t] == every
    words = tokenize.ascii_words(texts)
    assert words is not None and [t for w in words if (t := tokenize.ascii_stems[w])] == every
    plain = tokenize.ascii_words(["paid 2,000"])  # (a batch with a camelCase word reads every text's steps 6 and 7)
    assert plain is not None and [tokenize.ascii_stems[w] for w in plain] == [
        "paid",
        "2",
        "000",
        "2000",
        tokenize.DOC_END,
    ]
    assert tokenize.ascii_words(["no numbers", "1,45"]) == [b"no", b"numbers", b"\xff", b"1", b"45", b"\xff"]


def test_a_chinese_numeral_before_what_it_counts_also_gives_its_value():
    # "十一月八号" (November 8th) finds "11月8号" and the other way round; a numeral that counts nothing (一起,
    # together) gives no number
    assert analyze("十一月八号") == ["十一", "一月", "月八", "八号", "11", "8"]
    assert analyze("11月8号") == ["11", "月", "8", "号"]
    assert analyze("两千块 一百零五岁 三零五号房") == [
        *["两千", "千块", "2000"],
        *["一百", "百零", "零五", "五岁", "105"],
        *["三零", "零五", "五号", "号房", "305"],
    ]
    assert analyze("我们一起去") == ["我们", "们一", "一起", "起去"]


@pytest.mark.parametrize(
    ("numeral", "value"),
    [
        ("十", 10),
        ("十二", 12),
        ("二十五", 25),
        ("一百零五", 105),
        ("两千", 2000),
        ("三万五千", 35000),
        ("十万", 100000),
        ("三零五", 305),
        ("二〇二四", 2024),
        ("二三十", None),
        ("一" * 25, None),
    ],
)
def test_chinese_numerals_read_by_hand(numeral, value):
    assert tokenize.chinese_number(numeral) == value


def test_no_parts_for_a_word_joined_to_a_letter_of_another_alphabet():
    # "ÉcoleNormale" is one word: its ASCII piece "coleNormale" gave "cole" and "normal" (review); a CJK character,
    # though, ends a word ("报错ModuleNotFoundError")
    assert analyze("ÉcoleNormale MüllerStraße") == ["écolenormal", "ecolenormal", "müllerstrass", "mullerstrass"]
    assert analyze("报错ModuleNotFoundError")[-3:] == ["modul", "found", "error"]


def test_only_the_first_words_of_a_text_give_parts(monkeypatch):
    # 1 MiB of "aB " words took 1.1 s to analyse, inside an Add's write lock (review): at most MAX_CAMEL_WORDS
    monkeypatch.setattr(tokenize, "MAX_CAMEL_WORDS", 2)
    text = "getUser setUser delUser"
    assert (
        analyze(text)
        == tokenize.reference_analyze(text)
        == [*["getus", "setus", "delus"], *["get", "user", "set", "user"]]
    )
    mixed = "getUser JSONParse delUser"  # the first two by place, whichever case change found them
    assert analyze(mixed) == tokenize.reference_analyze(mixed)
    assert analyze(mixed)[3:] == ["get", "user", "json", "pars"]


def test_a_text_of_thousands_of_numeral_characters_is_analysed():
    # 5,000 一 before 个: a number of 5,000 digits is past Python's limit for int(): the Add failed
    assert analyze("一" * 5000 + "个")[-1] == "一个"
