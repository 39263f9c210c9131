"""Bounded connections for ``refind serve``: uvicorn's h11 protocol with read deadlines and a cap on open sockets.

uvicorn waits forever for a request's headers and body (its keep-alive timer stops at the first byte), so a client
sending a byte now and then holds a socket for good, and 20k such clients take the process to its open-file limit
(README "Security"). Here every connection must deliver a request's headers within ``header_timeout_s`` (counted
from when it opened, or from the previous response) and its body within ``body_timeout_s`` after them, or it is
closed. At most ``max_connections`` sockets are open at once: one more closes the connection that has waited longest
without a request in progress (an idle or half-sent one), or, if every one is busy with a request, the newcomer.
That condition is logged once a minute at most, never per socket; so is the event loop's own "out of system
resource" error, should the file limit be reached anyway.

Imported only by ``refind serve`` (uvicorn loads :class:`GuardedH11Protocol` by its import path).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("refind.server")

RESERVED_FILES = 64  # files kept free for SQLite, the model's connections and the process itself
DEFAULT_MAX_CONNECTIONS = 1024
LOG_EVERY_S = 60.0


class Limits:
    """The process's connection policy, set once by :func:`configure` before uvicorn accepts anything."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 120.0
    max_connections: int = DEFAULT_MAX_CONNECTIONS


_last_logged: dict[str, float] = {}


def log_rarely(key: str, message: str, *args: object) -> None:
    """A warning at most once per LOG_EVERY_S for one condition."""
    now = time.monotonic()
    if now - _last_logged.get(key, -LOG_EVERY_S) >= LOG_EVERY_S:
        _last_logged[key] = now
        log.warning(message, *args)


def max_connections_for(open_files: int, wanted: int | None) -> int:
    """Connections the process may hold: what was asked for (default 1,024), never more than the open-file limit
    leaves after RESERVED_FILES for everything else (a search holds a SQLite connection: two files)."""
    cap = DEFAULT_MAX_CONNECTIONS if wanted is None else wanted
    if open_files > 0:
        cap = min(cap, max(8, (open_files - RESERVED_FILES) // 2))
    return max(1, cap)


def configure(cfg: Any, open_files: int | None = None) -> None:
    """Apply a ServerSettings' limits to every connection of this process."""
    if open_files is None:
        open_files = _soft_file_limit()
    Limits.header_timeout_s = float(cfg.header_timeout_s)
    Limits.body_timeout_s = float(cfg.body_timeout_s)
    Limits.max_connections = max_connections_for(open_files, cfg.max_connections)


def _soft_file_limit() -> int:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return -1 if soft == resource.RLIM_INFINITY else soft
    except (ImportError, ValueError, OSError):
        return -1


def _accepted_after_close(transport: asyncio.BaseTransport) -> bool:
    """Whether the listening server that accepted this connection has stopped serving (the shutdown began). asyncio's
    socket transports keep that server as ``_server`` (CPython's selector and proactor loops; uvloop's keep none:
    False, as before)."""
    server = getattr(transport, "_server", None)
    return server is not None and not server.is_serving()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on reading each request, and the cap on open connections."""

    _deadline: asyncio.TimerHandle | None = None
    _phase: str = ""  # "headers" | "body" | "" (the request has been read; the app is answering)
    _opened: float = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(cast(asyncio.Transport, transport))  # uvicorn narrows asyncio.Protocol's type
        if _accepted_after_close(transport):
            # uvicorn's shutdown stops accepting, then closes the idle connections it knows of; a connection the
            # event loop accepted just before (made a moment later) was never told, so it served every request its
            # client sent, and the shutdown waited for it as long as the client kept it busy: a probe of round 31
            # (16 clients, --workers 2, Ctrl-C) found a worker still answering 200s 90 s on, and connections queued
            # unanswered. It is closed before it reads a request, as uvicorn closes an idle one.
            self.transport.close()
            return
        self._arm("headers", Limits.header_timeout_s)
        if len(self.connections) > Limits.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        self._track()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that are not an HTTP request, in the one error shape (JSON), not text/plain."""
        import json

        from .asgi import error_body

        body = json.dumps(error_body("bad_request", msg)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        start = h11.Response(status_code=400, headers=headers, reason=b"Bad Request")
        for event in (start, h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.DONE):
            # The next request (keep-alive) gets its own header deadline, after uvicorn's keep-alive wait.
            self._arm("headers", Limits.header_timeout_s + self.timeout_keep_alive)
        self._track()

    # ---- the read deadline --------------------------------------------------------------------------------

    def _track(self) -> None:
        state = self.conn.their_state
        if state is h11.SEND_BODY and self._phase == "headers":
            self._arm("body", Limits.body_timeout_s)
        elif state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR) and self._phase:
            self._disarm()

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        if phase == "headers":
            self._opened = time.monotonic()  # waiting since: the longest waiting is closed first at the cap
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = ""

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log_rarely(
            "read-timeout",
            "closing connections that did not send a request's %s in time (%g s headers, %g s body; "
            "logged once a minute)",
            self._phase,
            Limits.header_timeout_s,
            Limits.body_timeout_s,
        )
        self._phase = ""
        self.transport.close()  # a handler waiting for the body sees the client disconnect

    # ---- the connection cap ---------------------------------------------------------------------------------

    def _waiting(self) -> bool:
        """No request in progress: idle between requests, or still sending one's headers."""
        return self._phase == "headers"

    def _make_room(self) -> None:
        idle = [c for c in self.connections if isinstance(c, GuardedH11Protocol) and c is not self and c._waiting()]
        victim: GuardedH11Protocol = min(idle, key=lambda c: c._opened) if idle else self
        log_rarely(
            "max-connections",
            "%d connections open, the limit (--max-connections): closing the longest-waiting idle or half-sent "
            "ones (logged once a minute)",
            Limits.max_connections,
        )
        victim._disarm()
        victim.transport.close()


class RareLog(logging.Filter):
    """Passes a record of the event loop's "out of system resource" once a minute, not once per refused socket."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "out of system resource" in record.getMessage():
            now = time.monotonic()
            if now - _last_logged.get("emfile", -LOG_EVERY_S) < LOG_EVERY_S:
                return False
            _last_logged["emfile"] = now
            record.exc_info = None  # one line, not a traceback
            record.exc_text = None
        return True
