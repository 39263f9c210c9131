"""A lone CJK character (or grapheme cluster of a spaceless script) in a query: the analyzer indexes runs of them as
bigrams, so "猫" alone never met "我的猫叫咪咪" (的猫 猫叫); it now matches the bigrams that hold it (expand.py)."""

from __future__ import annotations

import json

from helpers import T0, add

from refind_cli import expand
from refind_cli import search as S

OFF = S.SearchConfig(lone_units=False)


def test_a_lone_chinese_character_finds_the_words_it_is_part_of(cli, tmp_path):
    log = tmp_path / "zh.jsonl"
    messages = [{"role": "user", "content": "我的猫叫咪咪，它很可爱"}, {"role": "user", "content": "今天去超市买了书"}]
    request = {"request_id": "r1", "user_id": "u", "session_id": "s", "messages": messages}
    log.write_text(json.dumps(request, ensure_ascii=False) + "\n", encoding="utf-8")
    assert cli("add", "--file", str(log), "-q").exit_code == 0
    for query, first in [("猫", "我的猫叫咪咪，它很可爱"), ("书", "今天去超市买了书")]:
        r = cli("search", query, "--user", "u", "--mode", "bm25", "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["data"][0]["content"] == f"user: {first}"


def test_it_fails_without_the_stage_and_a_longer_query_is_unchanged(store):
    add(store, "u", "s", ("user", "我的猫叫咪咪，它很可爱", T0), ("user", "今天去超市买了书", T0 + 60_000))
    assert S.search(store, "u", "猫", top_k=5, config=OFF) == []  # 的猫 猫叫: no bigram is "猫"
    on = S.search(store, "u", "可爱的咪咪", top_k=5)
    assert [b.content for b in on] == [b.content for b in S.search(store, "u", "可爱的咪咪", top_k=5, config=OFF)]
    assert [b.score for b in on] == [b.score for b in S.search(store, "u", "可爱的咪咪", top_k=5, config=OFF)]


def test_a_turn_scores_as_its_best_bigram_holding_the_character_not_their_sum(store):
    # by hand: "小猫和老猫" holds 猫 in three bigrams (小猫 猫和 老猫), "我的猫" in one (的猫), each bigram in one turn;
    # summed, the first would win three to one; as the best bigram, the shorter turn wins (BM25's length norm)
    add(store, "u", "s1", ("user", "小猫和老猫", T0))
    add(store, "u", "s2", ("user", "我的猫", T0 + 60_000))
    add(store, "u", "s3", ("user", "今天下雨", T0 + 120_000))
    found = S.search(store, "u", "猫", top_k=5, config=S.SearchConfig(backfill=False, session_fusion=False))
    assert [b.content.rsplit(": ", 1)[1] for b in found] == ["我的猫", "小猫和老猫"]


def test_a_one_cluster_word_of_a_spaceless_script_is_found_inside_a_sentence(store):
    # Myanmar စား ("eat") inside ထမင်းစားပြီးပြီ ("have eaten rice"): a single grapheme cluster, a lone unit
    add(store, "u", "s", ("user", "ထမင်းစားပြီးပြီ", T0), ("user", "ကျွန်တော်နေကောင်းတယ်", T0 + 60_000))
    assert S.search(store, "u", "စား", top_k=5, config=OFF) == []
    (first, *_) = S.search(store, "u", "စား", top_k=5)
    assert first.content.endswith("ထမင်းစားပြီးပြီ")


def test_a_one_cluster_word_of_javanese_and_balinese_is_found_inside_a_sentence(store):
    # Javanese ꦲꦶꦁ ("ing": in, at; ha with wulu and cecak: one cluster) inside "aku mangan ing pasar" (I eat at the
    # market), Balinese ᬓᬾ ("ke": to) inside "tiang ke pasar" — both written without spaces (analyzer 5)
    add(store, "u", "s", ("user", "ꦲꦏꦸꦩꦔꦤ꧀ꦲꦶꦁꦥꦱꦂ", T0), ("user", "ꦢꦶꦤꦲꦶꦏꦶꦲꦸꦢꦤ꧀", T0 + 60_000))
    add(store, "u", "t", ("user", "ᬢᬶᬬᬂᬓᬾᬧᬲᬃ", T0 + 120_000), ("user", "ᬚᬦᬶᬳᬸᬚᬦ᭄", T0 + 180_000))
    for word, sentence in [("ꦲꦶꦁ", "ꦲꦏꦸꦩꦔꦤ꧀ꦲꦶꦁꦥꦱꦂ"), ("ᬓᬾ", "ᬢᬶᬬᬂᬓᬾᬧᬲᬃ")]:
        assert S.search(store, "u", word, top_k=5, config=OFF) == []
        (first, *_) = S.search(store, "u", word, top_k=5)
        assert first.content.endswith(sentence)


def test_only_lone_units_are_expanded(store):
    add(store, "u", "s", ("user", "我的猫叫咪咪", T0))
    idx = S.user_index(store, "u")
    assert expand.lone_unit_scores(idx.index, ["咪咪", "cat", "的猫"]) is None
    assert expand.lone_unit_scores(idx.index, ["狗"]) is None  # in no bigram of the user's
    scores = expand.lone_unit_scores(idx.index, ["猫"])
    assert scores is not None and float(scores.max()) > 0


def test_only_the_first_lone_units_of_a_query_are_expanded(store):
    # each lone character reads up to 64 bigrams' postings: a query of thousands of characters apart held a search
    # thread for seconds, so only the first few are expanded (as fuzzy expansion's words are)
    add(store, "u", "s", ("user", "我的猫叫咪咪", T0))
    idx = S.user_index(store, "u").index
    assert expand.lone_unit_scores(idx, ["狗", "鸟", "猫"], max_units=3) is not None
    assert expand.lone_unit_scores(idx, ["狗", "鸟", "猫"], max_units=2) is None  # 猫, the third, is not read
    many = [chr(0x4E00 + i) for i in range(expand.MAX_LONE_UNITS)] + ["猫"]
    assert S.search(store, "u", " ".join(many), top_k=5, config=S.SearchConfig(backfill=False)) == []


def test_a_common_characters_most_frequent_bigrams_are_sorted_once_per_vocabulary(store, monkeypatch):
    # which bigrams a character in more than `most` of them reads is decided by their document frequencies, each a
    # read of the postings: once per vocabulary, not on every search
    add(store, "u", "s", ("user", "我的猫叫咪咪", T0), ("user", "小猫和老猫", T0 + 60_000))
    idx = S.user_index(store, "u").index
    reads = []
    for mapping in (expand._DocFreq, expand._PostingsDocFreq):
        read = mapping.__getitem__
        monkeypatch.setattr(mapping, "__getitem__", lambda self, w, read=read: reads.append(w) or read(self, w))
    first = expand.lone_unit_scores(idx, ["猫"], most=2)
    assert reads and first is not None
    reads.clear()
    again = expand.lone_unit_scores(idx, ["猫"], most=2)
    assert reads == [] and again is not None and again.tolist() == first.tolist()


PAIRS_OFF = S.SearchConfig(pair_units_df=None, backfill=False)
PAIRS_ON = S.SearchConfig(backfill=False)


def test_a_question_s_bigram_no_turn_holds_asks_its_characters(store):
    # "猫的名字" (the cat's name): 猫的 and 的名 are in no turn — "我家猫叫咪咪" writes 家猫 猫叫 — so 猫 and 的 are asked
    # alone; 的 is in no other bigram of these turns either, and 名 is held by 名字
    add(store, "u", "s1", ("user", "我家猫叫咪咪", T0))
    add(store, "u", "s2", ("user", "今天去超市买了书", T0 + 60_000), ("user", "明天要开会", T0 + 120_000))
    assert S.search(store, "u", "猫的名字", top_k=5, config=PAIRS_OFF) == []
    found = S.search(store, "u", "猫的名字", top_k=5, config=PAIRS_ON)
    assert [b.content.rsplit(": ", 1)[1] for b in found] == ["我家猫叫咪咪"]


def test_a_common_character_of_such_a_bigram_is_not_asked(store):
    # 的 is in 我的 / 他的 / 你的: three turns of four, over the 2% share (at least 2 turns), so only 猫 is asked — the turns that
    # share nothing but a common character stay out of the list; with every character asked they come in
    add(store, "u", "s1", ("user", "我家猫叫咪咪", T0))
    add(store, "u", "s2", ("user", "我的书很好看", T0 + 60_000), ("user", "他的车很新", T0 + 120_000))
    add(store, "u", "s3", ("user", "你的手机呢", T0 + 180_000))
    found = S.search(store, "u", "猫的", top_k=5, config=PAIRS_ON)
    assert [b.content.rsplit(": ", 1)[1] for b in found] == ["我家猫叫咪咪"]
    every = S.search(store, "u", "猫的", top_k=5, config=PAIRS_ON.with_(pair_units_df=1.0))
    shown = "".join(b.content for b in every)
    assert all(text in shown for text in ("我家猫叫咪咪", "我的书很好看", "他的车很新", "你的手机呢"))


def test_the_characters_asked_are_those_of_absent_bigrams_less_those_of_held_ones():
    vocab = {"名字": 3, "家猫": 1}
    assert expand._pair_units(["猫的", "的名", "名字", "cat", "猫"], vocab) == ["猫", "的"]
    assert expand._pair_units(["名字"], vocab) == []


def test_only_the_first_characters_of_absent_bigrams_are_asked(store, monkeypatch):
    # each character asked reads up to 64 bigrams' postings: MemDaily's questions hold a dozen absent bigrams, and
    # asking all of their characters cost 1.1 ms a search for no recall (BENCHMARKS.md), so at most MAX_PAIR_UNITS
    add(store, "u", "s1", ("user", "我家猫叫咪咪", T0))
    add(store, "u", "s2", ("user", "他买了新车", T0 + 60_000))

    def shown() -> str:
        return "".join(b.content for b in S.search(store, "u", "猫的车是", top_k=5, config=PAIRS_ON))

    assert "我家猫叫咪咪" in shown() and "他买了新车" in shown()  # 猫 的 车 是: 猫 and 车 find a turn each
    monkeypatch.setattr(expand, "MAX_PAIR_UNITS", 1)
    assert "我家猫叫咪咪" in shown() and "他买了新车" not in shown()


def test_a_character_of_an_absent_bigram_reads_only_its_most_frequent_bigrams(store, monkeypatch):
    # a character asked for a bigram no turn holds reads at most PAIR_UNIT_BIGRAMS of its bigrams, the most frequent
    # (64 each made a 10-character question 0.3 -> 15 ms on 20,000 Chinese messages: review of analyzer 7)
    add(store, "u", "s1", ("user", "小猫很可爱", T0), ("user", "小猫在睡觉", T0 + 60_000))
    add(store, "u", "s2", ("user", "猫粮没了", T0 + 120_000))

    def shown() -> str:  # (猫 is in every turn: no share counts it as common here)
        every = PAIRS_ON.with_(pair_units_df=1.0)
        return "".join(b.content for b in S.search(store, "u", "猫的", top_k=5, config=every))

    assert "猫粮没了" in shown() and "小猫在睡觉" in shown()
    monkeypatch.setattr(expand, "PAIR_UNIT_BIGRAMS", 1)  # 小猫 (two turns), not 猫粮 (one)
    assert "猫粮没了" not in shown() and "小猫在睡觉" in shown()
