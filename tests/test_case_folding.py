"""Unicode case folding end to end: stored turns and queries match whatever case either is written in, a database
indexed by the analyzer that lowercased is indexed again, and day names in a query fold as words do."""

from __future__ import annotations

import logging
import unicodedata

import pytest
from helpers import T0, add
from typer.testing import CliRunner

from refind_cli import health, index_store, tokenize
from refind_cli import search as S
from refind_cli.cli import app
from refind_cli.query_dates import named_days
from refind_cli.search_config import SearchConfig
from refind_cli.store import Store


def _sessions(store, query):
    """The sessions of the turns that match ``query`` (no backfill of turns that do not)."""
    return [b.session_id for b in S.search(store, "alice", query, top_k=5, config=SearchConfig(backfill=False))]


def _fill(store):
    add(store, "alice", "s1", ("user", "I flew to İstanbul for the conference"), at=T0)
    add(store, "alice", "s2", ("user", "We live on Hauptstraße 5 now"), at=T0)
    add(store, "alice", "s3", ("user", "Η ΟΔΟΣ.ΑΘΗΝΑ ήταν κλειστή"), at=T0)
    add(store, "alice", "s4", ("user", "Mein Fuß tut weh"), at=T0)


@pytest.mark.parametrize(
    ("query", "session"),
    [
        ("istanbul", "s1"),
        ("ISTANBUL trip", "s1"),
        ("İSTANBUL", "s1"),
        ("HAUPTSTRASSE", "s2"),
        ("hauptstrasse", "s2"),  # (fuzzy expansion found this one before: "strass" is two edits from "straß")
        ("FUSS", "s4"),  # (and not this one: a word of four letters is expanded by one edit only)
        ("οδος", "s3"),
    ],
)
def test_a_turn_is_found_whatever_case_the_query_writes_it_in(store, query, session):
    _fill(store)
    assert _sessions(store, query) == [session]


def _old_normalise(text: str) -> str:
    """Analyzer version 1's step 1: NFKC, then lower()."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return text.lower()


def _clear_caches():
    for cache in (tokenize._ASCII_CACHE, tokenize._WORD_CACHE, tokenize._STEM_CACHE):
        cache.clear()
    S.clear()


def test_a_database_indexed_by_analyzer_1_is_indexed_again_and_then_finds_istanbul(db_path, monkeypatch):
    with monkeypatch.context() as old:  # the analyzer as it was: version 1, lower()
        old.setattr(tokenize, "ANALYZER_VERSION", 1)
        old.setattr(tokenize, "_normalise", _old_normalise)
        old.setattr(tokenize, "unaccented", lambda word: word)  # nor did it give a word's token without accents
        _clear_caches()
        with Store(db_path, retention_days=None) as store:
            _fill(store)
            assert S.user_index(store, "alice").maintained
            assert _sessions(store, "istanbul") == []  # what the old analyzer missed
            assert index_store.stats(store.conn)["state"] == "ready"
    _clear_caches()
    report = health.check(db_path)  # before it is opened: not damage (exit 0), a note that it is indexed again
    assert report["ok"] and report["derived"] == []
    assert report["notes"] == [
        f"the search index was built by analyzer version 1 (this refind's is {tokenize.ANALYZER_VERSION}): every "
        "message is indexed again on "
        "the next open; nothing to repair"
    ]
    with Store(db_path, retention_days=None) as store:  # this version opens it: everything is indexed again
        assert index_store.stats(store.conn)["state"] == "ready"
        assert index_store.verify(store.conn) == []
        assert S.user_index(store, "alice").maintained
        assert _sessions(store, "istanbul") == ["s1"]
        assert _sessions(store, "HAUPTSTRASSE") == ["s2"]


@pytest.mark.parametrize(
    ("query", "day"),
    [
        ("what on Auguſt 5, 2023?", 19574),  # "ſ" (long s) matches "s" under IGNORECASE and folds to it
        ("what on 5 APRİL 2023?", 19452),
        ("what on Aprıl 5, 2023?", None),  # dotless "ı" matches "i" under IGNORECASE but folds to no month
    ],
)
def test_month_names_fold_as_the_analyzer_folds_words(query, day):
    assert named_days(query) == ([] if day is None else [day])


def test_a_query_naming_a_day_with_a_long_s_is_searched(db_path):
    # lower() left "Auguſt" as "auguſt", which no month name is: the search failed with a KeyError
    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "s1", ("user", "the regatta was great"), at=T0)
    args = ["search", "--user", "alice", "--mode", "bm25", "--db", str(db_path), "regatta on Auguſt 5, 2023"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "regatta" in result.output


def _server_log(cfg) -> list[str]:
    """What building the app logs on ``refind.server`` (a handler of its own: whatever logging config is in force)."""
    from refind_cli.server.app import create_app

    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    handler = Keep(logging.INFO)
    logger = logging.getLogger("refind.server")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        create_app(cfg)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return said


def old_database(db_path) -> None:
    """A database indexed by analyzer 1 (lower(), before case folding): its next open indexes it again."""
    with pytest.MonkeyPatch.context() as old:
        old.setattr(tokenize, "ANALYZER_VERSION", 1)
        old.setattr(tokenize, "_normalise", _old_normalise)
        old.setattr(tokenize, "unaccented", lambda word: word)  # nor did it give a word's token without accents
        _clear_caches()
        with Store(db_path, retention_days=None) as store:
            _fill(store)
    _clear_caches()


def test_the_server_logs_the_re_index_of_an_upgraded_database(db_path):
    from refind_cli.server.app import ServerSettings

    old_database(db_path)
    cfg = ServerSettings(db=db_path, retention_days=None, mode="bm25", expire_interval_s=0)
    said = _server_log(cfg)
    assert len(said) == 2, said  # when it starts (before the first batch) and when it ends, once each
    assert said[0] == "indexing 4 messages for search (the first open after an upgrade): listening when done"
    assert said[1].startswith("indexed 4 messages in ")
    assert not [line for line in _server_log(cfg) if "index" in line]  # opened since: nothing to index, nothing said
