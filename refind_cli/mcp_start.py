"""How `refind mcp` starts: it answers a client's first requests with the SDK's own earlier answers while the SDK loads.

The official ``mcp`` SDK takes 1.5-2 s of CPU to import (its ~500 protocol models are built at import), longer than
a client should wait for its tool list. Its answers to ``initialize``, ``server/discover`` and ``tools/list`` depend
only on the request, on refind's tools (its version, the source of its modules, the mode and ``--allow-forget``) and on the
SDK and pydantic versions that render them. So each launch records the lines the SDK read and the answers it wrote,
up to the first request of any other kind, in a file keyed by all of those (:func:`cache_file`); the next launch
with the same key starts importing the SDK on a thread and, meanwhile, answers the client from that record — but
only while every line the client sends is byte for byte the recorded one, in order. The first line that differs
(another client, another id, a tool call, a malformed line) stops it: that line and all later ones wait for the SDK.

When the SDK is loaded it reads every line the client sent, from the first (so its session state is what the client
negotiated), and serves the session from then on; its answers to the requests already answered are not sent again
but compared with what was sent: a difference (which the key should make impossible) is reported on stderr and
deletes the record. Every ``tools/call`` and every error is the SDK's.

The SDK gets the client's streams as ``sys.stdin``/``sys.stdout`` objects not backed by a descriptor, which its
stdio transport serves in place; as it would itself, this module keeps the wire on private descriptors and points
fd 0 at the null device and fd 1 at stderr, and once the server runs (:meth:`Wire.release`, from its lifespan)
``sys.stdout`` is the process's own again, so a stray ``print`` cannot corrupt the protocol. Every line the client
sends passes a :class:`Gate` first: what the SDK would drop without an answer (not UTF-8, not JSON, a batch, no JSON-RPC
2.0 message, half an emoji's surrogate) is answered with JSON-RPC's error instead, and the end of the input reaches the
SDK only once the requests in flight are answered. POSIX only: on Windows the SDK serves the streams alone; when the
record cannot be keyed (or ``REFIND_MCP_CACHE=off``) the wire still gates and drains, with nothing to answer from.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import select
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

# What a record may hold: the handshake and the tool list. The first line of any other kind ends it.
RECORDED = frozenset({"initialize", "notifications/initialized", "server/discover", "tools/list"})
MAX_RECORDS = 8  # per key: a few clients (each its own first lines) share one server configuration

Step = tuple[bytes, bytes | None]  # a line the client sent, and the SDK's answer (None for a notification)


@dataclass(frozen=True)
class McpSettings:
    user: str
    session: str  # the default session of remember / remember_exchange
    mode: str = "bm25"  # "bm25" | "agent"
    model: Any = None  # agent mode: the resolved ``complete`` callable
    model_name: str | None = None
    max_actions: int = 4
    deadline_s: float = 120.0  # agent mode: seconds one search may take in all
    skip: str | None = None  # agent mode: what later searches skip, "session" | "turn" (None: session)
    allow_forget: bool = False


def cache_file(cfg: McpSettings, directory: Path) -> Path | None:
    """The record's file for this server configuration; None when the SDK is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    from . import __version__

    try:
        versions = [version(name) for name in ("mcp", "mcp-types", "pydantic", "pydantic-core")]
    except PackageNotFoundError:
        return None
    try:
        tools = _source_digest(Path(__file__).parent)
    except OSError:  # not plain files (a zipped install): no record
        return None
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    key = json.dumps([__version__, tools, versions, python, cfg.mode, cfg.allow_forget])
    return directory / f"mcp-{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _source_digest(package: Path) -> str:
    """A hash of every module of the package: the tools' schemas draw on more than ``mcp_server.py`` (the API's
    dataclasses, the contract's limits), and a source checkout changes them without changing ``__version__``."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def load(path: Path) -> list[list[Step]]:
    """The records in ``path``; none when it is missing, unreadable, or writable by anyone but its owner."""
    try:
        info = path.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            return []
        records = json.loads(path.read_bytes())
        return [[(s[0].encode(), None if s[1] is None else s[1].encode()) for s in record] for record in records]
    except (OSError, ValueError, TypeError, LookupError, AttributeError):
        return []


def save(path: Path, records: list[list[Step]]) -> None:
    """Write the records (owner-only); a cache that cannot be written is skipped."""
    data = [[[s[0].decode(), None if s[1] is None else s[1].decode()] for s in record] for record in records]
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp.unlink(missing_ok=True)  # (a crashed launch's, same pid): made anew, never followed if a link
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(data, ensure_ascii=False).encode())
        os.replace(tmp, path)
    except (OSError, UnicodeError):
        with contextlib.suppress(OSError):  # (REFIND_MCP_CACHE naming a file: NotADirectoryError ended the server)
            tmp.unlink(missing_ok=True)


def _message(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _repeated_key(text: str) -> str | None:
    """What names a key twice in one object of the JSON ``text``, None when no key is given twice."""
    from .contract import DuplicateKey, unique_keys

    try:
        json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        return str(exc)
    except (ValueError, RecursionError):  # (what the models read and json does not: nothing of this check's)
        return None
    return None


def _id(message: dict[str, Any]) -> str:
    return json.dumps(message.get("id"))  # 1 and "1" are different ids


_NOTED: list[str] = []  # SIGTERM or Ctrl-C, come while `refind mcp` started (:func:`starting`), before its wire took it


def _python_default(signum: int) -> Any:
    """The handler Python starts with for ``signum``: Ctrl-C raises KeyboardInterrupt; SIGTERM ends the process."""
    import signal

    return signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL


def _note(signum: int, _frame: Any) -> None:
    import signal

    signal.signal(signum, _python_default(signum))  # a second one is Python's again: it ends the process
    _NOTED.append("SIGTERM" if signum == signal.SIGTERM else "Ctrl-C")


def _noted_signals() -> tuple[int, ...]:
    import signal

    return (signal.SIGINT, signal.SIGTERM)  # (SIGTERM last: a process that catches it has both noted)


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """While the block runs (`refind mcp` from its launch), a first SIGTERM or Ctrl-C is noted, not acted on, until the
    wire takes it (:func:`serve`): then it ends the input once what the client already sent is read — answered,
    stored — and the server exits 143 (130 for Ctrl-C). Agent mode imports litellm (seconds) before the wire exists,
    and the SDK (seconds) before it served: an MCP client quitting that early (it closes the input, then SIGTERMs 2 s
    later) ended the server with nothing it had sent stored or answered (round 30 review); Ctrl-C then raised
    KeyboardInterrupt in an import, the same (round 31). In the main thread, each over Python's own handler only."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = []
    for signum in _noted_signals():
        found = signal.getsignal(signum)
        if found is _python_default(signum) or (signum == signal.SIGTERM and found is None):
            signal.signal(signum, _note)
            taken.append(signum)
    try:
        yield
    finally:
        for signum in taken:
            if signal.getsignal(signum) is _note:
                signal.signal(signum, _python_default(signum))
        _NOTED.clear()


def _unnoted() -> None:
    """SIGTERM and Ctrl-C are Python's again where :func:`starting` noted them: served without a wire, nothing would
    act on a noted one (it was ignored while the SDK served); one noted already ends the server now (143, or 130)."""
    import signal

    if threading.current_thread() is threading.main_thread():
        for signum in _noted_signals():
            if signal.getsignal(signum) is _note:
                signal.signal(signum, _python_default(signum))
    if _NOTED:
        from .signals import Terminated

        raise Terminated if _NOTED[0] == "SIGTERM" else KeyboardInterrupt


def serve(cfg: McpSettings, start: Callable[[Callable[[], None]], Callable[[], None]]) -> None:
    """Serve one client over stdin/stdout until it closes the stream. ``start(on_running)`` imports the SDK and
    builds the server (:func:`refind_cli.mcp_server.runner`, which calls ``on_running`` once its transport holds
    the streams) and returns the function that serves."""
    from . import settings

    directory = settings.mcp_cache_dir()
    path = None if directory is None or sys.platform == "win32" else cache_file(cfg, directory)
    drain_s = cfg.deadline_s + DRAIN_EXTRA_S if cfg.mode == "agent" else DRAIN_EXTRA_S
    on_stop = _stop_agent_searches if cfg.mode == "agent" else _nothing
    try:  # (no record to answer from, or none to keep: the wire still checks every line and drains at the end)
        wire = None if sys.platform == "win32" else Wire(path, [] if path is None else load(path), drain_s, on_stop)
    except OSError:  # no standard descriptors to hold
        wire = None
    if wire is None:
        _unnoted()  # (nothing would read a SIGTERM noted now: the default's again)
        start(lambda: None)()
        return
    from .model import interruptible  # (no litellm: that is imported by the first model call)

    found = _handlers()
    try:  # (interruptible: the session's interruption ends with it — an in-process caller's later searches go on)
        with interruptible():
            wire.catch_sigterm()  # from now: while the SDK loads too, what the client sent is read first
            if _NOTED:  # (came while starting): the end of the input, once what was sent is read
                wire.interrupt(_NOTED[0])
            wire.answer_while(lambda: start(wire.release))()
    finally:
        wire.restore_signals()
        _put_back(found)
    if wire.interrupted == "SIGTERM":  # the requests in flight were answered; the exit status says so (143)
        from .signals import Terminated

        raise Terminated
    if wire.interrupted:  # Ctrl-C: likewise (130)
        raise KeyboardInterrupt


def _handlers() -> dict[int, Any]:
    """The Ctrl-C and SIGTERM handlers :func:`serve` found (main thread only; none not set from Python)."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: h for s in (signal.SIGINT, signal.SIGTERM) if (h := signal.getsignal(s)) is not None}


def _put_back(found: dict[int, Any]) -> None:
    """The handlers :func:`serve` found, in place again when it returns. The wire puts back the one it replaced
    (:meth:`Wire.restore_signals`) — for Ctrl-C, asyncio.run's, which asyncio.run leaves in place when it ends if
    another handler is installed then (the wire's): a caller in the same process was left asyncio.run's handler for
    a finished session, and later code that installs its own only over Python's (``signals.stopping``: a later
    ``refind search --mode agent`` in the process; asyncio.run) installed none (round 30 review)."""
    import signal

    for signum, handler in found.items():
        if signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


def _stop_agent_searches(why: str) -> None:
    """SIGTERM or Ctrl-C: the agent searches in flight stop now and answer what they have, their traces stored marked
    interrupted. An MCP client quitting closes the server's input, then SIGTERMs it 2 s later, which ended the process
    with a search waiting on its model and its trace never stored (round 30). Closing the input alone stops nothing:
    a client that pipes its requests and closes at once gets every answer in full."""
    from .model import interrupt

    interrupt(why)


def _nothing(why: str) -> None:
    """bm25 mode: a search in flight ends by itself in milliseconds."""


# at the end of the input, how long the requests in flight may still take (agent mode: this + its deadline)
DRAIN_EXTRA_S = 30.0


def _default(handler: Any) -> bool:
    import signal

    return handler in (signal.SIG_DFL, None)


class Gate:
    """What the SDK would drop unanswered — a line that is not UTF-8 (its reader would write U+FFFD into the text),
    not JSON, a batch, or no JSON-RPC message its models take (a "jsonrpc" other than "2.0", a float id, an unpaired
    surrogate such as half an emoji in a tool's argument) — is answered here with JSON-RPC's error, and not passed on:
    the SDK only logs such a line, and its client waits for an answer forever. A notification so refused is dropped
    (a notification is never answered)."""

    def __init__(self, answer: Callable[[bytes], None], passed: Callable[[Any], None] = lambda message: None) -> None:
        self.answer = answer
        self.passed = passed  # told each message passed on, as the SDK's models read it
        self.partial = bytearray()

    def feed(self, data: bytes) -> bytes:
        """The whole lines of ``data`` (with what came before) that the SDK may read; ``b""`` is the end of the input,
        which passes a last line without its newline."""
        if data:
            self.partial += data
            end = self.partial.rfind(b"\n")
            if end < 0:
                return b""
            lines = bytes(self.partial[: end + 1]).split(b"\n")[:-1]
            del self.partial[: end + 1]
            return b"".join(line + b"\n" for line in lines if self.passes(line))
        last, self.partial = bytes(self.partial), bytearray()
        return last if last.strip() and self.passes(last) else b""

    def passes(self, line: bytes) -> bool:
        import mcp_types

        stripped = line.strip()
        if not stripped:
            return False  # (nothing to answer)
        try:
            text = stripped.decode("utf-8")
        except UnicodeDecodeError:  # (its id, when the rest reads as JSON: the client's request fails, not waits)
            self._refuse(_key(_message(stripped.decode("utf-8", "replace").encode())), -32700, NOT_UTF8)
            return False
        try:
            model = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except Exception as exc:  # (pydantic's ValidationError, or what its JSON reader raises)
            refused = exc
        else:  # read as the SDK reads it: passed on, parsed once — but for a "notification" that has an id
            if isinstance(model, mcp_types.JSONRPCRequest) and (twice := _repeated_key(text)) is not None:
                # the models keep a key's last value ({"content": "a", "content": "b"} stored "b"): refused, as the
                # server and a replay file refuse it — a request's line is read once more, for this
                self._refuse(model.id, -32600, f"Invalid Request: {twice}")
                return False
            if not isinstance(model, mcp_types.JSONRPCNotification) or "id" not in (_message(stripped) or {}):
                self.passed(model)
                return True
            # (the models take {"id": 1.5, "method": …} for a notification, which the session never answers)
            self._refuse(None, -32600, "Invalid Request: an id is a string or an integer")
            return False
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):
            self._refuse(None, -32700, "Parse error: the line is not JSON")
            return False
        if isinstance(message, list):
            self._refuse(None, -32600, "Invalid Request: a batch; send one message per line")
            return False
        if not isinstance(message, dict) or ("id" not in message and "method" in message):
            if not isinstance(message, dict):
                self._refuse(None, -32600, "Invalid Request: a message is a JSON object")
            return False  # a notification: never answered
        key = _key(message)
        if _SURROGATE.search(text):
            why = "text holding an unpaired UTF-16 surrogate (half a character, such as half an emoji)"
        else:
            errors = getattr(refused, "errors", None)
            first = errors()[0] if callable(errors) and errors() else {}
            where = ".".join(str(part) for part in first.get("loc", ())[1:])
            why = f"not a JSON-RPC 2.0 message ({where + ': ' if where else ''}{first.get('msg', 'unreadable')})"
        self._refuse(key, -32600, f"Invalid Request: {why}")
        return False

    def _refuse(self, key: str | int | None, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": key, "error": {"code": code, "message": message}}
        self.answer(json.dumps(error).encode() + b"\n")


NOT_UTF8 = "Parse error: the line is not UTF-8 text"


def _key(message: dict[str, Any] | None) -> str | int | None:
    """A message's id when it is one JSON-RPC allows (a string or an integer), else None."""
    key = None if message is None else message.get("id")
    return key if isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool)) else None


# a \uD800-\uDFFF escape not part of a pair (JSON text; a pair's high half is followed by its low half)
_SURROGATE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F]"
)


class Wire:
    """The client's stdin and stdout, on private descriptors, with what was read, answered and recorded; every line
    the client sends checked by a :class:`Gate`, and the end of its input held back from the SDK until the requests
    in flight are answered (the SDK ends its session at once, and a ``remember`` stored meanwhile went unanswered)."""

    def __init__(
        self,
        path: Path | None,
        records: list[list[Step]],
        drain_s: float = DRAIN_EXTRA_S,
        on_stop: Callable[[str], None] = lambda why: None,
    ) -> None:
        import fcntl

        self.path, self.records, self.drain_s = path, records, drain_s
        self.on_stop = on_stop  # told which signal ended the input (interrupt): SIGTERM or Ctrl-C
        self.gate = Gate(self._write, self._track)
        self.ready = bytearray()  # lines the gate passed, not yet read by the SDK
        self.ended = False  # the client closed its end
        self.gone = False  # the client closed the end it reads: nothing more can reach it
        self.wake_r, self.wake_w = os.pipe()  # written by a signal: the reading thread takes it as the end of the input
        self.interrupted: str | None = None  # "Ctrl-C" or "SIGTERM", once one ended the input
        self.handlers: dict[int, Any] = {}  # the signal handlers to restore, while Ctrl-C and SIGTERM end the input
        self.pending: set[str] = set()  # ids of the requests passed to the SDK and not yet answered
        self.out = bytearray()  # the SDK's partial output line (what answers the pending requests)
        self.drained = threading.Condition()
        self.out_lock = threading.Lock()  # the gate answers on the SDK's reading thread, the SDK on its writing one
        sys.stdout.flush()
        self.fd_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        self.fd_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        self.std = (sys.stdin, sys.stdout)
        self.unread = bytearray()  # read from the client before the SDK was loaded: the SDK reads it first
        self.answered: dict[str, bytes] = {}  # id -> the recorded answer sent for it, until the SDK repeats it
        self.lock = threading.Lock()
        self.heard, self.said = bytearray(), bytearray()  # partial lines of the SDK's input and output
        self.lines: list[bytes] = []  # this session's record so far: the client's lines
        self.answers: list[bytes | None] = []  # and the SDK's answers to them
        self.waiting: dict[str, int] = {}  # id -> its step, until the SDK answers
        self.recording = True  # until a line of another kind, an error answer, or the end of the input
        self.reading = True  # the record's lines are still coming

    def answer_while(self, start: Callable[[], Callable[[], None]]) -> Callable[[], None]:
        """Run ``start`` on a thread; meanwhile answer the client from the records while its lines match one.
        Then hand the streams to the SDK and return what ``start`` returned (or raise what it raised)."""
        done_r, done_w = os.pipe()
        outcome: list[Callable[[], None] | BaseException] = []

        def load() -> None:
            try:
                outcome.append(start())
            except BaseException as exc:
                outcome.append(exc)
            finally:
                os.write(done_w, b"\0")

        threading.Thread(target=load, name="refind-mcp-load", daemon=True).start()
        candidates, index, line_start = self.records, 0, 0
        while True:
            watch = [done_r, self.fd_in] if candidates else [done_r]
            if done_r in select.select(watch, [], [])[0]:
                break
            chunk = os.read(self.fd_in, 65536)
            if not chunk:
                candidates = []  # the client closed its end: the SDK reads what came and the end
            self.unread += chunk
            while candidates and (end := self.unread.find(b"\n", line_start)) >= 0:
                line, line_start = bytes(self.unread[line_start:end]), end + 1
                candidates = [r for r in candidates if index < len(r) and r[index][0] == line]
                answers = {r[index][1] for r in candidates}
                if len(answers) > 1:
                    candidates = []
                elif candidates and (answer := answers.pop()) is not None:
                    message = _message(answer)
                    if message is None:
                        candidates = []
                        break
                    try:
                        self._write(answer + b"\n")
                    except OSError:  # the client is gone: the SDK will find out
                        candidates = []
                        break
                    self.answered[_id(message)] = answer
                index += 1
        os.close(done_r)
        os.close(done_w)
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        self.streams = (  # kept here: a collected wrapper would close the buffer the SDK serves
            io.TextIOWrapper(io.BufferedReader(_In(self)), encoding="utf-8"),
            io.TextIOWrapper(io.BufferedWriter(_Out(self)), encoding="utf-8"),
        )
        sys.stdin, sys.stdout = self.streams
        return result

    def catch_sigterm(self) -> None:
        """From now on SIGTERM ends the input (:meth:`interrupt`) — also while the SDK loads: what the client sent
        until then is read first (:meth:`read`). Over the default, which ended the process at once (an agent
        search's trace never stored), or :func:`starting`'s (a second SIGTERM is then the default again); not when
        the program handles it itself."""
        import signal

        if threading.current_thread() is not threading.main_thread() or self.interrupted:
            return
        handler = signal.getsignal(signal.SIGTERM)
        if _default(handler) or handler is _note:
            self.handlers[signal.SIGTERM] = signal.SIG_DFL if handler is _note else handler
            signal.signal(signal.SIGTERM, self._on_signal("SIGTERM"))
        if signal.getsignal(signal.SIGINT) is _note:  # `refind mcp` (starting): Ctrl-C too, from now on
            self.handlers[signal.SIGINT] = signal.default_int_handler
            signal.signal(signal.SIGINT, self._on_signal("Ctrl-C"))

    def release(self) -> None:
        """The SDK's transport holds the streams: ``sys.stdin``/``sys.stdout`` are the process's own again. From
        now on Ctrl-C ends the input too (:meth:`interrupt`)."""
        sys.stdin, sys.stdout = self.std
        import signal

        if threading.current_thread() is not threading.main_thread() or self.interrupted:
            return
        self.catch_sigterm()  # (a caller that did not: serve calls it first)
        # Ctrl-C: Python's, or asyncio.run's (not when SIGINT is ignored, nor taken already: catch_sigterm)
        if signal.SIGINT not in self.handlers and callable(handler := signal.getsignal(signal.SIGINT)):
            self.handlers[signal.SIGINT] = handler
            signal.signal(signal.SIGINT, self._on_signal("Ctrl-C"))

    def _on_signal(self, name: str) -> Callable[[int, Any], None]:
        return lambda _signum, _frame: self.interrupt(name)

    def interrupt(self, name: str = "Ctrl-C") -> None:
        """Ctrl-C (or SIGTERM) while the SDK serves: the end of the input, so the requests in flight are answered —
        an agent search's with what it has (:attr:`on_stop`) — and the server ends (its KeyboardInterrupt cancelled
        the session, whose reading thread, blocked on the client's stream, kept the process alive and unanswering
        until the client closed it — three Ctrl-C ended it, with a traceback: a probe of round 28). A second one is
        Python's own again."""
        self.restore_signals()
        if self.interrupted is None:
            self.interrupted = name
        self.on_stop(name)
        os.write(self.wake_w, b"\0")

    def restore_signals(self) -> None:
        if self.handlers and threading.current_thread() is threading.main_thread():
            import signal

            for signum, handler in self.handlers.items():
                signal.signal(signum, handler)
            self.handlers.clear()

    def read(self, size: int) -> bytes:
        """The SDK reads: first what was read before it loaded, then the client's stream — the lines the gate passes;
        at the end, once the requests in flight are answered (or ``drain_s`` has passed)."""
        while not self.ready and not self.ended:
            if self.unread:
                data = bytes(self.unread)
                self.unread.clear()
            elif self.wake_r in select.select([self.fd_in, self.wake_r], [], [])[0]:
                # Ctrl-C or SIGTERM (interrupt): the end of the input — once the lines the client already sent are
                # read, never waiting for more (a SIGTERM early in the start ended the input with its initialize
                # still in the pipe, unanswered: round 30 review)
                data = self._sent()
            else:
                # (the end of the input stops nothing: what the client asked before closing it is answered in full
                # — a client piping its requests closes at once; one quitting SIGTERMs the server 2 s later)
                data = os.read(self.fd_in, max(size, 65536))
            self.ended = not data
            passed = self.gate.feed(data)
            self.ready += passed
        if not self.ready:  # the end of the input: the SDK ends the session when it reads it
            with self.drained:
                self.drained.wait_for(lambda: not self.pending, timeout=self.drain_s)
        data = bytes(self.ready[:size])
        del self.ready[:size]
        if self.recording:
            with self.lock:
                self._heard(data)
        return data

    def _sent(self) -> bytes:
        """What the client has sent and the wire not read yet, without waiting; ``b""`` when nothing is there."""
        if self.fd_in in select.select([self.fd_in], [], [], 0)[0]:
            return os.read(self.fd_in, 65536)
        return b""

    def _track(self, message: Any) -> None:
        """Note a request passed to the SDK (a model of the SDK's): pending until the SDK answers it."""
        import mcp_types

        if isinstance(message, mcp_types.JSONRPCRequest):
            with self.drained:
                self.pending.add(json.dumps(message.id))
        elif isinstance(message, mcp_types.JSONRPCNotification) and message.method == "notifications/cancelled":
            params = message.params if isinstance(message.params, dict) else {}
            with self.drained:  # a cancelled request is never answered
                self.pending.discard(json.dumps(params.get("requestId")))
                self.drained.notify_all()

    def _answered(self, data: bytes) -> None:
        """Take the pending requests the SDK's output ``data`` answers off the list."""
        self.out += data
        while (end := self.out.find(b"\n")) >= 0:
            message = _message(bytes(self.out[:end])) or {}
            del self.out[: end + 1]
            if "result" in message or "error" in message:
                with self.drained:
                    self.pending.discard(_id(message))
                    self.drained.notify_all()

    def write(self, data: bytes) -> None:
        """The SDK writes: answers already sent from the record are checked and dropped, the rest goes out."""
        if self.pending:
            self._answered(data)
        if not (self.answered or self.recording):
            self._write(data)
            return
        with self.lock:
            self.said += data
            while (end := self.said.find(b"\n")) >= 0:
                line = bytes(self.said[:end])
                del self.said[: end + 1]
                if not self._said(line):
                    self._write(line + b"\n")
            self._save()
            if not (self.answered or self.recording) and self.said:
                self._write(bytes(self.said))
                self.said.clear()

    def _heard(self, data: bytes) -> None:
        if not data:
            self.reading = False
        self.heard += data
        while self.reading and (end := self.heard.find(b"\n")) >= 0:
            line = bytes(self.heard[:end])
            del self.heard[: end + 1]
            message = _message(line)
            method = message.get("method") if message else None
            notification = method == "notifications/initialized"
            if message is None or method not in RECORDED or ("id" in message) == notification:
                self.reading = False
                break
            self.lines.append(line)
            self.answers.append(None)
            if not notification:
                self.waiting[_id(message)] = len(self.lines) - 1
        if not self.reading:
            self.heard.clear()
            self.recording = bool(self.waiting)

    def _said(self, line: bytes) -> bool:
        """Record the SDK's answer; True when the client already has it from the record."""
        message = _message(line) or {}
        if "result" not in message and "error" not in message:
            return False
        key = _id(message)
        if (step := self.waiting.pop(key, None)) is not None:
            self.answers[step] = line
            if "result" not in message:
                self.recording = False  # an error is never recorded
                self.lines.clear()
            elif not (self.waiting or self.reading):
                self.recording = False
        if (sent := self.answered.pop(key, None)) is None:
            return False
        if sent != line:
            print(
                f"refind mcp: the recorded answer to request {key} differs from the SDK's; {self.path} is deleted",
                file=sys.stderr,
            )
            if self.path is not None:
                self.path.unlink(missing_ok=True)
            self.records = []
        return True

    def _save(self) -> None:
        """Once every recorded request has its answer, keep this session's lines if they are new."""
        if self.waiting or not self.lines or self.path is None:
            return
        record: list[Step] = list(zip(self.lines, self.answers))
        if any(r[: len(record)] == record for r in self.records):
            return
        self.records = [record, *(r for r in self.records if record[: len(r)] != r)][:MAX_RECORDS]
        save(self.path, self.records)

    def _write(self, data: bytes) -> None:
        """Send ``data`` to the client; once the client has closed its end (it quit, mid-call too), what is left to
        send is dropped: the SDK's writer raised BrokenPipeError, and its task group ended the server with a
        traceback of ~100 lines and exit 1 (a probe of round 28). The server serves on until its input ends."""
        view = memoryview(data)
        with self.out_lock:  # (one line at a time: the gate's answers and the SDK's never interleave)
            while view and not self.gone:
                try:
                    view = view[os.write(self.fd_out, view) :]
                except (BrokenPipeError, ConnectionResetError):
                    self.gone = True
                    self._say_gone()

    def _say_gone(self) -> None:
        """One line on stderr: the client is gone. A client that quit closed stderr too: then nothing more can be said
        (the line left in stderr's buffer failed again at exit, status 120)."""
        try:
            print(
                "refind mcp: the client closed its end of the output; answers are dropped", file=sys.stderr, flush=True
            )
        except OSError:
            sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (kept open until the process ends)


class _In(io.RawIOBase):
    """The SDK's stdin (no descriptor: its transport serves it in place)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self.wire.read(len(view))
        view[: len(data)] = data
        return len(data)


class _Out(io.RawIOBase):
    """The SDK's stdout (no descriptor: its transport serves it in place)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer) -> int:
        chunk = bytes(data)
        self.wire.write(chunk)
        return len(chunk)
