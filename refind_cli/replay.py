"""JSONL replay: stream a file of Add requests or single messages into the store.

Two line shapes, detected per line:

* an **Add request** in the contract's shape: ``{"request_id", "user_id", "session_id", "messages": [...]}``
* one **message**: ``{"user_id", "session_id", "role", "content", "timestamp"?, "request_id"?}``. Consecutive
  message lines of one user and session become one Add request: with their ``request_id`` when they carry one,
  else in groups of at most ``GROUP_SIZE`` with the id ``auto-<hash of the group's payload>`` (``-2``, ``-3``, … for
  a repeat of a group later in the file), so replaying the same file again (or again after an interruption) stores
  nothing twice, and a message said twice is stored twice.

The file is read line by line (``-`` for stdin, ``.gz`` decompressed on the fly once checked whole), so its size
does not matter. Requests are written in batches, one transaction each and one savepoint per request: a bad request
never takes a good one down with it, and a killed replay re-run stores each message exactly once.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

from . import index_store, sealed
from .auto_ids import (
    CHAINED,
    Known,
    Piece,
    Repeats,
    Said,
    Split,
    Stone,
    apart_request_id,
    group_id,
    prefix_candidates,
    prefix_ids,
    renumbered,
    split_grown,
    stored_chained,
)
from .contract import (
    MAX_CONTAINERS,
    MAX_ID_CHARS,
    MAX_LINE_BYTES,
    MAX_MESSAGES_PER_ADD,
    SURROGATE_ESCAPE,
    AddRequest,
    DuplicateKey,
    Message,
    check_id,
    containers_over_limit,
    empty_text,
    exported_bytes,
    long_number,
    mend_lone_surrogates,
    parse_add,
    parse_message,
    unique_keys,
)
from .errors import FileReplaced, Forgotten, InvalidInput, RefindError
from .signals import Terminated, sigterm_as_ctrl_c
from .store import Prepared, Store, iso_time, prepare, storage_error

GROUP_SIZE = 20
BATCH_SIZE = 500
# A batch ends at BATCH_SIZE requests, or sooner once it holds this many messages or characters of text: a file of
# Adds of 5,000 messages (or of a 5 MB pasted log each) held 500 of them at once — 1.3 GB of memory for a million
# short messages, 2.7 GB for 40 lines of 5 MB, and a file of 500 such lines would never finish (killed for memory
# each time, the same command again). 500 requests of a replay's groups of 20 are 10,000 messages: cut as before.
# 10,000 messages a batch cost a million short ones 1.4× the time (a commit each); 50,000 cost none (BENCHMARKS.md,
# "Slow paths found by a probe (round 28)").
BATCH_MESSAGES = 50_000
BATCH_CHARS = 16 << 20
MESSAGE_LINE_FIELDS = frozenset({"user_id", "session_id", "request_id", "role", "content", "timestamp"})


@dataclass(frozen=True)
class Parsed:
    """One request ready to store, with the file lines it came from."""

    request: AddRequest
    first_line: int
    last_line: int
    warnings: tuple[tuple[int, str], ...] = ()  # (the line at fault, what was ignored there)
    notes: tuple[tuple[int, str], ...] = ()  # (line, a value read leniently: seconds ×1000, digits as numbers)
    auto: bool = False  # a group of message lines: its id derived from its messages (auto_ids)
    lines: tuple[int, ...] = ()  # (auto, of two messages or more) the line of each message


@dataclass(frozen=True)
class LineError:
    """Lines of the file refused: ``line`` (to ``last``, when it refuses several: a request_id's lines apart from
    its first ones), and why. ``regroups``: the line may be a message line without request_id — once fixed, it joins
    a group whose id is derived from its content, so the whole file replayed again would store that group anew."""

    line: int
    message: str
    last: int | None = None
    regroups: bool = False
    lines: int | None = None  # how many lines of the span it refuses, when not all (blank or bad lines between)

    @property
    def where(self) -> str:
        return _span(self.line, self.last or self.line)

    @property
    def count(self) -> int:
        """How many of the file's lines it refuses."""
        return self.lines if self.lines is not None else (self.last or self.line) - self.line + 1


@dataclass
class ReplaySummary:
    source: str
    requests_added: int = 0
    messages_added: int = 0
    duplicates: int = 0
    conflicts: int = 0
    forgotten: int = 0  # requests refused because forget removed them (a tombstone names them)
    grown: int = 0  # groups of message lines grown since an earlier replay: only their new messages were stored
    invalid_lines: int = 0  # the file's lines refused, as their problems name them (a span counts each line)
    regrouping: int = 0  # refused lines that may be message lines without request_id (LineError.regroups)
    normalized: int = 0  # values read leniently (timestamps in seconds, strings of digits), each also a warning
    lines: int = 0
    problems: list[str] = field(default_factory=list)  # "FILE:LINE: reason", every refused line or request
    warnings: list[str] = field(default_factory=list)  # "FILE:LINE: ignored unknown field(s) ..."
    fault: RefindError | None = None  # the storage fault (disk full, locked, …) or read error that stopped the replay
    requests_in_file: int | None = None  # counted when a fault stopped the replay: what "the rest" is out of
    interrupted: bool = False  # Ctrl-C (or SIGTERM) stopped it: the counts are of the batches committed before
    stopped_by: str = "Ctrl-C"  # what interrupted it: "Ctrl-C" or "SIGTERM"
    once: bool = False  # the input is read once (stdin, a pipe): the same command cannot read its lines again
    handled: int = 0  # the file's lines up to this one are handled (stored, skipped or reported): committed batches

    @property
    def refused(self) -> int:
        return self.conflicts + self.forgotten + self.invalid_lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "lines": self.lines,
            "requests_added": self.requests_added,
            "messages_added": self.messages_added,
            "duplicates": self.duplicates,
            "conflicts": self.conflicts,
            "forgotten": self.forgotten,
            "grown": self.grown,
            "invalid_lines": self.invalid_lines,
            "normalized": self.normalized,
            "problems": self.problems,
            "warnings": self.warnings,
            "error": None if self.fault is None else {"type": self.fault.kind, "message": self.fault.message},
            "interrupted": self.interrupted,
        }


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped a replay. ``summary`` counts what was stored before it: every batch committed (a
    batch is one transaction; the one in progress was rolled back). Replaying the same file again stores the rest."""

    def __init__(self, summary: ReplaySummary, stopped_by: str = "Ctrl-C") -> None:
        super().__init__()
        summary.interrupted = True
        summary.stopped_by = stopped_by
        self.summary = summary


class _Counting:
    """Wraps a binary stream to report how many bytes of the underlying file were consumed."""

    def __init__(self, raw: IO[bytes] | _Live) -> None:
        self.raw: Any = raw
        self.done = 0

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.raw.read(n)
        self.done += len(data)
        return data

    def readable(self) -> bool:
        return True


def open_lines(
    path: str, *, source: IO[bytes] | None = None, check: bool = True
) -> tuple[Iterator[tuple[int, bytes]], Callable[[], int], int | None]:
    """(numbered raw lines, bytes-consumed probe, total bytes or None). ``-`` reads stdin; ``source``, an open binary
    file read from where it stands and left open (named ``path`` in messages). A .gz is first read whole and checked
    (:func:`_check_gzip`; ``check=False`` skips that, for a file checked already): a damaged one raises here, before
    a line is read."""
    owned = source is None and path != "-"  # a file opened here, closed here
    live: _Live | None = None  # a stream read as it comes (stdin, a pipe): idle reads are said (_Live)
    if source is not None:
        raw: Any = _Counting(source)
        total = os.fstat(source.fileno()).st_size - source.tell()
    elif path == "-":
        live = _Live.of(sys.stdin)
        raw = _Counting(sys.stdin.buffer if live is None else live)
        total = None
    else:
        p = Path(path)
        if not p.is_file() and not is_stream(path):
            what = "no such file" if not p.exists() else "a folder, not a file" if p.is_dir() else "not a regular file"
            raise RefindError(f"{path}: {what}")
        try:
            raw = _Counting(p.open("rb"))
            total = p.stat().st_size if p.is_file() else None  # (a pipe's size is not known ahead)
        except OSError as exc:  # permission denied and the like: one line, not a traceback
            raise RefindError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        if total is None and (live := _Live.of(raw.raw)) is not None:
            raw = _Counting(live)  # (closing it closes the file)
    try:
        head = _peek(raw)
    except OSError as exc:
        if owned:
            raw.raw.close()
        raise RefindError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    stream: IO[bytes]
    spool: IO[bytes] | None = None  # a .gz read once (stdin, a pipe): its bytes, kept for the second pass
    if live is not None and not head.startswith(GZIP_MAGIC):
        live.idle = True  # (a .gz is read whole first, as it comes)
    if head.startswith(GZIP_MAGIC):
        if check:
            try:
                spool = _check_gzip(path, raw, head)
            except BaseException:
                if owned:
                    raw.raw.close()
                raise
            if spool is not None:  # read on from the copy
                if owned:
                    raw.raw.close()
                owned, raw = True, _Counting(spool)
                head = _peek(raw)
        stream = cast("IO[bytes]", _Gunzip(_Prefixed(head, raw)))
    else:
        stream = cast("IO[bytes]", _Prefixed(head, raw))

    def numbered() -> Iterator[tuple[int, bytes]]:
        try:
            if live is not None and live.idle:
                yield from _numbered_live(_iter_lines(stream))
            else:
                yield from enumerate(_iter_lines(stream), start=1)
        except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt .gz (when not checked first)
            raise RefindError(f"{path}: cannot read: {exc}") from exc
        finally:
            if owned:
                raw.raw.close()

    return numbered(), (lambda: raw.done), total


IDLE_S = 1.0  # a live input (a pipe) with no complete line for this long: the batch read so far is committed


class _Idle(bytes):
    """What a live input's read answers when nothing came for IDLE_S seconds: not a line (:data:`IDLE`)."""


IDLE = _Idle()


class _Live:
    """Stdin or a pipe, read as it comes: each read answers the bytes there (one ``read`` of the descriptor), or
    :data:`IDLE` once ``idle`` is set and nothing came for IDLE_S seconds — so a producer's lines (``tail -f log |
    refind add --file -``) are committed while it waits, not only once a batch fills or the input ends (a buffered
    read of 1 MiB waited for a whole MiB). ``file``: the file object the descriptor belongs to."""

    def __init__(self, fd: int, file: Any) -> None:
        self.fd = fd
        self.file = file
        self.idle = False  # set once the input is known not to be a .gz (read whole first: no idle reads)

    @classmethod
    def of(cls, file: Any) -> _Live | None:
        """A live reader of ``file``'s descriptor, or None where there is none to wait on (a test's stdin, Windows)."""
        if sys.platform.startswith("win"):
            return None
        try:
            fd = file.fileno()
        except (AttributeError, OSError, ValueError):
            return None
        return cls(fd, file)

    def read(self, n: int = -1) -> bytes:
        import select

        if n is None or n < 0:
            n = 1 << 20
        while True:
            ready, _, _ = select.select([self.fd], [], [], IDLE_S if self.idle else None)
            if ready:
                return os.read(self.fd, n)
            if self.idle:
                return IDLE

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.file.close()


def _numbered_live(lines: Iterator[bytes]) -> Iterator[tuple[int, bytes]]:
    """A live input's lines numbered, :data:`IDLE` passed on (with the last line's number) and not counted."""
    n = 0
    for line in lines:
        if line is not IDLE:
            n += 1
        yield n, line


def is_stream(path: str) -> bool:
    """Whether ``path`` names a pipe or a character device — a stream read once, as stdin is: a named pipe, the shell's
    ``<(zcat log.gz)`` (/dev/fd/63), /dev/stdin."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _peek(raw: _Counting) -> bytes:
    head = raw.read(2)
    while 0 < len(head) < 2 and isinstance(raw.raw, _Live):  # (a live read answers what is there: one byte, say)
        more = raw.read(1)
        if not more:
            break
        head += more
    return head


class _Prefixed:
    def __init__(self, head: bytes, raw: _Counting | _Tee) -> None:
        self.head = head
        self.raw = raw

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n is None or n < 0:
                data, self.head = self.head + self.raw.read(), b""
                return data
            data, self.head = self.head[:n], self.head[n:]
            if len(data) < n:
                data += self.raw.read(n - len(data))
            return data
        return self.raw.read(n)

    def readable(self) -> bool:
        return True


GZIP_MAGIC = b"\x1f\x8b"
GZIP_TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"  # gzip's own words


def _check_gzip(path: str, raw: _Counting, head: bytes) -> IO[bytes] | None:
    """Decompress the .gz whole, keeping nothing, before a line of it is stored: gzip checks a member's CRC-32 and
    length only at its end, and a replay commits batches as it reads, so text altered by a damaged byte would be
    stored (and its request id taken) before the check failed. A damaged file (a member failing its check, corrupt
    deflate data, bytes after the last member that are not one) raises :class:`RefindError` and nothing is stored.
    A truncated file passes: the replay stores every whole line before the cut, then stops at it with its error.

    A seekable file is read again from where it stood; what cannot be read twice (stdin from a pipe, a named pipe)
    is copied while it is checked to an unnamed temporary file (the compressed bytes), returned to be read instead."""
    seekable = getattr(raw.raw, "seekable", lambda: False)()
    start = raw.raw.tell() - len(head) if seekable else 0
    name = "<stdin>" if path == "-" else path
    spool: IO[bytes] | None = None
    if not seekable:
        spool = tempfile.TemporaryFile(prefix="refind-replay-")  # noqa: SIM115  returned: the lines close it
        spool.write(head)
    reader = _Gunzip(_Prefixed(head, raw if spool is None else _Tee(raw, spool, name)), chunk=1 << 20)
    try:
        while reader.read(1 << 20):
            pass
    except EOFError:
        pass  # truncated: the replay stores what precedes the cut and reports it
    except (zlib.error, gzip.BadGzipFile) as exc:
        if spool is not None:
            spool.close()
        raise RefindError(f"{name}: damaged .gz file: {_damage(exc, reader)}") from exc
    except OSError as exc:
        if spool is not None:
            spool.close()
        raise RefindError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    except BaseException:
        if spool is not None:
            spool.close()
        raise
    if spool is not None:
        spool.seek(0)
        return spool
    raw.raw.seek(start + len(head))
    raw.done = len(head)
    return None


def _damage(exc: Exception, reader: _Gunzip) -> str:
    """What is wrong with a damaged .gz, in words (zlib's own in parentheses where they add something)."""
    nothing = "nothing from it was stored — replay an intact copy"
    if isinstance(exc, gzip.BadGzipFile):
        return (
            f"the bytes from byte {reader.at:,} on are not gzip data (trailing garbage, or a gzip member whose header "
            f"is damaged); {nothing}, or what precedes those bytes (`gzip -dc` decompresses and checks it)"
        )
    member = f"the gzip member at byte {reader.started:,}"
    detail = str(exc).removeprefix("Error -3 while decompressing data: ")
    if detail == "incorrect data check":
        return f"the data of {member} does not match its CRC-32 checksum; {nothing}"
    if detail == "incorrect length check":
        return f"the data of {member} does not match its recorded length; {nothing}"
    return f"the compressed data of {member} is corrupt (zlib: {detail}); {nothing}"


class _Tee:
    """Reads ``raw``, writing what it reads to ``copy`` (an unnamed temporary file; ``name``: the input's, for
    messages)."""

    def __init__(self, raw: _Counting, copy: IO[bytes], name: str) -> None:
        self.raw = raw
        self.copy = copy
        self.name = name

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        try:
            self.copy.write(data)
        except OSError as exc:  # a full disk, most likely
            raise RefindError(
                f"{self.name}: cannot copy the .gz to a temporary file to check it before storing it "
                f"({exc.strerror or exc}); free space there or point TMPDIR at a folder with room"
            ) from exc
        return data

    def readable(self) -> bool:
        return True


class _Gunzip:
    """A .gz file's content, read as ``gzip`` reads it (every member of a concatenated file, the zero bytes that may
    pad one skipped, each member's CRC and length checked), but each ``read`` answers what was decompressed so far:
    a truncated file gives every byte before the cut, then EOFError. (``gzip.GzipFile`` lost what the read that met
    the cut had decompressed: up to a MiB of whole lines, never stored.) zlib, unlike ``gzip``, also checks a header
    CRC (FHCRC) and refuses reserved flag bits: such rare files are refused as damaged (:func:`_check_gzip`)."""

    def __init__(self, raw: _Prefixed | _Tee | IO[bytes], chunk: int = 1 << 17) -> None:
        self.raw = raw
        self.chunk = chunk
        self.member: Any = None  # the current member's zlib decompressor; None between members
        self.input = b""  # compressed bytes read and not yet decompressed
        self.full = False  # the last decompress stopped at its output limit: it may hold more output
        self.consumed = 0  # bytes read from ``raw``
        self.started = 0  # the offset of the current (or last) member's header

    @property
    def at(self) -> int:
        """The offset of the first compressed byte not yet decompressed (for messages)."""
        return self.consumed - len(self.input)

    def _more(self) -> bytes:
        data = self.raw.read(self.chunk)
        self.consumed += len(data)
        return data

    def read(self, n: int = -1) -> bytes:
        if n == 0:
            return b""
        limit = max(n, 0)  # zlib's max_length: 0 is no limit
        while True:
            if self.member is None and not self._next_member():
                return b""
            if not self.input and not self.full:
                self.input = self._more()
                if not self.input:
                    raise EOFError(GZIP_TRUNCATED)
            out: bytes = self.member.decompress(self.input, limit)
            self.full = limit > 0 and len(out) == limit
            if self.member.eof:  # its trailer read and checked: what follows is the next member (or padding)
                self.input, self.member, self.full = self.member.unused_data, None, False
            else:
                self.input = self.member.unconsumed_tail
            if out:
                return out

    def _next_member(self) -> bool:
        """Start the next member (False at the end of the file), as gzip does: zero bytes skipped, anything else
        that is not a member's header refused."""
        data = self.input.lstrip(b"\x00")
        while len(data) < len(GZIP_MAGIC):
            more = self._more()
            if not more:
                break
            data = (data + more).lstrip(b"\x00")
        self.input = data
        if not data:
            return False
        if not data.startswith(GZIP_MAGIC):
            raise gzip.BadGzipFile(f"Not a gzipped file ({data[:2]!r})")
        self.member, self.started = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), self.at
        return True

    def readable(self) -> bool:
        return True


class Overlong(bytes):
    """Stands for a line longer than MAX_LINE_BYTES: its bytes were skipped, never held (``size``: how many;
    ``returns``: a carriage return was among them, not at its end — a file whose lines end in "\\r" alone is one
    line to this reader, :func:`_lone_returns`)."""

    size: int = 0
    returns: bool = False


def _overlong(size: int, returns: bool) -> Overlong:
    line = Overlong()
    line.size, line.returns = size, returns
    return line


def _iter_lines(stream: IO[bytes], chunk: int = 1 << 20) -> Iterator[bytes]:
    """The stream's lines, in time linear in its length: a line's pieces are kept in a list and joined once (adding
    each chunk to one growing buffer and splitting it again was quadratic in a line's length). A line over
    MAX_LINE_BYTES is read past and yielded as :class:`Overlong`, so memory stays bounded by the limit."""
    limit = MAX_LINE_BYTES
    parts: list[bytes] = []  # the pieces of the current, unfinished line
    size = 0  # its length so far (parts are dropped once it passes the limit)
    # a carriage return inside the current line (not its last byte: a CRLF file's), looked for once it passes the limit
    returns = False
    last_cr = False  # the line's bytes so far end in one

    def grow(piece: bytes) -> None:
        nonlocal parts, size, returns, last_cr
        if not piece:
            return
        size += len(piece)
        if size <= limit:
            parts.append(piece)
            return
        if parts:  # passing the limit now: what was kept (all of it inside the line) is looked at once, and dropped
            returns = any(b"\r" in part for part in parts)
            parts = []
        returns = returns or last_cr or b"\r" in piece[:-1]
        last_cr = piece.endswith(b"\r")

    def finish() -> bytes:
        return _overlong(size, returns) if size > limit else b"".join(parts)

    while True:
        data = stream.read(chunk)
        if not data:
            if data is IDLE:  # a live input waiting: said, and read on
                yield IDLE
                continue
            break
        pieces = data.split(b"\n")
        if len(pieces) > 1:
            grow(pieces[0])
            yield finish()
            for line in pieces[1:-1]:
                yield line if len(line) <= limit else _overlong(len(line), b"\r" in line[:-1])
            parts, size, returns, last_cr = [], 0, False, False
        grow(pieces[-1])
    if size:
        yield finish()


def parse_lines(lines: Iterable[tuple[int, bytes]], *, strict: bool = False) -> Iterator[Parsed | LineError | _Idle]:
    """Turn numbered raw lines into requests (grouping message lines) and line errors, in file order; a live input's
    :data:`IDLE` is passed on (a group of lines in progress stays open: its next line may belong to it)."""
    group: list[tuple[int, Message, list[str], list[str]]] = []
    key: tuple[str, str, str | None] | None = None
    size = 0  # the group's lines' bytes: an Add line of its messages (refind export) is about as long
    refused = 0  # the group's lines refused for going past one Add
    seen_auto = Repeats()  # auto ids already given in this file
    # (user, request_id) → its lines' first, last, payload: the last APART_WINDOW request ids met (a file of a million
    # message lines, each with its own request_id, would otherwise hold them all: ~200 MB)
    named: OrderedDict[tuple[str, str], tuple[int, int, int, str]] = OrderedDict()  # (… and their session)

    def flush() -> Iterator[Parsed | LineError]:
        nonlocal group, key, size, refused
        if group and key is not None:
            parsed = _group_request(key, group, seen_auto)
            earlier = None
            if key[2] is not None:  # the same request_id's lines again, apart from its first lines
                payload = hash((key[1], tuple((m.role, m.content, m.timestamp) for m in parsed.request.messages)))
                earlier = named.get((key[0], key[2]))
                if earlier is None:
                    named[(key[0], key[2])] = (parsed.first_line, parsed.last_line, payload, key[1])
                    if len(named) > APART_WINDOW:
                        named.popitem(last=False)
                elif earlier[2] == payload:  # the same lines again: a duplicate
                    earlier = None
            if earlier is None:
                yield parsed
            else:
                span = (parsed.first_line, parsed.last_line)
                why = _apart(key, earlier[:2], span) if earlier[3] == key[1] else _other_session(key, earlier, span)
                yield LineError(span[0], why, last=span[1], lines=len(group))
        group, key, size, refused = [], None, 0, 0

    for n, raw in lines:
        if raw is IDLE:
            yield IDLE
            continue
        if isinstance(raw, Overlong):
            yield from flush()
            yield LineError(
                n,
                f"line of {raw.size:,} bytes, over the limit of {MAX_LINE_BYTES:,} bytes; "
                + (_RETURNS_ADVICE if raw.returns else "split its messages"),
                regroups=True,  # (not read: it may be a message line without request_id)
            )
            continue
        if n == 1 and raw.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):  # UTF-16's or UTF-32's BOM
            wide = "UTF-32" if raw.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")) else "UTF-16"
            yield LineError(n, not_utf8(wide))  # every line after: not JSON; one reason, nothing read
            return
        if raw.startswith(b"\xef\xbb\xbf"):  # a byte order mark: the file's, or one of files joined with cat
            raw = raw[3:]
        text = raw.strip()
        if not text:
            continue
        if (containers := containers_over_limit(text)) is not None:
            yield LineError(
                n, f"{containers:,} JSON objects and arrays, over the limit of {MAX_CONTAINERS:,}", regroups=True
            )
            continue
        try:
            obj = _loads(text.decode("utf-8"))
        # a line that cannot be read may be a message line without request_id (regroups): said so, as unknown
        except DuplicateKey as exc:
            yield LineError(n, str(exc), regroups=True)
            continue
        except UnicodeDecodeError:
            yield LineError(n, "not valid UTF-8", regroups=True)
            continue
        except json.JSONDecodeError as exc:  # ("Unterminated string starting at": its message ends in "at")
            yield LineError(
                n,
                f"not valid JSON ({exc.msg}{'' if exc.msg.endswith(' at') else ' at'} column {exc.colno})"
                + _lone_returns(exc),
                regroups=True,
            )
            continue
        except RecursionError:  # "[[[[…" thousands deep: one bad line, never the end of the replay
            yield LineError(n, "not valid JSON here (nested too deeply)", regroups=True)
            continue
        except ValueError:  # an integer past Python's digit limit
            yield LineError(n, long_number(), regroups=True)
            continue
        mended: tuple[str, ...] = ()
        if SURROGATE_ESCAPE.search(text):
            try:
                obj, mended = mend_lone_surrogates(obj)  # half an emoji in a message's text: U+FFFD, noted
            except InvalidInput as exc:
                yield LineError(n, exc.message, regroups=_regroups(obj))
                continue
            except RecursionError:
                yield LineError(n, "not valid JSON here (nested too deeply)", regroups=True)
                continue
        if isinstance(obj, dict) and "messages" in obj:
            yield from flush()
            try:
                request = parse_add(obj, strict=strict, notes=mended)
            except InvalidInput as exc:
                yield LineError(n, exc.message)  # an Add request: its own request, never grouped
                continue
            lenient = tuple((n, note) for note in request.normalized)
            yield Parsed(request, n, n, _warning(n, request.unknown_fields), lenient)
            continue
        if not isinstance(obj, dict) or not ({"role", "content"} & obj.keys()):
            yield from flush()
            yield LineError(
                n,
                "neither an Add request (an object with messages) nor a message (an object with role and content)"
                + _an_array(obj),
                regroups=_regroups(obj),
            )
            continue
        try:
            line_key, message, unknown, notes = _parse_message_line(obj, strict=strict)
            notes[:0] = mended
        except InvalidInput as exc:
            yield LineError(n, exc.message, regroups=_regroups(obj))
            continue
        full = len(group) >= MAX_MESSAGES_PER_ADD or _past_one_line(size + len(text), line_key, group, message)
        if key is not None and (line_key != key or (line_key[2] is None and (len(group) >= GROUP_SIZE or full))):
            yield from flush()
        elif key is not None and (full or refused):  # one request_id's lines past what one Add may hold (an export
            # could not be read back), and every line after the first refused: no later line fills a hole
            refused += 1
            rid = line_key[2] or ""
            over = (
                _over_one_add(rid, len(group) + refused, _line_bytes(line_key, group, message)) if full else _after(rid)
            )
            yield LineError(n, over)
            continue
        key = line_key
        group.append((n, message, unknown, notes))
        size += len(text)
    yield from flush()


def _regroups(obj: Any) -> bool:
    """A refused line that may be a message line without request_id: not an Add request, no request_id given."""
    if not isinstance(obj, dict):
        return True
    if "messages" in obj:
        return False
    rid = obj.get("request_id")
    return not (isinstance(rid, str) and rid.strip())


def _apart(key: tuple[str, str, str | None], first: tuple[int, int], again: tuple[int, int]) -> str:
    """Why message lines of a request_id met earlier in the file, with other messages, are not stored."""
    return (
        f"request_id {key[2]!r} of user {key[0]!r}: {_lines(again)} {'is' if again[0] == again[1] else 'are'} not "
        f"next to its {_lines(first)}, which alone made that request (message lines make one request only while "
        "consecutive), so these are not stored: only another request_id stores them (moved next to the first "
        "lines, they would be another payload under an id already taken: a conflict)"
    )


def _other_session(key: tuple[str, str, str | None], first: tuple[int, int, int, str], again: tuple[int, int]) -> str:
    """Why message lines of a request_id met earlier in the file under another session are not stored."""
    return (
        f"request_id {key[2]!r} of user {key[0]!r}: {_lines(again)} name{'s' if again[0] == again[1] else ''} session "
        f"{key[1]!r}, {_lines(first[:2])} session {first[3]!r}; one request's messages are of one session, so give "
        "these another request_id"
    )


def _lines(span: tuple[int, ...]) -> str:
    return f"line {span[0]}" if span[0] == span[1] else f"lines {span[0]}–{span[1]}"


APART_WINDOW = 4_096  # request ids a replay remembers to tell lines of one apart (further apart: a conflict, as before)


def not_utf8(encoding: str) -> str:
    """Why a file that opens with a UTF-16 or UTF-32 byte order mark (``encoding``) is not read."""
    return (
        f"the file is {encoding} (what Windows PowerShell's `>` writes), not UTF-8: nothing of it was read; convert it "
        f"first (`iconv -f {encoding} -t UTF-8 FILE > NEW`, or in PowerShell `Get-Content FILE | Set-Content "
        "-Encoding utf8 NEW`)"
    )


# an Add line refind export writes for a group: at most its lines' bytes, ROOM_PER_LINE more a message (its said-at,
# null where a line gave none; a line's escapes are never shorter in the export), and the ids once (each character
# at most a 6-byte escape; an auto id, auto-<hash>-n, is ROOM_AUTO_ID long at most)
ROOM_PER_LINE = 32
ROOM_AUTO_ID = 40
_ROOM_IDS = 6 * (3 * MAX_ID_CHARS) + 128


def _past_one_line(lines_bytes: int, key: tuple[str, str, str | None], group: list[Any], message: Message) -> bool:
    """Whether a group's lines (``lines_bytes`` of them, ``group`` and one more line's ``message``) would make an Add
    line past :data:`MAX_LINE_BYTES` as refind export writes it: measured only near the limit."""
    if lines_bytes + ROOM_PER_LINE * (len(group) + 1) + _ROOM_IDS <= MAX_LINE_BYTES:
        return False
    return _line_bytes(key, group, message) > MAX_LINE_BYTES


def _line_bytes(key: tuple[str, str, str | None], group: list[Any], message: Message) -> int:
    """The bytes of the Add line refind export would write for ``group``'s messages and ``message`` under ``key``."""
    said = [entry[1] for entry in group] + [message]
    request_id = key[2] if key[2] is not None else "x" * ROOM_AUTO_ID
    return exported_bytes(request_id, key[0], key[1], ((m.role, m.content, m.timestamp) for m in said))


def _after(request_id: str) -> str:
    return (
        f"a line of request_id {request_id!r} before this one was refused for going past one Add, so this one is "
        "too (the request keeps no hole); give the rest another request_id"
    )


def _over_one_add(request_id: str, messages: int, size: int) -> str:
    """Why a message line is not added to the request its request_id groups it in."""
    if messages > MAX_MESSAGES_PER_ADD:
        over = (
            f"message {messages:,} of request_id {request_id!r}, over the limit of {MAX_MESSAGES_PER_ADD:,} for one Add"
        )
    else:
        over = (
            f"request_id {request_id!r}: its lines come to {size:,} bytes as one Add line, over the limit of "
            f"{MAX_LINE_BYTES:,}"
        )
    return (
        f"{over} (refind export could not write it as a line refind add reads back); give the rest another request_id"
    )


_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)  # one per process (replays run on one thread)


def _loads(text: str) -> Any:
    """``json.loads(text, object_pairs_hook=unique_keys)`` with one decoder made once: json.loads builds a decoder for
    every call given a hook, a sixth of what parsing a message line costs."""
    if text.startswith("\ufeff"):  # what json.loads refuses before decoding
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


def _lone_returns(exc: json.JSONDecodeError) -> str:
    """What to add to the refusal of a line that holds several JSON values parted by carriage returns alone: a file
    whose lines end in "\\r" (a classic Mac editor's) is one line to a reader of "\\n" lines, "Extra data at column
    64" said nothing of why (a probe of round 30). JSON never holds a raw "\\r" inside a string."""
    if exc.msg != "Extra data" or "\r" not in exc.doc[: exc.pos]:  # (the text decoded: pos counts characters)
        return ""
    return "; " + _RETURNS_ADVICE


# (also said of such a file past MAX_LINE_BYTES, one line of it all: "split its messages" told nothing of why)
_RETURNS_ADVICE = (
    "its lines end in a carriage return alone (\\r), and refind reads lines that end in \\n or \\r\\n: convert the "
    "file (tr '\\r' '\\n' < FILE), nothing of this line was stored"
)


def _an_array(obj: Any) -> str:
    """What to add to the refusal of a line that is a JSON array of objects (a whole file written as one array, or
    a list of messages without its request): replayed as one bad line, said as such (a probe of round 30)."""
    if not isinstance(obj, list) or not obj or not all(isinstance(item, dict) for item in obj):
        return ""
    return (
        f"; it is a JSON array of {len(obj):,} objects: write one object per line (jq -c '.[]' < FILE), nothing of "
        "this line was stored"
    )


def _parse_message_line(
    obj: dict[str, Any], *, strict: bool
) -> tuple[tuple[str, str, str | None], Message, list[str], list[str]]:
    ids = []
    for name in ("user_id", "session_id"):
        value = obj.get(name)
        if value is None:
            raise InvalidInput(f"{name}: required")
        if not isinstance(value, str) or not value.strip():
            raise empty_text(name, value)
        ids.append(check_id(name, value))
    request_id = obj.get("request_id")
    if request_id is not None:
        if not isinstance(request_id, str) or not request_id.strip():
            raise empty_text("request_id", request_id, " when given")
        check_id("request_id", request_id)
    notes: list[str] = []
    message, _ = parse_message(obj, "", notes)
    unknown = [k for k in obj if k not in MESSAGE_LINE_FIELDS]
    if strict and unknown:
        raise InvalidInput(
            f"unknown field{'s' if len(unknown) > 1 else ''} (refused by --strict): {', '.join(unknown)}"
        )
    return (ids[0], ids[1], request_id), message, unknown, notes


def _group_request(
    key: tuple[str, str, str | None], group: list[tuple[int, Message, list[str], list[str]]], seen_auto: Repeats
) -> Parsed:
    user_id, session_id, request_id = key
    messages = tuple(m for _, m, _, _ in group)
    rid = request_id
    if rid is None:
        # The same messages said again later in the file (an "ok" in another group of the session) are new
        # messages, not a replay: the n-th repeat of a group gets its own id, "-n" after the hash. The first
        # occurrence keeps the plain hash, and a re-run of the file derives the very same ids.
        rid = group_id(user_id, session_id, [(m.role, m.content, m.timestamp) for m in messages], seen_auto)
    unknown = sorted({f for _, _, fields, _ in group for f in fields})
    notes = tuple((line, note) for line, _, _, line_notes in group for note in line_notes)  # each on its own line
    return Parsed(
        AddRequest(rid, user_id, session_id, messages, tuple(unknown), tuple(note for _, note in notes)),
        group[0][0],
        group[-1][0],
        tuple(w for line, _, fields, _ in group for w in _warning(line, tuple(fields))),
        notes,
        request_id is None,
        tuple(n for n, _, _, _ in group) if request_id is None and len(group) > 1 else (),
    )


def _warning(line: int, unknown: tuple[str, ...]) -> tuple[tuple[int, str], ...]:
    """The warning of a line whose unknown fields were ignored (none when it had none)."""
    if not unknown:
        return ()
    return ((line, f"ignored unknown field{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}"),)


def replay(
    store: Store,
    path: str,
    *,
    strict: bool = False,
    batch_size: int = BATCH_SIZE,
    on_progress: Callable[[int, int | None], None] | None = None,
    on_problem: Callable[[str], None] | None = None,
    parallel: bool | None = None,
) -> ReplaySummary:
    """Replay a JSONL file into the store. With ``strict``, check the whole file first and store nothing if any
    line is bad (stdin is spooled to an unnamed temporary file for the second pass).

    ``parallel``: read, check and tokenize the lines in a second process while this one writes (see
    :func:`_read_ahead`); by default on Linux when the file is at least ``PARALLEL_MIN_BYTES``
    (or is stdin). The stored bytes are the same either way. Ctrl-C raises :class:`Interrupted`, which carries
    the summary of what was stored before it."""
    name = "<stdin>" if path == "-" else path
    summary = ReplaySummary(source=name, once=path == "-" or is_stream(path))
    try:
        with sigterm_as_ctrl_c():
            return _replay(store, path, name, summary, strict, batch_size, on_progress, on_problem, parallel)
    except KeyboardInterrupt as exc:  # after the reader process and the transaction in progress were ended
        if isinstance(exc, Interrupted):
            raise
        raise Interrupted(summary, "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C") from exc


def _replay(
    store: Store,
    path: str,
    name: str,
    summary: ReplaySummary,
    strict: bool,
    batch_size: int,
    on_progress: Callable[[int, int | None], None] | None,
    on_problem: Callable[[str], None] | None,
    parallel: bool | None,
) -> ReplaySummary:
    # stdin (or a pipe) under --strict is read twice: spooled to an unnamed temporary file (unlinked as it is made,
    # where the system allows: no copy of the text outlives the process, even one killed by SIGKILL)
    once = path == "-" or is_stream(path)
    with tempfile.TemporaryFile(prefix="refind-replay-") if strict and once else contextlib.nullcontext() as spool:
        if spool is not None:
            if path == "-":
                shutil.copyfileobj(sys.stdin.buffer, spool)
            else:
                try:
                    with open(path, "rb") as stream:
                        shutil.copyfileobj(stream, spool)
                except OSError as exc:
                    raise RefindError(f"{path}: cannot read: {exc.strerror or exc}") from exc
            path = name
        if strict:
            if spool is not None:
                spool.seek(0)
            lines, _, _ = open_lines(path, source=spool)
            read = [0]
            bad = _strict_check(store, parse_lines(_counted(lines, read), strict=True))
            if bad:
                summary.lines = read[0]
                for item in bad:
                    if isinstance(item, LineError):
                        _refused(summary, item, name, on_problem)
                        continue
                    where, message, kind = item
                    _problem(summary, f"{name}:{where}: {message}", on_problem)
                    if kind == "forgotten":
                        summary.forgotten += 1
                    else:
                        summary.conflicts += 1
                refused = summary.conflicts + summary.forgotten
                why = [f"{summary.invalid_lines:,} line(s) are invalid"] if summary.invalid_lines else []
                why += [f"{refused:,} request(s) would be refused"] if refused else []
                _problem(summary, f"{name}: --strict: nothing stored because {' and '.join(why)}", on_problem)
                return summary
        if spool is not None:
            spool.seek(0)
        lines, done, total = open_lines(path, source=spool, check=not strict)  # (--strict read it whole)
        if on_progress:
            on_progress(0, total)
        if parallel is None:
            parallel = (total is None or total >= PARALLEL_MIN_BYTES) and _can_fork()
        hint = _Hint() if parallel else None
        chunks = _chunks(lines, done, strict, batch_size, hint)
        with _replay_cache(store), _read_ahead(chunks, parallel) as ready:
            return _replay_stream(store, ready, hint, total, summary, name, on_progress, on_problem)


REPLAY_CACHE_KIB = 64 * 1024  # SQLite's page cache while replaying (the default is 2 MiB)


@contextmanager
def _replay_cache(store: Store) -> Iterator[None]:
    """A larger page cache for the replay's connection, the default again after: a batch's inserts touch every
    index of the messages table (one of them keyed by a hash, so spread over all its pages), and with 2 MiB their
    pages are written out and read back within one batch. Durability is untouched (the cache holds nothing that a
    COMMIT has not written)."""
    (previous,) = store.conn.execute("PRAGMA cache_size").fetchone()
    store.conn.execute(f"PRAGMA cache_size = {-REPLAY_CACHE_KIB}")
    try:
        yield
    finally:
        store.conn.execute(f"PRAGMA cache_size = {int(previous)}")


PARALLEL_MIN_BYTES = 1 << 20  # a file at least this big is read by a second process (forking costs ~10 ms)


class Ready(NamedTuple):
    """A request of the file, prepared for the writer (hash and ids computed), with the lines it came from."""

    request: Prepared
    first_line: int
    last_line: int
    warnings: tuple[tuple[int, str], ...]  # as in Parsed
    notes: tuple[tuple[int, str], ...]
    auto: bool = False  # as in Parsed
    lines: tuple[int, ...] = ()
    grown: int = 0  # 1: the new messages of a group grown since an earlier replay (auto_ids)


class Chunk(NamedTuple):
    """One batch of the file: its requests and line errors in file order (at most ``batch_size`` requests, fewer past
    :data:`BATCH_MESSAGES` messages or :data:`BATCH_CHARS` characters, the
    batch stored in one transaction), the lines and bytes read so far, and — when read ahead by a second process —
    each user's index segment of the chunk's requests (:meth:`Store.add_prepared`)."""

    items: list[Ready | LineError]
    lines: int
    done: int
    segments: dict[str, index_store.Segment] | None


def _chunks(
    lines: Iterator[tuple[int, bytes]], done: Callable[[], int], strict: bool, batch_size: int, hint: Any
) -> Iterator[Chunk]:
    """The file in chunks of ``batch_size`` requests, or fewer where they reach :data:`BATCH_MESSAGES` messages or
    :data:`BATCH_CHARS` characters of text (memory is bounded by the batch, not by how big a file's lines are). With a ``hint`` (read by a reader process: a flag in memory
    shared with the writer) each chunk's index segments are built too, unless the hint says that the writer's last
    batch added nothing (a file replayed again): then the writer builds any it needs itself."""
    items: list[Ready | LineError] = []
    requests = messages = chars = 0
    count = [0]

    def cut() -> Chunk:
        segments = None
        if hint is not None and hint.value:
            segments = index_store.segments_ahead(
                (r.request.user_id, r.request.session_id, r.request.messages) for r in items if isinstance(r, Ready)
            )
        return Chunk(items, count[0], done(), segments)

    try:
        for item in parse_lines(_counted(lines, count), strict=strict):
            if isinstance(item, _Idle):  # a live input waiting: what was read whole is committed now
                if items:
                    yield cut()
                    items, requests, messages, chars = [], 0, 0, 0
                continue
            if isinstance(item, LineError):
                items.append(item)
                continue
            # a reader derives the ids (work off the writer) unless the last batch added nothing (a replay again)
            prepared = prepare(item.request, ids=hint is not None and bool(hint.value))
            items.append(
                Ready(prepared, item.first_line, item.last_line, item.warnings, item.notes, item.auto, item.lines)
            )
            requests += 1
            messages += len(item.request.messages)
            chars += sum(len(m.content) for m in item.request.messages)
            if requests >= batch_size or messages >= BATCH_MESSAGES or chars >= BATCH_CHARS:
                yield cut()
                items, requests, messages, chars = [], 0, 0, 0
    except RefindError:  # the file could not be read on (a truncated .gz): what was read whole is stored first
        if items:  # (complete requests only: a group of message lines is yielded once the next line closes it)
            yield cut()
        raise
    yield cut()


def _counted(lines: Iterator[tuple[int, bytes]], read: list[int]) -> Iterator[tuple[int, bytes]]:
    """``lines``, keeping the number of the last one read in ``read[0]`` (the summary's lines read)."""
    for n, line in lines:
        read[0] = n
        yield n, line


class _Hint:
    """One byte of memory shared with a forked reader: 1 while building index segments ahead pays."""

    def __init__(self) -> None:
        import mmap

        self.memory = mmap.mmap(-1, 1)  # anonymous and shared: a forked child sees the parent's writes
        self.memory[0] = 1

    @property
    def value(self) -> int:
        return self.memory[0]

    @value.setter
    def value(self, value: int) -> None:
        self.memory[0] = value


def _can_fork() -> bool:
    """Linux (macOS's system frameworks may abort in a forked child), and a process with one thread: a fork copies
    only the thread that calls it, so a lock another thread held (in an embedder's process) would stay held."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1


@contextmanager
def _read_ahead(chunks: Iterator[Chunk], parallel: bool) -> Iterator[Iterator[Chunk]]:
    """The chunks, read here or — ``parallel`` — by a forked reader process while this one writes: parsing, checking,
    hashing and tokenizing a batch (the reader) overlap with storing the one before (the writer). Only this process
    opens or writes the database; the reader never touches it and leaves with ``os._exit`` (no finalizer, no
    flush of what it inherited).

    The reader never outlives the replay: it ends when the file does, and it is killed when the writer stops early
    (an error, a storage fault, Ctrl-C); a writer killed outright closes the pipe, which ends the reader at its next
    chunk. An error raised by the reader (an unreadable or corrupt file) is raised here, after the batches before it
    were stored, as it would be without a reader."""
    if not parallel:
        yield chunks
        return
    from multiprocessing.connection import Pipe

    import numpy  # noqa: F401  both processes use it (segments): imported once, before the fork, not in each

    receive, send = Pipe(duplex=False)
    writer = os.getpid()
    pid = os.fork()
    if pid == 0:  # the reader
        code = 1
        try:
            receive.close()
            _end_with(writer)
            _reader(chunks, send)
            code = 0
        finally:
            os._exit(code)
    send.close()
    ended: list[int] = []

    def wait() -> int:
        if not ended:
            ended.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        return ended[0]

    def received() -> Iterator[Chunk]:
        while True:
            try:
                message = receive.recv()
            except (EOFError, OSError):  # (OSError: it died inside a message, "got end of file during message")
                raise _ReaderGone(wait()) from None
            if message is None:  # the file's end: the reader exits now
                wait()
                return
            if isinstance(message, BaseException):
                raise message
            yield message

    try:
        yield received()
    finally:
        receive.close()
        if not ended:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # done already (then this is a no-op on a zombie), or stopped early
            wait()


class _ReaderGone(RefindError):
    """The replay's reader process ended before the file did (killed: the OOM killer, a kill of its pid)."""

    def __init__(self, code: int) -> None:
        how = f"exit code {code}"
        if code < 0:
            with contextlib.suppress(ValueError):  # (a signal Python does not name)
                how = f"was killed by {signal.Signals(-code).name}"
        super().__init__(f"the replay's reader process (which reads the file ahead of the writer) ended ({how})")


def _end_with(writer: int) -> None:
    """Have the kernel kill this reader the moment its writer dies (Linux: a writer killed outright would otherwise
    leave it parsing until its next chunk finds the pipe closed)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != writer:  # died before that: end now
        os._exit(1)


def _reader(chunks: Iterator[Chunk], send: Any) -> None:
    """The reader process: send each chunk, then None (or the error that stopped it). Ctrl-C is the writer's to
    handle (it kills the reader); a writer gone (a closed pipe) ends the reader."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (as Ctrl-C: sent to the process group by timeout, systemd)
    try:
        for chunk in chunks:
            send.send(chunk)
        send.send(None)
    except (BrokenPipeError, ConnectionResetError):
        pass
    except BaseException as exc:  # the writer raises it as its own (it pickles: RefindError(message))
        with contextlib.suppress(Exception):
            send.send(exc if isinstance(exc, RefindError) else RefindError(f"reading the file failed: {exc!r}"))
    finally:
        send.close()


def _replay_stream(
    store: Store,
    chunks: Iterator[Chunk],
    hint: Any,
    total: int | None,
    summary: ReplaySummary,
    name: str,
    on_progress: Callable[[int, int | None], None] | None,
    on_problem: Callable[[str], None] | None,
) -> ReplaySummary:
    seen = Seen()  # the sessions this replay began, and what precedes each group in the others (_grown)
    repeats = Repeats()  # the file's auto ids so far, as its parser counts them (_grown)
    try:
        for chunk in chunks:
            summary.lines = chunk.lines
            batch: list[Ready] = []
            for item in chunk.items:
                if isinstance(item, LineError):
                    _refused(summary, item, name, on_problem)
                    continue
                if item.warnings:
                    summary.warnings.extend(f"{name}:{line}: {w}" for line, w in item.warnings)
                if item.notes:
                    summary.warnings.extend(f"{name}:{line}: {note}" for line, note in item.notes)
                    summary.normalized += len(item.notes)
                batch.append(item)
            if batch:
                added = summary.messages_added
                if not _store_batch(store, batch, chunk.segments, summary, name, on_problem, seen, repeats):
                    if hint is not None:  # the rest is only counted: nothing to build ahead for
                        hint.value = 0
                    return _stopped(summary, batch, chunks)
                if hint is not None:  # tell the reader whether building index segments ahead pays
                    hint.value = 1 if summary.messages_added > added else 0
            summary.handled = max(
                [
                    summary.handled,
                    *(i.last or i.line for i in chunk.items if isinstance(i, LineError)),
                    *(i.last_line for i in batch),
                ]
            )
            if on_progress:
                on_progress(chunk.done, total)
    except RefindError as exc:  # reading stopped (a truncated .gz, the reader process gone): say what was stored
        if summary.fault is None:  # (a storage fault met first is the one to report)
            if isinstance(exc, _ReaderGone):  # the file was not the problem
                rest = "; " + rest_advice(summary)
            else:
                rest = "; the same command stores the rest once the file can be read whole (what is stored is skipped)"
            summary.fault = RefindError(
                f"{exc.message}; stored before it: {summary.requests_added:,} requests ({summary.messages_added:,} "
                f"messages), kept{rest}"
            )
    return summary


def rest_advice(summary: ReplaySummary) -> str:
    """What stores the rest of a replay stopped early (Ctrl-C, SIGTERM, its reader killed): the same command, for a
    file; for an input read once (stdin, a pipe), its lines after those handled, given again."""
    if not summary.once:
        return "the same command stores the rest (what is stored is skipped)"
    after = f"after line {summary.handled:,} " if summary.handled else ""
    return (
        f"{summary.source} cannot be read again, and its lines {after}were not stored: give refind add those lines "
        "again (or the whole input: what is stored is skipped)"
    )


def _stopped(summary: ReplaySummary, batch: list[Ready], rest: Iterable[Chunk]) -> ReplaySummary:
    """A storage fault stopped the replay: count the file's requests (reading on, storing nothing), so the message
    says how much was stored of how much. The failed batch rolled back whole; a re-run stores the rest."""
    handled = summary.requests_added + summary.duplicates + summary.conflicts + summary.forgotten
    total = handled + len(batch)
    for chunk in rest:
        summary.lines = chunk.lines
        total += sum(1 for item in chunk.items if isinstance(item, Ready))
    summary.requests_in_file = total
    stored = summary.requests_added + summary.duplicates
    fault = summary.fault
    assert fault is not None
    if isinstance(fault, FileReplaced):  # what was stored is in the file it opened: the one there now has none of it
        again = (
            f"{summary.source} cannot be read again: give refind add all of its lines again to store them in the "
            "database there now"
            if summary.once
            else "the same command stores the whole file into the database there now"
        )
        summary.fault = type(fault)(
            f"{fault.message}; {stored:,} of {total:,} requests went into the file this replay opened; {again}"
        )
        return summary
    # stdin or a pipe cannot be read again: "the same command" would read new input (a probe of round 28)
    again = rest_advice(summary) if summary.once else "the rest can be replayed with the same command"
    summary.fault = type(fault)(f"{fault.message}; stored {stored:,} of {total:,} requests; {again}")
    return summary


def _strict_check(store: Store, items: Iterable[Parsed | LineError | _Idle]) -> list[LineError | tuple[str, str, str]]:
    """--strict's first pass: every line that is invalid, or whose request would be refused — by the store (another
    payload under a stored id, a forgotten id) or by an earlier line of the file with the same id and another
    payload. Returns the invalid lines' LineErrors and, for requests, (line or line range, reason, kind: conflict |
    forgotten), in file order. The file's ids are kept in a temporary
    SQLite database, so a file of any size is checked in little memory."""
    import sqlite3

    bad: list[LineError | tuple[str, str, str]] = []
    sessions = Seen()  # as the writer keeps them (_grown): this pass stores nothing
    repeats = Repeats()
    seen = sqlite3.connect("")  # a private temporary database on disk
    try:
        seen.execute(
            "CREATE TABLE seen (user_id TEXT, request_id TEXT, hash TEXT, line INTEGER, "
            "PRIMARY KEY (user_id, request_id)) WITHOUT ROWID"
        )
        for item in items:
            if isinstance(item, _Idle):  # (never: --strict reads a copy of a live input)
                continue
            if isinstance(item, LineError):
                bad.append(item)
                continue
            ready = Ready(prepare(item.request), item.first_line, item.last_line, (), (), item.auto, item.lines)
            parts, known = _grown(store, [ready], sessions, repeats)  # the requests the writer will store of it
            for _, piece in known:  # a group grown since an earlier replay: its known part is skipped
                if piece.stone is not None:
                    bad.append((_piece_where(item, piece), _forgotten_piece(item, piece, piece.stone), "forgotten"))
            for part in parts:
                req, where = part.request, _where(part)
                row = seen.execute(
                    "SELECT hash, line FROM seen WHERE user_id = ? AND request_id = ?", (req.user_id, req.request_id)
                ).fetchone()
                if row is None:
                    refusal = store.check(req)
                    if isinstance(refusal, InvalidInput):  # (a request export could not write back: its lines)
                        bad.append(_invalid(part, refusal))
                    elif refusal is not None:
                        kind = "forgotten" if isinstance(refusal, Forgotten) else "conflict"
                        bad.append((where, refusal.message, kind))
                    else:  # it would be stored (or is already): later lines of this id must repeat it exactly
                        seen.execute(
                            "INSERT INTO seen VALUES (?, ?, ?, ?)",
                            (req.user_id, req.request_id, req.digest, part.first_line),
                        )
                elif row[0] != req.digest:
                    bad.append(
                        (
                            where,
                            f"request_id {req.request_id!r} of user {req.user_id!r} is given another payload "
                            f"than at line {row[1]}; an identical replay is accepted, a changed one is not",
                            "conflict",
                        )
                    )
    finally:
        seen.close()
    return bad


def _where(item: Parsed | Ready) -> str:
    return _span(item.first_line, item.last_line)


def _span(first: int, last: int) -> str:
    return f"{first}" if first == last else f"{first}-{last}"


def _invalid(item: Ready, refusal: InvalidInput) -> LineError:
    """The lines of a request the store refused as invalid (one export could not write back), as a LineError."""
    return LineError(item.first_line, refusal.message, last=item.last_line, lines=len(item.lines) or None)


def _refused(summary: ReplaySummary, item: LineError, name: str, on_problem: Callable[[str], None] | None) -> None:
    """Count and report refused lines: each line of the span its problem names."""
    summary.invalid_lines += item.count
    summary.regrouping += item.count if item.regroups else 0
    _problem(summary, f"{name}:{item.where}: {item.message}", on_problem)


def _problem(summary: ReplaySummary, text: str, on_problem: Callable[[str], None] | None) -> None:
    summary.problems.append(text)
    if on_problem:
        on_problem(text)


def _store_batch(
    store: Store,
    batch: list[Ready],
    segments: dict[str, index_store.Segment] | None,
    summary: ReplaySummary,
    name: str,
    on_problem: Callable[[str], None] | None,
    seen: Seen,
    repeats: Repeats,
) -> bool:
    """Store one batch (one transaction). False when a storage fault rolled it back: ``summary.fault`` says which."""
    import sqlite3

    with _ctrl_c_held() as hold:
        try:
            with store.write():  # grown groups are looked up under the lock their new messages are stored under
                batch, known = _grown(store, batch, seen, repeats)
                outcomes = store.add_prepared((item.request for item in batch), segments=segments)
                hold()  # a Ctrl-C from here waits for the commit and its counts
        except sqlite3.Error as exc:
            summary.fault = storage_error(exc, store.path)
            return False
        except FileReplaced as exc:  # the database file was deleted or replaced under the replay (Store.check_file)
            summary.fault = exc
            return False
        for item, piece in known:
            if piece.stone is None:
                summary.duplicates += 1
            else:
                summary.forgotten += 1
                _problem(
                    summary,
                    f"{name}:{_piece_where(item, piece)}: {_forgotten_piece(item, piece, piece.stone)}",
                    on_problem,
                )
        for item, outcome in zip(batch, outcomes):
            if isinstance(outcome, Forgotten):
                summary.forgotten += 1
                _problem(summary, f"{name}:{_where(item)}: {outcome.message}", on_problem)
            elif isinstance(outcome, InvalidInput):  # a request export could not write back: its lines are invalid
                _refused(summary, _invalid(item, outcome), name, on_problem)
            elif isinstance(outcome, RefindError):
                summary.conflicts += 1
                _problem(summary, f"{name}:{_where(item)}: {outcome.message}", on_problem)
            elif outcome.status == "duplicate":
                summary.duplicates += 1
            else:
                summary.requests_added += 1
                summary.messages_added += outcome.messages
                summary.grown += item.grown
        return True


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[Callable[[], None]]:
    """A block where a Ctrl-C (or SIGTERM) that comes after ``hold()`` waits for the block's end (in the main thread,
    where Python runs signal handlers): a batch's commit and its counts. An interrupt between the COMMIT and the counts
    left a stored batch uncounted, the summary one batch short of what the database held (a probe of round 24: 6 of 17
    runs). A block that raises raises that, the signal with it gone."""
    held: dict[int, Any] = {}  # each signal's handler that was
    caught: list[int] = []

    def hold() -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                held[signum] = signal.signal(signum, lambda signum, _frame: caught.append(signum))

    try:
        yield hold
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)
    for signum in dict.fromkeys(caught):  # a signal came meanwhile: now (its handler's way)
        handler = held[signum]
        if callable(handler):
            handler(signum, None)  # (Python's own raises KeyboardInterrupt; the replay's SIGTERM, as Ctrl-C)
        elif handler == signal.SIG_DFL and signum == signal.SIGTERM:
            signal.raise_signal(signum)
        elif handler != signal.SIG_IGN:
            raise KeyboardInterrupt


@dataclass
class Seen:
    """What a replay keeps of the sessions between its batches (:func:`_grown`)."""

    fresh: set[int] = field(default_factory=set)  # hashes of the sessions that held nothing when it first met them
    last: dict[int, str] = field(default_factory=dict)  # each session's last request so far, in file order
    version: int | None = None  # the database's data_version at the last batch: another process's commit changes it
    stones: dict[tuple[str, str], list[_Stone]] = field(default_factory=dict)  # (user, session) → what covers it
    copies: set[int] = field(default_factory=set)  # the sessions whose last group so far was stored already (a copy)
    said_at: dict[tuple[str, str], dict[int, _Kept]] = field(default_factory=dict)  # (_SaidAt)
    held: dict[int, Counter[Said]] = field(default_factory=dict)  # per session, the copies found stored already
    latest: dict[tuple[str, str], int | None] = field(default_factory=dict)  # (user, session) → its latest said-at
    looked: set[tuple[str, str]] = field(default_factory=set)  # (user, session) whose messages _stored_apart read
    matched: set[int] = field(default_factory=set)  # hashes of the requests that hold exactly a part of the file so far


@dataclass
class _Stone:
    """A tombstone that covers a session (:meth:`Store.session_tombstones`), its hashes' places found once."""

    stone: tuple[int, int]  # (id, at)
    contents: list[str]  # keyed hashes of the forgotten messages' text, in their order
    said: set[str] | None  # … of the role, text and said-at of this session's (m012; None in one written before)
    places: dict[str, list[int]] | None = None  # a content hash → its places

    def holds(self, hashes: list[str]) -> bool:
        """Whether ``hashes`` are a contiguous run of this tombstone's content hashes."""
        if self.places is None:
            self.places = {}
            for i, h in enumerate(self.contents):
                self.places.setdefault(h, []).append(i)
        kept = self.contents
        return any(kept[i : i + len(hashes)] == hashes for i in self.places.get(hashes[0], ()))


def _grown(
    store: Store, batch: list[Ready], seen: Seen, repeats: Repeats
) -> tuple[list[Ready], list[tuple[Ready, Piece]]]:
    """The batch with every group that has grown since an earlier replay cut to the messages after what is known of
    it (:mod:`auto_ids`; marked ``grown``), and the pieces known already, each with its group. ``repeats`` counts
    the file's groups in order (a prefix's id carries the repeat suffix it got), as its parser did.

    Looked up only where something can be known: not in a session that had no stored message (and whose user had no
    tombstone) when this replay first met it — ``seen.fresh``, the hashes of those sessions, kept until another
    process writes to the database (its ``data_version`` changes: a replay of the same log may have stored them).
    No group of such a session can be a grown one: nothing of it was stored before, and the ids a group's prefixes
    would have are never ids this replay gives (their repeat suffixes differ). So a file replayed into a new database
    asks one question per session, one replayed again one per session and batch, and only a group whose own id is
    unknown has its prefixes' ids derived and looked up.

    The other way round, a **shorter, older copy** of a log replayed after the longer one (a snapshot, a backup, a
    second replay racing the first): its session's last group is the start of a group stored already, whose id it
    cannot know. So a group (or what follows the known part of a grown one) that would be stored in a started session
    is compared with the request stored next after what precedes it in the file (``seen.last``: each session's last
    request of this replay, in file order; the session's first request when nothing does): when that request begins
    with exactly its messages (role, content and said-at, each said-at the only one of its millisecond in the session)
    and holds more, they are known as part of it and not stored again. Where nothing stored precedes it in the file (it
    is its session's first there, or follows a piece forgotten since), its messages are looked up by their said-ats
    (:func:`_held_already`).

    A group (or what follows a grown group's known part) stored neither whole nor as a copy of forgotten messages may
    still hold messages stored already: an earlier replay stored its group without a line it refused (or that was
    fixed since). Those are left out, one by one, and the others stored as a group of their own
    (:func:`_stored_apart`)."""
    fresh, last, copies = seen.fresh, seen.last, seen.copies
    version = store.conn.execute("PRAGMA data_version").fetchone()[0]
    if version != seen.version:  # (also the first batch: nothing is fresh yet)
        fresh.clear()  # another process wrote: a session this replay began may hold a copy's lines now
        seen.stones.clear()  # (and a forget may have written a tombstone)
        seen.said_at.clear()
        seen.latest.clear()
        seen.version = version
    looked: dict[int, str] = {}  # the places of the groups that may have grown, and their users
    opened: set[int] = set()  # the places of the requests in sessions that held something when this replay met them
    stones: dict[str, bool] = {}
    started: set[int] = set()
    for place, item in enumerate(batch):
        user, session = item.request.user_id, item.request.session_id
        key = hash((user, session))
        if key in fresh:
            continue
        if user not in stones:
            stones[user] = store.has_tombstones(user)
        if key not in started:
            if not stones[user] and not store.session_started(user, session):
                fresh.add(key)  # (before this batch stores anything of it)
                continue
            started.add(key)
        opened.add(place)
        if item.auto and len(item.request.messages) > 1:
            looked[place] = user
    by_user: dict[str, list[str]] = {}
    for place, user in looked.items():
        by_user.setdefault(user, []).append(batch[place].request.request_id)
    known = {user: store.known_requests(user, ids) for user, ids in by_user.items()}  # the parser's ids, at once
    _note_known(store, seen, batch, opened, looked, known)
    # the prefixes of the groups whose ids are unknown, hashed once and looked up at once too (numbered as the batch
    # begins: _split looks up on its own what a group numbered otherwise, after a repeat or a grown group earlier in
    # the batch, needs besides)
    hashed: dict[int, list[str]] = {}
    asked: dict[str, set[str]] = {user: set() for user in by_user}
    for place, user in looked.items():
        req = batch[place].request
        if req.request_id not in known[user]:
            hashed[place] = prefix_ids(user, req.session_id, req.messages)[:-1]
            asked[user].update(prefix_candidates(user, req.session_id, req.messages, repeats, hashed=hashed[place]))
    for user, ids in asked.items():
        if ids:
            known[user] |= store.known_requests(user, ids)
    # with a retention: the sessions holding a chained request (only there can one follow an expired prefix)
    chained = (
        {user: store.sessions_with_request_prefix(user, CHAINED) for user in by_user}
        if store.retention_cutoff() is not None
        else {}
    )
    chains = _Chains(store) if looked else None
    out: list[Ready] = []
    pieces: list[tuple[Ready, Piece]] = []
    batched: set[str] = set()  # the ids of the requests of ``out``: stored with this batch, none of them yet
    noted = [0]  # how many of ``out`` are noted in ``seen.matched`` (_note)
    for place, item in enumerate(batch):  # in file order: repeats are counted as the groups come
        key = hash((item.request.user_id, item.request.session_id))
        if not item.auto:
            out.append(item)
            last[key] = item.request.request_id
            batched.add(last[key])
            copies.discard(key)
            continue
        req = item.request
        rid = renumbered(req.request_id, repeats)
        if rid != req.request_id:  # a grown group before it was counted as the earlier group it began with
            req = req._replace(request_id=rid, ids=None)
            item = item._replace(request=req)
            if place in looked:
                known[req.user_id] |= store.known_requests(req.user_id, [rid])
        split = (
            _split(
                store,
                chains,
                req.user_id,
                req.session_id,
                rid,
                req.messages,
                known[req.user_id],
                repeats,
                asked=asked[req.user_id],
                hashed=hashed.get(place),
                chained=req.session_id in chained.get(req.user_id, ()),
            )
            if chains is not None and place in looked
            else None
        )
        if split is None:
            held = None
            if place in opened and req.request_id not in known.get(req.user_id, {}):
                held = _held_already(
                    store,
                    req.user_id,
                    req.session_id,
                    last.get(key),
                    req.messages,
                    batched,
                    stones[req.user_id],
                    copied=_SaidAt(store, seen, req.user_id, req.session_id) if key in copies else None,
                    matched=seen.matched,
                )
            if held is not None and not _first_in_file(seen, key, req.messages):
                held = None  # found stored already earlier in this file: it comes again, and is stored again
            if held is not None:  # messages stored already: a shorter, older copy of the log
                pieces.append((item, Piece(0, len(req.messages), held, None)))
                last[key] = held
                copies.add(key)
                continue
            copy = _copy_of_forgotten(store, seen, req) if place in opened and stones[req.user_id] else None
            if copy is not None and req.request_id not in store.known_requests(req.user_id, [req.request_id]):
                if copy.held is None:  # messages forgotten: a copy's
                    pieces.append((item, Piece(0, len(req.messages), COPY, copy.stone)))
                    continue
                # some of them: those are left out, the others stored as a group of their own
                left, kept = _left_out(item, 0, copy.held)
                pieces += [(item, piece) for piece in left]
                if kept is not None:
                    _keep(store, seen, kept, out, pieces, item, last, batched, copies)
                continue
            apart = None
            if place in opened and req.request_id not in known.get(req.user_id, {}):
                _note(seen, out, noted)
                apart = _stored_apart(store, seen, req, copied=key in copies)
            if apart is not None:  # some of its messages stored already (a group an older refind stored without a line)
                _leave_out(item, 0, apart, out, pieces, last, batched, copies)
                continue
            out.append(item)
            last[key] = req.request_id
            batched.add(last[key])
            copies.discard(key)
            continue
        pieces += [(item, piece) for piece in split.known]
        seen.matched.update(hash(piece.request_id) for piece in split.known)  # (each holds exactly its part)
        if split.again is not None:  # expired since it was stored: stored again, as any expired request replayed
            stop = split.again.stop
            head = AddRequest(split.again.request_id, req.user_id, req.session_id, _messages(req.messages[:stop]))
            out.append(Ready(prepare(head), item.first_line, item.lines[stop - 1], (), ()))
            batched.add(head.request_id)
        after = split.known[-1].request_id if split.known else None
        held = after and _held_already(
            store,
            req.user_id,
            req.session_id,
            after,
            req.messages[split.start :],
            batched,
            stones[req.user_id],
            matched=seen.matched,
        )
        if held and not _first_in_file(seen, key, req.messages[split.start :]):
            held = None
        if held:  # what follows the known part (stored or forgotten) is stored already: an older copy of the log
            pieces.append((item, Piece(split.start, len(req.messages), held, None)))
            last[key] = held
            copies.add(key)
            continue
        tail = req._replace(messages=req.messages[split.start :], ids=None)
        copy = _copy_of_forgotten(store, seen, tail) if stones.get(req.user_id) else None
        if copy is not None and copy.held is None:  # what follows the known part is a copy of forgotten messages
            pieces.append((item, Piece(split.start, len(req.messages), COPY, copy.stone)))  # (an older copy, again)
            continue
        some = None if copy is None else copy.held
        if some is not None and split.request_id not in store.known_requests(req.user_id, [split.request_id]):
            left, kept = _left_out(item, split.start, some)  # some of them: left out, as in a whole group
            pieces += [(item, piece) for piece in left]
            if kept is not None:
                _keep(store, seen, kept, out, pieces, item, last, batched, copies)
            continue
        tail = tail._replace(request_id=split.request_id)
        _note(seen, out, noted)
        apart = _stored_apart(store, seen, tail, copied=key in copies)
        if apart is not None:  # some of what follows the known part is stored already (a line refused before)
            _leave_out(item, split.start, apart, out, pieces, last, batched, copies)
            continue
        messages = _messages(req.messages[split.start :])
        rest = prepare(AddRequest(split.request_id, req.user_id, req.session_id, messages))
        out.append(Ready(rest, item.lines[split.start], item.last_line, (), (), grown=1))
        last[key] = split.request_id
        batched.add(last[key])
        copies.discard(key)
    _note(seen, out, noted)
    return out, pieces


def _note_known(
    store: Store, seen: Seen, batch: list[Ready], opened: set[int], looked: dict[int, str], known: dict[str, Known]
) -> None:
    """The batch's groups stored already as they are (their own ids known: each a duplicate, whatever comes before it
    in the file) noted in ``seen.matched`` before any group of the batch is looked at: a part of the file, whose
    copies no earlier group of the batch may take as its own (:func:`_stored_apart`) — that group would take a
    message the file says once more, and the later group, a duplicate, store nothing of it: one message lost."""
    singles: dict[str, list[str]] = {}  # (the groups of one message, not looked up with the others)
    for place in opened:
        req = batch[place].request
        if place in looked:
            if req.request_id in known[req.user_id]:
                seen.matched.add(hash(req.request_id))
        elif batch[place].auto:
            singles.setdefault(req.user_id, []).append(req.request_id)
    for user, ids in singles.items():
        seen.matched.update(hash(rid) for rid in store.known_requests(user, ids))


def _note(seen: Seen, out: list[Ready], noted: list[int]) -> None:
    """The ids of the batch's requests so far (stored, or known already: each holds exactly its part of the file), in
    sessions that held something when this replay met them, noted in ``seen.matched`` (``noted``: how many of ``out``
    were noted before)."""
    for item in out[noted[0] :]:
        if hash((item.request.user_id, item.request.session_id)) not in seen.fresh:
            seen.matched.add(hash(item.request.request_id))
    noted[0] = len(out)


def _first_in_file(seen: Seen, key: int, said: Sequence[Said]) -> bool:
    """Whether none of these messages, found stored already, was found so earlier in this file (then noted): a log
    concatenated twice stores its messages twice, as one replay of the file into a new database would — the second
    time they come, they are a group that comes again, not a copy of what is stored."""
    held = seen.held.setdefault(key, Counter())
    if not held.keys().isdisjoint(said):
        return False
    held.update(said)
    return True


def _keep(
    store: Store,
    seen: Seen,
    kept: Ready,
    out: list[Ready],
    pieces: list[tuple[Ready, Piece]],
    item: Ready,
    last: dict[int, str],
    batched: set[str],
    copies: set[int],
) -> None:
    """What :func:`_left_out` kept of a group (forgotten messages left out) added to the batch (``out``) — unless each
    of its messages is stored already, found by its said-at (:func:`_stored_by_said_at`): an older copy of a log whose
    group held them with the forgotten ones, stored so before (a duplicate, as any copy's group)."""
    req = kept.request
    key = hash((req.user_id, req.session_id))
    said = req.messages
    read = _SaidAt(store, seen, req.user_id, req.session_id) if key in copies else None
    times = [cast("int", m[2]) for m in said]  # (each carries one: _copy_of_forgotten)
    held = _stored_by_said_at(store, req.user_id, req.session_id, said, times, read, matched=seen.matched)
    if held is not None and not _first_in_file(seen, key, said):
        held = None  # found stored already earlier in this file: it comes again, and is stored again
    if held is not None:
        first, stop = item.lines.index(kept.lines[0]), item.lines.index(kept.lines[-1]) + 1
        pieces.append((item, Piece(first, stop, held, None)))
        last[key] = held
        copies.add(key)
        return
    out.append(kept)
    last[key] = req.request_id
    batched.add(last[key])
    copies.discard(key)


def _held_already(
    store: Store,
    user: str,
    session: str,
    after: str | None,
    said: Sequence[Said],
    batched: set[str],
    stones: bool,
    *,
    copied: _SaidAt | None = None,
    matched: set[int] | frozenset[int] = frozenset(),
) -> str | None:
    """The id of a request stored already that holds these messages (:func:`_grown`), else None: the request stored
    next in this session after ``after`` (its first when None) when it begins with exactly these messages and holds
    more — they were stored as part of it. When it does not and no message of ``after`` is stored, nor will be with
    this batch (``batched``, less what a tombstone names — ``stones``: the user has one), the group is its session's
    first in the file or follows a piece forgotten since — or ``copied``: the group before it in the file was stored
    already, a copy too — then the request each message is stored in, found by its said-at
    (:func:`_stored_by_said_at`): a copy cut after a forgotten first piece, a copy of a second log that went on with a
    session, a log's groups of 20 cut elsewhere in a file that holds another log before it. (Only there: that looks
    through the session's messages, the other at one request; a growing log's new groups follow no copy. After a copy
    the session's messages are read once, :class:`_SaidAt`, not once per group.)

    Only messages whose said-at tells them apart are matched: each carries one, and no other message of the session
    was said at that millisecond. Without timestamps, or with coarse ones (a session's date on every line), a new "ok"
    is the old "ok" word for word — a new day's log begun like the last (found by a review) — so such a group is
    stored: a duplicate at worst, never a message lost."""
    times = [m[2] for m in said if m[2] is not None]
    if len(set(times)) < len(said):
        return None
    found = store.request_after(user, session, after, count=len(said)) if len(said) < GROUP_SIZE else None
    if found is not None:  # (no stored group is longer than a full one)
        request_id, total, stored = found
        if total > len(said) and request_id.startswith(("auto-", CHAINED)) and [tuple(m) for m in said] == stored:
            # (the same length: its own id, known or not, says whether it is stored)
            return _stored_by_said_at(store, user, session, said, times, copied, matched=matched)
    if after is not None and copied is None:
        if after in batched:  # stored with this batch, unless it was forgotten (refused)
            if not stones or store.known_requests(user, [after]).get(after) is None:
                return None
        elif store.holds_request(user, after):
            return None
    return _stored_by_said_at(store, user, session, said, times, copied, matched=matched)


def _stored_by_said_at(
    store: Store,
    user: str,
    session: str,
    said: Sequence[Said],
    times: list[int],
    read: _SaidAt | None = None,
    *,
    matched: set[int] | frozenset[int] = frozenset(),
) -> str | None:
    """The id of the request the last of these messages is stored in when each is stored — the only message of the
    session said at its said-at, of the same role and text — in a request with a derived id (``auto-``, ``auto+``),
    kept (stored past retention counts as not stored: stored again, as a whole group would be); else None. ``read``:
    the session's messages read once (:class:`_SaidAt`), else those said at these times are read here. Not in a
    request that is exactly a part of the file (``matched``, ``Seen.matched``: a group of it stored or known as it is,
    before or later in the batch): the file says these messages again, and a replay into a new database stores them
    again."""
    stored = read.said_at(times) if read is not None else _said_at(store, user, session, times)
    if len(stored) < len(said):
        return None
    held: list[str] = []
    for (role, content, _), at in zip(said, times):
        n, _, request_id, kept_role, kept = stored[at]
        if n != 1 or kept_role != role or kept != _digest(content) or not request_id.startswith(("auto-", CHAINED)):
            return None
        if hash(request_id) in matched:
            return None
        held.append(request_id)
    requests = list(dict.fromkeys(held))
    if len(store.known_requests(user, requests)) < len(requests):
        return None
    return held[-1]


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _Kept(NamedTuple):
    """What a session holds at one said-at (:meth:`Store.said_at_rows`), a message's text as its digest."""

    n: int  # how many of its messages were said then
    same: bool  # … all of them one message (the same role and text): its copies
    request_id: str  # their requests' ids, joined by NUL (one id where n is 1)
    role: str  # (one's)
    digest: bytes


def _said_at(store: Store, user: str, session: str, times: Sequence[int]) -> dict[int, _Kept]:
    return {
        t: _Kept(n, same, rid, role, _digest(text))
        for t, n, same, rid, role, text in store.said_at_rows(user, session, times)
    }


class _SaidAt:
    """A session's stored messages by said-at (:meth:`Store.said_at_rows` of them all), read once per replay —
    ``seen.said_at``, dropped when another process writes — where groups follow a copy: a log concatenated behind
    another, its groups of 20 cut elsewhere, would read them all once per group. Each message's text is kept as a
    digest. Messages this replay stores after the read are not in it: their copies later in the same file are stored
    again, as a group that comes again in a file is (a duplicate at worst, never a message lost)."""

    def __init__(self, store: Store, seen: Seen, user: str, session: str) -> None:
        self.store, self.seen, self.where = store, seen, (user, session)

    def said_at(self, times: Sequence[int]) -> dict[int, _Kept]:
        kept = self.seen.said_at.get(self.where)
        if kept is None:
            one: dict[str, str] = {}  # each request id and role held once, not once per message (400k: ~70 MB)
            kept = self.seen.said_at[self.where] = {
                t: _Kept(n, same, one.setdefault(rid, rid), one.setdefault(role, role), _digest(text))
                for t, n, same, rid, role, text in self.store.said_at_rows(*self.where, None)
            }
        return {t: kept[t] for t in times if t in kept}


COPY = ""  # a Piece's request id where its messages are a copy of forgotten ones (_copy_of_forgotten): no id known


class _Copy(NamedTuple):
    """What :func:`_copy_of_forgotten` finds of a group's messages among the tombstones covering its session."""

    stone: Stone  # the newest tombstone that holds one of them
    held: tuple[Stone | None, ...] | None = None  # when not all: each message's newest tombstone holding it, or None


def _copy_of_forgotten(store: Store, seen: Seen, req: Prepared) -> _Copy | None:
    """The newest tombstone covering the group's session (its user's, the session's, a request's of it) that holds
    one of the group's messages, as (id, at), when tombstones hold them all — a shorter, older copy of a log cut inside
    what was forgotten (its group's id is then one no tombstone names) — or, when m012's said hashes hold only some of
    them, with each message's newest tombstone holding it (``held``: None for a message none holds; the group mixes
    forgotten messages with others, :func:`_left_out`); else None (:func:`_grown`, for a group whose id is unknown).

    As for a group stored already (:func:`_held_already`), only messages whose said-at tells them apart are matched:
    each carries one, no two different ones the same (a line said twice at one time, as :func:`_stored_apart` takes
    one: a group stored apart and forgotten is a copy when replayed again). A tombstone of m012 or later keeps a keyed hash of each message's role, text
    and said-at (and, since m013, its session sealed: only the messages forgotten from the group's own session
    count): each of the group's messages is looked up among those, in any order (a message said again, at another
    time, is new; a copy's lines reordered are the same messages), also across tombstones (two requests forgotten one
    by one). One written before keeps the text's hash alone: matched only by a group of two messages or more, as a
    contiguous run, and only whole — one message alone ("ok", "thanks") is said again word for word too often to
    refuse; two or more in the same order, in a session a forget covered, are a copy far more often than not; a
    refusal is reported, and a request_id on the lines stores them."""
    from .lifecycle import content_hash, said_hash

    said = req.messages
    if _told_apart(said) is None:
        return None
    where = (req.user_id, req.session_id)
    stones = seen.stones.get(where)
    if stones is None:
        rows = store.session_tombstones(*where)
        stones = seen.stones[where] = [
            _Stone(stone=(i, at), contents=c, said=None if s is None else set(s)) for i, at, c, s in rows
        ]
    secret = sealed.key(store.conn) if stones else b""
    hashes: list[str] = []  # the group's said hashes
    missing: set[str] | None = None  # … that no tombstone seen so far holds
    held: dict[str, Stone] = {}  # a said hash → the newest tombstone that holds it
    first: Stone | None = None  # the newest tombstone that holds one of them
    content_hashes: list[str] = []
    for stone in stones:  # (newest first)
        if stone.said is not None:
            if missing is None:
                hashes = [said_hash(secret, m[0], m[1], m[2]) for m in said]
                missing = set(hashes)
            found = missing & stone.said
            if found:
                first = first or stone.stone
                held.update(dict.fromkeys(found, stone.stone))
                missing -= found
                if not missing:
                    return _Copy(first)
        elif len(said) >= 2 and stone.contents:
            content_hashes = content_hashes or [content_hash(secret, m[1]) for m in said]
            if stone.holds(content_hashes):
                return _Copy(stone.stone)
    if first is None:
        return None
    return _Copy(first, tuple(held.get(h) for h in hashes))


def _left_out(item: Ready, start: int, held: Sequence[Stone | str | None]) -> tuple[list[Piece], Ready | None]:
    """A group's messages from ``start`` on, of which tombstones hold some (``held``, :func:`_copy_of_forgotten`), or
    that are stored already (``held`` naming the request each is stored in, :func:`_stored_apart`): each run of
    forgotten messages as a piece not stored again (a copy, reported as one), each run of stored ones as a piece known
    already (a duplicate), and the others as a request of their own, with their lines (None when none is left):
    :func:`auto_ids.apart_request_id` of the group's id (its repeat suffix included) and those messages, so a replay of
    the same file again derives the same id and stores nothing twice — not ``auto-<hash of those messages>``, the id a
    later group of the file made of the same lines gets, which was then taken for a duplicate of them (lost). Its
    ``grown`` is 1 when ``start`` is past the group's first message (what follows a grown group's known part)."""
    req = item.request
    pieces: list[Piece] = []
    kept: list[int] = []
    for i, mark in enumerate(held, start):
        if mark is None:
            kept.append(i)
            continue
        before = pieces[-1] if pieces and pieces[-1].stop == i else None
        if isinstance(mark, str):  # stored already, in request ``mark``
            if before is not None and before.stone is None:  # (the run goes on: named by its last message's request)
                pieces[-1] = Piece(before.start, i + 1, mark, None)
            else:
                pieces.append(Piece(i, i + 1, mark, None))
        elif before is not None and before.stone is not None:  # (named by the newest tombstone holding one of it)
            pieces[-1] = Piece(before.start, i + 1, COPY, max(mark, before.stone))
        else:
            pieces.append(Piece(i, i + 1, COPY, mark))
    if not kept:
        return pieces, None
    said = [req.messages[i] for i in kept]
    lines = tuple(item.lines[i] for i in kept)
    rid = apart_request_id(req.user_id, req.session_id, req.request_id, said)
    rest = prepare(AddRequest(rid, req.user_id, req.session_id, _messages(said)))
    return pieces, Ready(rest, lines[0], lines[-1], (), (), item.auto, lines, grown=int(start > 0))


def _leave_out(
    item: Ready,
    start: int,
    held: Sequence[str | None],
    out: list[Ready],
    pieces: list[tuple[Ready, Piece]],
    last: dict[int, str],
    batched: set[str],
    copies: set[int],
) -> None:
    """A group's messages from ``start`` on, some stored already (:func:`_stored_apart`), added to the batch: those as
    pieces known already, the others (if any) as a request of their own (:func:`_left_out`). The session is then
    marked as following a copy (``copies``): its next groups, shifted by the line the earlier replay lacked, hold
    messages stored already too, and are looked up in the session's messages read once (:class:`_SaidAt`)."""
    left, kept = _left_out(item, start, held)
    pieces += [(item, piece) for piece in left]
    key = hash((item.request.user_id, item.request.session_id))
    if kept is None:
        last[key] = next(rid for rid in reversed(held) if rid is not None)
    else:
        out.append(kept)
        last[key] = kept.request.request_id
        batched.add(last[key])
    copies.add(key)


def _stored_apart(store: Store, seen: Seen, req: Prepared, *, copied: bool) -> list[str | None] | None:
    """For a group whose id (and its prefixes') no store knows — or what follows a grown group's known part, ``req``
    under the id it would be stored with — that is neither stored whole nor a copy of forgotten messages (:func:`_grown`):
    the request each message is stored in already (None for one that is not), when some are; else None.

    Such messages were stored by an earlier replay in a group without one of this group's lines: a line an older
    refind refused (a timestamp it could not read, read now), or one fixed since it was reported; the bigger group's
    hash (and so its prefixes') is new. Stored whole again, every other message was a duplicate; now only the lines
    the earlier replay lacked are stored, as a request of their own (:func:`_left_out`), which the next replay finds
    stored as the rest: nothing is stored twice.

    Looked up only where they can be: every message carries a said-at and no two different ones of the group share
    one; its id is unknown; and one of its said-ats is no later than the latest of its session's stored messages
    (read once per session and replay, ``seen.latest``: a growing log's new groups come after it, and nothing is looked
    up for them). The messages said then are read for the session's first group looked up so; for the next (the
    session's next groups of 20, shifted by the line; a group after one that held stored messages, ``copied``) the
    session's messages are read once (:class:`_SaidAt`): a log of a session's older lines, none stored, read the
    session once per group.

    A message is taken as stored when every message of its session said at its millisecond is that message (same role
    and text; the only one, or its copies), in a kept request with a derived id (``auto-``, ``auto+``) that is not
    exactly a part of the file met before (``seen.matched``: a group stored or known as it is, the known part of a
    grown group — those copies are that part's: a group that comes again in the file, or a log grown by a copy of a
    line, is stored again, as a fresh replay of the file stores it) — as a multiset: as many of its copies in the group
    as such requests hold, less those found so earlier in this file (each copy found stored is counted in
    ``seen.held``: an earlier group of the file that took two copies leaves none for a later one). A message whose
    millisecond holds other messages too (an edited line beside its old text) is taken as stored only where one of the
    requests found holding the group's other messages holds it (:meth:`Store.said_at_in_requests`): what an earlier
    replay stored of this group, found by the next. Without said-ats, or
    with coarse ones (a session's date on every line), a new
    "ok" is the old one word for word: such a group is stored whole, as before (a duplicate at worst, never a message
    lost)."""
    said = req.messages
    by_time = _told_apart(said)
    if by_time is None:
        return None
    user, session = req.user_id, req.session_id
    where = (user, session)
    if where not in seen.latest:
        seen.latest[where] = store.latest_said_at(user, session)
    latest = seen.latest[where]
    if latest is None or min(by_time) > latest:
        return None
    if req.request_id in store.known_requests(user, [req.request_id]):  # (a group of one line: not looked up yet)
        return None
    if copied or where in seen.looked:
        stored = _SaidAt(store, seen, user, session).said_at(list(by_time))
    else:  # (the session's first group looked up so: its messages said then; the next reads the session once)
        seen.looked.add(where)
        stored = _said_at(store, user, session, list(by_time))
    found_before = seen.held.get(hash((user, session)), Counter())
    holding: dict[int, list[str]] = {}  # said-at → the requests holding its message that may be taken for this group's
    for at, (role, content, _) in by_time.items():
        kept = stored.get(at)
        if kept is not None and kept.same and kept.role == role and kept.digest == _digest(content):
            holding[at] = [
                rid
                for rid in kept.request_id.split("\0")
                if rid.startswith(("auto-", CHAINED)) and hash(rid) not in seen.matched
            ]
    requests = {rid for rids in holding.values() for rid in rids}
    if not requests:
        return None
    shared = [at for at, kept in stored.items() if not kept.same]  # (said-ats that hold other messages too)
    if shared:  # … the group's message among them in a request that holds its other messages (an earlier replay's)
        for at, rid, role, content in store.said_at_in_requests(user, session, requests, shared):
            if by_time[at][:2] == (role, content) and hash(rid) not in seen.matched:
                holding.setdefault(at, []).append(rid)
    alive = store.known_requests(user, requests)  # (stored past retention: not stored, as a whole group would be)
    left: dict[int, list[str]] = {}
    for at, rids in holding.items():
        rids = [rid for rid in rids if rid in alive and alive[rid] is None]
        left[at] = rids[found_before[by_time[at]] :]  # (less the copies an earlier group of the file took)
    held: list[str | None] = []
    for message in said:
        kept_in = left.get(cast("int", message[2]))
        held.append(kept_in.pop(0) if kept_in else None)
    if not any(held):
        return None
    seen.held.setdefault(hash((user, session)), Counter()).update(m for m, rid in zip(said, held) if rid is not None)
    return held


def _told_apart(said: Sequence[Said]) -> dict[int, Said] | None:
    """The messages by said-at when their said-ats tell them apart — each carries one, no two different messages share
    one (a line said twice at one time is one message, logged twice: a group stored apart holds it) — else None."""
    by_time: dict[int, Said] = {}
    for message in said:
        if message[2] is None or by_time.setdefault(message[2], message) != message:
            return None
    return by_time


def _messages(said: Sequence[Said]) -> tuple[Message, ...]:
    return tuple(Message(*m) for m in said)


class _Chains:
    """The one seam between the chained ids a replay computes (:mod:`auto_ids`: unkeyed hashes of the text, each
    chained on the computed id of the piece before it) and the ids the store holds: a chained request is stored keyed
    under the database's secret (:func:`auto_ids.stored_chained`), so that a kept id confirms no guess of a forgotten
    piece. :meth:`lookup` asks the store for the stored form of each computed id and for the id itself (what a
    tombstone written by an older refind seals, or a request imported as an older refind's export gave it) and answers
    under the computed id; :meth:`stored` is the id a computed one is stored, shown and followed under. Only computed
    ids come here: a stored id is never translated again."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.secret = sealed.key(store.conn)
        self.found: dict[str, str] = {}  # computed id → the form the store knows it by

    def lookup(self, user: str, ids: Sequence[str]) -> Known:
        keyed = {rid: stored_chained(self.secret, rid) for rid in ids}
        found = self.store.known_requests(user, [*keyed.values(), *ids])
        known: Known = {}
        for rid, key in keyed.items():
            form = key if key in found else rid if rid in found else None
            if form is not None:
                known[rid] = found[form]
                self.found[rid] = form
        return known

    def stored(self, rid: str) -> str:
        """The id a computed one is stored under: an ``auto-`` id as it is; a chained one in the form the store knows
        it by, keyed when it knows none."""
        if not rid.startswith(CHAINED):
            return rid
        return self.found.get(rid) or stored_chained(self.secret, rid)

    def split(self, split: Split) -> Split:
        """The split with its computed ids in their stored forms."""
        known = tuple(Piece(p.start, p.stop, self.stored(p.request_id), p.stone) for p in split.known)
        return Split(known, split.start, self.stored(split.request_id), split.again)


def _split(
    store: Store,
    chains: _Chains,
    user: str,
    session: str,
    rid: str,
    said: Sequence[Said],
    known: Known,
    repeats: Repeats,
    *,
    asked: set[str],
    hashed: Sequence[str] | None,
    chained: bool,
) -> Split | None:
    """How a group that may have grown is stored (:func:`auto_ids.split_grown`; its ids in their stored forms,
    ``chains``), ``known`` holding its own id if it
    is known, and whichever of the ``asked`` ids are (those not asked are looked up here); ``hashed``: its prefixes'
    ids, derived already; ``chained``: the store has a retention and the session a chained request, stored or forgotten
    (one may follow an expired prefix). A grown group's prefixes are counted in ``repeats``."""
    if rid in known:
        return None
    candidates = prefix_candidates(user, session, said, repeats, hashed=hashed)
    missed = [c for c in candidates if c not in asked]
    found = (known | store.known_requests(user, missed)) if missed else known
    split = split_grown(
        user,
        session,
        said,
        rid,
        candidates,
        found,
        chains.lookup,
        after_expired=chained,
        counted=lambda own: repeats.so_far(own) > 0,
    )
    if split is None:
        return None
    # counted as each of its shorter groups too (auto_ids), and as the groups of their own it holds after its first
    # piece (two logs concatenated): later groups never take their ids
    for candidate in candidates:
        repeats.count(candidate)
    for own in [*(p.request_id for p in split.known if p.start > 0), split.request_id]:
        if own.startswith("auto-"):
            repeats.count(own)
    return chains.split(split)


def _piece_where(item: Ready | Parsed, piece: Piece) -> str:
    if not item.lines:  # a group of one line
        return _where(item)
    return _span(item.lines[piece.start], item.lines[piece.stop - 1])


def _forgotten_piece(item: Ready | Parsed, piece: Piece, stone: tuple[int, int]) -> str:
    if piece.request_id == COPY:
        return (
            f"these messages are a copy of messages of user {item.request.user_id!r} that were forgotten (tombstone "
            f"{stone[0]}, {iso_time(stone[1])}): not stored again (an older copy of the log, cut inside what was "
            "forgotten); to store them as new messages said again, give their lines a request_id"
        )
    return (
        f"these messages were stored as request_id {piece.request_id!r} of user {item.request.user_id!r}, which was "
        f"forgotten (tombstone {stone[0]}, {iso_time(stone[1])}): not stored again (their group of "
        "lines has grown since it was stored)"
    )
