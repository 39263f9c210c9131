"""Warming a user's index after an Add (server/warm.py): once per user however many Adds, bounded, never fatal, and
never a different answer."""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager

from refind_cli import index_cache
from refind_cli.server.app import encode_items
from refind_cli.server.warm import Warmer


class Recorder:
    """A warm function that records the users it is given; the first call waits until ``release`` is set."""

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.calls: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.fail = fail
        self.called = threading.Condition()

    def wait_for(self, count: int, timeout: float = 10.0) -> bool:
        with self.called:
            return self.called.wait_for(lambda: len(self.calls) >= count, timeout)

    def __call__(self, store: object, user_id: str) -> None:
        self.calls.append(user_id)
        self.started.set()
        with self.called:
            self.called.notify_all()
        self.release.wait(10)
        if user_id in self.fail:
            raise RuntimeError("boom")


@contextmanager
def no_store():
    yield None


def test_a_user_touched_many_times_before_its_turn_is_warmed_once_in_order():
    warm = Recorder()
    warmer = Warmer(no_store, warm=warm)
    warmer.touch("a")
    assert warm.started.wait(10)  # "a" is being warmed: the rest queue behind it
    for user in ["b", "c", "b", "b", "c", "d"]:
        warmer.touch(user)
    warm.release.set()
    assert warmer.idle(10)
    warmer.close()
    assert warm.calls == ["a", "b", "c", "d"]
    assert warmer.warmed == 4


def test_the_queue_is_bounded_and_drops_the_oldest_waiting_user():
    warm = Recorder()
    warmer = Warmer(no_store, warm=warm, max_pending=2)
    warmer.touch("a")
    assert warm.started.wait(10)
    for user in ["b", "c", "d"]:
        warmer.touch(user)
    warm.release.set()
    assert warmer.idle(10)
    warmer.close()
    assert warm.calls == ["a", "c", "d"]  # "b" waited longest: its first search will load it instead


def test_a_failed_warm_is_logged_without_data_and_the_next_user_is_still_warmed(caplog):
    warm = Recorder(fail=frozenset({"secret-user"}))
    warm.release.set()
    warmer = Warmer(no_store, warm=warm)
    with caplog.at_level(logging.WARNING, logger="refind.server"):
        warmer.touch("secret-user")
        assert warmer.idle(10)
        warmer.touch("b")
        assert warmer.idle(10)
    warmer.close()
    assert warm.calls == ["secret-user", "b"]
    assert warmer.warmed == 1
    assert "warming an index failed: RuntimeError at test_server_warm.py:" in caplog.text
    assert "secret-user" not in caplog.text


def test_a_user_is_warmed_again_only_after_the_interval_while_others_are_not_held_up():
    warm = Recorder()
    warm.release.set()
    warmer = Warmer(no_store, warm=warm, min_interval_s=60)
    warmer.touch("a")
    assert warmer.idle(10)
    warmer.touch("a")  # an Add right after the last warming: not before 60 s
    warmer.touch("b")  # never warmed: at once
    assert warm.wait_for(2)
    assert not warmer.idle(0.5)  # "a" still waits its turn
    warmer.close()  # and closing does not wait for it
    assert warm.calls == ["a", "b"]


def test_after_close_nothing_more_is_warmed():
    warm = Recorder()
    warm.release.set()
    warmer = Warmer(no_store, warm=warm)
    warmer.touch("a")
    assert warmer.idle(10)
    warmer.close()
    warmer.touch("b")
    assert warmer.idle(1)
    assert warm.calls == ["a"]


# ---- in the server -------------------------------------------------------------------------------------------


def add(client, user: str, request_id: str, *contents: str) -> None:
    messages = [{"role": "user", "content": c, "timestamp": 1_683_554_160_000 + i} for i, c in enumerate(contents)]
    body = {"request_id": request_id, "user_id": user, "session_id": "s1", "messages": messages}
    assert client.post("/v1/memories/add", json=body).status_code == 200


def live_users() -> set[str]:
    """Users whose maintained index is in the process's cache (any database: other tests' servers may still be
    closing, so tests ask about their own users only)."""
    return {key[2] for key in index_cache.CACHE if isinstance(key, tuple) and key[0] == "live"}


CONVERSATION = [
    "Caroline: I went hiking at Mount Rainier last weekend",
    "Melanie: did you see any marmots on the trail?",
    "Caroline: two of them, and a lot of wildflowers",
    "Melanie: I am painting a sunrise over the lake",
]
QUERIES = ["Where did Caroline go hiking?", "What is Melanie painting?", "marmots wildflowers", "Rainier"]


def test_an_add_loads_its_users_index_before_any_search(make_client):
    client = make_client()
    add(client, "alice", "r1", *CONVERSATION[:2])
    add(client, "alice", "r2", *CONVERSATION[2:])
    warmer = client.app.state.runtime.warmer
    assert warmer.idle(10)
    assert "alice" in live_users()  # loaded by the warmer: nobody has searched yet
    assert warmer.warmed >= 1


def test_warming_changes_no_answer_and_can_be_turned_off(make_client, tmp_path):
    answers = {}
    for warm in (False, True):  # the same Adds into two databases, one server each
        index_cache.clear()
        client = make_client(warm=warm, db=tmp_path / f"warm-{warm}.db")
        add(client, "alice", "r1", *CONVERSATION[:2])
        add(client, "alice", "r2", *CONVERSATION[2:])
        runtime = client.app.state.runtime
        if warm:
            assert runtime.warmer.idle(10)
            assert "alice" in live_users()
        else:
            assert runtime.warmer is None and "alice" not in live_users()
        answers[warm] = [
            client.post("/v1/memories/search", json={"query": q, "user_id": "alice", "top_k": 10}).json()
            for q in QUERIES
        ]
    for cold, warmed in zip(answers[False], answers[True], strict=True):
        for item in cold["data"] + warmed["data"]:
            item.pop("created_at")  # recorded-at: the two databases were written at different instants
        assert cold == warmed
    assert any(a["data"] for a in answers[True])


def test_the_response_body_is_the_json_the_standard_library_would_write():
    import json

    items = [
        {"id": "t1", "content": '[2023-05-08 13:56] user: 你好 "quoted" \\ back\nslash\u2028', "score": 0.5},
        {"id": "t2", "content": "emoji 🙂 and control \x01", "score": 1.25, "created_at": "2023-05-08T13:56Z"},
    ]
    body = encode_items(items)
    assert body.decode() == json.dumps({"data": items}, ensure_ascii=False, separators=(",", ":"))
    tiny = [{"id": "t3", "content": "x", "score": 1.25e-05}]
    assert json.loads(encode_items(tiny)) == {"data": tiny}  # written 0.0000125: the same number


def _text_reads(store: object) -> list[str]:
    reads: list[str] = []
    store.conn.set_trace_callback(lambda sql: reads.append(sql) if "FROM messages" in sql else None)
    return reads


def test_a_warmed_user_s_first_search_reads_no_text_and_an_add_keeps_what_was_read(store) -> None:
    from helpers import T0

    from refind_cli import search as S
    from refind_cli.contract import parse_add
    from refind_cli.server.warm import warm_user

    def add(rid: str, text: str, at: int) -> None:
        msg = {"role": "user", "content": text, "timestamp": at}
        store.add(parse_add({"request_id": rid, "user_id": "alice", "session_id": "s", "messages": [msg]}))

    for i in range(20):
        add(f"r{i}", f"kayak trip number {i}", T0 + i)
    index_cache.clear()
    warm_user(store, "alice")
    reads = _text_reads(store)
    first = S.search(store, "alice", "kayak trip", top_k=100)
    assert len(first) > 0 and reads == []  # every rendered turn came from the warmed text
    add("r20", "kayak lake", T0 + 20)
    warm_user(store, "alice")  # reads the one new message only
    assert [sql for sql in reads if "seq IN (" in sql and "," in sql.split("seq IN (")[1]] == []
    store.conn.set_trace_callback(None)
    assert S.search(store, "alice", "kayak", top_k=100) == S.UserIndex(store.user_messages("alice")).search(
        "kayak", top_k=100
    )


def test_a_user_whose_text_exceeds_the_bound_is_not_preloaded_twice(store, monkeypatch) -> None:
    from helpers import T0

    from refind_cli.contract import parse_add
    from refind_cli.search import user_index

    monkeypatch.setattr(index_cache, "TURN_TEXT", 50)
    for i in range(10):
        msg = {"role": "user", "content": f"kayak trip number {i} " + "x" * 20, "timestamp": T0 + i}
        store.add(parse_add({"request_id": f"r{i}", "user_id": "alice", "session_id": "s", "messages": [msg]}))
    turns = user_index(store, "alice").index.turns
    assert turns.preload() is False
    reads = _text_reads(store)
    assert turns.preload() is False and reads == []
    store.conn.set_trace_callback(None)


def test_a_preloaded_view_is_handed_to_every_connection_as_a_plain_list_with_the_same_answers(store, tmp_path):
    from helpers import T0

    from refind_cli import search as S
    from refind_cli.contract import parse_add
    from refind_cli.server.warm import warm_user
    from refind_cli.store import Store

    for i in range(12):
        msg = {"role": "user", "content": f"kayak trip number {i}", "timestamp": T0 + i}
        store.add(parse_add({"request_id": f"r{i}", "user_id": "alice", "session_id": "s", "messages": [msg]}))
    index_cache.clear()
    with Store(store.path, retention_days=store.retention_days) as other:  # a search thread's own connection
        assert not isinstance(S.user_index(other, "alice").index.turns, list)  # not preloaded: read on demand
        warm_user(store, "alice")
        turns = S.user_index(other, "alice").index.turns
        assert isinstance(turns, list) and [t.id for t in turns] == [
            t.id for t in S.UserIndex(store.user_messages("alice")).turns
        ]
        reads = _text_reads(other)
        assert S.search(other, "alice", "kayak trip", top_k=100) == S.UserIndex(store.user_messages("alice")).search(
            "kayak trip", top_k=100
        )
        assert reads == []
