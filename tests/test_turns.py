"""Messages → turns: chronological order, the two units, ids stable when other turns arrive."""

from __future__ import annotations

from helpers import MIN, T0, add

from refind_cli.turns import build_turns, session_order


def _contents(turns):
    return [[m.content for m in t.messages] for t in turns]


def test_message_unit_orders_by_said_at_then_arrival(store):
    add(store, "u", "s", ("user", "late", T0 + 5 * MIN), ("user", "early", T0))
    add(store, "u", "s", ("user", "middle", T0 + 2 * MIN))
    turns = build_turns(store.user_messages("u"), "message")
    assert _contents(turns) == [["early"], ["middle"], ["late"]]


def test_same_said_at_keeps_arrival_then_index(store):
    add(store, "u", "s", ("user", "a", T0), ("user", "b", T0))
    add(store, "u", "s", ("user", "c", T0))
    assert _contents(build_turns(store.user_messages("u"))) == [["a"], ["b"], ["c"]]


def test_undated_messages_sort_where_they_arrived(store):
    add(store, "u", "s", ("user", "first undated"), ("user", "dated", T0 + 10 * MIN), ("user", "undated after"))
    add(store, "u", "s", ("user", "dated earlier", T0))
    order = [m.content for m in session_order(store.user_messages("u"))["s"]]
    assert order == ["first undated", "dated earlier", "dated", "undated after"]


def test_pair_unit_joins_assistant_replies_to_the_user_message(store):
    add(
        store,
        "u",
        "s",
        ("assistant", "welcome"),
        ("assistant", "how can I help?"),
        ("user", "q1"),
        ("assistant", "a1"),
        ("assistant", "a1 more"),
        ("user", "q2"),
        ("system", "note"),
        ("assistant", "a3"),
        at=T0,
    )
    turns = build_turns(store.user_messages("u"), "pair")
    assert _contents(turns) == [["welcome", "how can I help?"], ["q1", "a1", "a1 more"], ["q2"], ["note", "a3"]]
    assert [t.id for t in turns] == [t.messages[0].id for t in turns]


def test_sessions_never_mix_and_keep_first_arrival_order(store):
    add(store, "u", "b", ("user", "b1", T0))
    add(store, "u", "a", ("user", "a1", T0 - MIN))
    add(store, "u", "b", ("user", "b2", T0 + MIN))
    turns = build_turns(store.user_messages("u"))
    assert [(t.session_id, t.messages[0].content) for t in turns] == [("b", "b1"), ("b", "b2"), ("a", "a1")]


def test_turn_ids_do_not_change_when_other_turns_arrive(store):
    add(
        store,
        "u",
        "s1",
        ("user", "hello", T0),
        ("assistant", "hi", T0 + MIN),
        ("user", "bye", T0 + 2 * MIN),
        ("assistant", "ciao", T0 + 3 * MIN),
    )
    add(store, "u", "s2", ("user", "other", T0 + 9 * MIN))
    before = {
        u: {t.messages[0].content: t.id for t in build_turns(store.user_messages("u"), u)} for u in ("message", "pair")
    }
    # an EARLIER message arrives later in another session, and a new one in the same session
    add(store, "u", "s2", ("user", "earlier elsewhere", T0 - 60 * MIN))
    add(store, "u", "s1", ("user", "later here", T0 + 30 * MIN))
    for unit in ("message", "pair"):
        after = {t.messages[0].content: t.id for t in build_turns(store.user_messages("u"), unit)}
        assert {k: after[k] for k in before[unit]} == before[unit]
