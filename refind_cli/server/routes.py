"""The contract's two POST routes — Add and Search, and their aliases — answered straight from ASGI.

FastAPI still declares them (their OpenAPI documentation, and the 405 for another method), but a POST to one of them
is answered here, inside the same body limit, token guard and access log as every route (``ContractRoutes`` is the
innermost middleware). FastAPI's routing, dependency resolution and exception middleware cost ~0.5 ms of event-loop
CPU per request on the 2 shared cores (BENCHMARKS "The contest's traffic over HTTP"): a twentieth of a search's CPU,
and every request of the contest is one of these. An exception is answered by the same mapping as the app's
exception handlers (``errors``), so a refusal reads the same whichever way a request went.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

ADD_PATHS = frozenset({"/v1/memories/add", "/add"})
SEARCH_PATHS = frozenset({"/v1/memories/search", "/search"})

Errors = Callable[[Exception, Scope], Response | None]


class ContractRoutes:
    """POST Add → ``add(body)`` (its JSON object), POST Search → ``search(body)`` (the encoded response); any other
    request goes on to FastAPI."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        add: Callable[[bytes], Awaitable[dict[str, Any]]],
        search: Callable[[bytes], Awaitable[bytes]],
        errors: Errors,
    ) -> None:
        self.app = app
        self.add = add
        self.search = search
        self.errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" and scope.get("method") == "POST" else None
        if path and path.endswith("/") and (path[:-1] in ADD_PATHS or path[:-1] in SEARCH_PATHS):
            path = path[:-1]  # "/v1/memories/add/" is the same route: a redirect (307) lost an Add to a client not
            # following it, as httpx does by default (found by a server probe)
        if path not in ADD_PATHS and path not in SEARCH_PATHS:
            await self.app(scope, receive, send)
            return
        response: Response
        try:
            body = await Request(scope, receive).body()  # a hang-up before its end: ClientDisconnect
            if path in ADD_PATHS:
                answer = await self.add(body)
                if getattr(answer, "wrote", True) is False:  # (an identical replay: the fault log's run goes on)
                    scope["refind.nothing_written"] = True
                response = JSONResponse(answer)
            else:
                response = Response(await self.search(body), media_type="application/json")
        except Exception as exc:
            handled = self.errors(exc, scope)
            if handled is None:
                raise  # RequestLog logs it (type and file:line) and answers the JSON 500; a disconnect, a 499
            response = handled
        await response(scope, receive, send)
