"""Ids of the requests a replay builds from message lines that carry no ``request_id``, and recognising such a
group again after the log it came from has grown.

Consecutive message lines of one user and session form a group (at most ``GROUP_SIZE`` messages), stored as the
request ``auto-<hash of the group>``; the n-th repeat of the same group later in the file gets ``-n`` after the hash
(a message said twice is stored twice). A re-run of the file derives the very same ids: nothing is stored twice.

A log that is appended to and replayed again breaks that alone: the session's last group grows (``a b c`` replayed,
then ``a b c d e``), its hash changes, and the whole group would be stored a second time — messages forgotten since
included. So a group also carries the id each of its shorter prefixes got when the group ended there (repeat suffix
and all: the lines before it are the same). When the group's own id is neither stored nor forgotten, the longest
prefix that is — stored, or named by a tombstone — is taken as that earlier group: it is skipped, and the messages
after it form a request whose id chains on the prefix's (``auto-<hash of the prefix's id and those messages>``).
That request is recognised, and split again, when the log grows further. A prefix stored past retention (awaiting the
sweep) counts as not stored, as its whole group would.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

Said = tuple[str, str, int | None]  # (role, content, said-at) of one message

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def prefix_ids(user_id: str, session_id: str, messages: Sequence[Said], *, after: str | None = None) -> list[str]:
    """The id of every prefix of the group — of its first message, its first two, …, all of them — each the hash of
    the compact JSON ``[user, session, [[role, content, said-at], …]]`` (``[user, session, after, […]]`` for the
    messages that follow the stored request ``after``), without a repeat suffix."""
    digest = _opened(user_id, session_id, after)
    ids = []
    for i, said in enumerate(messages):
        digest.update((("," if i else "") + _message(said)).encode("utf-8"))
        ids.append(_closed(digest))
    return ids


def auto_request_id(user_id: str, session_id: str, messages: Sequence[Said]) -> str:
    """The id of a request built without one: a hash of its payload, so a replay of it is recognised (the last of
    :func:`prefix_ids`, hashed once)."""
    digest = _opened(user_id, session_id, None)
    digest.update(",".join(_message(said) for said in messages).encode("utf-8"))
    return _closed(digest)


def _opened(user_id: str, session_id: str, after: str | None) -> Any:
    head = [user_id, session_id] if after is None else [user_id, session_id, after]
    return hashlib.sha256((_encode(head)[:-1] + ",[").encode("utf-8"))


def _closed(digest: Any) -> str:
    closed = digest.copy()
    closed.update(b"]]")
    return "auto-" + str(closed.hexdigest())[:20]


def _message(said: Said) -> str:
    """``[role, content, said-at]`` as json.dumps(ensure_ascii=False, compact) writes it, written out for plain str and
    int (or None) values (half the cost: every group of a replay is hashed once per message)."""
    role, content, ts = said
    if type(role) is not str or type(content) is not str or (ts is not None and type(ts) is not int):
        return _encode(list(said))
    return f"[{encode_basestring(role)},{encode_basestring(content)},{'null' if ts is None else ts}]"


class Repeats:
    """How often each auto id has been derived so far in one file (8 bytes of the hash per group; counts only for
    the rare repeats), so that a file of millions of groups is still read in little memory."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.repeats: dict[int, int] = {}

    def count(self, rid: str) -> int:
        """Record one more group with this id; the number of groups (this one included) that got it."""
        key = int(rid[5:21], 16)
        if key not in self.seen:
            self.seen.add(key)
            return 1
        self.repeats[key] = self.repeats.get(key, 1) + 1
        return self.repeats[key]

    def so_far(self, rid: str) -> int:
        """How many groups got this id so far (nothing recorded)."""
        key = int(rid[5:21], 16)
        return self.repeats.get(key, 1) if key in self.seen else 0


def _suffixed(rid: str, nth: int) -> str:
    return rid if nth == 1 else f"{rid}-{nth}"


def group_id(user_id: str, session_id: str, messages: Sequence[Said], repeats: Repeats) -> str:
    """The id of a group of a file (``-n`` after the hash for its n-th repeat), recorded in ``repeats``."""
    rid = auto_request_id(user_id, session_id, messages)
    return _suffixed(rid, repeats.count(rid))


def prefix_candidates(user_id: str, session_id: str, messages: Sequence[Said], repeats: Repeats) -> tuple[str, ...]:
    """The ids the group's shorter prefixes got, shortest first, had the group ended there when the file was replayed
    before — ``repeats`` holding the file's groups before this one (nothing recorded)."""
    return tuple(_suffixed(p, repeats.so_far(p) + 1) for p in prefix_ids(user_id, session_id, messages)[:-1])


Stone = tuple[int, int]  # (tombstone id, when) of a forgotten request
Known = dict[str, Stone | None]  # request ids found: None when stored, the tombstone when forgotten
Lookup = Callable[[str, Sequence[str]], Known]  # (user, request ids) -> which of them are known


@dataclass(frozen=True)
class Piece:
    """Messages ``start:stop`` of a group, known already as the request ``request_id``: stored (``stone`` None) or
    forgotten."""

    start: int
    stop: int
    request_id: str
    stone: Stone | None


@dataclass(frozen=True)
class Split:
    """A grown group: the prefixes known already (in order), and the request of the messages after them."""

    known: tuple[Piece, ...]
    start: int  # the first message of the new request
    request_id: str


def split_grown(
    user_id: str,
    session_id: str,
    messages: Sequence[Said],
    request_id: str,
    prefixes: Sequence[str],
    known: Known,
    lookup: Lookup,
) -> Split | None:
    """How a group whose id and prefixes' ids were looked up (``known``) is stored: None when it is stored as it is
    (its id known, or none of its prefixes), else the :class:`Split`. ``lookup`` looks up the chained ids of what
    follows a known prefix."""
    if request_id in known or not prefixes:
        return None
    pieces: list[Piece] = []
    start = 0
    while prefixes:
        found = next((k for k in range(len(prefixes), 0, -1) if prefixes[k - 1] in known), None)
        if found is None:
            break
        matched = prefixes[found - 1]
        pieces.append(Piece(start, start + found, matched, known[matched]))
        start += found
        ids = prefix_ids(user_id, session_id, messages[start:], after=matched)
        request_id, prefixes = ids[-1], ids[:-1]
        known = lookup(user_id, ids)
        if request_id in known:  # all that follows is known too: the store says stored or forgotten
            break
    return Split(tuple(pieces), start, request_id) if pieces else None
