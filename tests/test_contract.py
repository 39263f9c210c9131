"""Add/Search validation: one precise message per fault, unknown fields reported, never a reason to lose a memory."""

from __future__ import annotations

import json

import pytest

from refind_cli.contract import parse_add, parse_search
from refind_cli.errors import InvalidInput

GOOD = {
    "request_id": "r1",
    "user_id": "u1",
    "session_id": "s1",
    "messages": [{"role": "user", "content": "Alice: hi", "timestamp": 1_700_000_000_000}],
}


def with_(**changes):
    body = {**GOOD, **changes}
    return {k: v for k, v in body.items() if v is not DROP}


def msg(**changes):
    m = {**GOOD["messages"][0], **changes}
    return with_(messages=[{k: v for k, v in m.items() if v is not DROP}])


DROP = object()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1, 2], "request: must be a JSON object, got array"),
        (with_(request_id=DROP), "request_id: required"),
        (with_(request_id=None), "request_id: required"),
        (with_(request_id=7), "request_id: must be a string, got number"),
        (with_(request_id="  "), "request_id: must be a non-empty string, got only whitespace"),
        (with_(user_id=DROP), "user_id: required"),
        (with_(user_id=""), "user_id: must be a non-empty string"),
        (with_(session_id=["s"]), "session_id: must be a string, got array"),
        (  # every stored message repeats its ids: a 200 KB session id on 2,000 messages wrote 1.5 GB
            with_(session_id="s" * 1025),
            "session_id: 1,025 characters, over the limit of 1,024 for an id (every stored message repeats its ids)",
        ),
        (
            with_(user_id="u" * 5000),
            "user_id: 5,000 characters, over the limit of 1,024 for an id (every stored message repeats its ids)",
        ),
        (
            with_(request_id="r" * 1025),
            "request_id: 1,025 characters, over the limit of 1,024 for an id (every stored message repeats its ids)",
        ),
        (with_(messages=DROP), "messages: required"),
        (with_(messages={"role": "user"}), "messages: must be an array, got object"),
        (with_(messages=[]), "messages: must hold at least one message"),
        (with_(messages=["hi"]), "messages[0]: must be an object with role and content, got string"),
        (msg(role=DROP), "messages[0].role: required"),
        (msg(role="tool"), "messages[0].role: must be one of user, assistant, system; got 'tool'"),
        (msg(role="User"), "messages[0].role: must be one of user, assistant, system; got 'User'"),
        (msg(content=DROP), "messages[0].content: required"),
        (msg(content=5), "messages[0].content: must be a string, got number"),
        (msg(content=""), "messages[0].content: must be a non-empty string"),
        (
            msg(timestamp="2023-01-01"),
            "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got string (read too: a number as a string, an ISO 8601 time that names its zone such as 2024-03-10T10:00:00Z)",
        ),
        (msg(timestamp=True), "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got boolean"),
        (  # JSON's 1e400 reads as infinity: said so, not "a whole number of milliseconds, got inf" (a probe)
            msg(timestamp=float("inf")),
            "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got infinity (a number past a "
            "float's range, such as 1e400)",
        ),
        (
            msg(timestamp=float("-inf")),
            "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got minus infinity (a number "
            "past a float's range, such as 1e400)",
        ),
        (
            msg(timestamp=float("nan")),
            "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got not a number",
        ),
        (
            msg(timestamp=-2),
            "messages[0].timestamp: -2 is neither Unix milliseconds in [100000000000, 10000000000000) nor Unix "
            "seconds in [100000000, 10000000000) (1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z)",
        ),
        (  # 1970-01-12 in seconds, or 17 minutes past the epoch in ms: ambiguous, still refused
            msg(timestamp=1_000_000),
            "messages[0].timestamp: 1000000 is neither Unix milliseconds in [100000000000, 10000000000000) nor "
            "Unix seconds in [100000000, 10000000000) (1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z)",
        ),
        (  # past 2286 as seconds, before 1973 as milliseconds: ambiguous
            msg(timestamp=50_000_000_000),
            "messages[0].timestamp: 50000000000 is neither Unix milliseconds in [100000000000, 10000000000000) "
            "nor Unix seconds in [100000000, 10000000000) (1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z)",
        ),
        (
            msg(timestamp="1.7e12"),
            "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got string (read too: a number as a string, an ISO 8601 time that names its zone such as 2024-03-10T10:00:00Z)",
        ),
        (  # seconds that round to the first millisecond past the stored dates (was stored, then unexportable)
            msg(timestamp=9_999_999_999.9996),
            "messages[0].timestamp: 9999999999.9996 Unix seconds is past the dates refind stores, "
            "1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z",
        ),
        (  # a number of 61 digits is not echoed whole
            msg(timestamp=10**60),
            "messages[0].timestamp: 100000000000…0000 (61 characters) is neither Unix milliseconds in "
            "[100000000000, 10000000000000) nor Unix seconds in [100000000, 10000000000) "
            "(1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z)",
        ),
    ],
)
def test_each_fault_has_a_precise_message(body, message) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_add(body)
    assert info.value.message == message


def test_second_message_fault_names_its_index() -> None:
    body = with_(messages=[GOOD["messages"][0], {"role": "assistant", "content": ""}])
    with pytest.raises(InvalidInput, match=r"^messages\[1\]\.content: must be a non-empty string$"):
        parse_add(body)


def test_content_and_ids_are_kept_byte_for_byte() -> None:
    content = "  Caroline: 周末去爬山吧 🏔\r\n  second line  "
    req = parse_add(with_(request_id="eval:run_abc:sample-3:chunk-0", messages=[{"role": "user", "content": content}]))
    assert req.messages[0].content == content
    assert req.request_id == "eval:run_abc:sample-3:chunk-0"


def test_whitespace_only_content_is_a_message_and_kept_verbatim() -> None:
    """The contract asks for a non-empty string; a long message hard-cut into chunks can leave one of only
    whitespace, and refusing it would lose the whole Add (the platform does not retry a 422)."""
    assert parse_add(msg(content=" \n\t")).messages[0].content == " \n\t"


def test_timestamp_may_be_absent_null_or_an_integral_float() -> None:
    assert parse_add(msg(timestamp=DROP)).messages[0].timestamp is None
    assert parse_add(msg(timestamp=None)).messages[0].timestamp is None
    assert parse_add(msg(timestamp=1.7e12)).messages[0].timestamp == 1_700_000_000_000


def test_unknown_fields_are_reported_not_refused_unless_strict() -> None:
    body = with_(metadata={"x": 1}, agent_id="a", messages=[{"role": "user", "content": "hi", "name": "Al"}])
    req = parse_add(body)
    assert req.unknown_fields == ("metadata", "agent_id", "messages[0].name")
    with pytest.raises(
        InvalidInput, match=r"unknown fields \(refused by --strict\): metadata, agent_id, messages\[0\]\.name"
    ):
        parse_add(body, strict=True)


def test_payload_hash_ignores_key_order_and_unknown_fields_but_not_content() -> None:
    a = parse_add(GOOD)
    b = parse_add(
        {
            "messages": [{"timestamp": 1_700_000_000_000, "content": "Alice: hi", "role": "user", "x": 1}],
            "session_id": "s1",
            "user_id": "u1",
            "request_id": "r1",
            "app_id": "z",
        }
    )
    c = parse_add(msg(content="Alice: hi "))
    assert a.payload_hash() == b.payload_hash() != c.payload_hash()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"user_id": "u", "top_k": 5}, "query: required"),
        ({"query": "q", "top_k": 5}, "user_id: required"),
        ({"query": "q", "user_id": "u"}, "top_k: required"),
        ({"query": "q", "user_id": "u", "top_k": "five"}, "top_k: must be an integer, got string"),
        ({"query": "q", "user_id": "u", "top_k": "-5"}, "top_k: must be an integer, got string"),
        ({"query": "q", "user_id": "u", "top_k": 0}, "top_k: must be at least 1, got 0"),
        ({"query": "q", "user_id": "u", "top_k": 2.5}, "top_k: must be an integer, got number"),
        ({"query": "q", "user_id": "u", "top_k": 5, "options": "A"}, "options: must be an array of strings"),
    ],
)
def test_search_faults(body, message) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_search(body)
    assert info.value.message == message


def test_search_accepts_options_and_ignores_unknown_fields() -> None:
    req = parse_search({"query": "q", "user_id": "u", "top_k": 100, "options": ["A. tea", "B. coffee"], "filters": {}})
    assert req.options == ("A. tea", "B. coffee") and req.unknown_fields == ("filters",)


@pytest.mark.parametrize(
    ("timestamp", "stored", "note"),
    [
        (
            1_700_000_000,
            1_700_000_000_000,
            "messages[0].timestamp: 1700000000 read as Unix seconds (×1000 = 1700000000000 ms)",
        ),
        (
            1_700_000_000.25,
            1_700_000_000_250,
            "messages[0].timestamp: 1700000000.25 read as Unix seconds (×1000 = 1700000000250 ms)",
        ),
        ("1700000000000", 1_700_000_000_000, "messages[0].timestamp: a string of digits read as a number"),
        (1_700_000_000_000, 1_700_000_000_000, None),
        # a probe of round 24: each refused the whole Add with a 422, which the platform does not retry
        (  # what time.time() * 1000 gives
            1_700_000_000_000.5,
            1_700_000_000_000,
            "messages[0].timestamp: 1700000000000.5 read as 1700000000000 ms (the fraction of a millisecond dropped)",
        ),
        (0, None, "messages[0].timestamp: 0 read as no said-at (a placeholder for an unknown time)"),
        (-1, None, "messages[0].timestamp: -1 read as no said-at (a placeholder for an unknown time)"),
        (-1.0, None, "messages[0].timestamp: -1.0 read as no said-at (a placeholder for an unknown time)"),
    ],
)
def test_unambiguous_timestamps_are_read_and_said(timestamp, stored, note) -> None:
    """Seconds (1973-2286) and a string of digits are stored as milliseconds, with a note naming the field."""
    req = parse_add(msg(timestamp=timestamp))
    assert req.messages[0].timestamp == stored
    assert req.normalized == ((note,) if note else ())
    assert req.payload_hash() == parse_add(msg(timestamp=stored)).payload_hash()  # a replay in ms is identical


def test_top_k_digits_and_above_the_limit_are_read() -> None:
    assert parse_search({"query": "q", "user_id": "u", "top_k": "7"}).top_k == 7
    big = parse_search({"query": "q", "user_id": "u", "top_k": 5000})
    assert big.top_k == 1000 and big.normalized == ("top_k: 5000 clamped to 1000",)


def test_an_id_of_1024_characters_is_kept_and_a_replay_line_refuses_a_longer_one(tmp_path) -> None:
    from refind_cli.replay import replay
    from refind_cli.store import Store

    assert parse_add(with_(session_id="s" * 1024)).session_id == "s" * 1024
    source = tmp_path / "lines.jsonl"
    line = {"user_id": "u", "session_id": "s" * 1025, "role": "user", "content": "hi"}
    source.write_text(json.dumps(line) + "\n" + json.dumps({**line, "session_id": "s"}) + "\n")
    with Store(tmp_path / "r.db", retention_days=None) as store:
        summary = replay(store, str(source))
        assert (summary.invalid_lines, summary.messages_added) == (1, 1)
        assert summary.problems[0].endswith(
            ":1: session_id: 1,025 characters, over the limit of 1,024 for an id (every stored message repeats its ids)"
        )
