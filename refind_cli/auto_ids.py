"""Ids of the requests a replay builds from message lines that carry no ``request_id``, and recognising such a
group again after the log it came from has grown.

Consecutive message lines of one user and session form a group (at most ``GROUP_SIZE`` messages), stored as the
request ``auto-<hash of the group>``; the n-th repeat of the same group later in the file gets ``-n`` after the hash
(a message said twice is stored twice). A re-run of the file derives the very same ids: nothing is stored twice.

A log that is appended to and replayed again breaks that alone: the session's last group grows (``a b c`` replayed,
then ``a b c d e``), its hash changes, and the whole group would be stored a second time — messages forgotten since
included. So a group also carries the id each of its shorter prefixes got when the group ended there (repeat suffix
and all: the lines before it are the same). When the group's own id is neither stored nor forgotten, a prefix that
is — stored, or named by a tombstone — is taken as that earlier group (the one whose chain below covers the most of
the group, the longest among equals): it is skipped, and the messages after it form a request whose id chains on
the prefix's (``auto+<hash of the prefix's id and those messages>``).
That request is recognised, and split again, when the log grows further. A prefix stored past retention (swept, or
awaiting the sweep) counts as not stored, as its whole group would: it is stored again — but a request chained on it
and still kept is recognised (with a retention, the ids chained on each prefix are looked up when no prefix is known).

A grown group is then counted among the file's groups as each of its shorter prefixes too: its earlier group was
counted so by the replay that stored it, and a later group of the same messages (the same "ok" said again after
the log grew) must get the next repeat suffix, never an id that one of the grown group's prefixes may claim (it
would be a duplicate of that group, and so lost; or, replayed again, it would be taken for the grown group's
earlier group). The writer therefore numbers the repeats itself (:func:`renumbered`), in file order: a group's id
is what its parser gave it unless a grown group came before it. A group is split the same way at every replay once
it has grown (its pieces stay known: stored, or named by a tombstone), so the numbering holds; a piece expired by
retention and swept is no longer known, and the file's later groups may then be stored again.

A chained id is computed here as it always was — a hash of the text without a key, chained on the computed id of the
piece before it — but never stored so: the request is stored as :func:`stored_chained`, that id keyed under the
database's secret (:mod:`refind_cli.sealed`). Computed alone, a kept chained id (and its messages' ids) would confirm
a guess of a forgotten piece before it in milliseconds — a hash of the forgotten piece's id, itself a hash of its text.
The replay translates between the two at one seam (``replay._Chains``: every lookup of a computed id asks for its
stored form, and for the unkeyed form a tombstone of an older refind holds).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from . import sealed

Said = tuple[str, str, int | None]  # (role, content, said-at) of one message
CHAINED = "auto+"  # the start of a chained request's id (what follows a known prefix): ``auto+<hash>``

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def prefix_ids(user_id: str, session_id: str, messages: Sequence[Said], *, after: str | None = None) -> list[str]:
    """The id of every prefix of the group — of its first message, its first two, …, all of them — each the hash of
    the compact JSON ``[user, session, [[role, content, said-at], …]]`` (``[user, session, after, […]]`` for the
    messages that follow the stored request ``after``), without a repeat suffix."""
    digest = _opened(user_id, session_id, after)
    tag = "auto-" if after is None else CHAINED
    ids = []
    for i, said in enumerate(messages):
        digest.update((("," if i else "") + _message(said)).encode("utf-8"))
        ids.append(_closed(digest, tag))
    return ids


def stored_chained(secret: bytes, rid: str) -> str:
    """The id a chained request ``rid`` (as :func:`prefix_ids` computes it) is stored under: ``auto+`` and 20 hex
    digits of its HMAC under the database's secret (:func:`refind_cli.sealed.seal`), so that a kept chained id tells
    nothing of the pieces it is chained on. The same shape as ``rid``: looked up by kind (``auto+``), sealed as any
    text-derived id when it is forgotten."""
    return CHAINED + sealed.seal(secret, rid)[:20]


def auto_request_id(user_id: str, session_id: str, messages: Sequence[Said]) -> str:
    """The id of a request built without one: a hash of its payload, so a replay of it is recognised (the last of
    :func:`prefix_ids`, hashed once)."""
    digest = _opened(user_id, session_id, None)
    digest.update(",".join(_message(said) for said in messages).encode("utf-8"))
    return _closed(digest, "auto-")


def apart_request_id(user_id: str, session_id: str, group: str, messages: Sequence[Said]) -> str:
    """The id of what a replay stores of the group ``group`` (its id) when some of its messages are stored already
    (``replay._stored_apart``: a line an earlier replay refused): a hash of ``[user, session, "apart:<group>", […]]``,
    never the payload a group of the file hashes — a later group of the file made of the very same lines is another
    group, stored again (as a replay into a new database stores it), not a duplicate of these. The same group
    replayed again derives the same id: nothing is stored twice."""
    digest = _opened(user_id, session_id, "apart:" + group)
    digest.update(",".join(_message(said) for said in messages).encode("utf-8"))
    return _closed(digest, "auto-")


def _opened(user_id: str, session_id: str, after: str | None) -> Any:
    head = [user_id, session_id] if after is None else [user_id, session_id, after]
    return hashlib.sha256((_encode(head)[:-1] + ",[").encode("utf-8"))


def _closed(digest: Any, tag: str) -> str:
    closed = digest.copy()
    closed.update(b"]]")
    return tag + str(closed.hexdigest())[:20]


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


_BASE = len("auto-") + 20  # an auto id without its repeat suffix


def renumbered(rid: str, repeats: Repeats) -> str:
    """A group's id given its repeat suffix again by ``repeats`` (recorded there): what its parser gave it, unless a
    grown group before it was counted as the earlier group it began with (:func:`split_grown`)."""
    base = rid[:_BASE]
    return _suffixed(base, repeats.count(base))


def group_id(user_id: str, session_id: str, messages: Sequence[Said], repeats: Repeats) -> str:
    """The id of a group of a file (``-n`` after the hash for its n-th repeat), recorded in ``repeats``."""
    rid = auto_request_id(user_id, session_id, messages)
    return _suffixed(rid, repeats.count(rid))


def prefix_candidates(
    user_id: str, session_id: str, messages: Sequence[Said], repeats: Repeats, *, hashed: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The ids the group's shorter prefixes got, shortest first, had the group ended there when the file was replayed
    before — ``repeats`` holding the file's groups before this one (nothing recorded). ``hashed``: the prefixes'
    :func:`prefix_ids` (all but the group's own), derived already."""
    if hashed is None:
        hashed = prefix_ids(user_id, session_id, messages)[:-1]
    return tuple(_suffixed(p, repeats.so_far(p) + 1) for p in hashed)


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
    again: Piece | None = None  # the messages before the known pieces, stored before and expired since: stored again


def split_grown(
    user_id: str,
    session_id: str,
    messages: Sequence[Said],
    request_id: str,
    prefixes: Sequence[str],
    known: Known,
    lookup: Lookup,
    *,
    after_expired: bool = False,
    counted: Callable[[str], bool] = lambda rid: False,
) -> Split | None:
    """How a group whose id and prefixes' ids were looked up (``known``) is stored: None when it is stored as it is
    (its id known, or none of its prefixes), else the :class:`Split`. ``lookup`` looks up the chained ids of what
    follows a known prefix (computed ids, answered under them: the caller finds their stored forms). The split's ids
    are computed ids too. ``after_expired`` (the store has a retention and the session a chained request, stored or
    forgotten): when no prefix is known, the requests chained on each prefix are looked up too — a prefix that
    expired since (swept, or awaiting the sweep) is stored again (``again``), as any expired request a replay meets,
    and what was chained on it and is kept, or was forgotten, is recognised. ``counted``: whether a group of the file
    before this one got that id (its repeat suffix given; then it is not taken for a group of this one's messages).

    The known prefix whose chain covers the most of the group is taken (the longest of those that cover as much): a
    group replayed again after it grew was stored as its earlier group and chained requests, all known; a later group
    of the file equal to one of its prefixes may have taken that prefix's id since (the file went on after the
    group), but nothing was ever chained on it for this group."""
    if request_id in known:
        return None
    best: Split | None = None
    covered = -1
    for k in range(len(prefixes), 0, -1):
        if prefixes[k - 1] in known:
            split, cover = _chain(
                user_id, session_id, messages, Piece(0, k, prefixes[k - 1], known[prefixes[k - 1]]), lookup, counted
            )
            if cover > covered:
                best, covered = split, cover
            if cover == len(messages):
                break
    if best is None and after_expired and prefixes:
        head = _after_expired(user_id, session_id, messages, prefixes, lookup)
        if head is not None:
            split, _ = _chain(user_id, session_id, messages, head, lookup, counted)
            return Split(split.known[1:], split.start, split.request_id, head)
    return best


def _after_expired(
    user_id: str, session_id: str, messages: Sequence[Said], prefixes: Sequence[str], lookup: Lookup
) -> Piece | None:
    """The longest prefix that a known request (stored or forgotten) was chained on, its own id unknown (expired)."""
    chains = [prefix_ids(user_id, session_id, messages[k:], after=prefixes[k - 1]) for k in range(1, len(prefixes) + 1)]
    found = lookup(user_id, [rid for ids in chains for rid in ids])
    k = next((k for k in range(len(prefixes), 0, -1) if any(rid in found for rid in chains[k - 1])), None)
    return None if k is None else Piece(0, k, prefixes[k - 1], None)


def _chain(
    user_id: str,
    session_id: str,
    messages: Sequence[Said],
    first: Piece,
    lookup: Lookup,
    counted: Callable[[str], bool] = lambda rid: False,
) -> tuple[Split, int]:
    """The split that begins with the known prefix ``first`` and follows the requests chained on it, and how many of
    the group's messages it finds known (all of them when the request after the last piece is known too).

    Where no request is chained on the last piece, what follows it may be a group of its own stored already: two logs
    of one session replayed one by one, then concatenated (the second log's first group was stored as
    ``auto-<hash of its messages>``, chained on nothing). So the ids the messages after the piece would have as a
    group of their own are looked up too (:func:`_own_ids`: only messages that each carry a said-at, which their ids
    hash, in a group where no two different messages share a said-at, so a new "ok" is never taken for an old one —
    with a session's date on every line, a later "ok" matched an earlier one's group and was lost; none a group of the
    file before took: ``counted``), the longest known taken as the next piece; the chain goes on from it."""
    pieces = [first]
    start = first.stop
    said_then: dict[int, set[tuple[str, str]]] = {}
    for role, content, at in messages:
        if at is not None:
            said_then.setdefault(at, set()).add((role, content))
    told_apart = all(len(v) == 1 for v in said_then.values())  # each said-at names one message (a repeat is its copy)
    while True:
        ids = prefix_ids(user_id, session_id, messages[start:], after=pieces[-1].request_id)
        own = _own_ids(user_id, session_id, messages[start:], pieces, counted) if told_apart else []
        known = lookup(user_id, [*ids, *(rid for rid in own if rid)])
        if ids[-1] in known:  # all that follows is known too: the store says stored or forgotten
            return Split(tuple(pieces), start, ids[-1]), len(messages)
        found = next((k for k in range(len(ids) - 1, 0, -1) if ids[k - 1] in known), None)
        if found is not None:
            pieces.append(Piece(start, start + found, ids[found - 1], known[ids[found - 1]]))
            start += found
            continue
        found = next((k for k in range(len(own), 0, -1) if own[k - 1] in known), None)
        if found is None:
            return Split(tuple(pieces), start, ids[-1]), start
        if start + found == len(messages):  # all that follows is that group: it is the request (stored, or forgotten)
            return Split(tuple(pieces), start, own[found - 1]), len(messages)
        pieces.append(Piece(start, start + found, own[found - 1], known[own[found - 1]]))
        start += found


def _own_ids(
    user_id: str, session_id: str, said: Sequence[Said], pieces: Sequence[Piece], counted: Callable[[str], bool]
) -> list[str]:
    """The ids the first messages of ``said`` would have as a group of their own (:func:`prefix_ids`, no repeat
    suffix): as many as lead it carrying a said-at; "" for one that is already one of ``pieces`` or that a group of
    the file before got (``counted``): a log concatenated twice is another group, stored again."""
    timed = next((i for i, m in enumerate(said) if m[2] is None), len(said))
    taken = {p.request_id for p in pieces}
    ids = prefix_ids(user_id, session_id, said[:timed])
    return [rid if rid not in taken and not counted(rid) else "" for rid in ids]
