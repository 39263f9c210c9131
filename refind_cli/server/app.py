"""The contest endpoint: a FastAPI app speaking the Agent Memory Leaderboard's Add/Search contract.

``create_app(ServerSettings(...))`` builds it; ``refind serve`` runs it on uvicorn. The routes call the same domain
functions as the CLI (``contract.parse_add``/``parse_search``, ``Store.add``, ``search.search``, the planner), so both
refuse the same input with the same message. Request bodies are parsed by hand (never a 422 for an unknown field);
``api_schema`` only documents them in OpenAPI. The HTTP edge — error shape, token check, body limit, access log —
is ``asgi``; a POST to Add or Search is answered by ``routes.ContractRoutes`` inside that edge, without FastAPI's
routing (the same answers, ~0.5 ms less CPU per request).

Concurrency: request handlers are ``async``. An Add is parsed on the event loop (a big body in a worker thread) and
handed to the one ``GroupWriter`` thread (group commit); the handler awaits its commit without holding a thread.
Searches run on a thread pool of their own (a few threads for CPU-bound bm25, 256 for agent mode; the rest queue),
each borrowing a ``Store`` from a ``StorePool``, so slow agent searches never hold up Adds or ``/health``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import logging.config
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from .. import settings as defaults
from ..contract import SEARCH_MODES, SearchRequest, empty_text
from ..errors import FileReplaced, InvalidInput, RefindError, StorageError
from ..store import Store, iso_time, storage_error
from .api_schema import ADD_RESPONSE, ADD_SCHEMA, ERROR_SCHEMA, SEARCH_RESPONSE, SEARCH_SCHEMA, json_content, operation
from .asgi import MB, BodyLimit, RequestLog, error_response, failure, printable, read_add, read_search
from .dbpool import GroupWriter, SerialStore, StorePool, check_same_file, file_key, open_anew
from .fault_log import FaultLog
from .guard import EdgeGuard, token_check
from .routes import ContractRoutes
from .warm import Warmer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..blocks import Block
    from ..retention import Given

log = logging.getLogger("refind.server")

INLINE_PARSE_BYTES = 64 * 1024  # bodies up to this size are parsed on the event loop (well under a millisecond)
T = TypeVar("T")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
FORGET_PARAMETERS = frozenset({"user_id", "session_id", "request_id"})
HEALTH_BODY = b'{"status": "ok"}'  # byte for byte as the contract and README write it: smoke tests compare it exactly
HEALTH_REPLACED = "the database file was deleted or replaced while the server had it open: restart the server"


@dataclass(frozen=True)
class ServerSettings:
    db: Path = Path(defaults.DEFAULT_DB)
    retention_days: float | None = defaults.DEFAULT_RETENTION_DAYS
    # `refind serve`'s --retention-days / REFIND_RETENTION_DAYS as given ('' when none was): create_app stores it as the
    # database's policy, or applies the stored one when none was given; None: retention_days as it is (tests)
    retention_given: str | None = None
    retention_from: str = "--retention-days"  # where retention_given came from, for the log line of a change
    token: str | None = None  # None: no authentication (only allowed on loopback unless insecure)
    mode: str = "bm25"  # "bm25" | "agent"
    model: str | None = None  # agent mode: the litellm model name (None: REFIND_MODEL, else the default)
    api_base: str | None = None  # agent mode: an OpenAI-compatible base URL (None: REFIND_API_BASE)
    max_actions: int = defaults.DEFAULT_MAX_ACTIONS  # agent mode: the planner's budget of replies per search
    deadline_s: float = defaults.DEFAULT_AGENT_DEADLINE_S  # agent mode: seconds one search may take in all
    skip: str | None = None  # agent mode: what later searches skip, "session" | "turn" (None: session)
    max_body_bytes: int = int(defaults.DEFAULT_MAX_BODY_MB * MB)
    search_threads: int | None = None  # searches running at once, the rest queue (None: auto_search_threads)
    parse_threads: int = 8  # big bodies parsed at once off the event loop (writes are group-committed on one thread)
    expire_interval_s: float = defaults.DEFAULT_EXPIRE_INTERVAL_S  # retention sweep period; 0 turns it off
    token_sha256: str | None = None  # the token as workers receive it: its hash only (guard.token_digest)
    allow_hosts: tuple[str, ...] = ()  # without a token: Host/Origin names accepted besides loopback ("*": any)
    max_inflight_bytes: int = int(defaults.DEFAULT_MAX_INFLIGHT_MB * MB)  # request bodies held at once (503 above)
    header_timeout_s: float = defaults.DEFAULT_HEADER_TIMEOUT_S  # a request's headers must arrive within this
    body_timeout_s: float = defaults.DEFAULT_BODY_TIMEOUT_S  # … and its body within this after them
    max_connections: int | None = None  # open connections at once (None: from the open-file limit)
    warm: bool = True  # load a user's index into the cache after each Add, off the search path (warm.py)

    def digest(self) -> str | None:
        """The hash the token check compares against; None when no token is set."""
        if self.token is not None:
            from .guard import token_digest

            return token_digest(self.token)
        return self.token_sha256

    def open_store(self, *, index_progress: Callable[[int, int], None] | None = None) -> Store:
        return SerialStore(self.db, retention_days=self.retention_days, index_progress=index_progress)


def auto_search_threads(mode: str) -> int:
    """bm25 searches are CPU-bound under one GIL: a few threads finish a burst sooner than hundreds, and leave the
    Add path room to run. Agent searches mostly wait on the model: let every one of the platform's 256 run."""
    if mode == "agent":
        return defaults.DEFAULT_SEARCH_THREADS
    import os

    return max(2, min(32, 2 * (os.cpu_count() or 1)))


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# ---- the app -----------------------------------------------------------------------------------------------------


class Runtime:
    """What the routes share: the store pool, the writer, the thread limiters, the retention sweeper."""

    def __init__(self, cfg: ServerSettings, *, model: tuple[Any, str | None]) -> None:
        """``model``: agent mode's (model, name) as create_app resolved it; ``(None, None)`` in bm25 mode."""
        import anyio

        self.cfg = cfg
        self.writer = GroupWriter(cfg.open_store)
        self.faults = FaultLog()  # a full disk refuses every Add: logged once, then counted
        self.pool = StorePool(cfg.open_store, max_idle=64, on_replaced=self.writer.recheck)
        self.warmer = Warmer(self.pool.store) if cfg.warm else None
        # Searches run on their own threads through asyncio's executor hand-off: ~0.3 ms less event-loop CPU per search
        # than anyio.to_thread with a limiter (BENCHMARKS "The contest's traffic over HTTP"); the rest queue.
        self.searchers = ThreadPoolExecutor(
            max_workers=cfg.search_threads or auto_search_threads(cfg.mode), thread_name_prefix="refind-search"
        )
        self.parse_limiter = anyio.CapacityLimiter(cfg.parse_threads)
        self.write_limiter = anyio.CapacityLimiter(4)  # forget: rare, and serialised by SQLite anyway
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._scrubber: threading.Thread | None = None  # retries a forget's truncate of the -wal (scrub_later)
        self._scrubs = 0  # forgets whose truncate found readers in the way, so far
        self._scrub_lock = threading.Lock()
        self._warming: asyncio.Task[None] | None = None
        self.complete, self.model_name = model
        self.searching = 0  # searches handed to a searcher thread and not finished (a forced quit abandons them)
        self._searching_lock = threading.Lock()

    def start(self) -> None:
        self._warming = asyncio.get_running_loop().create_task(_warm_threads())
        if self.cfg.expire_interval_s > 0:
            self._sweeper = threading.Thread(target=self._sweep_loop, name="refind-retention", daemon=True)
            self._sweeper.start()

    def close(self) -> None:
        self._stop.set()
        for thread in (self._sweeper, self._scrubber):
            if thread is not None:
                thread.join(10)
        if self.warmer is not None:
            self.warmer.close()
        self.writer.close()
        self.searchers.shutdown(wait=False)  # the server has answered its requests: nothing is running here now
        self.pool.close()

    # -- what the routes do --

    async def parse(self, read: Callable[[bytes], T], body: bytes) -> T:
        """Small bodies are parsed on the event loop (no thread hop); big ones in a worker thread."""
        if len(body) <= INLINE_PARSE_BYTES:
            return read(body)
        import anyio.to_thread

        return await anyio.to_thread.run_sync(lambda: read(body), limiter=self.parse_limiter)

    async def add(self, body: bytes) -> dict[str, Any]:
        request = await self.parse(read_add, body)
        if request.normalized:  # field names and how they were read; never content, ids or values of text
            log.info("add normalized %d value(s): %s", len(request.normalized), "; ".join(_fields(request.normalized)))
        outcome = await asyncio.wrap_future(self.writer.submit_add(request))  # resolves after COMMIT
        if self.warmer is not None:
            self.warmer.touch(request.user_id)  # the user's next search finds its index loaded (warm.py)
        answer = AddAnswer(
            success=True, request_id=outcome.request_id, user_id=outcome.user_id, session_id=outcome.session_id
        )
        answer.wrote = outcome.status != "duplicate"
        return answer

    async def search(self, body: bytes) -> bytes:
        """The search response, already encoded (top_k 100 blocks can be megabytes: not on the event loop)."""
        request = await self.parse(read_search, body)
        if request.normalized:
            log.info("search normalized: %s", "; ".join(_fields(request.normalized)))
        asked_at = time.perf_counter()  # agent mode's deadline counts from here: a wait for a searcher thread too
        with self._searching_lock:
            self.searching += 1
        return await asyncio.get_running_loop().run_in_executor(self.searchers, self._search, request, asked_at)

    def _search(self, request: SearchRequest, asked_at: float) -> bytes:
        try:
            with self.pool.store() as store:
                blocks = self._blocks(store, request, asked_at)
            return encode_items(contract_items(blocks, request.top_k))
        finally:
            with self._searching_lock:
                self.searching -= 1

    def _blocks(self, store: Store, req: SearchRequest, asked_at: float) -> list[Block]:
        from dataclasses import replace

        from ..retrieval import Planner, retrieve

        planner = Planner(
            model=self.complete,
            model_name=self.model_name,
            max_actions=self.cfg.max_actions,
            deadline_s=self.cfg.deadline_s,
            skip=self.cfg.skip,
            asked_at=asked_at,
        )
        found = retrieve(store, replace(req, mode=self.cfg.mode), planner=planner)
        agent = found.agent
        if agent is None:
            return found.blocks
        fault = next((e.data.get("type") for e in agent.events if e.kind == "unrecorded"), None)
        if fault is None:
            if agent.search_id is not None:  # (None: dropped, a forget removed what it quotes — nothing was stored)
                self.faults.recorded()
        elif agent.withheld is None and not agent.deadline_passed:  # a full disk meets every trace: counted
            self.faults.unrecorded(str(fault))
            return found.blocks
        if agent.withheld is not None or agent.deadline_passed or fault:  # the contract has no room for these
            log.info(
                "agent search %s%s%s%s",
                agent.search_id or "(not stored)",
                f": {agent.stopped(self.cfg.deadline_s)}" if agent.deadline_passed else "",
                f": {agent.withheld.line()}" if agent.withheld is not None else "",
                f": trace not stored ({fault})" if fault else "",
            )
        return found.blocks

    def forget(self, user_id: str, session_id: str | None, request_id: str | None) -> dict[str, Any]:
        from ..lifecycle import forget

        for name, value in (("user_id", user_id), ("session_id", session_id), ("request_id", request_id)):
            if value is not None and not value.strip():
                raise empty_text(name, value)
        with self.pool.store() as store:
            result = forget(store, user_id, session_id=session_id, request_id=request_id)  # evicts the cache too
        if not result.checkpointed:
            self.scrub_later()
        return {"success": True, **result.as_dict()}

    def scrub_later(self) -> None:
        """A forget whose truncate of the -wal found readers in the way left the forgotten text in that file: try
        again every :data:`SCRUB_RETRY_S` until the log is truncated or the server stops, whatever the sweep's
        interval (``--expire-interval 0`` runs none: the text stayed there until shutdown)."""
        with self._scrub_lock:
            self._scrubs += 1
            if self._scrubber is None:
                self._scrubber = threading.Thread(target=self._scrub_loop, name="refind-scrub", daemon=True)
                self._scrubber.start()

    def _scrub_loop(self) -> None:
        from ..lifecycle import checkpoint

        while not self._stop.wait(SCRUB_RETRY_S):
            with self._scrub_lock:
                asked = self._scrubs
            try:
                with self.cfg.open_store() as store:
                    done = checkpoint(store)
            except Exception as exc:  # keep serving and trying; say what kind of failure without any data
                log.warning("truncating the write-ahead log after a forget failed: %s", failure(exc, self.cfg.db))
                continue
            with self._scrub_lock:
                if done and asked == self._scrubs:  # (a forget since may have been blocked again: one more round)
                    self._scrubber = None
                    log.info("the write-ahead log was truncated: a forget's scrub is finished")
                    return

    # -- retention --

    def sweep(self, removed: dict[str, int] | None = None) -> None:
        """Delete what fell out of the retention window (the read-time predicate already hides it). With retention
        off nothing expires, but the sweep still truncates the WAL: it finishes the scrub of a forget whose own
        checkpoint found readers in the way (``checkpointed: false``). Nobody asked for this one: it never deletes what
        the policy stored now keeps (another writer may have lengthened it, or turned it off, since this started).
        ``removed``: each user's messages removed by the sweep's committed steps, as they commit."""
        from ..lifecycle import UserExpiry, expire

        def committed(step: dict[str, UserExpiry]) -> None:
            for user, counts in step.items():
                if removed is not None:
                    removed[user] = removed.get(user, 0) + counts.messages

        with self.cfg.open_store() as store:
            result = expire(store, unasked=True, on_step=committed)
        if result.messages:  # what the sweep removed, in counts only (a probe of round 25: 200,000 went unsaid)
            log.info(
                "retention sweep: %d message%s of %d user%s recorded before %s removed (retention %g days)",
                result.messages,
                "" if result.messages == 1 else "s",
                len(result.users),
                "" if len(result.users) == 1 else "s",
                iso_time(result.cutoff) if result.cutoff is not None else "?",
                result.retention_days or 0,
            )

    def _sweep_loop(self) -> None:
        wait = 0.0  # once at startup, then every interval
        while not self._stop.wait(wait):
            wait = self.cfg.expire_interval_s
            self.sweep_logged()

    def sweep_logged(self) -> None:
        """One sweep of the loop: a failure is logged, never raised (the server keeps serving). A sweep that failed
        at a later step says what its committed steps removed: 'retention sweep failed' alone read as nothing
        removed (a probe of round 29)."""
        removed: dict[str, int] = {}
        try:
            self.sweep(removed)
        except Exception as exc:  # keep serving; say what kind of failure without any data
            n, users = sum(removed.values()), len(removed)
            if not n:
                log.warning("retention sweep failed: %s", failure(exc, self.cfg.db))
                return
            log.warning(
                "retention sweep failed after removing %d message%s of %d user%s (committed, their events recorded; "
                "the next sweep removes the rest): %s",
                n,
                "" if n == 1 else "s",
                users,
                "" if users == 1 else "s",
                failure(exc, self.cfg.db),
            )


SCRUB_RETRY_S = 5.0  # how often a forget's truncate of the -wal is tried again while readers are in its way
LOGGED_NOTES = 5  # fields a "normalized" log line names at most (an Add of 10,000 messages in seconds: one line)


class AddAnswer(dict[str, Any]):
    """An Add's response body (the contract's fields), and whether it wrote anything: an identical replay wrote
    nothing, so it ends no run of storage faults in the log (fault_log) — it is answered 200 on a full disk too."""

    wrote = True


def _fields(notes: tuple[str, ...]) -> list[str]:
    """Only what a note says of the field ("messages[0].timestamp: read as Unix seconds"), not the values; the
    first :data:`LOGGED_NOTES`, then how many more."""
    out = []
    for note in notes[:LOGGED_NOTES]:
        name, _, how = note.partition(": ")
        kind = (
            "ISO time"
            if "ISO 8601" in how
            else "seconds ×1000"
            if "seconds" in how
            else "digits"
            if "digits" in how
            else "string"
            if "string" in how
            else "fraction dropped"
            if "fraction" in how
            else "no said-at"
            if "no said-at" in how
            else "half a character as U+FFFD"
            if "U+FFFD" in how
            else "clamped"
        )
        out.append(f"{name} ({kind})")
    if len(notes) > LOGGED_NOTES:
        out.append(f"and {len(notes) - LOGGED_NOTES:,} more")
    return out


def _warm_up() -> None:
    """Import and exercise the search path once, so the first real search does not pay for it: the first questions
    arrive together, and ~0.1 s of imports and pattern compiling on the first of them held up all of them."""
    try:
        import numpy.ma  # noqa: F401 — np.unique imports it on first use (~25 ms)

        from .. import blocks, expand, kinds, retrieval, search  # noqa: F401 — imported now, not by the first search
        from ..query_dates import named_days
        from ..tokenize import analyze

        analyze("warming up the analyzer 预热")
        search.strip_instructions("Warming up. Answer in one word.")  # compiles its pattern
        named_days("warming up on 1 May 2023")  # compiles its patterns
        kinds.table()  # the WordNet table a first category question ("What sports …?") would read (~6 ms)
    except Exception:  # only an optimisation
        pass


async def _warm_threads() -> None:
    """Start anyio's worker-thread machinery: its first use imports its asyncio backend (~25 ms on the event loop),
    which the first request that uses it — a large Add's body parsed in a thread, a forget — would otherwise pay while
    every other request waits (searches run on their own executor). The warm-up itself runs there, off the loop."""
    import anyio.to_thread

    await anyio.to_thread.run_sync(_warm_up)


def encode_items(items: list[dict[str, Any]]) -> bytes:
    """The search response's body: compact UTF-8 JSON (what ``json.dumps(..., ensure_ascii=False,
    separators=(",", ":"))`` means, floats aside: ``1.25e-05`` is ``0.0000125``) by orjson: ~0.1 ms instead of 2–6 ms for
    top_k 100 LongMemEval blocks (~150 KB), time a search would spend holding the GIL (BENCHMARKS "Server")."""
    import orjson

    return orjson.dumps({"data": items})


def contract_items(blocks: list[Any], top_k: int) -> list[dict[str, Any]]:
    """Blocks as the contract's search items: never more than top_k, id and content non-empty, score finite."""
    items: list[dict[str, Any]] = []
    for block in blocks:
        if len(items) >= top_k:
            break
        item = block.as_contract() if hasattr(block, "as_contract") else dict(block)
        if not (
            isinstance(item.get("id"), str)
            and item["id"]
            and isinstance(item.get("content"), str)
            and item["content"].strip()
        ):
            continue
        score = item.get("score")
        if score is None or isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            item.pop("score", None)
        if item.get("created_at") is None:
            item.pop("created_at", None)
        items.append(item)
    return items


def create_app(cfg: ServerSettings | None = None) -> FastAPI:
    """The contest app for these settings (tests build their own; ``refind serve`` runs one on uvicorn)."""
    cfg = cfg or ServerSettings()
    if cfg.token is not None and not cfg.token.strip():
        raise InvalidInput(f"the server token is blank: set a real one ({defaults.ENV_SERVER_TOKEN}) or none at all")
    if cfg.token is not None and not (cfg.token.isascii() and cfg.token.strip().isprintable()):
        raise InvalidInput(  # never its value: it is a secret
            f"the server token must be printable ASCII: it travels in an HTTP header, where other characters never "
            f"arrive as they were set, so no request could match it; set another ({defaults.ENV_SERVER_TOKEN})"
        )
    if cfg.mode not in SEARCH_MODES:
        raise RefindError(f"mode must be bm25 or agent, got {cfg.mode!r}")
    if str(cfg.db) == ":memory:":  # each connection would get its own: the searches' would never see an Add
        raise InvalidInput("--db: ':memory:' is one connection's database, and the server opens many; give a file")
    from .. import retention

    # a bad value is refused before any file is opened or created
    given = retention.UNSET if cfg.retention_given is None else retention.given(cfg.retention_given)
    open_anew(cfg.db)  # this app serves the file that is there now, and only that one (dbpool.check_same_file)
    model: tuple[Any, str | None] = (None, None)
    if cfg.mode == "agent":  # resolve the model and its credentials now: fail at startup, not per search
        from ..model import from_env

        model = from_env(cfg.model, cfg.api_base)
    # fail now, not on the first request, when the database cannot be opened; the first open after an upgrade
    # indexes every message again (a new analyzer): say so, since the server listens only when it is done. Then,
    # once nothing can refuse the start, the retention given to `refind serve` is stored (or the stored one read).
    with cfg.open_store(index_progress=_reindex_log()) as store:
        cfg = _retention(cfg, store, given)
    rt = Runtime(cfg, model=model)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        rt.start()
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, rt.close)

    from .. import __version__

    app = FastAPI(
        title="refind",
        version=__version__,
        lifespan=lifespan,
        redirect_slashes=False,  # no 307 with an empty body: a JSON 404 or 405, as for any other path
        description="Agent memory over raw chat logs: the Agent Memory Leaderboard Add/Search contract.",
    )
    app.state.runtime = rt
    db_key = file_key(cfg.db)
    digest = cfg.digest()
    deps = [Depends(token_check(digest))] if digest else []

    faults = rt.faults

    def errors(exc: Exception, scope: Scope) -> JSONResponse | None:
        """The answer to what a route raised: a RefindError's own; for a storage fault (no space 507, locked or
        read-only 503, damaged 500) the store's one mapping — the transaction rolled back, so nothing of the request
        is stored, and the next request tries again (recovery needs no restart). None for anything else: not a
        fault of the file, RequestLog logs it (type and file:line) and answers the JSON 500."""
        error = storage_error(exc, cfg.db) if isinstance(exc, sqlite3.Error) else exc
        if isinstance(error, StorageError):  # (also one raised as such: the file deleted or replaced under it)
            what = "file_replaced" if isinstance(error, FileReplaced) else error.kind
            faults.refused(what, printable(scope.get("method")), printable(scope.get("path")))
            return error_response(error)
        return error_response(exc) if isinstance(exc, RefindError) else None

    @app.exception_handler(RefindError)
    async def _refind_error(request: Request, exc: RefindError) -> JSONResponse:
        return errors(exc, request.scope) or error_response(exc)

    @app.exception_handler(sqlite3.Error)
    async def _storage_error(request: Request, exc: sqlite3.Error) -> JSONResponse:
        answer = errors(exc, request.scope)
        if answer is None:
            raise exc
        return answer

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = RefindError(str(exc.detail))
        error.status = exc.status_code
        error.kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http")
        response = error_response(error)
        response.headers.update(exc.headers or {})  # a 405's Allow (RFC 9110 requires it)
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = [f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'request'}: {e.get('msg')}" for e in exc.errors()]
        return error_response(InvalidInput("; ".join(parts)))

    @app.get(
        "/health",
        summary="Liveness (no authentication)",
        responses={200: {"description": "OK", **json_content({"type": "object"})}},
    )
    async def health() -> Response:
        # alive is not enough: with its database file deleted or replaced, every Add and Search is a 503 until a
        # restart, so /health says so too — a supervisor watching it restarts the server (a probe of round 25)
        try:
            check_same_file(cfg.db, db_key)
        except StorageError as exc:  # (unauthenticated: the path is not said)
            await asyncio.get_running_loop().run_in_executor(None, rt.pool.replaced)
            return error_response(type(exc)(HEALTH_REPLACED))
        return Response(HEALTH_BODY, media_type="application/json")

    app.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False, name="health_head")
    # a probe configured with a trailing slash was redirected to /health before redirects were turned off: the same
    app.add_api_route("/health/", health, methods=["GET", "HEAD"], include_in_schema=False, name="health_slash")

    async def add(request: Request) -> JSONResponse:  # documents the route: ContractRoutes answers it
        return JSONResponse(await rt.add(await request.body()))

    async def search(request: Request) -> Response:  # documents the route: ContractRoutes answers it
        return Response(await rt.search(await request.body()), media_type="application/json")

    async def forget(
        request: Request,
        user_id: str = Query(description="The user whose memory to remove"),
        session_id: str | None = Query(None, description="Only this session"),
        request_id: str | None = Query(None, description="Only this Add request"),
    ) -> JSONResponse:
        import anyio.to_thread

        # a scope misspelt (`session=s1`) must not widen the delete to the whole user: unknown parameters are refused
        unknown = sorted(set(request.query_params) - FORGET_PARAMETERS)
        if unknown:
            raise InvalidInput(
                f"{unknown[0]}: not a parameter of DELETE /v1/memories (user_id, session_id, request_id); "
                "nothing was deleted"
            )
        if (await request.body()).strip():  # nor a scope sent as a body ({"session_id": "s1"}), which is not read
            raise InvalidInput(
                "DELETE /v1/memories takes its scope in the query string (user_id, session_id, request_id), not in a "
                "body; nothing was deleted"
            )
        result = await anyio.to_thread.run_sync(rt.forget, user_id, session_id, request_id, limiter=rt.write_limiter)
        return JSONResponse(result)

    # with a trailing slash it is the same route: a 404 there read as "nothing stored in that scope" while the user's
    # memory stayed searchable (found by a probe)
    for path, shown in (("/v1/memories", True), ("/v1/memories/", False)):
        app.add_api_route(
            path,
            forget,
            methods=["DELETE"],
            dependencies=deps,
            response_class=JSONResponse,
            summary="Forget a user's memory: all of it, one session, or one request",
            responses={
                404: {"description": "Nothing stored in that scope", **json_content(ERROR_SCHEMA)},
                422: {"description": "Bad scope", **json_content(ERROR_SCHEMA)},
            },
            include_in_schema=shown,
            name=None if shown else "forget_slash",
        )

    add_doc = operation(ADD_SCHEMA, ADD_RESPONSE, 401, 403, 409, 410, 413, 415, 422, 503, 507)
    search_doc = operation(SEARCH_SCHEMA, SEARCH_RESPONSE, 401, 403, 413, 415, 422, 502, 503)
    for path, fn, doc, summary, shown in (
        ("/v1/memories/add", add, add_doc, "Store one Add request (returns after commit)", True),
        ("/v1/memories/search", search, search_doc, "Search one user's memory", True),
        ("/add", add, add_doc, "Alias of /v1/memories/add", False),
        ("/search", search, search_doc, "Alias of /v1/memories/search", False),
    ):
        app.add_api_route(
            path,
            fn,
            methods=["POST"],
            dependencies=deps,
            openapi_extra=doc,
            summary=summary,
            include_in_schema=shown,
            name=f"{fn.__name__}{'' if shown else '_alias'}",
            response_class=JSONResponse,
        )

    app.add_middleware(ContractRoutes, add=rt.add, search=rt.search, errors=errors)  # innermost: POST Add/Search
    app.add_middleware(BodyLimit, limit=cfg.max_body_bytes, inflight=cfg.max_inflight_bytes)
    app.add_middleware(EdgeGuard, token_sha256=digest, allow_hosts=cfg.allow_hosts)  # before routing: 401, 403
    app.add_middleware(RequestLog, faults=faults)
    return app


# ---- running it ------------------------------------------------------------------------------------------------

PROTOCOL = "refind_cli.server.connections:GuardedH11Protocol"  # uvicorn's h11 with read deadlines and a connection cap
PROTOCOL_OVERRIDE: str | None = None  # bench/slowloris.py's baseline: uvicorn's plain "h11"
SETTINGS_ENV = "REFIND__SERVE_SETTINGS"  # how `refind serve --workers N` hands its settings to worker processes

LOG_CONFIG: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}},
    "filters": {"rare": {"()": "refind_cli.server.connections.RareLog"}},
    "loggers": {
        "asyncio": {"handlers": ["stderr"], "level": "WARNING", "propagate": False, "filters": ["rare"]},
        "uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},  # ours is refind.access
        "refind": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
    },
}


def _retention(cfg: ServerSettings, store: Store, days: Given) -> ServerSettings:
    """The settings with the retention the server applies: the one given to `refind serve` (``days``), stored as the
    database's policy (a change of it logged), else the stored policy, else ``cfg.retention_days``."""
    if cfg.retention_given is None:
        return cfg
    from dataclasses import replace

    from .. import retention

    if days is retention.UNSET:
        kept = retention.stored(store)
        return cfg if kept is None else replace(cfg, retention_days=kept.days)
    change = retention.remember(store, days, by="refind serve")
    if change.changed:
        log.info("retention policy: %s (stored, from %s)", change.describe(), cfg.retention_from)
    return replace(cfg, retention_days=days)


def _reindex_log() -> Callable[[int, int], None]:
    """Index progress for the log: a line when indexing starts and one when it ends (a re-index after an upgrade)."""
    import time

    started: float | None = None

    def report(done: int, total: int) -> None:
        nonlocal started
        if started is None:
            started = time.monotonic()
            log.info("indexing %d messages for search (the first open after an upgrade): listening when done", total)
        if done >= total:
            log.info("indexed %d messages in %.1f s", total, time.monotonic() - started)

    return report


def settings_to_env(cfg: ServerSettings) -> str:
    """The settings for worker processes, with the token replaced by its hash: no process but the one it was given
    to holds the token (nor passes it on to its children)."""
    data = {k: (str(v) if isinstance(v, Path) else v) for k, v in cfg.__dict__.items()}
    data["token"], data["token_sha256"] = None, cfg.digest()
    return json.dumps(data)


def app_from_env() -> FastAPI:
    """uvicorn's factory for worker processes: the settings the parent put in the environment."""
    import os

    end_with_supervisor(int(os.environ.get(SUPERVISOR_ENV) or 0))
    data = json.loads(os.environ[SETTINGS_ENV])
    data["db"] = Path(data["db"])
    data["allow_hosts"] = tuple(data.get("allow_hosts") or ())
    cfg = ServerSettings(**data)
    from .connections import configure

    configure(cfg)
    return create_app(cfg)


SUPERVISOR_ENV = "REFIND__SERVE_SUPERVISOR"  # the pid of `refind serve --workers N`, for its workers


def end_with_supervisor(supervisor: int) -> None:
    """Have this worker sent SIGTERM — a graceful stop, in-flight requests finished — when the process that started
    it ends, however it ends (Linux's PR_SET_PDEATHSIG). uvicorn's supervisor stops its workers on SIGTERM or Ctrl-C,
    but one killed by SIGKILL (the OOM killer, `kill -9`) left them serving, on the port a restart then could not
    bind (found by a fault probe). Elsewhere, or without the supervisor's pid, nothing is done."""
    import os
    import signal
    import sys

    if not supervisor or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    if ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0) != 0:
        log.warning("cannot ask to end with the supervisor (prctl: errno %d)", ctypes.get_errno())
        return
    if os.getppid() != supervisor:  # it ended before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def raise_open_file_limit(want: int = 65536) -> int:
    """Lift the soft limit on open files towards the hard one: 256 searches in flight hold 256 client sockets, 256
    SQLite connections (two files each) and, in agent mode, 256 model connections — past the common default of
    1,024. Returns the soft limit now in force."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        return soft
    except (ImportError, ValueError, OSError):  # not on this platform, or not allowed: keep what we have
        return -1


def _forced_quit() -> None:
    """A second Ctrl-C forced the quit: uvicorn answered nothing more (the requests in flight got their 503s) and
    skipped the lifespan's shutdown, but the interpreter's exit still joined the search threads — an agent search
    waits on its model up to its deadline (120 s), and the process with it (a probe of round 28: 40 s). End the
    process now: nothing needs closing, every write is a transaction (as under kill -9, what did not commit is
    rolled back)."""
    import os
    import sys

    log.warning("forced quit: searches still running were abandoned")
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def _check_listen(host: str, port: int) -> None:
    """Refuse to start when ``host:port`` cannot be bound (in use, no such address) before anything is opened: uvicorn
    binds only after the app's startup has run, and by then the retention policy was stored and the first sweep had
    deleted what it expires — for a server that never served."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as exc:  # socket.gaierror included
        raise RefindError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; nothing was opened or changed"
        ) from None


def run(cfg: ServerSettings, *, host: str, port: int, workers: int = 1) -> None:
    """Serve until SIGINT/SIGTERM; in-flight requests finish before the process exits."""
    import os

    import uvicorn

    from .connections import configure

    logging.config.dictConfig(LOG_CONFIG)  # (uvicorn applies it again): what create_app logs is seen too
    limit = raise_open_file_limit()
    if 0 < limit < 4096:
        log.warning("open-file limit is %d: 256 searches in flight may need more (raise `ulimit -n`)", limit)
    configure(cfg, limit)
    _check_listen(host, port)  # uvicorn binds after the app's startup, whose first sweep deletes: fail before it

    common = functools.partial(
        uvicorn.run,
        host=host,
        port=port,
        access_log=False,
        log_config=LOG_CONFIG,
        server_header=False,
        timeout_keep_alive=75,
        http=PROTOCOL_OVERRIDE or PROTOCOL,
    )
    if workers == 1:
        app = create_app(cfg)
        common(app)
        if app.state.runtime.searching:  # only after a forced quit: a graceful one waited for every request
            _forced_quit()
        return
    create_app(cfg)  # fail here, once, if the settings or the database are wrong
    os.environ[SETTINGS_ENV] = settings_to_env(cfg)
    os.environ[SUPERVISOR_ENV] = str(os.getpid())  # uvicorn's supervisor is this process
    common("refind_cli.server:app_from_env", factory=True, workers=workers)
