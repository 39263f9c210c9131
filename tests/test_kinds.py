"""Kinds of a question's category words (kinds.py): the phrase read, the WordNet table built and read, the words
kept, and a toy corpus ranked by hand with and without the stage."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest
from helpers import T0

from refind_cli import kinds, tokenize
from refind_cli import search as S
from refind_cli.contract import parse_add
from refind_cli.tokenize import analyze

TOY = Path(__file__).resolve().parent.parent / "fixtures" / "wordnet-toy"


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("What sports does Kevin like?", ["sports"]),
        ("What types of sports did Kevin do?", ["sports"]),
        ("What kind of pasta did Kate make on 29 Dec 2023?", ["pasta"]),
        ("What physical activity did Kevin do?", ["physical", "activity"]),
        ("Which cities have both, Kate and Elise, been to?", ["cities"]),  # "have" ends it
        ("What games has John played?", ["games"]),  # not "john" (whose first sense is a toilet)
        ("Which city?\nPorto\nMadrid", ["city"]),  # the end of the sentence ends it
        ("What\u2019s new?", []),  # a curly apostrophe joins, as a straight one: not "what" + "s new"
        ("When did Kevin go hiking?", []),  # no "what" / "which": not a category question
        ("What did Kevin watch? Which books does Paola like?", ["books"]),  # "did" ends the first phrase at once
        ("what board games or card games", ["board", "games"]),  # at most three words, "or" ends it anyway
        ("WHAT ſPORTS does Kevin like?", ["sports"]),  # folded as the analyzer folds (a long s is an s)
        ("Which cafés did we visit?", ["cafés"]),  # one word of any script, not "caf" and "s" (sulfur…)
        ("Which cafe\u0301s did we visit?", ["cafés"]),  # decomposed: normalised as the analyzer normalises
        ("What ＳＰＯＲＴＳ does Kevin like?", ["sports"]),  # full-width letters, as the analyzer reads them
    ],
)
def test_the_category_phrase_is_up_to_three_words_after_what_or_which(question: str, words: list[str]) -> None:
    assert kinds.category_words(question) == words


def test_a_query_expands_at_most_max_words_category_words() -> None:
    # 100,000 characters of "what xx yy": 15,000 words took 3.5 s to collect (a list searched for each) and 0.4 s more
    # to look up; a question has a handful
    query = " ".join(f"what w{a}{b} x{a}{b}" for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrst")
    assert len(query) > 5_000
    words = kinds.category_words(query)
    assert words[:4] == ["waa", "xaa", "wab", "xab"] and len(words) == kinds.MAX_WORDS  # the first ones, in order


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> kinds.Table:
    path = tmp_path_factory.mktemp("kinds") / "toy"
    kinds.write(kinds.build(TOY), path)
    return kinds.read(path)


def test_the_table_holds_each_noun_with_kinds_and_its_inflections(toy: kinds.Table) -> None:
    assert [h.decode() for h in toy.heads] == ["athletics", "child", "city", "diversion", "football", "sport"]
    assert toy.base("sports") == "sport"
    assert toy.base("cities") == "city"  # -ies
    assert toy.base("children") == "child"  # noun.exc
    assert toy.base("golf") is None  # a leaf: nothing below it, so not in the table
    assert toy.base("kevin") is None


def test_kinds_are_every_synset_below_the_first_senses_nearest_first(toy: kinds.Table) -> None:
    # sport's first sense: football (2 lemmas) and golf, then American football below football
    assert toy.kinds("sport", senses=1, depth=None) == ["football", "football game", "golf", "american football"]
    assert toy.kinds("sport", senses=1, depth=1) == ["football", "football game", "golf"]
    # the second sense (a good loser) adds its own kinds, level by level; "loser(p)"'s adjective marker is dropped
    assert toy.kinds("sport", senses=2, depth=None) == [
        "football",
        "football game",
        "golf",
        "good sport",
        "loser",
        "american football",
    ]
    assert toy.kinds("city", senses=1, depth=None) == ["miami", "magic city"]  # instances count
    assert toy.kinds("diversion", senses=1, depth=None) == [
        "sport",
        "athletics",
        "football",
        "football game",
        "golf",
        "american football",
    ]


def test_the_table_holds_its_kinds_analyzed_and_reads_them_without_the_analyzer(
    toy: kinds.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = list(dict.fromkeys(t for t in analyze("\n".join(toy.kinds("sport", senses=1, depth=None))) if len(t) > 2))
    assert int(toy.analyzer[0]) == tokenize.ANALYZER_VERSION
    monkeypatch.setattr(kinds, "analyze", _no_analyzer)  # the table's tokens alone: nothing is stemmed now
    assert toy.kind_tokens("sport", senses=1, depth=None, most=100) == want
    assert toy.kind_tokens("sport", senses=1, depth=None, most=2) == want[:2]  # the nearest first


def _no_analyzer(text: str) -> list[str]:
    raise AssertionError("analyzed at search time")


def test_a_table_made_by_another_analyzer_is_analyzed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as other:  # another analyzer's table: its tokens are not this analyzer's
        other.setattr(tokenize, "ANALYZER_VERSION", tokenize.ANALYZER_VERSION + 1)
        other.setattr(kinds, "_tokens", lambda lemmas: [lemma.upper() for lemma in lemmas])
        kinds.write(kinds.build(TOY), tmp_path / "other")
    table = kinds.read(tmp_path / "other")
    assert int(table.analyzer[0]) == tokenize.ANALYZER_VERSION + 1
    analyzed = [t for t in analyze("\n".join(table.kinds("sport", senses=1, depth=None))) if len(t) > 2]
    assert table.kind_tokens("sport", senses=1, depth=None, most=100) == list(dict.fromkeys(analyzed))


def test_a_table_is_restamped_only_when_its_tokens_are_this_analyzers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as older:  # an older analyzer whose tokens are this one's
        older.setattr(tokenize, "ANALYZER_VERSION", tokenize.ANALYZER_VERSION - 1)
        kinds.write(kinds.build(TOY), tmp_path / "same")
        kinds.write(kinds.build(TOY), tmp_path / "other")
    with monkeypatch.context() as other:  # and one whose tokens differ for one synset
        tokens = kinds._tokens
        other.setattr(kinds, "_tokens", lambda lemmas: ["golfing"] if "golf" in lemmas else tokens(lemmas))
        (tmp_path / "other" / "token_text.npy").unlink()
        (tmp_path / "other" / "token_ptr.npy").unlink()
        arrays = kinds.build(TOY)
        kinds.write({k: arrays[k] for k in ("token_text", "token_ptr")}, tmp_path / "other")
    assert kinds.restamp(tmp_path / "same") == 0
    assert int(kinds.read(tmp_path / "same").analyzer[0]) == tokenize.ANALYZER_VERSION
    assert kinds.restamp(tmp_path / "other") == 1
    assert int(kinds.read(tmp_path / "other").analyzer[0]) == tokenize.ANALYZER_VERSION - 1


def test_the_shipped_tables_tokens_are_this_analyzers() -> None:
    # its stamp is no claim: every synset's lemmas analyzed now give the tokens it holds (2 s)
    assert kinds.stale_synsets(kinds.table()) == 0


def test_the_shipped_table_knows_the_kinds_of_everyday_categories() -> None:
    # made by this analyzer (else every process stems the lemmas again): rebuild with python -m refind_cli.kinds DIR
    assert int(kinds.table().analyzer[0]) == tokenize.ANALYZER_VERSION

    def has(word: str, kind: str) -> bool:
        return set(analyze(kind)) <= kinds.kind_tokens(word, 1, None).keys()

    assert has("sports", "football") and has("sports", "golf") and has("sports", "basketball")
    assert has("cities", "Miami") and has("cities", "Boston")
    assert has("pasta", "lasagna") and has("foods", "cheese")
    assert kinds.kind_tokens("kevin", 1, None) == {}
    assert kinds.kind_tokens("women", 1, None)  # WordNet's -men → -man
    assert len(kinds.kind_tokens("colors", 1, None)) > 100  # color's kinds, though "colors" is a head too
    # the broadest words keep their nearest kinds only: a process's cache stays bounded (entity has 57,877)
    assert len(kinds.kind_tokens("entities", 1, None)) == kinds.MAX_CANDIDATES


def _user(
    counts: dict[str, int],
) -> tuple[dict[str, int], Callable[[Mapping[str, int], Hashable], AbstractSet[str]]]:
    """A user's vocabulary (token → turns holding it) and its ``present``."""
    return counts, lambda candidates, _: candidates.keys() & counts.keys()


def test_kept_kinds_are_written_by_the_user_rare_there_and_not_asked_already() -> None:
    question = "What kind of pasta did Kate make?"
    lasagna, spaghetti, macaroni = (analyze(w)[0] for w in ("lasagna", "spaghetti", "macaroni"))
    user = _user({lasagna: 1, spaghetti: 30, macaroni: 4, "kate": 500})  # no other kind of pasta

    # 1,000 turns: at most 2% (20) of them: spaghetti is too common to say anything
    assert kinds.kind_terms(*user, 1000, question, ["pasta"]) == sorted([lasagna, macaroni])
    assert kinds.kind_terms(*user, 1000, question, ["pasta", lasagna]) == [macaroni]  # asked already
    assert kinds.kind_terms(*user, 1000, "Did Kate make pasta?", ["pasta"]) == []  # no category phrase
    # 10 turns: a kind in up to 3 of them is kept (2% of 10 is less than one turn)
    assert kinds.kind_terms(*user, 10, question, ["pasta"]) == [lasagna]


def test_a_word_adds_at_most_its_nearest_kinds_that_the_user_wrote() -> None:
    """ "animal" has thousands of kinds; a user who wrote every one of them gets the nearest ``most`` only."""
    places = kinds.kind_tokens("animals", 1, None)
    ordered = sorted(places, key=places.__getitem__)
    assert len(ordered) > 1000
    question = "What animals did Kate see?"
    every = _user(dict.fromkeys(ordered, 1))
    assert kinds.kind_terms(*every, 10_000, question, [], most=64) == sorted(ordered[:64])
    assert len(kinds.kind_terms(*every, 10_000, question, [])) == kinds.MAX_KINDS
    # the nearest the user wrote: the first 10 missing, the cap takes the next 64
    most = _user(dict.fromkeys(ordered[10:], 1))
    assert kinds.kind_terms(*most, 10_000, question, [], most=64) == sorted(ordered[10:74])


KEVIN = [
    "Kevin: I play football on Sundays",
    "Kevin: my sister called me today",
    "Kevin: golf is relaxing",
    "Kevin: the weather was rainy",
    "Kevin: I cooked pasta",
]


def _kevin(store: object) -> None:
    for i, text in enumerate(KEVIN):  # a session each: no neighbours, the session rank is the turn's own
        msg = {"role": "user", "content": text, "timestamp": T0 + i * 60_000}
        store.add(parse_add({"request_id": f"r{i}", "user_id": "kevin", "session_id": f"s{i}", "messages": [msg]}))


def test_a_category_question_ranks_the_turns_naming_its_kinds_first(store) -> None:
    """By hand: "sports" and "like" are in no turn, so without kinds every turn scores by "kevin" alone, and the
    shorter turns (golf, weather, pasta: 3 words and the month's 2) beat the longer ones (football, sister) by BM25's
    length norm. With kinds, football and golf also score, weakly, for being kinds of sport: football first, as it
    holds two ("football", and "play" of golf's "stroke play"), each worth 0.15 × 1.39 × 0.43 = 0.09 against
    "kevin"'s 0.04, then golf (0.15 × 1.39 × 0.47 = 0.10)."""
    _kevin(store)
    question = "What sports does Kevin like?"
    with_kinds = [b.content.split("user: ", 1)[1] for b in S.search(store, "kevin", question, top_k=5)]
    assert with_kinds[:2] == ["Kevin: I play football on Sundays", "Kevin: golf is relaxing"]
    off = S.SearchConfig().with_(kinds_weight=0.0)
    without = [b.content.split("user: ", 1)[1] for b in S.search(store, "kevin", question, top_k=5, config=off)]
    assert set(without[:3]) == {"Kevin: golf is relaxing", "Kevin: the weather was rainy", "Kevin: I cooked pasta"}
    # the index built from the user's rows (another vocabulary path) gives the same answer
    scratch = S.UserIndex(store.user_messages("kevin")).search(question, top_k=5)
    assert scratch == S.search(store, "kevin", question, top_k=5)


def test_kinds_senses_is_refused_beyond_what_the_table_keeps() -> None:
    from refind_cli.errors import InvalidInput

    assert S.SearchConfig(kinds_senses=kinds.MAX_SENSES).kinds_senses == 3
    with pytest.raises(InvalidInput, match="kinds_senses must be 1 to 3"):
        S.SearchConfig(kinds_senses=4)
    with pytest.raises(InvalidInput, match="kinds_senses must be 1 to 3"):
        S.SearchConfig(kinds_senses=0)


def test_kinds_kept_per_segment_are_those_the_whole_vocabulary_gives_after_each_add(db_path) -> None:
    """``expand.present`` keeps what each segment holds of a category word's kinds (by the word, its senses and
    depth): after each Add (a new segment, some merged), in a view that hides the last Adds, and for an index built
    from scratch, every category word's kinds are those that an intersection with the whole visible vocabulary — the
    definition, nothing kept — gives, and so is the search."""
    from functools import partial

    from helpers import DAY, Clock, add

    from refind_cli import expand, term_groups
    from refind_cli.store import Store

    clock = Clock()
    store = Store(db_path, retention_days=None, clock=clock)
    term_groups.GROUPS.clear()
    texts = [
        "Kevin: I play football on Sundays",
        "Kevin: a fantastic day for golf",
        "Kevin: we flew to Miami, then Boston",
        "Kevin: tennis with my sister",
        "Kevin: I cooked lasagna and macaroni",
        "Kevin: a walk by the river",
        "Kevin: basketball in Chicago",
        "Kevin: spaghetti again, ravioli next time",  # ravioli: a kind of pasta in its second sense only
    ]
    questions = ["What sports does Kevin like?", "Which cities did Kevin visit?", "What kind of pasta did he cook?"]
    found: set[str] = set()
    for i, text in enumerate(texts):
        add(store, "kevin", f"s{i}", ("user", text, clock.now))
        clock.now += DAY
        views = [S.user_index(store, "kevin").index, S.user_index(store, "kevin", as_of=clock.now - 3 * DAY).index]
        views.append(S.UserIndex(store.user_messages("kevin")).index)  # from scratch: the index is the one piece
        for view in views:
            vocab = expand.vocabulary(view)
            whole = _user(dict.fromkeys(vocab, 1))[1]  # the visible words, nothing kept
            for question in questions:
                for senses in (1, 3):
                    tokens = analyze(question)
                    kept = kinds.kind_terms(
                        vocab, partial(expand.present, view), len(view), question, tokens, senses=senses
                    )
                    assert kept == kinds.kind_terms(vocab, whole, len(view), question, tokens, senses=senses)
                    found.update(kept)
    assert set(analyze("football golf tennis basketball Miami Boston Chicago lasagna macaroni ravioli")) <= found
    for question in questions:
        warm = S.search(store, "kevin", question, top_k=8)
        cold = S.UserIndex(store.user_messages("kevin")).search(question, top_k=8)  # bm25s, from scratch
        assert [(b.content, b.score) for b in warm] == [(b.content, b.score) for b in cold]
    store.close()


def test_a_category_word_with_kinds_is_not_also_expanded_as_a_misspelling(store) -> None:
    """ "sports", a word this user never wrote, is a category whose kinds they did write (football): its kinds serve
    it, and fuzzy matching does not also read it as a misspelling of "spots" (one edit away), which the user wrote in
    a turn about something else. A word with no kinds ("spoots") is still expanded."""
    texts = ["Kevin: I play football on Sundays", "Kevin: the dog has white spots", "Kevin: I cooked pasta"]
    for i, text in enumerate(texts):
        msg = {"role": "user", "content": text, "timestamp": T0 + i * 60_000}
        store.add(parse_add({"request_id": f"r{i}", "user_id": "kevin", "session_id": f"s{i}", "messages": [msg]}))
    plain = S.SearchConfig().with_(backfill=False)

    def found(question: str, config: S.SearchConfig) -> list[str]:
        return [b.content.split("user: ", 1)[1] for b in S.search(store, "kevin", question, top_k=5, config=config)]

    assert found("What sports are there?", plain) == ["Kevin: I play football on Sundays"]
    both = found("What sports are there?", plain.with_(fuzzy_categories=True))
    assert set(both) == {"Kevin: I play football on Sundays", "Kevin: the dog has white spots"}
    assert found("What spoots are there?", plain) == ["Kevin: the dog has white spots"]
