"""A scripted OpenAI-compatible chat server on loopback, for tests that drive litellm over real HTTP.

Each POST to ``/v1/chat/completions`` (or ``/chat/completions``) consumes the next entry of the script:

- a ``str``: answered 200 as the assistant message's content (usage counts derived from the text);
- ``Fail(status, message)``: answered with that HTTP status and an OpenAI-style error body;
- ``Slow(seconds, content)``: sleeps, then answers like a ``str`` (for timeouts);
- ``Raw(body)``: answered 200 with exactly that JSON body;
- ``Trickle(seconds, content)``: answered like a ``str``, one byte of the body every ``seconds`` (each read is quick,
  the whole answer slow: a per-read timeout never trips);
- a callable: called as the request arrives (a write racing the search), and its return value answered as an entry
  (a ``str``, a ``Fail`` …);
- ``Tools((name, arguments), …)``: answered 200 with native tool calls in OpenAI's shape (``arguments`` a dict, sent
  as its JSON text, or the text itself), and ``content`` beside them (None by default).
- ``Cut(entry, finish_reason)``: answered as ``entry`` (a ``str`` or ``Tools``) but with that ``finish_reason``
  ("length": the provider cut the reply at its output token limit).

Every request body and its headers are recorded in ``requests``. When the script runs out the server answers
``default`` when set, else 500.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Fail:
    status: int
    message: str = "scripted failure"
    retry_after: float | str | None = None  # sent as a Retry-After header (seconds, or an HTTP date as written)
    retry_after_ms: float | None = None  # sent as a retry-after-ms header (OpenAI's)


@dataclass(frozen=True)
class Slow:
    seconds: float
    content: str = '{"action": "finish_search"}'


@dataclass(frozen=True)
class Trickle:
    seconds: float  # between bytes of the body
    content: str = '{"action": "finish_search"}'


@dataclass(frozen=True)
class Raw:
    """A 200 answer whose JSON body is exactly this (a provider's answer refind must survive)."""

    body: dict


@dataclass(frozen=True)
class Tools:
    calls: tuple[tuple[str, Any], ...]
    content: str | None = None

    def __init__(self, *calls: tuple[str, Any], content: str | None = None) -> None:
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "content", content)

    def message(self) -> dict:
        return {
            "role": "assistant",
            "content": self.content,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
                }
                for i, (name, args) in enumerate(self.calls)
            ],
        }


@dataclass(frozen=True)
class Cut:
    entry: Any  # a str or Tools
    finish_reason: str = "length"


@dataclass
class ScriptedLLM:
    host: str = "127.0.0.1"
    port: int = 0
    script: list = field(default_factory=list)
    requests: list = field(default_factory=list)
    headers: list = field(default_factory=list)
    default: str | None = None  # answered once the script runs out (None: HTTP 500 "script exhausted")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def play(self, *entries) -> None:
        """Replace the script."""
        self.script[:] = list(entries)

    def bodies_text(self) -> str:
        """Everything the model was sent, as one string (for leak checks)."""
        return json.dumps(self.requests, ensure_ascii=False)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def start(llm: ScriptedLLM) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: dict, headers: dict | None = None, trickle: float = 0) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not trickle:
                    self.wfile.write(data)
                for i in range(len(data) if trickle else 0):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(trickle)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            body = json.loads(raw or b"{}")
            with lock:
                llm.requests.append(body)
                llm.headers.append(dict(self.headers))
                entry = llm.script.pop(0) if llm.script else llm.default or Fail(500, "script exhausted")
            if callable(entry):  # run as the request arrives: its return value is answered as an entry
                entry = entry()
            if isinstance(entry, Fail):
                extra = {"Retry-After": str(entry.retry_after)} if entry.retry_after is not None else {}
                if entry.retry_after_ms is not None:
                    extra["retry-after-ms"] = str(entry.retry_after_ms)
                self._send(entry.status, {"error": {"message": entry.message, "type": "scripted", "code": None}}, extra)
                return
            if isinstance(entry, Raw):
                self._send(200, entry.body)
                return
            trickle = 0.0
            if isinstance(entry, Slow):
                time.sleep(entry.seconds)
                entry = entry.content
            if isinstance(entry, Trickle):
                trickle, entry = entry.seconds, entry.content
            if callable(entry):  # (Slow's or Trickle's content: run once the wait is over)
                entry = entry()
            ended = None
            if isinstance(entry, Cut):
                entry, ended = entry.entry, entry.finish_reason
            prompt = sum(_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
            if isinstance(entry, Tools):
                message, finish = entry.message(), "tool_calls"
                completion = _tokens(json.dumps(message))
            else:
                message, finish = {"role": "assistant", "content": entry}, "stop"
                completion = _tokens(entry)
            self._send(
                200,
                {
                    "id": f"chatcmpl-{len(llm.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": ended or finish, "message": message}],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                },
                trickle=trickle,
            )

    server = ThreadingHTTPServer((llm.host, llm.port), Handler)
    server.daemon_threads = True
    llm.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
