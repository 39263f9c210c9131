"""Which stored planner traces quote a message: one pass over a trace finds what a test of each needle finds."""

from __future__ import annotations

import json
import random

import pytest
from helpers import CLOCK_T0, Clock
from helpers import add_request as _add

from refind_cli import lifecycle
from refind_cli.store import DAY_MS, Store
from refind_cli.trace import QUOTE_PREFIX_CHARS, Quotes, needles


def _each_needle(messages: list[tuple[str, str]], text: str) -> bool:
    """The rule spelled out: a trace quotes a message when it holds any of the message's needles."""
    return any(n in text for mid, content in messages for n in needles(mid, content))


@pytest.mark.parametrize("chunk", [9, 16, 1 << 16])
def test_one_pass_finds_exactly_what_each_needle_finds(monkeypatch, chunk: int) -> None:
    # a two-letter alphabet makes near misses common: a needle's head held without the needle, a needle across the
    # boundary between two pieces of the trace (chunk 9 and 16 cut a trace of 60–300 characters into many pieces)
    monkeypatch.setattr(Quotes, "_FEW", 0)  # every case through the one-pass path
    monkeypatch.setattr(Quotes, "_CHUNK", chunk)
    rng = random.Random(7)
    found = 0
    for _ in range(400):
        messages = [
            (f"{rng.getrandbits(96):024x}", "".join(rng.choice("ab") for _ in range(rng.randint(0, 40))))
            for _ in range(rng.randint(1, 6))
        ]
        text = "".join(rng.choice('ab"') for _ in range(rng.randint(0, 300)))
        if rng.random() < 0.3:  # a quote of one message's start, somewhere in the trace
            _, content = rng.choice(messages)
            cut = rng.randint(0, len(text))
            text = text[:cut] + json.dumps(content.strip()[:QUOTE_PREFIX_CHARS])[1:-1] + text[cut:]
        expected = _each_needle(messages, text)
        found += expected
        assert Quotes(messages).found_in(text) is expected, (messages, text)
    assert 50 < found < 350  # both answers were asked for many times


def test_messages_that_open_alike_are_filed_apart() -> None:
    # a chat's messages open with their speaker's name: filed by their first characters, 8,000 of them shared two
    # keys and a trace quoting any other message of those speakers was tested against every one of them again (a
    # review of round 27: slower than testing each needle in turn on traces past 64 KB)
    rng = random.Random(3)
    messages = [
        (f"{rng.getrandbits(96):024x}", rng.choice(["Caroline: ", "Melanie: "]) + f"message {i} on day {i % 7}")
        for i in range(4000)
    ]
    quotes = Quotes(messages)
    assert max(len(filed) for filed in quotes._by_key.values()) <= 2
    assert len(quotes._by_key) >= len(quotes._long) // 2


def test_a_quote_across_the_boundary_of_two_pieces_of_a_long_trace_is_found(monkeypatch) -> None:
    monkeypatch.setattr(Quotes, "_FEW", 0)
    messages = [(f"{i:024x}", f"message number {i} says something of its own") for i in range(200)]
    quote = json.dumps(messages[137][1][:QUOTE_PREFIX_CHARS])[1:-1]
    for at in range((1 << 16) - len(quote) + 1, (1 << 16) + 1):  # the quote ends at, or crosses, the first piece's end
        text = "x" * at + quote + "y" * 100
        assert Quotes(messages).found_in(text), at
    assert not Quotes(messages).found_in("x" * (1 << 17))


@pytest.mark.parametrize("few", [0, 10**9])
def test_expire_of_many_messages_removes_each_trace_quoting_one_and_keeps_the_rest(db_path, monkeypatch, few) -> None:
    # through the one-pass path and the needle-by-needle one alike: a trace quoting one expired message by its text
    # alone (no id) and one by its id alone are removed; a trace quoting a message still within retention is kept
    monkeypatch.setattr(Quotes, "_FEW", few)
    clock = Clock(CLOCK_T0)
    store = Store(db_path, clock=clock, retention_days=30)
    _add(store, "old", "alice", "s1", *[f"old message {i} about the lake house, day zero" for i in range(100)])
    clock.now = CLOCK_T0 + 20 * DAY_MS
    _add(store, "new", "alice", "s2", "a message of day twenty, still kept")
    old_id = store.conn.execute("SELECT id FROM messages WHERE content LIKE 'old message 42 %'").fetchone()[0]
    traces = {
        "t-text": {"hits": [{"content": "old message 77 about the lake house, day zero"}]},
        "t-id": {"hits": [{"id": old_id}]},
        "t-keep": {"hits": [{"content": "a message of day twenty, still kept"}]},
    }
    with store.write():
        for sid, trace in traces.items():
            store.conn.execute(
                "INSERT INTO searches (id, user_id, at, query, mode, duration_ms, returned_ids, trace) "
                "VALUES (?, 'alice', ?, 'q', 'planner', 1.0, '[]', ?)",
                (sid, CLOCK_T0 + 20 * DAY_MS, json.dumps(trace)),
            )
    clock.now = CLOCK_T0 + 35 * DAY_MS
    result = lifecycle.expire(store)
    assert (result.users["alice"].messages, result.users["alice"].searches) == (100, 2)
    assert [r[0] for r in store.conn.execute("SELECT id FROM searches")] == ["t-keep"]
    store.close()
