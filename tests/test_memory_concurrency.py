"""One ``Memory`` shared by threads while an agent search waits on its model: the search runs on a connection of its
own, so an add, a BM25 search, the sessions, a forget and a second agent search are answered meanwhile — with every
guarantee the one connection gave (read-your-writes, nothing forgotten ever shown, the order of adds kept).

Before round 29 every call took turns on the Memory's one connection: an add sent while a planner waited on its model
waited for the whole search (tens of seconds; a held model: until it answered)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import T0

from refind_cli import Memory
from refind_cli.errors import RefindError
from refind_cli.model import Reply

SEARCH = '{"action": "search_chatrecord", "keywords": "hiking"}'
NOTE = '{"action": "take_note", "results": [1, 2]}'
NOTE_ALL = '{"action": "take_note", "results": [1, 2, 3]}'
FINISH = '{"action": "finish_search"}'
QUICK_S = 5.0  # a call answered while the search is held: well under the hold (60 s)


def _reply(text: str) -> Reply:
    return Reply(text, prompt_tokens=1, completion_tokens=1)


class HeldModel:
    """A model that answers ``replies`` in turn and, at call ``hold_at`` (0-based), waits until released."""

    def __init__(self, *replies: str, hold_at: int = 0) -> None:
        self.replies, self.hold_at = list(replies), hold_at
        self.calls = 0
        self.waiting, self.release = threading.Event(), threading.Event()
        self.__name__ = "held"

    def __call__(self, messages: list[dict[str, Any]]) -> Reply:
        n, self.calls = self.calls, self.calls + 1
        if n == self.hold_at:
            self.waiting.set()
            assert self.release.wait(60), "never released"
        return _reply(self.replies[n] if n < len(self.replies) else FINISH)


@contextmanager
def held_search(memory: Memory, model: HeldModel, **kw: Any) -> Iterator[dict[str, Any]]:
    """An agent search on another thread, held at its model while the block runs; its answer (or error) after."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["answer"] = memory.agent_search("where did we go hiking", user="u", model=model, deadline=90, **kw)
        except BaseException as exc:  # (reported by the test, not lost on the thread)
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert model.waiting.wait(30), "the search never reached its model"
        yield out
    finally:
        model.release.set()
        thread.join(60)
    assert not thread.is_alive()


def quick(call: Callable[[], Any]) -> Any:
    """``call`` on its own thread, answered within QUICK_S (it fails the test, not hangs it, when it waits)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:
            out["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(QUICK_S)
    assert not thread.is_alive(), f"still waiting after {time.monotonic() - started:.1f} s: it took turns"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "m.db", retention_days=None) as memory:
        memory.add("We went hiking on Mount Rainier", user="u", session="a1", at=T0)
        memory.add("hiking and camping by Lake Tahoe", user="u", session="a2", at=T0 + 60_000)
        yield memory


def test_calls_on_the_memory_are_answered_while_an_agent_search_waits_on_its_model(memory: Memory) -> None:
    model = HeldModel(SEARCH, NOTE, hold_at=1)
    with held_search(memory, model) as first:
        added = quick(lambda: memory.add("hiking the Enchantments next June", user="u", session="a3", at=T0 + 120_000))
        assert added.status == "added"
        # read-your-writes: what the add answered is what the next calls see, BM25 and agent alike
        assert "Enchantments" in json.dumps([e.content for e in quick(lambda: memory.search("hiking", user="u"))])
        assert quick(lambda: memory.sessions(user="u"))[0].session_id == "a3"
        second = quick(
            lambda: memory.agent_search("hiking", user="u", model=HeldModel(SEARCH, NOTE_ALL, hold_at=99), deadline=30)
        )
        assert "Enchantments" in json.dumps([e.content for e in second.evidence])
        # the adds of one session keep the order they were sent in
        for n in range(3):
            quick(lambda n=n: memory.add(f"step {n} of the trail", user="u", session="a4", at=T0 + 200_000))
        exported = quick(lambda: memory.export(user="u", session="a4"))
        assert [r["messages"][0]["content"] for r in exported] == [f"step {n} of the trail" for n in range(3)]
        assert "answer" not in first and "error" not in first  # the first search was still held all along
    assert "error" not in first, first.get("error")
    assert first["answer"].search_id is not None  # its trace stored, beside the others' writes


def test_a_forget_on_the_same_memory_while_an_agent_search_runs_is_withheld_from_it(memory: Memory) -> None:
    # the planner has seen both sessions and kept them; the forget comes while it waits on its model
    model = HeldModel(SEARCH, NOTE, FINISH, hold_at=2)
    with held_search(memory, model) as out:
        assert quick(lambda: memory.forget(user="u", session="a1")).messages == 1
    answer = out["answer"]
    assert [e.session_id for e in answer.evidence] == ["a2"]
    assert answer.withheld is not None and answer.withheld["blocks"] == 1
    assert "Mount Rainier" not in json.dumps([e.content for e in answer.evidence])
    assert "Mount Rainier" not in json.dumps(answer.trace)  # nor in the trace returned (or stored)


def test_close_while_an_agent_search_runs_lets_it_finish_and_refuses_later_calls(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "m.db", retention_days=None)
    memory.add("We went hiking on Mount Rainier", user="u", session="a1", at=T0)
    model = HeldModel(SEARCH, NOTE, hold_at=1)
    with held_search(memory, model) as out:
        quick(memory.close)  # answered at once: the search's connection is its own
        with pytest.raises(RefindError, match="this Memory is closed"):
            memory.add("after close", user="u", session="a1")
        with pytest.raises(RefindError, match="this Memory is closed"):
            memory.agent_search("hiking", user="u", model=HeldModel(hold_at=99))
    assert "error" not in out, out.get("error")
    assert [e.session_id for e in out["answer"].evidence] == ["a1"]
    assert out["answer"].search_id is not None
    with Memory(tmp_path / "m.db") as again:  # nothing lost: the search's trace is there, the add refused is not
        assert [r["messages"][0]["content"] for r in again.export(user="u")] == ["We went hiking on Mount Rainier"]
        assert again._store.conn.execute("SELECT count(*) FROM searches").fetchone()[0] == 1


def test_a_deleted_wal_file_costs_no_add_and_no_search(tmp_path: Path) -> None:
    # `rm m.db-wal` under an open Memory: its connection goes on with the deleted log (as every call did before round
    # 29); an agent search's own connection, opened now, started a second -wal beside it, and the next add failed
    # ("disk I/O error"). The search takes turns on the Memory's connection instead, and nothing is lost
    db = tmp_path / "m.db"
    memory = Memory(db, retention_days=None)
    memory.add("We went hiking on Mount Rainier", user="u", session="a1", at=T0)
    assert memory.agent_search("hiking", user="u", model=HeldModel(SEARCH, NOTE, hold_at=99)).search_id
    Path(f"{db}-wal").unlink()
    memory.add("hiking by Lake Tahoe", user="u", session="a2", at=T0 + 60_000)
    answer = memory.agent_search("hiking", user="u", model=HeldModel(SEARCH, NOTE, hold_at=99))
    assert [e.session_id for e in answer.evidence] == ["a1", "a2"]
    assert memory.add("hiking the Enchantments", user="u", session="a3", at=T0 + 120_000).status == "added"
    memory.close()
    with Memory(db) as again:
        stored = [r["messages"][0]["content"] for r in again.export(user="u")]
        assert stored == ["We went hiking on Mount Rainier", "hiking by Lake Tahoe", "hiking the Enchantments"]
        assert again._store.conn.execute("SELECT count(*) FROM searches").fetchone()[0] == 2


@pytest.mark.parametrize("searched_before", [False, True])
def test_a_wal_file_deleted_between_the_memorys_check_and_the_pools_lend_starts_no_second_wal(
    tmp_path: Path, searched_before: bool
) -> None:
    # round 30: `rm m.db-wal` landing after Memory._own_connection found the -wal in place, before the pool lent a
    # connection: the pool opened a new one (or, with one idle, healed through it and opened another), which started
    # a second -wal beside the deleted one the Memory's connection still writes. Forced here in that order: the -wal
    # is deleted (really) just as the check has passed and the lend begins
    db = tmp_path / "m.db"
    memory = Memory(db, retention_days=None)
    memory.add("We went hiking on Mount Rainier", user="u", session="a1", at=T0)
    if searched_before:  # a connection of the pool's is idle, opened with the first -wal
        assert memory.agent_search("hiking", user="u", model=HeldModel(SEARCH, NOTE, hold_at=99)).search_id
    lend = memory._searchers.store
    lends: list[int] = []

    @contextmanager
    def deleted_then_lent() -> Iterator[Any]:
        lends.append(1)
        Path(f"{db}-wal").unlink()
        with lend() as store:
            yield store

    memory._searchers.store = deleted_then_lent  # type: ignore[method-assign]
    memory.add("hiking by Lake Tahoe", user="u", session="a2", at=T0 + 60_000)
    answer = memory.agent_search("hiking", user="u", model=HeldModel(SEARCH, NOTE, hold_at=99))
    assert [e.session_id for e in answer.evidence] == ["a1", "a2"]
    assert lends == [1]  # the search went through the lend, the -wal deleted there: the race was run
    memory._searchers.store = lend  # type: ignore[method-assign]
    assert memory.add("hiking the Enchantments", user="u", session="a3", at=T0 + 120_000).status == "added"
    memory.close()
    with Memory(db) as again:
        stored = [r["messages"][0]["content"] for r in again.export(user="u")]
        assert stored == ["We went hiking on Mount Rainier", "hiking by Lake Tahoe", "hiking the Enchantments"]
        assert again._store.conn.execute("SELECT count(*) FROM searches").fetchone()[0] == 1 + searched_before


def test_a_memory_opened_by_a_relative_path_searches_the_same_file_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Memory("m.db"), then the program changes its working directory (a notebook's %cd, a library's os.chdir): the
    # agent search's own connection opened "m.db" in the new directory — refused as "the file was deleted or
    # replaced" (FileReplaced) while add and search went on with the file the Memory opened
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    with Memory("m.db", retention_days=None) as memory:
        memory.add("We went hiking on Mount Rainier", user="u", session="a1", at=T0)
        monkeypatch.chdir(tmp_path / "elsewhere")
        answer = memory.agent_search("hiking", user="u", model=HeldModel(SEARCH, NOTE, hold_at=99))
        assert [e.session_id for e in answer.evidence] == ["a1"]
        assert answer.search_id is not None
    assert list((tmp_path / "elsewhere").iterdir()) == []  # no database made where the search looked
