"""The one tokenizer: English stemming and stop-words, CJK bigrams, other scripts intact."""

from __future__ import annotations

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


def test_numbers_are_kept_and_full_width_forms_normalised():
    assert analyze("ＧＰＴ４ 2023 12.5") == ["gpt4", "2023", "12", "5"]


def test_plain_tokenize_leaves_han_runs_whole():
    assert plain_tokenize("我去北京旅游了 hiking") == ["我去北京旅游了", "hike"]


def test_query_and_corpus_share_the_tokenizer():
    corpus = analyze("我们昨天在北京见面")
    query = analyze("北京")
    assert set(query) <= set(corpus)
