"""The HTTP edge of the server, free of any route: the one error shape, JSON bodies, the token check, and the ASGI
middleware (body limit; one access-log line per request and a JSON 500 for anything unexpected).

Nothing here logs message content, queries or tokens: the access line is method, path (never the query string),
status and duration; an unexpected error is logged as its type and ``file:line``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..contract import (
    MAX_CONTAINERS,
    SURROGATE_ESCAPE,
    AddRequest,
    DuplicateKey,
    SearchRequest,
    containers_over_limit,
    long_number,
    mend_lone_surrogates,
    parse_add,
    parse_search,
    refuse_lone_surrogates,
    unique_keys,
)
from ..errors import InvalidInput, RefindError, StorageError
from .fault_log import FaultLog

access_log = logging.getLogger("refind.access")
log = logging.getLogger("refind.server")

MB = 1024 * 1024


class BodyTooLarge(RefindError):
    status = 413
    kind = "too_large"


class Unauthorized(RefindError):
    status = 401
    kind = "unauthorized"


class Busy(RefindError):
    """The server holds as many request bodies as it may at once: retry shortly (the platform retries 503)."""

    status = 503
    kind = "busy"


def load_json(body: bytes) -> Any:
    """A request body as JSON, or InvalidInput (422) saying what is wrong with it."""
    if not body.strip():
        raise InvalidInput("request: the body is empty; send a JSON object")
    if (containers := containers_over_limit(body)) is not None:
        raise InvalidInput(
            f"request: the body holds {containers:,} JSON objects and arrays, over the limit of {MAX_CONTAINERS:,}"
        )
    try:
        # strictly UTF-8 (RFC 8259 §8.1; a byte-order mark aside): json.loads of bytes would also take UTF-16 and
        # UTF-32, and a surrogate encoded in UTF-8 ("\xed\xa0\x80"), which no Unicode text holds
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput("request: the body is not UTF-8 text") from None
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise InvalidInput(f"request: the key {exc.key!r} appears {exc.count} times in one object") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"request: the body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise InvalidInput("request: the body nests too deeply") from None
    except ValueError:  # an integer past Python's limit on digits (int_max_str_digits)
        raise InvalidInput(f"request: the body holds {long_number()}") from None
    return data


def read_add(body: bytes) -> AddRequest:
    """An Add request body read: half an emoji in a message's text (a cut) mended and noted, as a replay does."""
    data = load_json(body)
    mended: tuple[str, ...] = ()
    if SURROGATE_ESCAPE.search(body):
        data, mended = mend_lone_surrogates(data)
    return parse_add(data, notes=mended)


def read_search(body: bytes) -> SearchRequest:
    """A Search request body read (a query holding half a character is refused: nothing is lost, the caller asks
    again)."""
    data = load_json(body)
    if SURROGATE_ESCAPE.search(body):
        refuse_lone_surrogates(data, "request")
    return parse_search(data)


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The one error shape of every answer that is not a success."""
    return {"error": {"type": kind, "message": message}}


def error_response(exc: RefindError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    body = error_body(exc.kind, exc.message)
    if exc.search_id is not None:  # a failed agent search, stored: `refind inspect search ID` shows its trace
        body["search_id"] = exc.search_id
    return JSONResponse(body, status_code=exc.status, headers=headers)


# ---- ASGI middleware ---------------------------------------------------------------------------------------------


class BodyLimit:
    """413 for a body over the limit: at once from Content-Length, else as soon as the stream passes it. And a
    budget of body bytes held at once across all requests (``inflight``): a request whose declared or streamed body
    would pass it is answered 503 (retryable), so parallel big bodies cannot take the process's memory."""

    def __init__(self, app: ASGIApp, limit: int, inflight: int | None = None) -> None:
        self.app = app
        self.limit = limit
        self.inflight = inflight
        self.held = 0  # body bytes reserved by requests in flight (one event loop: no lock needed)

    def _busy(self) -> Busy:
        assert self.inflight is not None
        return Busy(
            f"the server is holding {self.inflight / MB:g} MiB of request bodies at once (--max-inflight-mb); "
            "retry shortly"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = BodyTooLarge(
            f"request body over the limit of {self.limit:,} bytes ({self.limit / MB:g} MiB; see --max-body-mb)"
        )
        declared = 0
        names = {name for name, _ in scope.get("headers", ())}
        if b"content-length" in names and b"transfer-encoding" in names:  # RFC 9112 §6.3: answer, then close
            refused = error_response(
                InvalidInput("Content-Length and Transfer-Encoding: a request carries one of them")
            )
            refused.headers["connection"] = "close"  # what follows on the connection is never read as a request
            await refused(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await error_response(InvalidInput("Content-Length: not a number"))(scope, receive, send)
                    return
                if declared > self.limit:
                    await error_response(too_large)(scope, receive, send)
                    return
        if self.inflight is not None and declared and self.held + declared > self.inflight:
            await error_response(self._busy())(scope, receive, send)
            return
        reserved = declared
        self.held += reserved
        received = 0

        async def limited_receive() -> Message:
            nonlocal received, reserved
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise too_large
                if received > reserved:  # no (or a wrong) Content-Length: count what actually arrives
                    if self.inflight is not None and self.held + received - reserved > self.inflight:
                        raise self._busy()
                    self.held += received - reserved
                    reserved = received
            return message

        try:
            await self.app(scope, limited_receive, send)
        finally:
            self.held -= reserved


class RequestLog:
    """One access line per request, and the last word on errors: anything unexpected becomes a JSON 500. A request
    answered 2xx ends the run of storage faults of its sort (``faults``: what the log says of them)."""

    def __init__(self, app: ASGIApp, faults: FaultLog | None = None) -> None:
        self.app = app
        self.faults = faults

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        state = {"status": 500, "started": False}

        async def logged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["started"] = message["status"], True
            await send(message)

        try:
            await self.app(scope, receive, logged_send)
        except ClientDisconnect:  # the client went away mid-body: nothing to answer, and no server fault
            if not state["started"]:
                state["status"] = 499
        except asyncio.CancelledError:
            # the event loop is going down under the request (a second Ctrl-C or SIGTERM: uvicorn's forced quit
            # cancels every request still running) — uvicorn answered a plain-text 500 and logged a traceback for
            # each; an Add among them may be stored or not, so say what the platform retries (a probe of round 28)
            if not state["started"]:
                error = RefindError(
                    "the server is shutting down; retry the request (an Add may have been stored: its identical "
                    "replay is harmless)"
                )
                error.status, error.kind = 503, "unavailable"
                with contextlib.suppress(Exception):  # (the connection may be gone already)
                    await error_response(error)(scope, receive, logged_send)
        except Exception as exc:
            log.error(
                "internal error on %s %s: %s at %s",
                printable(scope.get("method")),
                printable(scope.get("path")),
                type(exc).__name__,
                where(exc),
            )
            if not state["started"]:
                error = RefindError("internal server error; the request was not completed, retry it")
                error.status, error.kind = 500, "internal"
                await error_response(error)(scope, receive, logged_send)
        finally:
            if self.faults is not None and 200 <= state["status"] < 300 and not scope.get("refind.nothing_written"):
                self.faults.succeeded(scope.get("method"), scope.get("path"))
            access_log.info(
                "%s %s %d %.1fms",
                printable(scope.get("method")),
                printable(scope.get("path")),
                state["status"],
                (time.perf_counter() - start) * 1000,
            )


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")


def printable(text: object) -> str:
    """Text safe for a log line: control characters (newlines, ANSI escapes) and backslashes as ``\\xNN``, so a
    request path can neither forge a line nor drive the reader's terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def failure(exc: BaseException, db: str | Path | None) -> str:
    """What a log line says of a failure outside a request (the retention sweep, warming an index), nothing of the
    data: a fault of the database file by its kind (``read_only``, ``no_space``, ``locked``, …: the store's one
    mapping, as a request's storage fault is logged), anything else by its type and ``file:line``."""
    import sqlite3

    from ..store import storage_error

    error = storage_error(exc, db) if isinstance(exc, sqlite3.Error) else exc
    if isinstance(error, StorageError):
        return f"storage fault: {error.kind}"
    return f"{type(exc).__name__} at {where(exc)}"


def where(exc: BaseException) -> str:
    """file:line of the innermost frame: enough to find the bug, nothing of the data."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
