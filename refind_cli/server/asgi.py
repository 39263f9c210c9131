"""The HTTP edge of the server, free of any route: the one error shape, JSON bodies, the token check, and the ASGI
middleware (body limit; one access-log line per request and a JSON 500 for anything unexpected).

Nothing here logs message content, queries or tokens: the access line is method, path (never the query string),
status and duration; an unexpected error is logged as its type and ``file:line``.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Depends
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..contract import SURROGATE_ESCAPE, refuse_lone_surrogates
from ..errors import InvalidInput, RefindError

access_log = logging.getLogger("refind.access")
log = logging.getLogger("refind.server")

MB = 1024 * 1024


class BodyTooLarge(RefindError):
    status = 413
    kind = "too_large"


class Unauthorized(RefindError):
    status = 401
    kind = "unauthorized"


def load_json(body: bytes) -> Any:
    """A request body as JSON, or InvalidInput (422) saying what is wrong with it."""
    if not body.strip():
        raise InvalidInput("request: the body is empty; send a JSON object")
    try:
        data = json.loads(body)
    except UnicodeDecodeError:
        raise InvalidInput("request: the body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"request: the body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise InvalidInput("request: the body nests too deeply") from None
    except ValueError as exc:  # an integer past Python's limit on digits (int_max_str_digits)
        raise InvalidInput(f"request: the body is not usable JSON ({exc})") from None
    if SURROGATE_ESCAPE.search(body):
        refuse_lone_surrogates(data, "request")
    return data


def error_response(exc: RefindError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse({"error": {"type": exc.kind, "message": exc.message}}, status_code=exc.status, headers=headers)


def token_check(token: str) -> Callable[..., Any]:
    # Header values arrive stripped, so a token read with a trailing newline (an env file) could never match.
    expected = token.strip().encode()
    authorization = APIKeyHeader(
        name="Authorization",
        auto_error=False,
        scheme_name="Authorization",
        description="`Bearer <token>` or `Token <token>`",
    )
    api_key = APIKeyHeader(name="X-Api-Key", auto_error=False, scheme_name="X-Api-Key")

    async def authorize(auth: str | None = Depends(authorization), key: str | None = Depends(api_key)) -> None:
        candidates = []
        if auth:
            scheme, _, value = auth.strip().partition(" ")
            if scheme.lower() in ("bearer", "token"):
                candidates.append(value.strip())
        if key:
            candidates.append(key.strip())
        ok = False
        for candidate in candidates:  # compare every candidate, in constant time each
            ok |= hmac.compare_digest(candidate.encode(), expected)
        if not ok:
            raise Unauthorized(
                "missing or wrong token: send Authorization: Bearer <token>, "
                "Authorization: Token <token> or X-Api-Key: <token>"
            )

    return authorize


# ---- ASGI middleware ---------------------------------------------------------------------------------------------


class BodyLimit:
    """413 for a body over the limit: at once from Content-Length, else as soon as the stream passes it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = BodyTooLarge(
            f"request body over the limit of {self.limit:,} bytes ({self.limit / MB:g} MiB; see --max-body-mb)"
        )
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    await error_response(InvalidInput("Content-Length: not a number"))(scope, receive, send)
                    return
                if length > self.limit:
                    await error_response(too_large)(scope, receive, send)
                    return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise too_large
            return message

        await self.app(scope, limited_receive, send)


class RequestLog:
    """One access line per request, and the last word on errors: anything unexpected becomes a JSON 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
        except Exception as exc:
            log.error(
                "internal error on %s %s: %s at %s",
                scope.get("method"),
                scope.get("path"),
                type(exc).__name__,
                where(exc),
            )
            if not state["started"]:
                error = RefindError("internal server error; the request was not completed, retry it")
                error.status, error.kind = 500, "internal"
                await error_response(error)(scope, receive, logged_send)
        finally:
            access_log.info(
                "%s %s %d %.1fms",
                scope.get("method"),
                scope.get("path"),
                state["status"],
                (time.perf_counter() - start) * 1000,
            )


def where(exc: BaseException) -> str:
    """file:line of the innermost frame: enough to find the bug, nothing of the data."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
