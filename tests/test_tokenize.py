"""The one tokenizer: English stemming and stop-words, CJK bigrams, other scripts intact."""

from __future__ import annotations

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
    assert analyze("東京に") == ["東京", "京に"]
    assert analyze("서울에서") == ["서울", "울에", "에서"]


def test_mixed_latin_and_han_in_one_word():
    assert analyze("iPhone手机") == ["iphon", "手机"]


def test_other_scripts_are_kept_intact_and_lowercased():
    assert analyze("Привет, Мир! Ελληνικά नमस्ते") == ["привет", "мир", "ελληνικά", "नमस्ते"]


def test_case_is_folded_as_search_engines_fold_it():
    # lower() made "İ" an "i" with a combining dot above ("i̇stanbul"), kept "ß" while "SS" became "ss", and kept a
    # word-final "ς" apart from "σ" (a "Σ" before "." lowers to "σ")
    assert analyze("İstanbul") == analyze("istanbul") == analyze("ISTANBUL") == ["istanbul"]
    assert analyze("Straße") == analyze("STRASSE") == analyze("strasse") == analyze("STRAẞE") == ["strass"]
    assert analyze("ΟΔΟΣ.ΑΘΗΝΑ") == analyze("οδος αθηνα") == analyze("οδοσ Αθηνα") == ["οδοσ", "αθηνα"]
    # folding "ΐ" leaves ι + two combining marks, which NFKC composes again: one token for both cases
    assert analyze("ΠΡΩΤΕΪ́ΝΗ") == analyze("πρωτεΐνη") == ["πρωτεΐνη"]


def test_case_folding_keeps_accents_and_other_combining_dots():
    assert analyze("café") != analyze("cafe")  # accents are not folded
    # only the dot that folding leaves after "i" goes: not one on another letter, precomposed or not
    assert analyze("İzmir ċ Ż Q\u0307") == ["izmir", "ċ", "ż", "q\u0307"]


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
