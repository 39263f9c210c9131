"""refind's Python API: one :class:`Memory` per database file, the same functions the CLI and the server call.

    from refind_cli import Memory

    with Memory("memory.db") as memory:
        memory.add("I adopted a cat named Biscuit", user="alice", session="s1", at="2023-05-08T13:56")
        for hit in memory.search("cat's name", user="alice", top_k=3):
            print(hit.score, hit.content)

Every option is keyword-only; every failure is a :class:`~refind_cli.errors.RefindError` (``InvalidInput`` naming the
field, ``Conflict``, ``Forgotten``, ``NotFound``, ``ModelError``); results are plain frozen dataclasses. Searches go
through :func:`refind_cli.retrieval.retrieve` with a :class:`~refind_cli.contract.SearchRequest` built by
:func:`~refind_cli.contract.search_request` — exactly as ``refind search`` does. A ``Memory`` may be shared by
threads: its calls take turns on its SQLite connection, except :meth:`Memory.agent_search`, which runs on a connection
of its own (lent by a :class:`~refind_cli.store_pool.StorePool`), so an add, a forget or a BM25 search is answered
while a planner waits on its model. litellm is imported only by :meth:`Memory.agent_search`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date
from typing import TYPE_CHECKING, Any, Literal

from . import settings
from .contract import (
    AddRequest,
    Message,
    SearchRequest,
    empty_text,
    parse_add,
    refuse_lone_surrogates,
    search_request,
)
from .contract import parse_said_at as said_at
from .errors import FileReplaced, InvalidInput, ModelError, RefindError
from .retention import UNSET, Unset
from .retention import apply as apply_retention
from .store import (
    SQLITE_MAX_INT,
    AddOutcome,
    Store,
    check_same_file,
    file_identity,
    storage_error,
    system_clock,
)
from .store_pool import StorePool

if TYPE_CHECKING:
    from .blocks import Block
    from .lifecycle import ExpireResult, ForgetResult
    from .model import Complete
    from .trace import Event

MessageLike = Mapping[str, Any] | Message
API_NAMES = {"user_id": "user"}  # the API's keyword for the user, in error messages
REOPEN = "open a new Memory (or restart `refind mcp`)"  # what to do when the file under it was replaced


@dataclass(frozen=True)
class Evidence:
    """One evidence block: the matching turn (the anchor) with up to two neighbouring turns of its session, one
    message per line as ``[YYYY-MM-DD HH:MM] role: content``, oldest first (a line other than the anchor's leaves out
    its day and role where they are those of the line above it and of its neighbour toward the anchor: ``[HH:MM]
    content``)."""

    id: str  # the anchor turn's stable id
    content: str
    score: float  # strictly decreasing with rank
    created_at: str  # ISO 8601 UTC: when the store recorded the anchor
    session_id: str
    said_at: int | None  # Unix ms when the anchor was said (None: unknown)
    message_ids: tuple[str, ...]  # every message shown, chronological

    @classmethod
    def of(cls, block: Block) -> Evidence:
        return cls(
            block.id, block.content, block.score, block.created_at, block.session_id, block.said_at, block.message_ids
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _WalLost(Exception):
    """The -wal file of a Memory's connection was deleted (or replaced) as the pool was to open a connection of its
    own for an agent search (:meth:`Memory._open_searcher`): the search takes turns on the Memory's connection."""


@dataclass(frozen=True)
class AgentAnswer:
    """What the LLM planner found, with what it cost and where its trace is stored."""

    evidence: list[Evidence]
    path: str  # "notes" | "last_search" | "direct_bm25": which evidence policy produced it
    search_id: str | None  # the stored trace (`refind inspect search ID`); None when not recorded
    llm_calls: int
    tokens: int
    trace: list[dict[str, Any]]
    deadline_passed: bool = False  # the deadline stopped the planner: the evidence is what it had by then
    withheld: dict[str, Any] | None = None  # what the evidence left out: forgotten or expired while it ran, and why
    # why the process's end stopped the planner (an MCP client that quit, SIGTERM, Ctrl-C): the evidence is what it
    # had by then (None: it was not)
    interrupted: str | None = None
    refused: str | None = None  # what the model said declining the search (its evidence is what it had by then)


@dataclass(frozen=True)
class Session:
    """One session of a user, as :meth:`Memory.sessions` lists them (most recent first)."""

    session_id: str
    messages: int
    requests: int
    first_said_at: int | None  # Unix ms (None: no message of it has a said-at)
    last_said_at: int | None
    last_recorded_at: int  # Unix ms when the store last received a message of it


def _request_dict(request: AddRequest) -> dict[str, Any]:
    """An AddRequest in the contract's JSON shape, to be checked as one (its fields may hold anything)."""
    messages: list[Any] = []
    for m in request.messages:
        if isinstance(m, Message):
            messages.append({"role": m.role, "content": m.content, "timestamp": m.timestamp})
        else:
            messages.append(m)  # (refused by the contract, named by its index)
    return {
        "request_id": request.request_id,
        "user_id": request.user_id,
        "session_id": request.session_id,
        "messages": messages,
    }


class Memory:
    """One refind database (a SQLite file, created when missing) with a retention window.

    ``retention_days``: messages recorded longer ago are hidden from every read and removed by :meth:`expire`
    (at least 1; ``None`` keeps everything). Given, it is stored in the database as its retention policy; left out,
    the stored policy applies (set by an earlier Memory, ``refind add``, ``serve`` or ``mcp`` given one), else 30.
    A Memory that stores a different value changes the policy without a word (``refind add`` and ``serve`` say
    so; ``refind inspect`` shows the stored one). When the file is deleted or replaced while open, every later
    call raises ``StorageError`` and reads or writes nothing: open a new Memory on what is there now.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = settings.DEFAULT_DB,
        *,
        retention_days: float | Literal[Unset.UNSET] | None = UNSET,
        clock: Callable[[], int] = system_clock,
        writer: str = "Memory",
    ) -> None:
        days = (
            retention_days
            if retention_days is None or retention_days is UNSET
            else settings.parse_retention(retention_days)
        )
        if not isinstance(path, (str, os.PathLike)) or "\0" in os.fspath(path):  # (a TypeError, a ValueError)
            raise InvalidInput(f"path: must be a file path without NUL characters, got {path!r}")
        self._store = Store(os.fspath(path), clock=clock)
        try:
            apply_retention(self._store, days, writer=writer)  # (a change of the stored policy prints nothing)
        except sqlite3.Error as exc:  # locked by another writer, no space…: a RefindError like every failure
            self._store.close()
            raise storage_error(exc, self._store.path) from exc
        except BaseException:
            self._store.close()
            raise
        self._store.remedy = REOPEN  # what its file checks tell a Memory's caller, before a call and at its writes
        self._lock = threading.RLock()
        self._closed = False
        # agent searches run on connections of their own: a planner waiting on its model (tens of seconds) held the
        # one connection, and an add sent meanwhile waited for it (round 29)
        self._searchers = StorePool(self._open_searcher, max_idle=4)
        self._opening = threading.local()  # the deadline of the agent search opening a connection (_open_searcher)
        self._wal = file_identity(self._store.wal_path)  # the -wal file its connection writes (_own_connection)
        # the file as named now: a relative path given, a later chdir must not point a search's connection elsewhere
        self._file = self._store.path.absolute()

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """One call at a time on this Memory's connection, on the file this Memory opened (StorageError, nothing read
        or written, when that file was deleted or replaced since: its connection would go on with a file no later
        open sees), and a storage fault (no space, locked, read-only, damaged) as its RefindError."""
        self._lock.acquire()
        try:
            self._refuse_closed()
            self._store.check_file()
            with self._faults():
                yield
        finally:
            self._lock.release()

    def _refuse_closed(self) -> None:
        if self._closed:  # (sqlite3's "Cannot operate on a closed database." said nothing of what to do)
            raise RefindError(
                f"{self.path}: this Memory is closed (its `with` block ended, or close() was called); open a new "
                "Memory to use the database"
            )

    @contextlib.contextmanager
    def _faults(self) -> Iterator[None]:
        """A storage fault (no space, locked, read-only, damaged) as its RefindError; a lone surrogate as
        InvalidInput."""
        try:
            yield
        except sqlite3.Error as exc:
            raise storage_error(exc, self._store.path) from exc
        except UnicodeEncodeError as exc:  # an id holding a lone surrogate, bound as SQLite text
            if "surrogates not allowed" not in exc.reason:
                raise
            bad = exc.object[exc.start]
            raise InvalidInput(
                f"an argument contains an unpaired UTF-16 surrogate (\\u{ord(bad):04x}), which is not Unicode text"
            ) from None

    @contextlib.contextmanager
    def _own_connection(self, until: float | None) -> Iterator[Store]:
        """A connection of its own for one agent search, lent by the pool and not shared with any other call while
        it runs, so the Memory's other calls go on meanwhile. The same checks as :meth:`_turn`: closed, the file
        deleted or replaced (the lend checks it, and a connection opened now must be of the Memory's file)."""
        self._refuse_closed()
        with contextlib.ExitStack() as held:
            store: Store | None = None
            if not self._wal_lost():
                self._opening.until = until
                try:
                    store = held.enter_context(self._searchers.store())
                except _WalLost:  # deleted since the check above, before the lend opened a connection (round 30)
                    store = None
                finally:
                    self._opening.until = None
            if store is None:
                # its -wal file was deleted (or replaced) under it: a connection opened now would start a second one
                # beside the one this Memory's connection still writes, and its next add failed ("disk I/O error").
                # The search takes turns on that one connection, as every call did before round 29.
                held.enter_context(self._turn())
                store = self._store
            else:
                held.enter_context(self._faults())
            yield store

    def _wal_lost(self) -> bool:
        """Whether the -wal file this Memory's connection writes is no longer the one at its path."""
        return self._wal is not None and file_identity(self._store.wal_path) != self._wal

    def _open_searcher(self) -> Store:
        """A new connection to the file this Memory opened, never to another one now at its path (nor a new file
        created there): refused as :meth:`Store.check_file` refuses a call."""
        opened = self._store
        check_same_file(self._file, opened.identity, holder=opened.holder, remedy=REOPEN)
        # checked again here, as the pool opens (or, having healed an idle one's lost -wal, reopens) a connection:
        # the -wal deleted after _own_connection's check started a second one (round 30). What is left is the
        # moment between this check and SQLite's own open of the log, which no lock of this process can hold shut
        if self._wal_lost():
            raise _WalLost
        try:
            store = Store(
                self._file,
                clock=opened.clock,
                retention_days=opened.retention_days,
                until=getattr(self._opening, "until", None),
            )
        except sqlite3.Error as exc:
            raise storage_error(exc, opened.path) from exc
        store.remedy = REOPEN
        try:
            if store.identity != opened.identity:  # deleted or replaced between the check and the open
                check_same_file(self._file, opened.identity, holder=opened.holder, remedy=REOPEN)
                raise FileReplaced(
                    f"database {opened.path}: the file was replaced while this Memory opened it; {REOPEN}"
                )
        except FileReplaced:
            if store.created:  # the file was deleted under the Memory: the new one this open made goes too
                store.remove_if_unused()
            store.close()
            raise
        return store

    @property
    def path(self) -> str:
        return str(self._store.path)

    def close(self) -> None:
        """Close the database. A later call raises; an agent search running on another thread finishes on its own
        connection (its answer returned, its trace stored), which is closed as it ends."""
        with self._lock:
            self._closed = True
            self._searchers.close()
            self._store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing ---------------------------------------------------------------------------------------------

    def add(
        self,
        content: str | Sequence[MessageLike],
        *,
        user: str,
        session: str,
        role: str | None = None,
        at: int | float | str | date | None = None,
        request_id: str | None = None,
    ) -> AddOutcome:
        """Store one message (``content`` a string, said by ``role``, ``"user"`` when left out, at ``at``: Unix ms,
        read as an Add's ``timestamp`` is, or ISO 8601, UTC) or an exchange (``content`` a list of ``{"role",
        "content", "timestamp"?}``, each naming its own role and time: ``role`` and ``at`` are refused beside it) as ONE
        Add request, all-or-nothing.

        Without ``request_id`` the id is ``api-`` plus a hash of the payload as read (user, session, each message's
        role, content and said-at in Unix ms), so adding the same thing again — its time spelt another way too — is
        an identical replay (status ``duplicate``, nothing written). (A message stored by a refind before round 25,
        whose id hashed the payload as sent, is recognised when sent again in the same spelling only.) ``Conflict``: the id is stored with another
        payload; ``Forgotten``: it was removed by :meth:`forget`.
        """
        if not isinstance(content, (str, Sequence)) or isinstance(content, (bytes, bytearray)):
            raise InvalidInput(f"content: must be a string or a list of messages, got {type(content).__name__}")
        if isinstance(content, str):
            said_by = "user" if role is None else role
            messages: list[dict[str, Any]] = [{"role": said_by, "content": content, "timestamp": parse_said_at(at)}]
            # what an earlier refind hashed: the number as given (1700000000 and -1 were hashed so, then read)
            legacy = [{**messages[0], "timestamp": at}] if _is_number(at) else messages
        else:
            if at is not None:
                raise InvalidInput("at: give each message its own timestamp when adding a list of messages")
            if role is not None:  # (it was ignored: each message kept its own role, or was refused for having none)
                raise InvalidInput("role: give each message its own role when adding a list of messages")
            messages = legacy = [_message_dict(m, i) for i, m in enumerate(content)]
        rid = "api-" if request_id is None else request_id  # (the derived id is set once the payload is read)
        body = {"request_id": rid, "user_id": user, "session_id": session, "messages": messages}
        refuse_lone_surrogates(body, "request")  # Python strings may hold them; the payload's hash cannot
        request = parse_add(body)
        if request_id is not None:
            with self._turn():
                return self._store.add(request)
        request = replace(request, request_id=auto_id(request))
        old = _auto_id(user, session, legacy)  # the id an earlier refind gave this call: the payload as sent
        with self._turn():
            if old is not None and old != request.request_id:
                # stored by an earlier refind under the id of the payload as sent (another spelling of its time, its
                # keys in another order): a replay of it, not a new request (and refused if it was forgotten)
                known = self._store.known_requests(request.user_id, [request.request_id, old])
                if request.request_id not in known and old in known:
                    request = replace(request, request_id=old)
            return self._store.add(request)

    def add_many(
        self, requests: Iterable[Mapping[str, Any] | AddRequest], *, strict: bool = False
    ) -> list[AddOutcome | RefindError]:
        """Store Add requests in the contract's shape (``{"request_id", "user_id", "session_id", "messages"}``, as
        :meth:`export` returns them) in one transaction, each all-or-nothing.

        Every request is checked first: an invalid one raises ``InvalidInput`` naming it (``requests[3].messages[0]
        .role: …``) and nothing is stored. Otherwise one outcome per request, in order: an ``AddOutcome``, or the
        ``Conflict`` / ``Forgotten`` that refused that request alone (the others are stored).
        """
        _flag("strict", strict)
        if requests is None or isinstance(requests, (str, bytes, Mapping)):
            raise InvalidInput(f"requests: must be a list of Add requests, got {type(requests).__name__}")
        parsed: list[AddRequest] = []
        for i, item in enumerate(requests):
            try:
                # an AddRequest is checked as its JSON shape is (content=5 raised TypeError; "" and a timestamp of
                # -5 were stored, and the export of them then refused)
                body = _request_dict(item) if isinstance(item, AddRequest) else item
                refuse_lone_surrogates(body, "request")
                parsed.append(parse_add(dict(body) if isinstance(body, Mapping) else body, strict=strict))
            except InvalidInput as exc:
                raise InvalidInput(f"requests[{i}].{exc.message}") from None
        with self._turn():
            return self._store.add_many(parsed)

    # ---- searching -------------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        user: str,
        top_k: int = 10,
        date_from: str | int | date | None = None,
        date_to: str | int | date | None = None,
        options: Sequence[str] = (),
        as_of: str | int | date | None = None,
    ) -> list[Evidence]:
        """BM25 over ``user``'s turns alone (no model, no network): at most ``top_k`` evidence blocks, best first;
        ``[]`` when nothing matches or the user is unknown. Dates: YYYY/MM/DD, YYYY-MM-DD, YYYYMMDD, ISO 8601 (UTC
        unless it names a zone), Unix ms or seconds, a ``datetime`` that names its zone (a naive one is refused) or a
        ``date`` (``date_to`` includes its whole day); ``as_of``: only what was stored by then."""
        from .retrieval import retrieve

        request = _request("bm25", query, user, top_k, date_from, date_to, options, as_of)
        with self._turn():
            found = retrieve(self._store, request)
        return [Evidence.of(b) for b in found.blocks]

    def agent_search(
        self,
        query: str,
        *,
        user: str,
        model: str | Complete | None = None,
        model_name: str | None = None,
        api_base: str | None = None,
        max_actions: int = settings.DEFAULT_MAX_ACTIONS,
        deadline: float = settings.DEFAULT_AGENT_DEADLINE_S,
        skip: str | None = None,
        top_k: int = 10,
        date_from: str | int | date | None = None,
        date_to: str | int | date | None = None,
        options: Sequence[str] = (),
        as_of: str | int | date | None = None,
        on_event: Callable[[Event], None] | None = None,
        record: bool = True,
    ) -> AgentAnswer:
        """The LLM planner searches ``user``'s memory (several BM25 searches, keeping what is useful).

        ``model``: a litellm model string (keys from the provider's usual variables; ``api_base`` for a local
        OpenAI-compatible server), a ``complete(messages) -> Reply`` callable (``model_name``: the name its traces
        record), or ``None`` for REFIND_MODEL / REFIND_API_BASE. The trace is stored (``record``) and each step passed to ``on_event`` as it happens
        (one that raises is not called again, and said once as a ``RuntimeWarning``: the search goes on).
        ``deadline``: seconds the whole search may take (default 120): past it the planner stops and returns what it
        kept (``deadline_passed``). ``skip``: what later searches skip of what earlier ones showed, ``"session"``
        (every session shown; the default) or ``"turn"`` (only the hits shown). The evidence never holds a message
        forgotten or expired while the search ran (``withheld`` says what was left out). ``ModelError`` when the model cannot be used — never a silent BM25
        answer.
        """
        from .retrieval import Planner, retrieve

        asked_at = time.perf_counter()  # the deadline counts from here: loading litellm is part of the search
        request = _request("agent", query, user, top_k, date_from, date_to, options, as_of)
        if (
            isinstance(max_actions, bool)
            or not isinstance(max_actions, int)
            or not 1 <= max_actions <= settings.MAX_MAX_ACTIONS
        ):
            # True read as one action, "3" raised a TypeError, 10**6 ran past the CLI's limit
            raise InvalidInput(
                f"max_actions: must be a whole number from 1 to {settings.MAX_MAX_ACTIONS}, got {max_actions!r}"
            )
        if (
            isinstance(deadline, bool)
            or not isinstance(deadline, int | float)
            or not 0 < deadline <= settings.MAX_AGENT_DEADLINE_S
        ):
            raise InvalidInput(
                f"deadline: must be a number of seconds above 0 and at most {settings.MAX_AGENT_DEADLINE_S:,g}, "
                f"got {deadline!r}"
            )
        _flag("record", record)
        if skip is not None and skip not in settings.SKIP_MODES:
            raise InvalidInput(f"skip: must be 'session' or 'turn' (or None), got {skip!r}")
        if model is not None and not isinstance(model, str) and not callable(model):
            raise InvalidInput(
                "model: must be a litellm model string, a complete(messages) -> Reply callable or None, "
                f"got {type(model).__name__}"
            )
        if model_name is not None and not isinstance(model_name, str):
            raise InvalidInput(f"model_name: must be a string or None, got {type(model_name).__name__}")
        if model_name is not None and not model_name.strip():  # (read as unset, as model="" was)
            raise InvalidInput(
                f"model_name: {model_name!r} names nothing; give the name its traces record, or leave it out (None) "
                "for the callable's own"
            )
        if on_event is not None and not callable(on_event):  # (a TypeError at the first step: the search lost)
            raise InvalidInput(
                f"on_event: must be a callable taking each trace event, or None, got {type(on_event).__name__}"
            )
        progress = None if on_event is None else _Progress(on_event)
        model_name = model_name or getattr(model, "__name__", None)
        if model is None or isinstance(model, str):
            from .model import from_env

            complete, model_name = from_env(model, api_base)
        else:
            complete = _own_model(model)
        planner = Planner(
            model=complete,
            model_name=model_name,
            max_actions=max_actions,
            deadline_s=float(deadline),
            skip=skip,
            asked_at=asked_at,
            on_event=progress,
            record=record,
        )
        try:
            with self._own_connection(planner.ends_at()) as store:
                found = retrieve(store, request, planner=planner)
        except RefindError as exc:
            if progress is not None:
                progress.report(exc.search_id)
            raise
        result = found.agent
        if progress is not None:
            progress.report(None if result is None else result.search_id)
        if result is None:  # retrieve answers an agent-mode request with the planner's result
            raise RefindError("agent search returned no planner result")
        return AgentAnswer(
            [Evidence.of(b) for b in found.blocks],
            result.path,
            result.search_id,
            result.llm_calls,
            result.tokens,
            result.trace_dicts(),
            result.deadline_passed,
            None if result.withheld is None else result.withheld.as_dict(),
            result.interrupted,
            result.refused,
        )

    # ---- reading and the lifecycle ---------------------------------------------------------------------------

    def sessions(self, *, user: str, limit: int = 20) -> list[Session]:
        """``user``'s sessions with visible messages, most recently active first (at most ``limit``): by their last
        said-at, a session without any by when it was last recorded."""
        _text_arg("user", user)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit: must be a positive integer, got {limit!r}")
        with self._turn():
            predicate, params = self._store.visible()
            rows = self._store.conn.execute(
                "SELECT session_id, count(*), count(DISTINCT request_id), min(said_at), max(said_at), "
                f"max(recorded_at) FROM messages WHERE user_id = ? AND {predicate} GROUP BY session_id "
                # a session's last said-at, else (none known) when it was recorded: a message without a said-at
                # ranked its session by its recorded-at, so an imported session holding one came first (round 28)
                "ORDER BY coalesce(max(said_at), max(recorded_at)) DESC, max(seq) DESC LIMIT ?",
                [user, *params, min(limit, SQLITE_MAX_INT)],  # more than SQLite can count is all of them
            ).fetchall()
        return [Session(*row) for row in rows]

    def export(self, *, user: str, session: str | None = None) -> list[dict[str, Any]]:
        """``user``'s visible messages (or one session's) as Add requests with their original ids, order and
        said-at timestamps — what :meth:`add_many` reads back into an identical store. ``[]`` when none."""
        from .lifecycle import export_requests

        _text_arg("user", user)
        if session is not None:
            _text_arg("session", session)
        with self._turn():
            return list(export_requests(self._store, user, session_id=session))

    def forget(self, *, user: str, session: str | None = None, request_id: str | None = None) -> ForgetResult:
        """Delete ``user``'s memory — all of it, one session, or one request — scrubbed from the file, with a
        tombstone (ids, counts, hashes; never text) that refuses a later replay. ``NotFound`` when nothing is
        there."""
        from .lifecycle import forget

        _text_arg("user", user)
        for name, value in (("session", session), ("request_id", request_id)):
            if value is not None:
                _text_arg(name, value)
        with self._turn():
            return forget(self._store, user, session_id=session, request_id=request_id)

    def expire(self, *, user: str | None = None, dry_run: bool = False) -> ExpireResult:
        """Delete now what was recorded before the retention window (per user counts); ``dry_run`` only counts. The
        window is the longer of this Memory's and the policy the database stores now: it never deletes what another
        writer's newer policy keeps."""
        from .lifecycle import expire

        _flag("dry_run", dry_run)
        with self._turn():
            return expire(self._store, user_id=user, dry_run=dry_run, unasked=True)


def _request(
    mode: str,
    query: str,
    user: str,
    top_k: int,
    date_from: str | int | date | None,
    date_to: str | int | date | None,
    options: Sequence[str],
    as_of: str | int | date | None,
) -> SearchRequest:
    """The search's values checked and parsed once, as ``refind search`` does, naming the API's keywords."""
    return search_request(
        query,
        user,
        top_k=top_k,
        date_from=date_from,
        date_to=date_to,
        as_of=as_of,
        options=options,
        mode=mode,
        names=API_NAMES,
    )


class _Progress:
    """A caller's ``on_event`` as the planner calls it: the first exception it raises is kept, it is not called again
    for that search, and the search goes on (its evidence returned, its trace stored); :meth:`report` then says it
    once, as a ``RuntimeWarning`` naming where it raised. Before round 29 it escaped the planner: the search, its
    model calls paid for, was lost with its trace. (KeyboardInterrupt and the like still stop the search.)"""

    def __init__(self, on_event: Callable[[Event], None]) -> None:
        self.on_event = on_event
        self.failed: tuple[Exception, Event] | None = None

    def __call__(self, event: Event) -> None:
        if self.failed is not None:
            return
        try:
            self.on_event(event)
        except Exception as exc:
            self.failed = (exc, event)

    def report(self, search_id: str | None) -> None:
        if self.failed is None:
            return
        import traceback
        import warnings

        exc, event = self.failed
        said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        stored = f"its trace is stored: `refind inspect search {search_id}`" if search_id else "its trace is not stored"
        warnings.warn(
            f"on_event raised {said} ({frame.filename}:{frame.lineno}, given the {event.kind!r} event of step "
            f"{event.step}); it was not called again for this search, which went on: {stored}",
            RuntimeWarning,
            stacklevel=3,  # (the caller's agent_search line)
        )


def _own_model(model: Complete) -> Complete:
    """A caller's ``complete`` as the planner calls it: an exception it raises, or an answer that is no ``Reply``, is
    a ``ModelError`` (the search's trace stored, its id said), as a provider's failure is — a ValueError of its own
    escaped the planner, unrecorded, and ``None`` returned was an AttributeError from inside it (round 28)."""
    import inspect

    from .model import Reply

    name = getattr(model, "__name__", type(model).__name__)

    def complete(messages: list[dict[str, Any]]) -> Reply:
        try:
            reply = model(messages)
        except RefindError:  # (its own ModelError, or the deadline's)
            raise
        except Exception as exc:
            said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise ModelError(f"the model callable {name} raised {said}") from exc
        if not isinstance(reply, Reply):
            if inspect.iscoroutine(reply):  # an async def: never awaited here (closed: no "never awaited" warning)
                reply.close()
                raise ModelError(
                    f"the model callable {name} is an async function (it returned a coroutine); give a plain "
                    "function that returns a refind_cli.model.Reply"
                )
            raise ModelError(f"the model callable {name} returned {type(reply).__name__}, not a refind_cli.model.Reply")
        return reply

    return complete


def _flag(name: str, value: object) -> None:
    """A yes-or-no option: True or False (``dry_run="no"`` was read as yes, ``strict=0.0`` as no)."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{name}: must be True or False, got {value!r}")


def _text_arg(name: str, value: object) -> None:
    """A user or session id argument: a string with words (``user=None`` or ``""`` read as nobody's, and
    :meth:`Memory.sessions` and :meth:`Memory.export` answered ``[]``, as if nothing were stored)."""
    if not isinstance(value, str) or not value.strip():
        raise empty_text(name, value)


def parse_said_at(at: int | float | str | date | None) -> int | None:
    """``at`` of an Add: a number (or a string of one) read as an Add's ``timestamp`` is, an ISO 8601 time or a
    date (UTC unless it names a zone), or a ``datetime`` that names its zone or a ``date``:
    :func:`refind_cli.contract.parse_said_at`."""
    if at is not None and not isinstance(at, (str, date)) and not _is_number(at):
        raise InvalidInput(
            f"at: must be Unix milliseconds, an ISO 8601 time or a datetime that names its zone, got {type(at).__name__}"
        )
    return said_at(at, "at")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _message_dict(message: MessageLike, i: int) -> dict[str, Any]:
    if isinstance(message, Message):
        return {"role": message.role, "content": message.content, "timestamp": message.timestamp}
    if isinstance(message, Mapping):
        return dict(message)
    raise InvalidInput(f"messages[{i}]: must be a mapping with role and content, got {type(message).__name__}")


def auto_id(request: AddRequest) -> str:
    """``api-`` and a hash of the request as read — ``[user, session, [{"role", "content", "timestamp"}, …]]`` as
    compact JSON, the timestamp in Unix ms or null — so every spelling of the same message (its time as seconds, as
    a string, as null or left out) is one request (as ``refind add`` derives ``cli-…``): adding it again is a
    replay. A payload sent in that shape already gets the id an earlier refind gave it."""
    messages = [{"role": m.role, "content": m.content, "timestamp": m.timestamp} for m in request.messages]
    hashed = _auto_id(request.user_id, request.session_id, messages)
    if hashed is None:  # (a parsed request holds only text and integers)
        raise RefindError("the request could not be hashed")
    return hashed


def _auto_id(user: Any, session: Any, messages: list[Any]) -> str | None:
    import hashlib
    import json

    try:
        data = json.dumps([user, session, messages], ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return "api-" + hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:20]


__all__ = ["AddOutcome", "AgentAnswer", "Evidence", "Memory", "Session"]
