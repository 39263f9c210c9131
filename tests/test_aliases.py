"""Another name of a speaker (aliases.py), on a toy chat ranked by hand: the questions call Emi "Kate", the name her
friend calls her by; her lines are labelled "Emi"."""

from __future__ import annotations

import pytest
from helpers import DAY, T0, add

from refind_cli import aliases
from refind_cli import search as S

FILLER = [
    ("Emi", "the weather was grey all week"),
    ("elise", "my sister visits on Sunday"),
    ("Emi", "work was busy with reports"),
    ("elise", "the gym opens early now"),
]
CHAT = [
    [("Emi", "Hi, I'm Kate! Nice to meet you"), ("elise", "Hey Kate! Tell me about the cooking class")],
    [("Emi", "In the cooking class we made a pasta dish with ham and peas"), ("elise", "Thank you, Kate!")],
    [("elise", "Hello Kate. I will try the cooking class too, it made me hungry"), ("Emi", "Do, it is fun")],
    [("Emi", "Tonight the cooking class made osso buco"), ("elise", "That looks great, Kate.")],
    [("elise", "I walked Max in the park"), ("Emi", "How old is Max now?")],
    [("elise", "Max chased a cat, Emi!"), ("Emi", "haha")],
    [("elise", "I fed Max early"), ("Emi", "good")],
    *[[line] for line in FILLER * 3],
]
NO_NEIGHBOURS = S.SearchConfig(neighbours=0, backfill=False)


def _stored(store, chat, prefix):
    """``chat`` stored as user "u": a session a day, each of its lines "Who: text"."""
    for i, lines in enumerate(chat):
        add(store, "u", f"{prefix}{i}", *(("user", f"{who}: {text}") for who, text in lines), at=T0 + i * DAY)
    return store


@pytest.fixture
def chat(store):
    return _stored(store, CHAT, "s")


def test_a_question_naming_a_speaker_by_what_she_is_called_ranks_her_turns(chat):
    question = "What did Kate make in the cooking class?"
    # by hand: without the alias, "kate" is in elise's lines only (she calls Emi so), and her "Hello Kate … the
    # cooking class … made" holds every word asked; as "Emi" — her label, in every line of hers, counted by
    # presence — Emi's two answers share "cooking class made", and come first
    (plain,) = S.search(chat, "u", question, top_k=1, config=NO_NEIGHBOURS.with_(aliases=False))
    assert plain.content.split("] ", 1)[1].startswith("user: elise: ")
    top = S.search(chat, "u", question, top_k=2, config=NO_NEIGHBOURS)
    assert {b.content.split("] ", 1)[1] for b in top} == {
        "user: Emi: Tonight the cooking class made osso buco",
        "user: Emi: In the cooking class we made a pasta dish with ham and peas",
    }


def test_only_a_name_that_the_other_speaker_calls_her_by_is_read_as_hers(chat):
    index = S.user_index(chat, "u").index
    assert aliases.alias(index, "kate", "Kate") == "Emi"  # called so 5 times by elise, each next to a line of Emi's
    assert aliases.alias(index, "max", "Max") is None  # talked about (a dog), never called: no one's name
    assert aliases.alias(index, "emi", "Emi") is None  # a label already
    assert aliases.alias(index, "cooking", "Cooking") is None  # both say it
    assert aliases.labelled(index, "Does Kate like Max?") == "Does Emi like Max?"


def test_a_name_called_too_seldom_or_to_two_speakers_is_left_alone(store):
    # two calls: under MIN_CALLS; then a third name called by both speakers' turns next to two others
    add(store, "u", "a", ("user", "Emi: hello"), ("user", "elise: Hey Kate!"), at=T0)
    add(store, "u", "b", ("user", "Emi: hi"), ("user", "elise: Thanks, Kate!"), at=T0 + DAY)
    for i, (who, text) in enumerate(FILLER * 4):
        add(store, "u", f"f{i}", ("user", f"{who}: {text}"), at=T0 + (i + 2) * DAY)
    index = S.user_index(store, "u").index
    assert aliases.alias(index, "kate", "Kate") is None
    assert aliases.labelled(index, "What did Kate say?") == "What did Kate say?"


TEXTING = [  # Oliver calls Katherine "kat" as people text: first word set off by "!!!", after "ty" / "night", alone
    [("Katherine", "made banana bread today"), ("Oliver", "kat!!! are you alive")],
    [("Oliver", "ty kat"), ("Katherine", "np, the bread was a hit")],
    [("Katherine", "baked again, sourdough this time"), ("Oliver", "night kat")],
    [("Oliver", "KAT"), ("Katherine", "what")],
    [("Oliver", "Kat went quiet lol"), ("Katherine", "was busy")],  # opens with her name and goes on: about her
    *[[line] for line in [("Katherine", "work ran late"), ("Oliver", "the game was fun")] * 8],
]


@pytest.fixture
def texting(store):
    return _stored(store, TEXTING, "t")


def test_a_name_called_as_people_text_is_read_as_hers(texting):
    index = S.user_index(texting, "u").index
    # four calls (the fifth line opens with "Kat" and goes on: not one), each next to a line of Katherine's
    assert aliases.alias(index, "kat", "Kat") == "Katherine"
    assert aliases.labelled(index, "What did Kat bake?") == "What did Katherine bake?"
    calls = aliases._calls("Kat")
    said = ("kat!!! are you alive", "KAT", "kat...", "Kat went quiet")
    assert [bool(calls.search(f"Oliver: {text}")) for text in said] == [True, True, True, False]


def test_only_a_name_inside_the_question_is_replaced(store):
    # Katherine opens her messages with "Yup!" next to Oliver's: her turns "call" the word as they would a name
    for i in range(4):
        add(
            store,
            "u",
            f"y{i}",
            ("user", "Oliver: did you bake?"),
            ("user", f"Katherine: Yup! loaf {i}"),
            at=T0 + i * DAY,
        )
    for i, (who, text) in enumerate([("Katherine", "work ran late"), ("Oliver", "the game was fun")] * 4):
        add(store, "u", f"f{i}", ("user", f"{who}: {text}"), at=T0 + (i + 4) * DAY)
    index = S.user_index(store, "u").index
    assert aliases.alias(index, "yup", "Yup") == "Oliver"
    # a question's opening word may be any word: left alone; a capitalised word inside a sentence is a name
    assert aliases.labelled(index, "Yup, what did Katherine bake?") == "Yup, what did Katherine bake?"
    assert aliases.labelled(index, "Is it true? Yup or nope?") == "Is it true? Yup or nope?"
    assert aliases.labelled(index, "Did she say Yup?") == "Did she say Oliver?"


def _chat(store, lines):
    for i, (who, text) in enumerate(lines):
        add(store, "u", f"z{i}", ("user", f"{who}: {text}"), at=T0 + i * DAY)
    return S.user_index(store, "u").index


ZH_FILLER = [
    ("陈静", "今天加班到很晚"),
    ("周磊", "周末去爬山了"),
    ("陈静", "晚饭吃了面"),
    ("周磊", "新买的耳机不错"),
] * 3


def test_a_chinese_nickname_is_read_as_the_speakers_label(store):
    lines = [("周磊", "静静你在吗"), ("陈静", "我的猫生病了，带它去看了兽医"), ("周磊", "我的猫很乖"), *ZH_FILLER]
    index = _chat(store, lines)
    # 静静 (her given name doubled): written by 周磊 only; 小陈 (小 + her surname) is nobody's word here, and needs none
    assert aliases.labelled(index, "静静的猫怎么了？") == "陈静的猫怎么了？"
    assert aliases.labelled(index, "小陈的猫怎么了？") == "陈静的猫怎么了？"
    # by hand: both cat lines share 的猫 alone; 周磊's is shorter and first, unless the question names 陈静's label
    (plain,) = S.search(store, "u", "小陈的猫怎么了？", top_k=1, config=NO_NEIGHBOURS.with_(aliases=False))
    assert "周磊: 我的猫很乖" in plain.content
    (top,) = S.search(store, "u", "小陈的猫怎么了？", top_k=1, config=NO_NEIGHBOURS)
    assert "陈静: 我的猫生病了" in top.content


def test_a_chinese_nickname_is_left_alone_when_unwritten_said_by_its_owner_or_shared(store):
    lines = [("李天", "我天天加班"), ("王芳", "辛苦了"), ("李天", "天天都是"), ("王芳", "休息一下")] * 3
    index = _chat(store, [*lines, ("王芳", "我也天天加班")])
    # 天天 ("every day") is 李天's given name doubled: 王芳 writes it once, 李天 six times; 芳芳 nobody writes; 小李
    # (小 + surname) needs no one
    assert aliases.labelled(index, "谁天天加班？") == "谁天天加班？"
    assert aliases.labelled(index, "芳芳说了什么？") == "芳芳说了什么？"
    assert aliases.labelled(index, "小李说了什么？") == "李天说了什么？"


def test_a_chinese_nickname_two_speakers_share_is_nobodys(store):
    index = _chat(store, [("陈静", "你好"), ("陈磊", "你好啊"), ("陈静", "在吗"), ("陈磊", "在")] * 3)
    assert aliases.labelled(index, "小陈说了什么？") == "小陈说了什么？"


def test_a_chinese_form_of_address_is_read_as_the_label_when_someone_writes_it(store):
    lines = [
        ("周子航", "陈女士今天跳舞了吗"),
        ("陈桂兰", "跳了，我们队拿了第二名"),
        ("周子航", "厉害"),
        ("陈桂兰", "你吃饭没"),
    ]
    index = _chat(store, lines * 2)
    assert aliases.labelled(index, "陈女士她们拿了第几名？") == "陈桂兰她们拿了第几名？"  # written by her son
    assert aliases.labelled(index, "周先生吃饭了吗？") == "周先生吃饭了吗？"  # written by nobody


def _sessions(store, sessions):
    """``sessions`` stored as user "u": a session a day, each of its lines "Who: text"."""
    for i, lines in enumerate(sessions):
        add(store, "u", f"k{i}", *(("user", f"{who}: {text}") for who, text in lines), at=T0 + i * DAY)
    return S.user_index(store, "u").index


MOTHER_SON = [
    [("周子航", "腊肉煮好了"), ("陈桂兰", "好")],
    [("陈桂兰", "腊肉煮好了"), ("周子航", "嗯")],
    [("周子航", "妈，我到学校了"), ("陈桂兰", "注意安全")],
    [("周子航", "妈 香肠到了！"), ("陈桂兰", "好吃吗")],
    [("周子航", "妈！"), ("陈桂兰", "怎么了")],
    [("陈桂兰", "儿子，吃饭没"), ("周子航", "吃了")],
    *[[line] for line in ZH_FILLER],
]


def test_a_chinese_kinship_word_a_speaker_is_called_by_is_read_as_the_label(store):
    index = _sessions(store, MOTHER_SON)
    # her son calls her 妈 three times ("妈，", "妈 ", "妈！"), each answered by her
    assert aliases.labelled(index, "妈妈的腊肉煮好了吗？") == "陈桂兰的腊肉煮好了吗？"
    assert aliases.labelled(index, "老妈说了什么") == "陈桂兰说了什么"  # another form of the relation
    assert aliases.labelled(index, "儿子吃饭了吗") == "儿子吃饭了吗"  # called so once: too seldom
    assert aliases.labelled(index, "我妈说了什么") == "我妈说了什么"  # a lone 妈 is part of many words: not read
    assert aliases.labelled(index, "妈妈说了什么", kin_of=False) == "妈妈说了什么"
    # by hand: both 腊肉煮好了 lines hold the same words; the son's, said first, ranks first unless the question
    # names his mother's label
    question = "妈妈的腊肉煮好了吗？"
    (plain,) = S.search(store, "u", question, top_k=1, config=NO_NEIGHBOURS.with_(kin_aliases=False))
    assert "周子航: 腊肉煮好了" in plain.content
    (top,) = S.search(store, "u", question, top_k=1, config=NO_NEIGHBOURS)
    assert "陈桂兰: 腊肉煮好了" in top.content


def test_a_kinship_word_called_to_no_one_speaker_is_nobodys(store):
    # 妈 opens three messages, but as a word of a sentence ("妈妈做的菜") or called by both speakers to each other
    sessions = [
        [("周子航", "妈妈做的菜真好吃"), ("陈桂兰", "那多吃点")],
        [("周子航", "妈，在吗"), ("陈桂兰", "在")],
        [("陈桂兰", "妈，您身体好吗"), ("周子航", "嗯")],
        [("周子航", "妈 到家了"), ("陈桂兰", "好")],
        [("陈桂兰", "妈！"), ("周子航", "怎么")],
        *[[line] for line in ZH_FILLER],
    ]
    index = _sessions(store, sessions)
    assert aliases.labelled(index, "妈妈说了什么") == "妈妈说了什么"


def test_a_label_with_a_backslash_is_put_in_the_question_as_written(store):
    # re.sub reads "\1" in a replacement as a group: a label is text (the question became an error before)
    label = "E\\1mi"
    chat = [[(label if who == "Emi" else who, text) for who, text in lines] for lines in CHAT]
    index = S.user_index(_stored(store, chat, "s"), "u").index
    assert aliases.labelled(index, "What did Kate make?") == f"What did {label} make?"
    mother = [[("陈\\g<0>兰" if who == "陈桂兰" else who, text) for who, text in lines] for lines in MOTHER_SON]
    kin_index = _sessions(store, mother)
    assert aliases.labelled(kin_index, "妈妈说了什么") == "陈\\g<0>兰说了什么"


def test_mom_in_an_english_question_is_read_as_any_name_a_speaker_is_called(store):
    # no kinship list for English: "Mom" inside a question is a capitalised word, and the son's calls ("Hi Mom",
    # "Mom, look", "thanks Mom!") each answered by Ann make it hers (BENCHMARKS.md, "A kinship word …")
    sessions = [
        [("Tom", "Hi Mom, I arrived"), ("Ann", "good")],
        [("Tom", "Mom, look at this"), ("Ann", "nice")],
        [("Tom", "thanks Mom!"), ("Ann", "welcome")],
        [("Ann", "the soup is ready"), ("Tom", "ok")],
        *[[("Ann", "work was long")], [("Tom", "gym today")]] * 4,
    ]
    index = _sessions(store, sessions)
    assert aliases.labelled(index, "What soup did Mom make?") == "What soup did Ann make?"
