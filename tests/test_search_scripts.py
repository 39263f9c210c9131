"""`refind search --mode bm25` finds a word inside a sentence in scripts that the analyzer used to break: stored
through the CLI into a real database, searched through the CLI."""

from __future__ import annotations

import json
import re

import pytest
from helpers import T0, add

from refind_cli import health, index_store, tokenize
from refind_cli import search as S
from refind_cli.search_config import SearchConfig
from refind_cli.store import Store

# script: (the sentence that holds the word, two other sentences of the same script, the word asked for). Before
# analyzer 4 each case failed: a Thai sentence was one token, the others broke words at every mark not in a hand-kept
# list — into pieces that the other sentences share ("ချင်" gave "ခ" and "င", both in "ကောင်း"). Before analyzer 5
# a Javanese or Balinese sentence was one token, and emoji were dropped; before analyzer 6 "👍" did not find "👍🏽".
CORPUS = {
    "thai": (
        "ฉันชอบกินข้าวผัดกับไข่ดาว",  # I like eating fried rice with a fried egg
        ["วันนี้ฝนตกหนักมาก", "พรุ่งนี้ฉันจะไปทำงาน"],  # it rains hard today; tomorrow I go to work
        "ข้าวผัด",  # fried rice
    ),
    "lao": (
        "ຂ້ອຍມັກກິນເຂົ້າໜຽວ",  # I like eating sticky rice
        ["ມື້ນີ້ອາກາດຮ້ອນຫຼາຍ", "ລາວໄປໂຮງຮຽນ"],  # it is very hot today; he goes to school
        "ມັກ",  # like
    ),
    "khmer": (
        "ខ្ញុំចូលចិត្តញ៉ាំបាយ",  # I like eating rice
        ["ថ្ងៃនេះភ្លៀងធ្លាក់ខ្លាំង", "គាត់ចេញពីផ្ទះ"],  # it rains hard today; he left the house
        "ចូលចិត្ត",  # like
    ),
    "myanmar": (
        "ကျွန်တော်ထမင်းစားချင်တယ်",  # I want to eat rice
        ["ဒီနေ့မိုးရွာတယ်", "ဒီနေ့ရာသီဥတုကောင်းတယ်"],  # it rains today; the weather is good today
        "ချင်",  # want
    ),
    "tibetan": (
        "ང་བོད་ལ་འགྲོ་གི་ཡིན",  # I am going to Tibet
        ["དེ་རིང་གནམ་གཤིས་ཡག་པོ་འདུག", "ཁོ་སློབ་གྲྭ་ལ་སོང་"],  # the weather is good today; he went to school
        "བོད",  # Tibet
    ),
    "sinhala": (
        "මම ශ්\u200dරී ලංකාවේ ජීවත් වෙමි",  # I live in Sri Lanka (with the ZWJ of the conjunct "ශ්‍රී")
        ["මට කෝපි බොන්න ඕන", "මම රෝහලට ගියා"],  # I want to drink coffee; I went to hospital
        "ශ්රී",  # Sri, typed without the joiner
    ),
    "javanese": (
        "ꦲꦏꦸꦩꦔꦤ꧀ꦱꦼꦒ",  # aku mangan sega: I eat rice
        ["ꦢꦶꦤꦲꦶꦏꦶꦲꦸꦢꦤ꧀", "ꦧꦥꦏ꧀ꦭꦸꦔ"],  # dina iki udan: it rains today; bapak lunga: father left
        "ꦩꦔꦤ꧀",  # mangan: eat
    ),
    "balinese": (
        "ᬢᬶᬬᬂᬗᬚᬾᬂᬦᬲᬶ",  # tiang ngajeng nasi: I eat rice
        ["ᬚᬦᬶᬳᬸᬚᬦ᭄", "ᬩᬧᬓᬧᬲᬶᬄ"],  # jani hujan: it rains now; bapa ka pasih: father goes to the sea
        "ᬦᬲᬶ",  # nasi: rice
    ),
    "emoji": (
        "happy birthday grandma 🎂🎉",
        ["happy new year 🎆", "see you tomorrow 👋"],
        "when did I send 🎂",  # "send" is in none of them: the cake alone finds the sentence
    ),
    "skin-tone": (
        "sounds good 👍🏽",
        ["happy new year 🎆", "see you tomorrow 👋🏽"],
        "👍",  # a planner's query in the default yellow finds the user's own tone
    ),
    # before analyzer 7 each of these found nothing: no fold, no stemmer, no accent-free token, no pair's units
    "traditional-chinese": (
        "這個月的電費帳單寄來了",  # this month's electricity bill came (Traditional)
        ["今天天氣很好", "我們明天去爬山"],  # the weather is good today; we go hiking tomorrow
        "电费",  # electricity fee (Simplified)
    ),
    "chinese-question": (
        "我家的猫叫咪咪",  # our cat is called Mimi
        ["今天去超市买了书", "明天要开会"],  # went to the supermarket for books today; a meeting tomorrow
        "猫的名字",  # the cat's name: 猫的 and 的名 are in no sentence, so their characters are asked
    ),
    "chinese-numerals": (
        "我女儿的生日是11月8号",  # my daughter's birthday is on 11月8号 (November 8th, in digits)
        ["今天去超市买了书", "明天要开会"],
        "十一月八号",  # November 8th in Chinese numerals
    ),
    "vietnamese-unmarked": (
        "Tuần sau mình đi Đà Nẵng công tác",  # next week I go to Da Nang for work
        ["Hôm nay trời mưa to", "Mình thích ăn bún chả"],  # it rains hard today; I like bun cha
        "da nang",  # typed without its marks
    ),
    "russian": (
        "Я еду в Москву на поезде",  # I am going to Moscow by train
        ["Сегодня идёт дождь", "Мы пойдём в кино"],  # it is raining today; we will go to the cinema
        "Москва",  # Moscow, in the nominative
    ),
    "greek": (
        "Θα σου πω όταν φτάσω στο ίδιο ξενοδοχείο",  # I'll tell you when I reach the same hotel
        ["Καλημέρα σε όλους", "Πάμε για καφέ αύριο"],  # good morning everyone; let's go for coffee tomorrow
        "όταν",  # when: a word the Greek stemmer takes wholly away (an empty token, at first: review of analyzer 7)
    ),
    "code": (
        "The bug is in getUserProfile, it returns None",
        ["Rename the config file", "Crash in the date parser"],
        "user profile",  # the parts of a camelCase word
    ),
    "arabic": (
        "اشتريت السيارة الجديدة أمس",  # I bought the new car yesterday
        ["الجو حار اليوم", "سأذهب إلى المدرسة"],  # it is hot today; I will go to school
        "سيارة",  # car, without the article
    ),
    # before analyzer 9 an invisible character split the word it stood in: "doc", "u", "ment"; "key", "board"
    "soft-hyphen": (
        "the doc\u00adu\u00adment is ready",  # pasted from a web page that hyphenates
        ["the report is late", "send me the file"],
        "document",
    ),
    "zero-width-space": (
        "I bought a new keyboard",
        ["my old board game", "the key is under the mat"],  # each holds one half of the split query
        "key\u200bboard",  # a query pasted with a zero-width space in it
    ),
    # a German word that starts with an umlaut, typed with "ae", "oe", "ue" (fuzzy matching keeps the first two
    # letters, so before the query-time variant nothing found it)
    "german-typed-umlaut": (
        "Die Äpfel aus dem Garten sind reif",  # the apples from the garden are ripe
        ["Die Birnen sind noch grün", "Wir kaufen morgen Brot"],  # the pears are still green; we buy bread tomorrow
        "aepfel",
    ),
    "german-typed-umlaut-short": (
        "Das Öl für das Auto ist teuer",  # the oil for the car is expensive
        ["Das Auto ist neu", "Die Werkstatt ist zu"],  # the car is new; the garage is closed
        "oel",
    ),
}


@pytest.fixture
def stored(cli, tmp_path):
    """User ``<script>`` has the three sentences, user ``<script>-without`` only the two other ones."""
    lines = []
    for script, (sentence, others, _) in CORPUS.items():
        for user, texts in ((script, [*others, sentence]), (f"{script}-without", others)):
            for i, text in enumerate(texts):
                message = {"role": "user", "content": text, "timestamp": 1_700_000_000_000 + i * 60_000}
                lines.append(
                    {"request_id": f"{user}-{i}", "user_id": user, "session_id": f"s{i}", "messages": [message]}
                )
    path = tmp_path / "scripts.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    assert cli("add", "--file", str(path), "--quiet", "--retention-days", "off").exit_code == 0
    return cli


def search(cli, word: str, user: str) -> list[str]:
    """The sentences that `refind search WORD --mode bm25 --top-k 1` shows."""
    r = cli("search", word, "--user", user, "--mode", "bm25", "--json", "--top-k", "1", "--retention-days", "off")
    assert r.exit_code == 0, r.output
    return [item["content"].split(" user: ", 1)[1] for item in json.loads(r.output)["data"]]


@pytest.mark.parametrize("script", list(CORPUS))
def test_a_word_inside_a_sentence_finds_that_sentence_first(stored, script):
    sentence, _, word = CORPUS[script]
    assert search(stored, word, script) == [sentence]


def test_the_index_of_every_script_checks_as_sound(stored, cli):
    # an index whose tokens differ from what its texts analyse to is damage to `inspect --check` (exit 1); the
    # Greek stemmer's empty tokens were dropped by the index and kept by the check
    r = cli("inspect", "--check", "--json")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("script", list(CORPUS))
def test_the_word_finds_nothing_where_only_other_sentences_of_its_script_are(stored, script):
    _, _, word = CORPUS[script]
    assert search(stored, word, f"{script}-without") == []


def sessions(store: Store, query: str) -> list[str]:
    found = S.search(store, "somchai", query, top_k=5, config=SearchConfig(backfill=False))
    return [b.session_id for b in found]


def clear_caches() -> None:
    for cache in (tokenize._ASCII_CACHE, tokenize._WORD_CACHE, tokenize._STEM_CACHE):
        cache.clear()
    S.clear()


def indexed_again(db_path, version: int) -> Store:
    """The database, indexed by analyzer ``version``, as this refind finds it: ``inspect --check`` notes the old
    index (nothing to repair), and opening it indexes every message again."""
    clear_caches()
    report = health.check(db_path)
    assert report["ok"] and report["notes"] == [
        f"the search index was built by analyzer version {version} (this refind's is {tokenize.ANALYZER_VERSION}): "
        "every message is indexed again on the next open; nothing to repair"
    ]
    store = Store(db_path, retention_days=None)
    assert index_store.verify(store.conn) == []
    return store


def test_a_database_indexed_by_analyzer_3_is_indexed_again_and_then_finds_thai_words(db_path, monkeypatch):
    sentence, others, word = CORPUS["thai"]
    with monkeypatch.context() as old:  # the analyzer as it was: version 3, a Thai run one word
        old.setattr(tokenize, "ANALYZER_VERSION", 3)
        old.setattr(tokenize, "_spaceless_letter", lambda: re.compile("(?!)"))
        clear_caches()
        with Store(db_path, retention_days=None) as store:
            for i, text in enumerate([sentence, *others]):
                add(store, "somchai", f"s{i}", ("user", text), at=T0)
            assert sessions(store, word) == []  # what the old analyzer missed
    with indexed_again(db_path, 3) as store:
        assert sessions(store, word) == ["s0"]


def test_a_database_indexed_by_analyzer_4_is_indexed_again_and_then_finds_emoji_and_javanese(db_path, monkeypatch):
    texts = [CORPUS["emoji"][0], *CORPUS["emoji"][1], CORPUS["javanese"][0]]
    with monkeypatch.context() as old:  # the analyzer as it was: version 4, no emoji, Javanese one word
        old.setattr(tokenize, "ANALYZER_VERSION", 4)
        old.setattr(tokenize, "_emoji_hint", lambda: re.compile("(?!)"))
        spaceless_4 = f"(?![\ua980-\ua9df\u1b00-\u1b7f])[{tokenize._SPACELESS}\U00010000-\U0010ffff]"
        old.setattr(tokenize, "_UNCOMMON", re.compile(spaceless_4))  # neither Javanese nor Balinese
        clear_caches()
        assert tokenize.analyze(texts[-1]) == [texts[-1]]
        with Store(db_path, retention_days=None) as store:
            for i, text in enumerate(texts):
                add(store, "somchai", f"s{i}", ("user", text), at=T0)
            assert sessions(store, "🎂") == sessions(store, "ꦩꦔꦤ꧀") == []  # what the old analyzer missed
    with indexed_again(db_path, 4) as store:
        assert sessions(store, "🎂") == ["s0"]
        assert sessions(store, "ꦩꦔꦤ꧀") == ["s3"]


def test_a_database_indexed_by_analyzer_8_is_indexed_again_and_then_finds_a_word_with_a_soft_hyphen(
    db_path, monkeypatch
):
    sentence, others, word = CORPUS["soft-hyphen"]
    with monkeypatch.context() as old:  # the analyzer as it was: version 8, a soft hyphen split its word
        old.setattr(tokenize, "ANALYZER_VERSION", 8)
        old.setattr(tokenize, "visible", lambda text: text)
        clear_caches()
        assert tokenize.analyze(sentence) == ["doc", "u", "ment", "readi"]
        with Store(db_path, retention_days=None) as store:
            for i, text in enumerate([*others, sentence]):
                add(store, "somchai", f"s{i}", ("user", text), at=T0)
            assert sessions(store, word) == []  # what the old analyzer missed
    with indexed_again(db_path, 8) as store:
        assert sessions(store, word) == ["s2"]
        assert sessions(store, "doc\u00adu\u00adment") == ["s2"]


def test_a_database_indexed_by_analyzer_5_is_indexed_again_and_then_finds_a_skin_tone(db_path, monkeypatch):
    sentence, others, word = CORPUS["skin-tone"]
    with monkeypatch.context() as old:  # the analyzer as it was: version 5, a skin tone part of its emoji's token
        old.setattr(tokenize, "ANALYZER_VERSION", 5)
        old.setattr(tokenize, "_PRESENTATION", dict.fromkeys((0xFE0E, 0xFE0F)))
        clear_caches()
        assert tokenize.analyze(sentence) == ["sound", "good", "👍🏽"]
        with Store(db_path, retention_days=None) as store:
            for i, text in enumerate([*others, sentence]):
                add(store, "somchai", f"s{i}", ("user", text), at=T0)
            assert sessions(store, word) == []  # what the old analyzer missed
    with indexed_again(db_path, 5) as store:
        assert sessions(store, word) == ["s2"]
        assert sessions(store, "👋🏿") == ["s1"]  # any tone finds any other
