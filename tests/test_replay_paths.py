"""The replay's fast paths give exactly what the plain steps give: the same message ids, payload hashes, parsed
messages, tokens and segment bytes (issue 9 item 4: replay ≥ 20,000 messages/s with nothing stored differently)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import Clock
from hypothesis import given, settings
from hypothesis import strategies as st

from refind_cli import index_store, tokenize
from refind_cli.contract import AddRequest, Message, parse_add, parse_message
from refind_cli.errors import InvalidInput
from refind_cli.replay import replay
from refind_cli.store import DAY_MS, Store, message_id, message_ids

# quotes, backslashes, control characters, non-ASCII, astral, a lone surrogate, the old id separator
_TEXT = st.text(alphabet=st.sampled_from(list('ab "\\\x00\x1f\n\x7fé北\u2028🙂\ud800')), max_size=8)


def _json_id(user_id: str, request_id: str, index: int) -> str:
    """The derivation as first written with json.dumps: what every stored id was computed by."""
    raw = json.dumps([user_id, request_id, index], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


@settings(max_examples=300, deadline=None)
@given(_TEXT, _TEXT, st.integers(0, 30))
def test_message_ids_are_the_json_derivation(user_id: str, request_id: str, count: int) -> None:
    assert message_ids(user_id, request_id, 0, count) == [_json_id(user_id, request_id, i) for i in range(count)]
    assert message_id(user_id, request_id, count) == _json_id(user_id, request_id, count)


def test_a_known_id_is_unchanged() -> None:
    assert message_id("alice", "r1", 0) == hashlib.sha256(b'["alice","r1",0]').hexdigest()[:24]


def _json_payload_hash(req: AddRequest) -> str:
    body = {
        "session_id": req.session_id,
        "messages": [{"role": m.role, "content": m.content, "timestamp": m.timestamp} for m in req.messages],
    }
    data = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


_NO_SURROGATE = st.text(alphabet=st.sampled_from(list('ab "\\\x00\x1f\n\x7fé北\u2028🙂')), max_size=8)
_TIMESTAMP = st.one_of(st.none(), st.integers(-5, 10**13), st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=300, deadline=None)
@given(_NO_SURROGATE, st.lists(st.tuples(_NO_SURROGATE, _NO_SURROGATE, _TIMESTAMP), max_size=4))
def test_the_payload_hash_is_the_json_formula(session_id: str, messages: list) -> None:
    req = AddRequest("r", "u", session_id, tuple(Message(role, content, ts) for role, content, ts in messages))
    assert req.payload_hash() == _json_payload_hash(req)


_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**14), 10**14),
    st.sampled_from([1_690_000_000_000, 1_690_000_000, 99_999_999_999, 10**13, 10**13 - 1, 1.5e12, 1.5]),
    st.sampled_from(["user", "assistant", "system", "", " ", "tool", "1690000000000", "hi"]),
    st.lists(st.integers(), max_size=1),
)
_PLAUSIBLE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", 1])},
    optional={"content": st.sampled_from(["hi", "", " ", None, 3]), "timestamp": _VALUE, "extra": _VALUE},
)
_MESSAGE = st.one_of(
    _PLAUSIBLE,
    st.dictionaries(st.sampled_from(["role", "content", "timestamp", "extra"]), _VALUE, max_size=4),
    _VALUE,
)


@settings(max_examples=500, deadline=None)
@given(_MESSAGE)
def test_parse_add_reads_each_message_as_parse_message_does(item: object) -> None:
    """parse_add checks a plain message in one go; anything it does not take that way goes through parse_message,
    so both give the same message, the same unknown fields, notes and errors."""
    notes: list[str] = []
    try:
        expected = parse_message(item, "messages[0].", notes)
    except InvalidInput as exc:
        with pytest.raises(InvalidInput) as refused:
            parse_add({"request_id": "r", "user_id": "u", "session_id": "s", "messages": [item]})
        assert refused.value.message == exc.message
        return
    req = parse_add({"request_id": "r", "user_id": "u", "session_id": "s", "messages": [item]})
    assert req.messages == (expected[0],)
    assert (req.unknown_fields, req.normalized) == (tuple(expected[1]), tuple(notes))
    assert type(req.messages[0].timestamp) is type(expected[0].timestamp)


_WORDS = [
    "The",
    "running",
    "Caf\u00e9",
    "\u65b0\u5e74\u5feb\u4e50",
    "a",
    "_x_",
    "dog's",
    "\u03a3",
    "42",
    "\ufb01ne",
    "",
    "\u0e09\u0e31\u0e19\u0e0a\u0e2d\u0e1a\u0e02\u0e49\u0e32\u0e27",  # Thai, Khmer, Myanmar, Tibetan, Sinhala (ZWJ)
    "\u1781\u17d2\u1789\u17bb\u17c6\u1785\u17bc\u179b",
    "\u1000\u103b\u103d\u1014\u103a\u1010\u1031\u102c\u103a",
    "\u0f56\u0f7c\u0f51\u0f0b\u0f61\u0f72\u0f42",
    "\u0dc1\u0dca\u200d\u0dbb\u0dd3",
    "\u2764\ufe0f",
]
_DOC = st.tuples(
    st.lists(st.one_of(st.sampled_from(_WORDS), st.text(max_size=4)), max_size=8).map(" ".join),
    st.one_of(st.none(), st.integers(0, 20_000).map(lambda d: d * DAY_MS + 5)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=6))
def test_analyze_each_is_analyze_of_each_text(texts: list[str]) -> None:
    flat = tokenize.analyze_each(texts)
    ends = [i for i, t in enumerate(flat) if t == tokenize.DOC_END]
    assert len(ends) == len(texts)
    starts = [0, *(i + 1 for i in ends)][: len(ends)]
    for text, a, b in zip(texts, starts, ends, strict=True):
        assert [t for t in flat[a:b] if t] == tokenize.analyze(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(_DOC, min_size=1, max_size=10))
def test_a_segment_of_texts_is_the_segment_of_their_tokens(docs: list[tuple[str, int | None]]) -> None:
    seqs = [3 * i + 1 for i in range(len(docs))]
    tokens = [(seq, index_store.message_tokens(c, s)) for seq, (c, s) in zip(seqs, docs, strict=True)]
    texts = [index_store.index_text(c, s) for c, s in docs]
    for (_, t), text in zip(tokens, texts, strict=True):
        assert tokenize.analyze(text) == t  # a message's tokens are its text's and then its date's
    built = index_store.segment_of_texts(seqs, texts)
    assert index_store.encode(built) == index_store.encode(index_store.build_segment(tokens))
    backwards = index_store.segment_of_texts(seqs[::-1], texts[::-1])  # sorted by seq first, as build_segment does
    assert index_store.encode(backwards) == index_store.encode(built)


def _sorting_merge(segments: list[index_store.Segment]) -> index_store.Segment:
    seqs = np.concatenate([s.seqs for s in segments])
    return index_store._merge_sorting(segments, seqs, np.concatenate([s.lengths for s in segments]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_DOC, max_size=6), min_size=2, max_size=4))
def test_merging_segments_in_seq_order_is_the_general_merge(batches: list[list[tuple[str, int | None]]]) -> None:
    segments, seq = [], 1
    for batch in batches:
        seqs = list(range(seq, seq + len(batch)))
        seq += len(batch) + 1
        segments.append(index_store.segment_of_texts(seqs, [index_store.index_text(c, s) for c, s in batch]))
    in_order = index_store.merge(segments)
    assert index_store.encode(in_order) == index_store.encode(_sorting_merge(segments))
    assert np.all(np.diff(in_order.seqs) > 0)


def test_a_request_past_retention_replayed_again_is_indexed(db_path: Path, tmp_path: Path) -> None:
    """Its old messages held the store's highest seqs; the new ones must not take those seqs back below the index's
    watermark (they did: SQLite gives max(seq) + 1, and the index read only seqs above the batch's start)."""
    clock = Clock(1_700_000_000_000)
    source = tmp_path / "again.jsonl"
    line = {"request_id": "r1", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "kayak"}]}
    source.write_text(json.dumps(line) + "\n")
    with Store(db_path, clock=clock, retention_days=30) as store:
        assert replay(store, str(source)).messages_added == 1
        clock.now += 31 * DAY_MS  # past retention, not swept yet
        assert replay(store, str(source)).messages_added == 1  # stored again as new data
        assert index_store.verify(store.conn) == []
        assert [m.seq for m in store.user_messages("u")] == [2]


def test_the_replay_leaves_the_page_cache_as_it_found_it(db_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "one.jsonl"
    line = {"request_id": "r1", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "hi"}]}
    source.write_text(json.dumps(line) + "\n")
    from refind_cli.replay import REPLAY_CACHE_KIB

    with Store(db_path) as store:
        before = store.conn.execute("PRAGMA cache_size").fetchone()[0]
        during: list[int] = []
        replay(
            store,
            str(source),
            parallel=False,
            on_progress=lambda done, total: during.append(store.conn.execute("PRAGMA cache_size").fetchone()[0]),
        )
        assert during and set(during[1:]) == {-REPLAY_CACHE_KIB}  # larger while the batches are written
        assert store.conn.execute("PRAGMA cache_size").fetchone()[0] == before
