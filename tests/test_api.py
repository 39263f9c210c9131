"""The Python API (`refind_cli.Memory`): README's example runs as written; keyword-only options, plain dataclasses,
errors of the RefindError family, the same answers as the CLI, and a package import that stays cheap."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT

from refind_cli import Conflict, Forgotten, InvalidInput, Memory, NotFound, RefindError
from refind_cli.model import Reply

README = (ROOT / "README.md").read_text(encoding="utf-8")
T0 = "2023-06-01T08:00"


def readme_example() -> str:
    section = README[README.index("## Python API") :]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@pytest.mark.slow
def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", readme_example()], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env()
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "[2023-05-08 13:56] user: I adopted a cat named Biscuit"
    assert lines[1].startswith("date_from: date '2023/02/30' is not a date")
    assert lines[2:4] == ["['s2', 's1']", "2"]
    assert lines[4] == "duplicate" and "was forgotten" in lines[5]


@pytest.fixture
def memory(tmp_path: Path):
    with Memory(tmp_path / "m.db", retention_days=None) as m:
        yield m


def _fill(memory: Memory) -> None:
    memory.add("I booked the trip to Lisbon with my sister Maya", user="alice", session="s1", at=T0)
    memory.add("Biscuit the dog needs grain-free food", user="alice", session="s2", at="2023-07-01")
    memory.add("My boat is moored in Lisbon", user="bob", session="b1", at=T0)


def test_search_returns_the_same_blocks_as_the_cli(memory: Memory, cli, db_path: Path) -> None:
    _fill(memory)
    hits = memory.search("Lisbon trip", user="alice", top_k=5)
    assert hits[0].session_id == "s1" and "trip to Lisbon" in hits[0].as_dict()["content"]
    memory.close()
    os.replace(memory.path, db_path)
    r = cli("search", "Lisbon trip", "--user", "alice", "--mode", "bm25", "--json", "--retention-days", "off")
    assert [item["id"] for item in json.loads(r.output)["data"]] == [h.id for h in hits]


def test_options_are_keyword_only(memory: Memory) -> None:
    with pytest.raises(TypeError):
        memory.search("Lisbon", "alice")  # type: ignore[misc]  # user is keyword-only: the call itself is the test
    with pytest.raises(TypeError):
        memory.add("hi", "alice", "s1")  # type: ignore[misc]  # same


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top_k": 0}, "top_k: must be between 1 and 1000, got 0"),
        ({"date_to": "yesterday"}, "date_to: date 'yesterday' is not a date"),
        ({"user": " "}, "user: must be a non-empty string, got only whitespace"),
        ({"as_of": "9" * 20}, "as_of 99999999999999999999: Unix milliseconds must be at most"),
    ],
)
def test_bad_search_arguments_raise_invalid_input_naming_the_field(memory: Memory, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        memory.search("Lisbon", **{"user": "alice", **kwargs})
    assert caught.value.message.startswith(message)


def test_add_refuses_bad_input_and_stores_nothing(memory: Memory) -> None:
    with pytest.raises(InvalidInput, match=r"^messages\[0\]\.role: must be one of user, assistant, system"):
        memory.add("hi", user="alice", session="s1", role="robot")
    with pytest.raises(InvalidInput, match=r"^at: 'noon' is not an ISO 8601 time such as 2023-05-08T13:56 or "):
        memory.add("hi", user="alice", session="s1", at="noon")
    with pytest.raises(
        InvalidInput, match=r"^at: '1969-12-31' is outside the dates refind stores, 1973-03-03T09:46:40Z to"
    ):
        memory.add("hi", user="alice", session="s1", at="1969-12-31")
    for content in (5, None, b"hi"):  # a TypeError from iterating it, or a list of ints
        with pytest.raises(InvalidInput, match=r"^content: must be a string or a list of messages, got "):
            memory.add(content, user="alice", session="s1")
    good = {"request_id": "r1", "user_id": "alice", "session_id": "s1", "messages": [{"role": "user", "content": "x"}]}
    bad = {**good, "request_id": "r2", "messages": [{"role": "user"}]}
    with pytest.raises(InvalidInput, match=r"^requests\[1\]\.messages\[0\]\.content: required"):
        memory.add_many([good, bad])
    assert memory.export(user="alice") == []  # the valid request before it was not stored either


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (("user", 5, None), "content: must be a string, got number"),
        (("user", "", None), "content: must be a non-empty string"),
        ((None, "x", None), "role: required"),
        (
            ("user", "x", "yesterday"),
            "timestamp: must be Unix milliseconds (an integer) or null, got string (read too: a number as a string, an ISO 8601 time that names its zone such as 2024-03-10T10:00:00Z)",
        ),
        (("user", "x", -5), "timestamp: -5 is neither Unix milliseconds"),
    ],
)
def test_add_many_checks_addrequest_objects_as_it_checks_dicts(memory: Memory, message, said) -> None:
    # a probe of round 17: AddRequest objects went to the store unchecked — content 5 raised TypeError, "" and a
    # timestamp of -5 were stored (and the export of them was then refused), a null role "collided"
    from refind_cli.contract import AddRequest, Message

    good = AddRequest("r1", "alice", "s1", (Message("user", "kept"),))
    bad = AddRequest("r2", "alice", "s1", (Message(*message),))
    with pytest.raises(InvalidInput) as err:
        memory.add_many([good, bad])
    assert err.value.message.startswith(f"requests[1].messages[0].{said}"), err.value.message
    assert memory.export(user="alice") == []
    assert memory.add_many([good])[0].status == "added"  # a sound one is stored as before


def test_add_many_of_no_list_is_invalid_input(memory: Memory) -> None:
    for nothing in (None, "r1", {"request_id": "r1"}):
        with pytest.raises(InvalidInput, match=r"^requests: must be a list of Add requests"):
            memory.add_many(nothing)


def test_a_lone_surrogate_is_invalid_input_not_a_unicode_error(memory: Memory) -> None:
    memory.add("kept", user="alice", session="s1")
    lone = "\ud800"
    surrogate = r"contains an unpaired UTF-16 surrogate \(\\ud800\), which is not Unicode text$"
    with pytest.raises(InvalidInput, match="^messages\\[0\\]\\.content: " + surrogate):
        memory.add(f"bad {lone}", user="alice", session="s1")
    with pytest.raises(InvalidInput, match="^user_id: " + surrogate):
        memory.add("x", user=lone, session="s1")
    good = {"request_id": "r1", "user_id": "alice", "session_id": "s1", "messages": [{"role": "user", "content": "x"}]}
    with pytest.raises(InvalidInput, match=r"^requests\[1\]\.session_id: " + surrogate):
        memory.add_many([good, {**good, "request_id": "r2", "session_id": lone}])
    for call in (
        lambda: memory.search("x", user=lone),
        lambda: memory.export(user=lone),
        lambda: memory.forget(user=lone),
        lambda: memory.sessions(user=lone),
    ):
        with pytest.raises(InvalidInput, match="^an argument " + surrogate):
            call()
    assert [r["messages"][0]["content"] for r in memory.export(user="alice")] == ["kept"]


def test_add_is_idempotent_and_conflicts_and_tombstones_are_errors_of_the_family(memory: Memory) -> None:
    first = memory.add("hello", user="alice", session="s1", at=T0)
    assert first.status == "added" and first.request_id.startswith("api-")
    assert memory.add("hello", user="alice", session="s1", at=T0).status == "duplicate"
    with pytest.raises(Conflict):
        memory.add("other text", user="alice", session="s1", request_id=first.request_id)
    memory.forget(user="alice", request_id=first.request_id)
    with pytest.raises(Forgotten):
        memory.add("hello", user="alice", session="s1", at=T0)
    with pytest.raises(NotFound):
        memory.forget(user="alice")
    assert issubclass(Forgotten, RefindError) and issubclass(NotFound, RefindError)


def test_export_then_add_many_rebuilds_an_identical_store(memory: Memory, tmp_path: Path) -> None:
    _fill(memory)
    memory.add([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], user="alice", session="s3")
    exported = memory.export(user="alice")
    with Memory(tmp_path / "copy.db", retention_days=None) as copy:
        assert all(o.status == "added" for o in copy.add_many(exported))  # type: ignore[union-attr]
        assert copy.export(user="alice") == exported
    assert [s.session_id for s in memory.sessions(user="alice", limit=2)] == ["s3", "s2"]
    assert memory.sessions(user="nobody") == []
    assert len(memory.sessions(user="alice", limit=10**20)) == 3  # more than SQLite can count: all of them


def test_expire_and_retention_hide_what_is_old(tmp_path: Path) -> None:
    now = [1_700_000_000_000]
    with Memory(tmp_path / "r.db", retention_days=1, clock=lambda: now[0]) as memory:
        memory.add("old kayak story", user="alice", session="s1")
        now[0] += 2 * 86_400_000
        assert memory.search("kayak", user="alice") == []  # hidden at read time, before any sweep
        result = memory.expire(dry_run=True)
        assert result.messages == 1 and result.dry_run
        assert memory.expire().messages == 1
    with pytest.raises(RefindError, match="below the minimum of 1 day"):
        Memory(tmp_path / "x.db", retention_days=0.5)
    with pytest.raises(RefindError, match=r"^retention: 'nan' is not a number of days \(or 'off'\)$"):
        Memory(tmp_path / "nan.db", retention_days="nan")
    with pytest.raises(RefindError, match=r"^retention: True is not a number of days \(or 'off'\)$"):
        Memory(tmp_path / "x.db", retention_days=True)  # read as one day: a day's memory hidden, then expired


def test_agent_search_with_a_scripted_model(memory: Memory) -> None:
    _fill(memory)
    replies = iter(
        [
            {"thought": "look", "action": "search_chatrecord", "keywords": "Lisbon"},
            {"thought": "keep", "action": "take_note", "results": [1]},
            {"thought": "done", "action": "finish_search"},
        ]
    )

    def scripted(messages: list[dict]) -> Reply:
        return Reply(json.dumps(next(replies)), prompt_tokens=7, completion_tokens=3)

    answer = memory.agent_search("where is the trip", user="alice", model=scripted, top_k=2)
    assert answer.path == "notes" and answer.llm_calls == 3 and answer.tokens == 30
    assert [e.session_id for e in answer.evidence] == ["s1"] and answer.search_id
    assert answer.trace[0]["kind"]


def test_an_on_event_callback_that_raises_costs_neither_the_search_nor_its_trace(memory: Memory) -> None:
    # before round 29 the callback's ValueError escaped the planner: the search, its model calls paid for, was lost,
    # and its trace was never stored
    from refind_cli import trace
    from refind_cli.trace import Event

    _fill(memory)
    replies = iter(
        [
            {"action": "search_chatrecord", "keywords": "Lisbon"},
            {"action": "take_note", "results": [1]},
            {"action": "finish_search"},
        ]
    )

    def scripted(messages: list[dict]) -> Reply:
        return Reply(json.dumps(next(replies)), prompt_tokens=7, completion_tokens=3)

    seen: list[str] = []

    def progress(event: Event) -> None:
        seen.append(event.kind)
        if event.kind == "search":
            raise ValueError("my progress bar broke")

    with pytest.warns(RuntimeWarning) as warned:
        answer = memory.agent_search("where is the trip", user="alice", model=scripted, top_k=2, on_event=progress)
    assert [e.session_id for e in answer.evidence] == ["s1"] and answer.llm_calls == 3  # the search went on
    assert seen[-1] == "search" and seen.count("search") == 1  # not called again once it raised
    assert [str(w.message) for w in warned] == [  # said once, naming the callback's line and the stored trace
        f"on_event raised ValueError: my progress bar broke ({__file__}:{progress.__code__.co_firstlineno + 3}, given "
        f"the 'search' event of step 1); it was not called again for this search, which went on: its trace is "
        f"stored: `refind inspect search {answer.search_id}`"
    ]
    assert warned[0].filename == __file__  # pointing at the caller's agent_search line
    kinds = [e.kind for e in trace.load(memory._store, answer.search_id).events]
    assert kinds[: len(seen)] == seen and "finish" in kinds  # the whole trace, stored
    with pytest.raises(InvalidInput, match=r"^on_event: must be a callable taking each trace event, or None, got int$"):
        memory.agent_search("where is the trip", user="alice", model=scripted, on_event=5)  # type: ignore[arg-type]


def test_one_memory_can_be_shared_by_threads(memory: Memory) -> None:
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(20):
                memory.add(f"thread {i} message {j} about kayaks", user="alice", session=f"t{i}")
                memory.search("kayaks", user="alice", top_k=3)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sum(len(r["messages"]) for r in memory.export(user="alice")) == 80


@pytest.mark.slow
def test_importing_the_package_loads_no_api_and_nothing_heavy() -> None:
    code = (
        "import sys, refind_cli\n"
        "loaded = [m for m in ('refind_cli.api', 'refind_cli.store', 'litellm', 'fastapi', 'mcp') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "refind_cli.Memory\n"
        "assert 'refind_cli.api' in sys.modules\n"
        "heavy = [m for m in ('litellm', 'fastapi', 'mcp') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())
    assert out.returncode == 0, out.stderr


def test_every_lazy_name_is_exported_and_resolves() -> None:
    import refind_cli

    assert sorted(refind_cli.__all__) == sorted(["__version__", *refind_cli._LAZY])
    assert all(getattr(refind_cli, name) is not None for name in refind_cli.__all__)
    with pytest.raises(AttributeError):
        refind_cli.NoSuchThing  # noqa: B018


def test_the_package_is_marked_typed() -> None:
    assert (ROOT / "refind_cli" / "py.typed").exists()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_a_storage_fault_is_a_refind_error_not_a_sqlite3_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from refind_cli.errors import DatabaseLocked

    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "0.2")
    db = tmp_path / "memory.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("Caroline: first", user="alice", session="s1")
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock past the busy timeout
        try:
            with pytest.raises(DatabaseLocked, match="locked"):
                memory.add("Caroline: second", user="alice", session="s1")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        memory.add("Caroline: second", user="alice", session="s1")  # the lock gone, the same call succeeds
        assert len(memory.search("Caroline", user="alice", top_k=5)) >= 1


def test_odd_arguments_are_invalid_input_not_python_errors(memory: Memory, tmp_path: Path) -> None:
    # a probe of round 17: each raised AttributeError, TypeError or ValueError
    with pytest.raises(InvalidInput, match=r"^user: must be a string, got array$"):
        memory.expire(user=["alice"])
    with pytest.raises(InvalidInput, match=r"^path: must be a file path without NUL characters"):
        Memory(tmp_path / "a\0b.db")
    with pytest.raises(InvalidInput, match=r"^path: must be a file path"):
        Memory(5)  # type: ignore[arg-type]
    memory.add("I adopted a cat", user="alice", session="s1")
    assert memory.search("cat", user="alice", options=None) == memory.search("cat", user="alice")  # none: ()
    with pytest.raises(InvalidInput, match=r"options: must be a list of strings"):
        memory.search("cat", user="alice", options={"a": 1})  # (its keys were searched)


def test_sessions_are_ordered_by_when_they_were_said_not_by_a_message_without_a_said_at(memory: Memory) -> None:
    # a probe of round 28: one message without a said-at (5% of real traffic) ranked its session by its recorded-at,
    # today, so an imported session from January came before June's
    memory.add(
        [
            {"role": "user", "content": "January plans", "timestamp": 1672600000000},
            {"role": "assistant", "content": "a reply logged without a time"},
        ],
        user="alice",
        session="january",
    )
    memory.add("June plans", user="alice", session="june", at="2023-06-01T10:00Z")
    memory.add("a note with no time at all", user="alice", session="undated")  # nothing said-at: its recorded-at
    assert [s.session_id for s in memory.sessions(user="alice")] == ["undated", "june", "january"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.sessions(user=None), "user: must be a string, got null"),
        (lambda m: m.sessions(user=""), "user: must be a non-empty string"),
        (lambda m: m.export(user=None), "user: must be a string, got null"),
        (lambda m: m.export(user=" "), "user: must be a non-empty string, got only whitespace"),
        (lambda m: m.export(user="alice", session=""), "session: must be a non-empty string"),
        (lambda m: m.export(user="alice", session=2), "session: must be a string, got number"),
        (lambda m: m.forget(user=None), "user: must be a string, got null"),
    ],
)
def test_a_user_or_session_that_names_nobody_is_invalid_input_not_an_empty_answer(
    memory: Memory, call: Callable[[Memory], object], message: str
) -> None:
    # a probe of round 28: sessions and export of user=None, "" or 5 (an unset variable, a typo) answered [] — as if
    # nothing were stored — where search refused them; forget(user=None) said "nothing stored for user None"
    _fill(memory)
    with pytest.raises(InvalidInput, match=f"^{re.escape(message)}$"):
        call(memory)


def test_a_model_callable_that_fails_is_a_model_error_with_its_trace_stored(memory: Memory) -> None:
    # a probe of round 28: a callable's own ValueError escaped the planner (its trace not stored), None returned was
    # an AttributeError from inside refind, and model=5 or model_name=5 a TypeError
    from refind_cli import ModelError

    _fill(memory)

    def broken(messages: list[dict]) -> Reply:
        raise ValueError("the local model is not loaded")

    with pytest.raises(
        ModelError, match=r"^the model callable broken raised ValueError: the local model is not loaded$"
    ) as caught:
        memory.agent_search("where is the trip", user="alice", model=broken)
    assert isinstance(caught.value.__cause__, ValueError) and caught.value.search_id  # the trace, stored
    with pytest.raises(
        ModelError, match=r"^the model callable silent returned NoneType, not a refind_cli\.model\.Reply$"
    ):

        def silent(messages: list[dict]) -> None:
            return None

        memory.agent_search("where is the trip", user="alice", model=silent)  # type: ignore[arg-type]
    with pytest.raises(
        InvalidInput,
        match=r"^model: must be a litellm model string, a complete\(messages\) -> Reply callable or None, got int$",
    ):
        memory.agent_search("trip", user="alice", model=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"^model_name: must be a string or None, got int$"):
        memory.agent_search("trip", user="alice", model=broken, model_name=5)  # type: ignore[arg-type]


def test_a_closed_memory_says_so_and_what_to_do(tmp_path: Path) -> None:
    # a probe of round 28: every call after the `with` block said sqlite3's "Cannot operate on a closed database."
    with Memory(tmp_path / "m.db") as memory:
        memory.add("I adopted a cat", user="alice", session="s1")
    said = f"{memory.path}: this Memory is closed (its `with` block ended, or close() was called); open a new Memory to use the database"
    for call in (
        lambda: memory.search("cat", user="alice"),
        lambda: memory.add("more", user="alice", session="s1"),
        lambda: memory.sessions(user="alice"),
        lambda: memory.export(user="alice"),
    ):
        with pytest.raises(RefindError, match=f"^{re.escape(said)}$"):
            call()
    memory.close()  # (again: nothing to do)
    with Memory(tmp_path / "m.db") as again:
        assert again.search("cat", user="alice")[0].content.endswith("I adopted a cat")


def test_a_role_beside_a_list_of_messages_is_refused_not_ignored(memory: Memory) -> None:
    # a probe of round 28: role="assistant" beside a list was dropped without a word — its messages stored as "user",
    # or refused as "messages[0].role: required" when they named none
    exchange = [{"role": "user", "content": "What did the vet say?"}]
    with pytest.raises(InvalidInput, match=r"^role: give each message its own role when adding a list of messages$"):
        memory.add(exchange, user="alice", session="s1", role="assistant")
    assert memory.export(user="alice") == []  # nothing stored
    memory.add("The vet said rest", user="alice", session="s1", role="assistant")
    memory.add("Thanks", user="alice", session="s1")  # left out: said by the user
    assert [m["role"] for r in memory.export(user="alice") for m in r["messages"]] == ["assistant", "user"]


def test_a_yes_or_no_option_is_true_or_false(memory: Memory) -> None:
    # a probe of round 28: expire(dry_run="no") ran as a dry run, add_many(strict="no") as strict
    with pytest.raises(InvalidInput, match=r"^dry_run: must be True or False, got 'no'$"):
        memory.expire(dry_run="no")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"^strict: must be True or False, got 'no'$"):
        memory.add_many([], strict="no")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"^record: must be True or False, got 0$"):
        memory.agent_search("trip", user="alice", model=lambda messages: Reply("{}"), record=0)  # type: ignore[arg-type]
    assert memory.expire(dry_run=True).dry_run is True


def test_the_storage_errors_readme_names_for_a_memory_import_from_the_package() -> None:
    # a probe of round 28: README says a Memory raises StorageError and DatabaseLocked, and
    # `from refind_cli import DatabaseLocked` was an ImportError (only refind_cli.errors had them)
    from refind_cli import DatabaseLocked, StorageError, errors

    assert StorageError is errors.StorageError and DatabaseLocked is errors.DatabaseLocked
    assert issubclass(DatabaseLocked, StorageError) and issubclass(StorageError, RefindError)


def test_an_async_model_callable_is_a_model_error_saying_so(memory: Memory) -> None:
    # a probe of round 28: agent frameworks' models are often `async def`; its coroutine was read as no Reply (and
    # left "never awaited")
    from refind_cli import ModelError

    _fill(memory)

    async def acomplete(messages: list[dict]) -> Reply:
        return Reply("{}")

    said = (
        "the model callable acomplete is an async function (it returned a coroutine); give a plain function that "
        "returns a refind_cli.model.Reply"
    )
    with pytest.raises(ModelError, match=f"^{re.escape(said)}$"):
        memory.agent_search("where is the trip", user="alice", model=acomplete)  # type: ignore[arg-type]
