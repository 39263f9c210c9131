"""The Agent Memory Leaderboard Add/Search contract: request shapes, validation, canonical hashing.

Shared by the CLI (``refind add``, replay) and the server, so both refuse exactly the same input with exactly the
same message. Validation is written out by hand rather than delegated to a schema library because every fault needs
a message that names the field and says what would be accepted.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from json.encoder import encode_basestring
from typing import Any

from .errors import InvalidInput

ROLES = ("user", "assistant", "system")
# Unix milliseconds between 1973-03-03 and 2286-11-20. Below that a value is almost surely seconds, not ms: one
# that is Unix seconds in the same dates (1e8 ≤ v < 1e10) is read as seconds (×1000) and said so; the rest is refused.
MIN_TIMESTAMP_MS = 100_000_000_000
MAX_TIMESTAMP_MS = 10_000_000_000_000
MIN_TIMESTAMP_S = MIN_TIMESTAMP_MS // 1000
MAX_TIMESTAMP_S = MAX_TIMESTAMP_MS // 1000
STORED_DATES = "1973-03-03T09:46:40Z to 2286-11-20T17:46:39.999Z"  # the said-at range above, exactly (UTC)

ADD_FIELDS = frozenset({"request_id", "user_id", "session_id", "messages"})
MESSAGE_FIELDS = frozenset({"role", "content", "timestamp"})
SEARCH_FIELDS = frozenset({"query", "user_id", "top_k", "options"})
MAX_TOP_K = 1000
SEARCH_MODES = ("agent", "bm25")  # agent: the LLM planner; bm25: BM25 alone
MAX_AS_OF_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last time parse_date can name
# Caps that keep one request from holding the single writer or a search thread for long (README "Security").
MAX_MESSAGES_PER_ADD = 10_000  # one Add; the platform sends a session in Adds of ~20
MAX_QUERY_CHARS = 100_000  # a search's query and options together; real questions are under 2,000
MAX_ID_CHARS = 1_024  # a user, session or request id of an Add: every stored message repeats its ids (and indexes them)


class DuplicateKey(ValueError):
    """A JSON object names one key twice (raised by :func:`unique_keys` while decoding)."""

    def __init__(self, key: str, count: int) -> None:
        super().__init__(f"the key {key!r} appears {count} times in one object")
        self.key, self.count = key, count


MAX_LINE_BYTES = 64 * 1024 * 1024  # one replay line (an Add request); twice the server's default body limit
MAX_CONTAINERS = 100_000  # JSON objects and arrays in one request or replay line (an Add of 10,000 messages: 10,002)
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')


def containers_over_limit(raw: bytes) -> int | None:
    """How many JSON objects and arrays ``raw`` holds outside its strings when that is over :data:`MAX_CONTAINERS`,
    else None — checked before parsing: each parsed costs 56 bytes or more, so a body of brackets ("[[],[],…]", in a
    field refind ignores) takes ~30 times its size in memory, past what the server's budget of bodies in flight
    counts. Only a text whose brackets alone pass the limit is read twice (strings taken out, then counted)."""
    if len(raw) <= 2 * MAX_CONTAINERS or raw.count(b"[") + raw.count(b"{") <= MAX_CONTAINERS:
        return None
    outside = _JSON_STRING.sub(b"", raw)
    n = outside.count(b"[") + outside.count(b"{")
    return n if n > MAX_CONTAINERS else None


def long_number() -> str:
    """How a refusal names a JSON integer past Python's limit on digits (``int_max_str_digits``, whose ValueError
    advises raising it): the server's, a replay line's and a dataset's alike."""
    return f"a number of more than {sys.get_int_max_str_digits():,} digits"


def request_line(request: dict[str, Any], *, ascii_only: bool = False) -> str:
    """An Add request as one JSONL line (without its newline), as ``refind export`` writes it and ``refind add``
    reads it back. ``ascii_only``: every non-ASCII character as a ``\\uXXXX`` escape."""
    return json.dumps(request, ensure_ascii=ascii_only, separators=(",", ":"))


def exported_bytes(request_id: str, user_id: str, session_id: str, said: Iterable[tuple[str, str, int | None]]) -> int:
    """The bytes of the line ``refind export`` writes (UTF-8, without its newline) for a request of these (role,
    content, said-at) messages: what ``refind add`` must be able to read back (:data:`MAX_LINE_BYTES`)."""
    messages = [{"role": role, "content": content, "timestamp": at} for role, content, at in said]
    request = {"request_id": request_id, "user_id": user_id, "session_id": session_id, "messages": messages}
    return len(request_line(request).encode())


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads(..., object_pairs_hook=unique_keys)``: an object as a dict, refusing a key given twice — two
    ``user_id``s must not mean "the last one" (the server and a replay file refuse it alike)."""
    data = dict(pairs)
    if len(data) != len(pairs):  # the first key given more than once, counted in one pass (not once per key)
        counts = Counter(k for k, _ in pairs)
        key = next(k for k in data if counts[k] > 1)
        raise DuplicateKey(key, counts[key])
    return data


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    timestamp: int | None = None  # Unix ms when said; None when unknown


@dataclass(frozen=True)
class AddRequest:
    request_id: str
    user_id: str
    session_id: str
    messages: tuple[Message, ...]
    unknown_fields: tuple[str, ...] = field(default=(), compare=False)
    normalized: tuple[str, ...] = field(default=(), compare=False)  # what was read leniently (field: how), no content

    def canonical(self) -> dict[str, Any]:
        """The payload that identifies this request: what an identical replay must repeat exactly."""
        return {
            "request_id": self.request_id,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "messages": [{"role": m.role, "content": m.content, "timestamp": m.timestamp} for m in self.messages],
        }

    def payload_hash(self) -> str:
        """SHA-256 of the payload (the canonical body less request_id and user_id) as compact JSON with sorted keys,
        non-ASCII kept: ``{"messages":[{"content":…,"role":…,"timestamp":…}],"session_id":…}``."""
        return hashlib.sha256(self._payload_json().encode("utf-8")).hexdigest()

    def _payload_json(self) -> str:
        # What json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":")) writes, written out: the
        # same bytes at a third of the cost (every replayed request is hashed). Anything but plain str and int (or
        # None) values goes through json.dumps itself.
        enc = encode_basestring
        parts = []
        for m in self.messages:
            ts = m.timestamp
            if type(m.content) is not str or type(m.role) is not str or (ts is not None and type(ts) is not int):
                return self._payload_json_dumps()
            parts.append(
                f'{{"content":{enc(m.content)},"role":{enc(m.role)},"timestamp":{"null" if ts is None else ts}}}'
            )
        if type(self.session_id) is not str:
            return self._payload_json_dumps()
        return f'{{"messages":[{",".join(parts)}],"session_id":{enc(self.session_id)}}}'

    def _payload_json_dumps(self) -> str:
        body = dict(self.canonical())
        del body["request_id"], body["user_id"]  # the key, not the payload
        return json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class SearchRequest:
    """One search, parsed once: what every surface (CLI, server, evaluator, Python API, MCP) hands to
    :func:`refind_cli.retrieval.retrieve`. Build it with :func:`parse_search` (a contract body) or
    :func:`search_request` (keyword values from a flag, an argument or a tool call)."""

    query: str
    user_id: str
    top_k: int
    options: tuple[str, ...] = ()
    unknown_fields: tuple[str, ...] = field(default=(), compare=False)
    normalized: tuple[str, ...] = field(default=(), compare=False)
    date_from: int | None = None  # Unix ms: only turns said at or after this
    date_to: int | None = None  # Unix ms, inclusive (a bare date was turned into its day's last millisecond)
    as_of: int | None = None  # Unix ms: only what the store had recorded by then
    mode: str = "bm25"  # one of SEARCH_MODES


# A \\uD800-style escape in raw JSON: the only way an unpaired surrogate gets into parsed text.
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def refuse_lone_surrogates(value: Any, at: str) -> None:
    """Refuse text holding an unpaired UTF-16 surrogate: JSON allows the escape, Unicode text (and SQLite) do not."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(
                f"{at}: contains an unpaired UTF-16 surrogate (\\u{ord(value[exc.start]):04x}), "
                "which is not Unicode text"
            ) from None
    elif isinstance(value, list):
        for i, item in enumerate(value):
            refuse_lone_surrogates(item, f"{at}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_lone_surrogates(key, f"{at} key")
            refuse_lone_surrogates(item, key if at == "request" else f"{at}.{key}")


LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # in decoded text a surrogate is always unpaired (pairs decode whole)


def mend_lone_surrogates(obj: Any) -> tuple[Any, tuple[str, ...]]:
    """``obj`` (an Add request, or a replay's message line) with each unpaired UTF-16 surrogate in a message's text
    as U+FFFD, as a WHATWG encoder writes one, and a note per message so mended; anything else holding one (an id, a
    role, a key) is refused by :func:`refuse_lone_surrogates`. A sender that cuts long messages by UTF-16 units (the
    platform's ~8,000-character cut; JavaScript's ``slice``) leaves half an emoji at the cut, which its JSON escapes
    ("\\ud83d"): a refusal lost the whole Add, which the platform does not retry. ``obj`` itself is not changed."""
    notes: list[str] = []

    def mended(message: Any, at: str) -> Any:
        text = message.get("content") if isinstance(message, dict) else None
        if not isinstance(text, str) or not (lone := LONE_SURROGATE.findall(text)):
            return message
        seen = list(dict.fromkeys(lone))
        halves = ", ".join(f"\\u{ord(c):04x}" for c in seen[:3]) + (", …" if len(seen) > 3 else "")
        notes.append(
            f"{at}content: {len(lone)} unpaired UTF-16 surrogate{'s' if len(lone) > 1 else ''} ({halves}: half a "
            f"character{' each' if len(lone) > 1 else ''}) stored as U+FFFD"
        )
        return {**message, "content": LONE_SURROGATE.sub("\ufffd", text)}

    if isinstance(obj, dict) and isinstance(messages := obj.get("messages"), list):
        obj = {**obj, "messages": [mended(m, f"messages[{i}].") for i, m in enumerate(messages)]}
    elif isinstance(obj, dict):
        obj = mended(obj, "")
    refuse_lone_surrogates(obj, "request")
    return obj, tuple(notes)


def _require_str(obj: dict[str, Any], key: str, where: str = "") -> str:
    name = f"{where}{key}"
    if key not in obj or obj[key] is None:
        raise InvalidInput(f"{name}: required")
    value = obj[key]
    if not isinstance(value, str):
        raise InvalidInput(f"{name}: must be a string, got {_json_type(value)}")
    if not value.strip():
        raise empty_text(name, value)
    return value


def check_id(name: str, value: str) -> str:
    """An Add's id, at most MAX_ID_CHARS long: each message row (and three indexes) repeats it, so a 200 KB session
    id on 2,000 one-character messages wrote 1.5 GB."""
    if len(value) > MAX_ID_CHARS:
        raise InvalidInput(
            f"{name}: {len(value):,} characters, over the limit of {MAX_ID_CHARS:,} for an id (every stored message "
            "repeats its ids)"
        )
    return value


def empty_text(name: str, value: Any, more: str = "") -> InvalidInput:
    """The refusal of a text or id that is missing its words: a string of whitespace alone says so (a user reading
    "must be a non-empty string" of "  " looks for an empty one), and a value that is no string names its type."""
    if not isinstance(value, str):
        return InvalidInput(f"{name}: must be a string, got {_json_type(value)}")
    blank = ", got only whitespace" if value else ""
    return InvalidInput(f"{name}: must be a non-empty string{more}{blank}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _digits(value: Any) -> Any:
    """A JSON string of ASCII digits is the number it spells (a 422 would lose a message whose meaning is clear)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        return int(value)
    return value


_NUMBER_TEXT = re.compile(r"[+-]?[0-9]{1,20}(?:\.[0-9]{1,20})?")


def number_text(text: str) -> int | float | None:
    """The number a string spells — ASCII digits, a sign and a fraction allowed, spaces around them ignored — or None
    (an exponent, a comma, a word: not read as a number)."""
    stripped = text.strip()
    if not _NUMBER_TEXT.fullmatch(stripped):
        return None
    return float(stripped) if "." in stripped else int(stripped)


# RFC 3339's form (its T and Z in either case, §5.6) and ISO 8601's basic one (20240310T100000Z), each with its zone:
# Z, or an offset of hours and minutes or of hours alone (ISO 8601's ±hh: PostgreSQL's text output, "…10:00:00+00");
# a fraction of a second after a point or, as ISO 8601 allows, a comma
_ZONED = re.compile(
    r"(?:\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(?::\d\d(?:[.,]\d{1,9})?)?|\d{8}[Tt]\d{4}(?:\d\d(?:[.,]\d{1,9})?)?)"
    r"(?:[Zz]|[+-]\d\d(?::?\d\d)?)",
    re.ASCII,
)


def _zoned_time(text: str, name: str = "timestamp") -> int | None:
    """Unix ms of an ISO 8601 time that names its zone (``Z`` or an offset) — one instant, whoever reads it — else
    None (a bare date or a time without its zone says no instant: refused as before). One written so that names no
    time that exists is refused as such, not as "got string" as if no time had been sent."""
    raw = text.strip()
    if len(raw) > 40 or not _ZONED.fullmatch(raw):
        return None
    try:
        return parse_date(raw.upper())
    except InvalidInput:  # (a month 13, a 25th hour; a leap second, :60, which Python's datetime cannot hold)
        raise InvalidInput(
            f"{name}: {text!r} is written as an ISO 8601 time but names none that exists (a day past its month's end, "
            "an hour past 23, a minute or second past 59, an offset past 23:59)"
        ) from None


def parse_timestamp(value: Any, name: str = "timestamp", notes: list[str] | None = None) -> int | None:
    """Unix milliseconds as an integer, or None. Also read, and noted in ``notes``: a number written as a string
    (digits; a sign, a fraction, spaces around it too: "-1", " 1700000000000 "), Unix seconds
    in the accepted dates (1e8 ≤ v < 1e10, ×1000; a fraction of a second is kept as milliseconds), milliseconds with a
    fraction (``time.time() * 1000``: the fraction dropped), and 0 or -1 — placeholders for an unknown time — as no
    said-at. Each was refused with a 422, which the platform does not retry: the whole Add was lost (a probe)."""
    if value is None:
        return None
    if isinstance(value, str) and (number := number_text(value)) is not None:
        if notes is not None:
            plain = value.isascii() and value.isdigit()
            notes.append(f"{name}: {'a string of digits' if plain else f'the string {value!r}'} read as a number")
        value = number
    elif isinstance(value, str) and (ms := _zoned_time(value, name)) is not None:  # "2024-03-10T10:00:00Z": one instant
        if not MIN_TIMESTAMP_MS <= ms < MAX_TIMESTAMP_MS:
            raise InvalidInput(f"{name}: {value!r} is outside the dates refind stores, {STORED_DATES}")
        if notes is not None:
            notes.append(f"{name}: the ISO 8601 time {value!r} read as {ms} ms")
        return ms
    if isinstance(value, str):
        raise InvalidInput(
            f"{name}: must be Unix milliseconds (an integer) or null, got string (read too: a number as a string, an ISO "
            "8601 time that names its zone such as 2024-03-10T10:00:00Z)"
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name}: must be Unix milliseconds (an integer) or null, got {_json_type(value)}")
    if isinstance(value, float) and not math.isfinite(value):  # infinity (1e400, past a float) or NaN: no time
        said = (
            "not a number"
            if value != value
            else f"{'minus ' if value < 0 else ''}infinity (a number past a float's range, such as 1e400)"
        )
        raise InvalidInput(f"{name}: must be Unix milliseconds (an integer) or null, got {said}")
    if value in (0, -1):
        if notes is not None:
            notes.append(f"{name}: {value!r} read as no said-at (a placeholder for an unknown time)")
        return None
    if MIN_TIMESTAMP_S <= value < MAX_TIMESTAMP_S:
        ms = round(value * 1000)
        if ms >= MAX_TIMESTAMP_MS:  # 9999999999.9996 s rounds to the first millisecond past the stored dates
            raise InvalidInput(f"{name}: {value!r} Unix seconds is past the dates refind stores, {STORED_DATES}")
        if notes is not None:
            notes.append(f"{name}: {value} read as Unix seconds (×1000 = {ms} ms)")
        return ms
    if not MIN_TIMESTAMP_MS <= value < MAX_TIMESTAMP_MS:
        raise InvalidInput(
            f"{name}: {_abbreviated(value) if isinstance(value, int) else repr(value)} is neither Unix milliseconds in "
            f"[{MIN_TIMESTAMP_MS}, {MAX_TIMESTAMP_MS}) nor Unix seconds in [{MIN_TIMESTAMP_S}, {MAX_TIMESTAMP_S}) "
            f"({STORED_DATES})"
        )
    if isinstance(value, float) and not value.is_integer():
        ms = math.floor(value)
        if notes is not None:
            notes.append(f"{name}: {value!r} read as {ms} ms (the fraction of a millisecond dropped)")
        return ms
    return int(value)


def _abbreviated(number: int) -> str:
    """A number as a refusal shows it: whole up to 40 digits, else its ends and its length (an error message never
    echoes thousands of digits back)."""
    text = str(number)
    return text if len(text) <= 40 else f"{text[:12]}…{text[-4:]} ({len(text):,} characters)"


def check_said_at(ms: int, name: str, given: str) -> int:
    """``ms``, a said-at parsed from the date ``given`` for ``name`` (``--at``, ``at``), when refind stores it; the
    refusal names the date as given, not the milliseconds it became."""
    if not MIN_TIMESTAMP_MS <= ms < MAX_TIMESTAMP_MS:
        raise InvalidInput(f"{name}: {given!r} is outside the dates refind stores, {STORED_DATES}")
    return ms


def parse_said_at(value: int | float | str | date | None, name: str, notes: list[str] | None = None) -> int | None:
    """When a message was said, given by a flag or an argument (``refind add --at``, ``Memory.add(at=)``, MCP's
    ``at``), named ``name``: a number — or a string of one — read exactly as an Add's ``timestamp`` is
    (:func:`parse_timestamp`: Unix ms, seconds ×1000, a fraction dropped, 0 and -1 no said-at; noted in ``notes``),
    or a date or ISO 8601 time (:func:`parse_date`, UTC unless it names a zone). A string of digits is a date only as
    YYYYMMDD (8 digits): "20230508" is 8 May 2023, "1700000000000" Unix ms. A Python ``datetime`` that names its
    zone is its instant, a ``date`` its first millisecond (UTC); a naive datetime is refused (:func:`_calendar_ms`)."""
    if isinstance(value, date):
        return check_said_at(_calendar_ms(value, name), name, value.isoformat())
    if not isinstance(value, str):
        return parse_timestamp(value, name, notes)
    text = value.strip()
    number = number_text(text)
    date_like = text.isdigit() and 6 <= len(text) <= 8  # (too few digits to be a time in seconds or ms)
    if number is not None and not date_like:
        return parse_timestamp(number, name, notes)
    try:
        ms = parse_date(text)
    except InvalidInput:
        if date_like:  # 202311 was read as 2023-01-01
            raise InvalidInput(
                f"{name}: {value!r} is not a date (in digits a date is YYYYMMDD, such as 20231101) nor Unix ms"
            ) from None
        raise InvalidInput(
            f"{name}: {value!r} is not an ISO 8601 time{_why_not(text)} such as 2023-05-08T13:56 or 2023-05-08, nor "
            "Unix ms"
        ) from None
    return check_said_at(ms, name, value)


def parse_message(obj: Any, where: str, notes: list[str] | None = None) -> tuple[Message, list[str]]:
    if not isinstance(obj, dict):
        raise InvalidInput(f"{where.rstrip('.')}: must be an object with role and content, got {_json_type(obj)}")
    role = _require_str(obj, "role", where)
    if role not in ROLES:
        raise InvalidInput(f"{where}role: must be one of {', '.join(ROLES)}; got {role!r}")
    content = obj.get("content")
    if content is None:
        raise InvalidInput(f"{where}content: required")
    if not isinstance(content, str):
        raise InvalidInput(f"{where}content: must be a string, got {_json_type(content)}")
    if not content:  # whitespace alone is kept: a hard-cut long message can leave such a chunk, and a 422 loses it
        raise InvalidInput(f"{where}content: must be a non-empty string")
    ts = parse_timestamp(obj.get("timestamp"), f"{where}timestamp", notes)
    unknown = [f"{where}{k}" for k in obj if k not in MESSAGE_FIELDS]
    return Message(role=role, content=content, timestamp=ts), unknown


def parse_add(obj: Any, *, strict: bool = False, notes: Sequence[str] = ()) -> AddRequest:
    """Validate one Add request body. Unknown fields are kept as names in ``unknown_fields`` (refused if strict);
    ``notes``: what was read leniently before (:func:`mend_lone_surrogates`), kept first in ``normalized``."""
    if not isinstance(obj, dict):
        raise InvalidInput(f"request: must be a JSON object, got {_json_type(obj)}")
    request_id = check_id("request_id", _require_str(obj, "request_id"))
    user_id = check_id("user_id", _require_str(obj, "user_id"))
    session_id = check_id("session_id", _require_str(obj, "session_id"))
    raw = obj.get("messages")
    if raw is None:
        raise InvalidInput("messages: required")
    if not isinstance(raw, list):
        raise InvalidInput(f"messages: must be an array, got {_json_type(raw)}")
    if not raw:
        raise InvalidInput("messages: must hold at least one message")
    if len(raw) > MAX_MESSAGES_PER_ADD:
        raise InvalidInput(
            f"messages: {len(raw):,} messages in one request, over the limit of {MAX_MESSAGES_PER_ADD:,}; "
            "split them into several Add requests"
        )
    unknown = [k for k in obj if k not in ADD_FIELDS]
    messages = []
    notes = list(notes)
    for i, item in enumerate(raw):
        if type(item) is dict and item.keys() <= MESSAGE_FIELDS:  # the usual message, checked in one go
            role, content, ts = item.get("role"), item.get("content"), item.get("timestamp")
            if (
                role in ROLES
                and type(content) is str
                and content
                and (ts is None or (type(ts) is int and MIN_TIMESTAMP_MS <= ts < MAX_TIMESTAMP_MS))
            ):
                messages.append(Message(role, content, ts))
                continue
        message, extra = parse_message(item, f"messages[{i}].", notes)  # anything else, with its exact message
        messages.append(message)
        unknown.extend(extra)
    if strict and unknown:
        raise InvalidInput(
            f"unknown field{'s' if len(unknown) > 1 else ''} (refused by --strict): {', '.join(unknown)}"
        )
    return AddRequest(request_id, user_id, session_id, tuple(messages), tuple(unknown), tuple(notes))


def parse_search(obj: Any, *, max_top_k: int = MAX_TOP_K) -> SearchRequest:
    if not isinstance(obj, dict):
        raise InvalidInput(f"request: must be a JSON object, got {_json_type(obj)}")
    query = _require_str(obj, "query")
    user_id = _require_str(obj, "user_id")
    top_k = obj.get("top_k")
    if top_k is None:
        raise InvalidInput("top_k: required")
    notes: list[str] = []
    if _digits(top_k) is not top_k:
        top_k = _digits(top_k)
        notes.append("top_k: a string of digits read as a number")
    if isinstance(top_k, float) and top_k.is_integer():
        top_k = int(top_k)
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise InvalidInput(f"top_k: must be an integer, got {_json_type(top_k)}")
    if top_k < 1:
        raise InvalidInput(f"top_k: must be at least 1, got {top_k}")
    if top_k > max_top_k:
        notes.append(f"top_k: {top_k} clamped to {max_top_k}")
        top_k = max_top_k
    options = obj.get("options")
    if options is None:
        options = []
    if isinstance(options, dict):  # some datasets carry choices as {"A": ...}; keep their values
        options = list(options.values())
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise InvalidInput("options: must be an array of strings")
    _check_length(query, options, "query")
    unknown = tuple(k for k in obj if k not in SEARCH_FIELDS)
    return SearchRequest(query, user_id, top_k, tuple(options), unknown, tuple(notes))


# ---- dates ---------------------------------------------------------------------------------------------------

_DATE_FORMATS = ("%Y/%m/%d", "%Y-%m-%d", "%Y%m%d")


def _bare_day(raw: str) -> date | None:
    """The day ``raw`` names with no time of day: one of :data:`_DATE_FORMATS`, or another of ISO 8601's forms of a
    date ("2023-W26-5", "2023-06-30Z" — these were read as the day's midnight: a --date-to left the day out)."""
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(raw, fmt).date()
        except ValueError:
            continue
    stem = raw[:-1] if raw[-1:] in ("Z", "z") else raw  # (one Z: "2023-06-30zZ" was read as 30 June)
    if stem.isdigit() and len(stem) != 8:  # (digits alone: parse_date's rule — "2023111506Z" was 15 November 00:00)
        return None
    try:
        return date.fromisoformat(stem)
    except ValueError:
        return None


def parse_date(text: str, *, end: bool = False) -> int:
    """YYYY/MM/DD, YYYY-MM-DD or an ISO 8601 datetime (UTC unless it names a zone) → Unix ms.

    A bare date means the start of that day (UTC), or its last millisecond with ``end=True``.
    """
    raw = (text or "").strip() if isinstance(text, str) else text
    if not isinstance(raw, str) or not raw:
        raise InvalidInput(f"date {text!r}: expected YYYY/MM/DD, YYYY-MM-DD or an ISO 8601 time")
    # digits alone are a date only as YYYYMMDD: strptime read "202311" as 2023-01-01, and Python's ISO parsers read
    # "2023050812" as 2023-05-08 and "2023050812345" as 2023-05-08T23:45
    day = None if raw.isdigit() and len(raw) != 8 else _bare_day(raw)
    if day is not None:
        ms = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)  # (a whole second: exact)
        return ms + 86_400_000 - 1 if end else ms
    try:
        if raw.isdigit():
            raise ValueError(raw)
        # (RFC 3339's z in lower case too, §5.6: what an Add's timestamp reads was refused by --at and --date-from)
        dt = datetime.fromisoformat(raw[:-1] + "+00:00" if raw[-1] in "Zz" else raw)
    except ValueError:
        raise InvalidInput(
            f"date {raw!r} is not a date: expected YYYY/MM/DD, YYYY-MM-DD or an ISO 8601 time such as 2023-05-08T13:56"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    # exact integer arithmetic: int(dt.timestamp() * 1000) is a millisecond short for about 1 time in 100
    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


# ---- a search from keyword values (CLI flags, Python API, MCP tool arguments) ----------------------------------

CLI_NAMES = {
    "query": "QUERY",
    "user_id": "--user",
    "top_k": "--top-k",
    "date_from": "--date-from",
    "date_to": "--date-to",
    "as_of": "--as-of",
    "options": "--option",
    "mode": "--mode",
}


def search_request(
    query: str,
    user_id: str,
    *,
    top_k: int,
    date_from: str | int | date | None = None,
    date_to: str | int | date | None = None,
    as_of: str | int | date | None = None,
    options: Sequence[str] = (),
    mode: str = "bm25",
    max_top_k: int = MAX_TOP_K,
    names: Mapping[str, str] | None = None,
) -> SearchRequest:
    """Check and parse one search's values ONCE (dates to Unix ms) into a :class:`SearchRequest`.

    Dates and ``as_of`` are read by :func:`parse_when` (YYYY/MM/DD, YYYY-MM-DD, YYYYMMDD, ISO 8601, Unix ms or
    seconds, an aware ``datetime`` or a ``date``); ``date_to`` and ``as_of`` as a bare date include its whole day. Every fault raises
    :class:`InvalidInput` naming the field — by ``names[field]`` when given (the CLI passes :data:`CLI_NAMES`).
    """

    def name(key: str) -> str:
        return (names or {}).get(key, key)

    if not isinstance(query, str):
        raise InvalidInput(f"{name('query')}: must be a string, got {_json_type(query)}")
    if not query.strip():
        raise empty_text(name("query"), query)
    if not isinstance(user_id, str) or not user_id.strip():
        raise empty_text(name("user_id"), user_id)
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise InvalidInput(f"{name('top_k')}: must be an integer, got {_json_type(top_k)}")
    if not 1 <= top_k <= max_top_k:
        raise InvalidInput(f"{name('top_k')}: must be between 1 and {max_top_k}, got {top_k}")
    lo = parse_when(date_from, name("date_from"), end=False)
    hi = parse_when(date_to, name("date_to"), end=True)
    if lo is not None and hi is not None and lo > hi:
        raise InvalidInput(f"{name('date_from')} {date_from} is after {name('date_to')} {date_to}: nothing can match")
    if options is None:  # (no options, as () says: None raised TypeError)
        options = ()
    if isinstance(options, (str, Mapping)) or not isinstance(options, Iterable):
        raise InvalidInput(f"{name('options')}: must be a list of strings")
    options = tuple(options)  # (once: checking an iterator's items used them up, and the search had none)
    if not all(isinstance(o, str) for o in options):
        raise InvalidInput(f"{name('options')}: must be a list of strings")
    # as the server refuses them: a query of over 100,000 characters (10**6 of dates took 44 s), half a character
    _check_length(query, options, name("query"))
    refuse_lone_surrogates(query, name("query"))  # (a user id's is refused where it is looked up, as every call's)
    for i, option in enumerate(options):
        refuse_lone_surrogates(option, f"{name('options')}[{i}]")
    mode_text = mode.strip().lower() if isinstance(mode, str) else mode
    if mode_text not in SEARCH_MODES:
        raise InvalidInput(f"{name('mode')}: must be {' or '.join(SEARCH_MODES)}, got {mode!r}")
    return SearchRequest(
        query,
        user_id,
        top_k,
        tuple(options),
        date_from=lo,
        date_to=hi,
        as_of=parse_as_of(as_of, name("as_of")),
        mode=mode_text,
    )


def _check_length(query: str, options: Sequence[str], name: str) -> None:
    """InvalidInput when a search's query and options together pass :data:`MAX_QUERY_CHARS` (every surface alike)."""
    chars = len(query) + sum(len(o) for o in options)
    if chars > MAX_QUERY_CHARS:
        raise InvalidInput(
            f"{name}: {chars:,} characters with its options, over the limit of {MAX_QUERY_CHARS:,}; send a shorter "
            "question"
        )


def parse_when(value: object, name: str, *, end: bool = False) -> int | None:
    """A search's ``date_from``, ``date_to`` or ``as_of`` as Unix ms (None: no bound), read one way wherever it is
    given — a flag, a Python argument, a tool call, the planner's reply:

    * an int, or a string of digits: Unix ms, or Unix seconds ×1000 from 10^8 to below 10^10 (as an Add's
      ``timestamp`` reads them) — except 8 digits in a string, YYYYMMDD (6 or 7 are refused: no date, no time);
    * a string: YYYY/MM/DD, YYYY-MM-DD or an ISO 8601 time, UTC unless it names a zone (:func:`parse_date`);
    * a ``datetime`` that names its zone; a ``date`` (a whole day, UTC).

    A bare day is its first millisecond, or with ``end`` its last (``date_to`` and ``as_of`` include their day)."""
    if value is None:
        return None
    if isinstance(value, (date, datetime)):
        return _calendar_ms(value, name, end=end)
    if isinstance(value, int) and not isinstance(value, bool):
        return _bound_ms(value, name, str(value))
    if not isinstance(value, str):
        raise InvalidInput(
            f"{name}: must be a date (such as 2023-05-08), an ISO 8601 time or Unix milliseconds, got "
            f"{type(value).__name__ if isinstance(value, (date, float, bool)) else _json_type(value)}"
        )
    text = value.strip()
    if text.isascii() and text.isdigit():  # ("²" is a digit to isdigit, not to int)
        if 6 <= len(text) <= 7:
            raise InvalidInput(
                f"{name}: {value!r} is not a date (in digits a date is YYYYMMDD, such as 20231101) nor Unix ms"
            )
        if len(text) != 8:
            return _bound_ms(int(text), name, text)
    try:
        return parse_date(text, end=end)
    except InvalidInput:
        raise InvalidInput(
            f"{name}: date {text!r} is not a date{_why_not(text)}: expected YYYY/MM/DD, YYYY-MM-DD, YYYYMMDD, an ISO "
            "8601 time such as 2023-05-08T13:56, or Unix ms"
        ) from None


def _why_not(text: str) -> str:
    """What is wrong with a date written in a shape refind reads, or in one people write whose order is ambiguous
    (the refusal listed the shapes, which ``2023-02-30`` is in, and no more)."""
    import calendar
    import re

    if match := re.fullmatch(r"(\d{4})([-/]?)(\d{1,2})\2(\d{1,2})(?:[T ].*)?", text):
        year, month, day = int(match[1]), int(match[3]), int(match[4])
        if not 1 <= month <= 12:
            return f" (there is no month {month})"
        days = calendar.monthrange(year, month)[1] if year else 31
        if not 1 <= day <= days:
            return f" ({calendar.month_name[month]} {year} has {days} days)"
    elif match := re.fullmatch(r"(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})", text):
        a, b, year_text = int(match[1]), int(match[2]), match[3]
        return f" (day and month in either order; write the year first: {year_text}-{a:02}-{b:02} or {year_text}-{b:02}-{a:02})"
    return ""


def _bound_ms(number: int, name: str, given: str) -> int:
    if MIN_TIMESTAMP_S <= number < MAX_TIMESTAMP_S:
        return number * 1000
    if number < 0:
        raise InvalidInput(f"{name}: {given} is not a time in Unix milliseconds (0 to {MAX_AS_OF_MS})")
    if number > MAX_AS_OF_MS:  # SQLite integers stop at 2**63 - 1: refuse rather than crash in the query
        raise InvalidInput(f"{name} {_abbreviated(number)}: Unix milliseconds must be at most {MAX_AS_OF_MS}")
    return number


def _calendar_ms(value: date, name: str, *, end: bool = False) -> int:
    """A Python ``datetime`` that names its zone as the instant it is; a ``date`` as its first millisecond (with
    ``end`` its last), UTC. A naive datetime is refused: Python reads it as local time and refind reads times as UTC
    — either guess shifts it by the machine's offset without a word."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInput(
                f"{name}: {value.isoformat()} names no time zone; give an aware datetime "
                "(datetime(..., tzinfo=datetime.UTC), or datetime.now(datetime.UTC)), a date or Unix milliseconds"
            )
        return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    ms = (datetime(value.year, value.month, value.day, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
        milliseconds=1
    )
    return ms + 86_400_000 - 1 if end else ms


def date_bound(value: str | int | None, *, end: bool) -> int | None:
    """A search's date bound as Unix ms: an int passes through, a string is parsed (``end``: a bare date means its
    last millisecond); the one reading shared by a search's own bounds and the planner's outer ones."""
    if value is None:
        return None
    if isinstance(value, int):
        if isinstance(value, bool):
            raise InvalidInput(f"a date must be ISO 8601 or Unix ms, got {value!r}")
        return value
    return parse_date(value, end=end)


def parse_as_of(value: object, name: str = "as_of") -> int | None:
    """A search's ``as_of``: read as :func:`parse_when` reads every bound (a bare date: its last millisecond)."""
    return parse_when(value, name, end=True)
