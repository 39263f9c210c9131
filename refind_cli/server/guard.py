"""Who may talk to the server at all, decided before any route runs (README "Security").

With a token, every request but ``/health`` must carry it — unknown paths and ``/docs``/``/openapi.json`` included —
so nothing about the app is visible without it (401 before routing, never a 404 that maps the routes).

Without a token the server trusts whatever can reach it, which on loopback is meant to be the local user only. Two
things on the same machine are not that user: a web page in a browser (it can POST form-like bodies to
``127.0.0.1`` without asking) and a hostile DNS name rebound to ``127.0.0.1`` (the browser then sends it
``Host: evil.example``). So without a token: the ``Host`` must be a loopback name or one given with
``--allow-host``; a request carrying an ``Origin`` must come from such a host; and POST bodies must say
``Content-Type: application/json``, which a page cannot send cross-site without a CORS preflight this server never
grants.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from fastapi import Depends
from fastapi.security import APIKeyHeader

from ..errors import InvalidInput, RefindError
from .asgi import Unauthorized, error_response

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/health", "/health/"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
JSON_TYPES = ("application/json",)


class Forbidden(RefindError):
    status = 403
    kind = "forbidden"


class UnsupportedMediaType(RefindError):
    status = 415
    kind = "unsupported_media_type"


def token_digest(token: str) -> str:
    """What the server keeps of its token: a hash, so worker processes never hold the token itself."""
    return hashlib.sha256(token.strip().encode()).hexdigest()


def presented_tokens(headers: Iterable[tuple[bytes, bytes]]) -> list[str]:
    """Tokens a request carries: ``Authorization: Bearer|Token <t>`` and ``X-Api-Key: <t>``."""
    out = []
    for name, value in headers:
        if name == b"authorization":
            scheme, _, rest = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() in ("bearer", "token"):
                out.append(rest.strip())
        elif name == b"x-api-key":
            out.append(value.decode("latin-1").strip())
    return out


def token_matches(candidates: Iterable[str], digest: str) -> bool:
    """Compare every candidate's hash with the expected one, each in constant time."""
    ok = False
    for candidate in candidates:
        ok |= hmac.compare_digest(hashlib.sha256(candidate.encode("utf-8", "surrogateescape")).hexdigest(), digest)
    return ok


UNAUTHORIZED = (
    "missing or wrong token: send Authorization: Bearer <token>, Authorization: Token <token> or X-Api-Key: <token>"
)


def host_name(value: str) -> str:
    """The name part of a Host header or an Origin's netloc, lower case, without port or IPv6 brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def is_loopback_name(name: str) -> bool:
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def encoding_refusal(scope: Scope) -> UnsupportedMediaType | None:
    """A body sent compressed (``Content-Encoding: gzip``, …) is refused as a coding refind does not read (RFC 9110
    §15.5.16: 415), not read as text: its bytes were answered 422 "not UTF-8 text" — no retry, the memory lost — and
    a coding named over a plain body was ignored."""
    for name, value in scope.get("headers") or ():
        if name == b"content-encoding":
            coding = value.decode("latin-1").strip().lower()
            if coding not in ("", "identity"):
                return UnsupportedMediaType(
                    f"Content-Encoding {coding[:40]!r} refused: send the body uncompressed (identity)"
                )
    return None


def query_refusal(query_string: bytes) -> InvalidInput | None:
    """A query string with more than one reading is refused: bytes outside ASCII (a client percent-encodes them;
    read as Latin-1 they would name another user), a "+" (a space in a form, itself in a URL: ``user_id=bob+test``
    forgot the user "bob test"), a value that is no UTF-8 text once percent-decoded ("%FF" would become U+FFFD,
    "%ED%A0%80" a lone surrogate), and a parameter given twice (``?user_id=bob&user_id=BOB``: never "the last one
    wins")."""
    if not query_string:
        return None
    from urllib.parse import parse_qsl

    if not query_string.isascii():
        return InvalidInput("the query string holds bytes outside ASCII; percent-encode them (as UTF-8)")
    if b"+" in query_string:
        return InvalidInput(
            'the query string holds a "+", which a form reads as a space and a URL as itself; percent-encode a plus '
            "as %2B and a space as %20"
        )
    try:
        pairs = parse_qsl(query_string.decode("ascii"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        return InvalidInput("a query parameter is not UTF-8 text once percent-decoded")
    seen: dict[str, int] = {}
    for name, _ in pairs:
        seen[name] = seen.get(name, 0) + 1
    for name, count in seen.items():
        if count > 1:
            return InvalidInput(f"{name}: given {count} times; send each parameter once")
    return None


def token_check(digest: str) -> Callable[..., Awaitable[None]]:
    """The routes' token dependency (it documents the schemes in OpenAPI; ``guard.EdgeGuard`` already refused a
    request without the token before routing). ``digest``: ``guard.token_digest`` of the token."""
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
        if not token_matches(candidates, digest):
            raise Unauthorized(UNAUTHORIZED)

    return authorize


class EdgeGuard:
    """The ASGI gate in front of every route: the token when one is set, the browser rules when none is."""

    def __init__(self, app: ASGIApp, *, token_sha256: str | None, allow_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.digest = token_sha256
        hosts = {h.strip().lower() for h in allow_hosts if h.strip()}
        self.any_host = "*" in hosts
        self.allow_hosts = frozenset(host_name(h) for h in hosts - {"*"})

    def allowed_host(self, name: str) -> bool:
        return self.any_host or is_loopback_name(name) or name in self.allow_hosts

    def refusal(self, scope: Scope) -> RefindError | None:
        if scope.get("path") in OPEN_PATHS:
            return None
        refused = self.who(scope) or encoding_refusal(scope)
        return refused if refused is not None else query_refusal(scope.get("query_string") or b"")

    def who(self, scope: Scope) -> RefindError | None:
        headers = scope.get("headers") or ()
        if self.digest is not None:
            return None if token_matches(presented_tokens(headers), self.digest) else Unauthorized(UNAUTHORIZED)
        host = origin = content_type = None
        for name, value in headers:
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"content-type":
                content_type = value.decode("latin-1")
        hint = "start the server with --allow-host NAME to accept it, or set a token"
        if host is not None and not self.allowed_host(host_name(host)):
            return Forbidden(f"Host {host_name(host)!r} is not served without a token ({hint})")
        if origin is not None:
            origin_host = host_name(urlsplit(origin.strip()).netloc) if "://" in origin else ""
            if not origin_host or not self.allowed_host(origin_host):
                return Forbidden(f"Origin {origin.strip()[:200]!r} may not use this server without a token ({hint})")
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            media = (content_type or "").partition(";")[0].strip().lower()
            if media not in JSON_TYPES and not media.endswith("+json"):
                return UnsupportedMediaType(
                    f"Content-Type {media or '(none)'!r} refused: send the body as application/json"
                )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)
