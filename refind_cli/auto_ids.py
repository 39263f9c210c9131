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
and still kept is recognised. With a retention, the chain is followed through the pieces that were ever stored (an
``add`` event names each) however many levels deep: the expired ones are stored again under their ids, what is kept
(or forgotten) after them is not stored a second time.

Files joined with ``cat`` join groups too: ``a b`` at the end of one file and ``c d`` at the start of the next are
one group ``a b c d``. After its known prefix (the first file's group), what follows is also matched as a group of
its own (``plain``: ``auto-`` with the repeat suffix it gets at this place in the file, numbered after the group's
own prefixes and the other files' groups before it) that was stored after the group's first piece (the same "ok"
in an older file of the session is never taken for one appended since), then followed by what was chained on it.

A group stored by a replay that reported invalid lines inside it is remembered with where they were (the store's
``replay_gaps``): once they are fixed, the group without them is matched to it (:func:`fixed_lines`) and only the
fixed lines are stored, each run chained on the stored group and its place (``auto+``).

A grown group is then counted among the file's groups as each of its shorter prefixes too: its earlier group was
counted so by the replay that stored it, and a later group of the same messages (the same "ok" said again after
the log grew) must get the next repeat suffix, never an id that one of the grown group's prefixes may claim (it
would be a duplicate of that group, and so lost; or, replayed again, it would be taken for the grown group's
earlier group). The writer therefore numbers the repeats itself (:func:`renumbered`), in file order: a group's id
is what its parser gave it unless a grown group came before it. A group is split the same way at every replay once
it has grown (its pieces stay known: stored, or named by a tombstone), so the numbering holds; a piece expired by
retention and swept is no longer known, and the file's later groups may then be stored again. A group of another
file held by a joined group is counted as that file's replay counted it (:func:`count_split`).

What identifies a group is its user, session, messages and place among equal groups: the same group in two files is
one request, and so is a joined group's piece equal to another file's group at the same place.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

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


def auto_request_id(user_id: str, session_id: str, messages: Sequence[Said]) -> str:
    """The id of a request built without one: a hash of its payload, so a replay of it is recognised (the last of
    :func:`prefix_ids`, hashed once)."""
    digest = _opened(user_id, session_id, None)
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


def renumbered(rid: str, repeats: Repeats) -> str:
    """A group's id given its repeat suffix again by ``repeats`` (recorded there): what its parser gave it, unless a
    grown group before it was counted as the earlier group it began with (:func:`split_grown`)."""
    base = rid[: len("auto-") + 20]
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
Ever = Callable[[str, Sequence[str]], set[str]]  # (user, request ids) -> which of them were ever stored
Added = Callable[[str, Sequence[str]], dict[str, tuple[int, int]]]  # (user, ids) -> (first, last) add of each stored


@dataclass(frozen=True)
class Piece:
    """Messages ``start:stop`` of a group, known already as the request ``request_id``: stored (``stone`` None) or
    forgotten; or (``again``) stored once and expired since, so stored again under its id. ``plain``: its id is a
    group's own (``auto-…``), not chained: a group of another file, joined after the one before it (``cat``)."""

    start: int
    stop: int
    request_id: str
    stone: Stone | None
    again: bool = False
    plain: bool = False


@dataclass(frozen=True)
class Split:
    """A grown group: the pieces known already (in order; the expired ones among them are stored again), and the
    request of the messages after them (None when none is left)."""

    known: tuple[Piece, ...]
    start: int  # the first message of the new request
    request_id: str | None


def split_grown(
    user_id: str,
    session_id: str,
    messages: Sequence[Said],
    request_id: str,
    prefixes: Sequence[str],
    known: Known,
    lookup: Lookup,
    *,
    repeats: Repeats | None = None,
    added: Added | None = None,
    ever: Ever | None = None,
) -> Split | None:
    """How a group whose id and prefixes' ids were looked up (``known``) is stored: None when it is stored as it is
    (its id known, or none of its prefixes), else the :class:`Split`. ``lookup`` looks up the chained ids of what
    follows a known prefix; with ``repeats`` (the file's groups before this one) and ``added``, what follows is also
    matched as a group of its own (``plain``: files joined with ``cat``, the second file's group stored by a replay of
    that file) — one stored after the group's first piece was first stored (``added``): a group of another file of
    the session stored before (the same "ok" said there, in its own group) is never taken for this group's new
    messages.

    ``ever`` (the store has a retention and the session a chained request, stored or forgotten): which ids were ever
    stored. A piece stored once and expired since (swept, or awaiting the sweep) is then followed too, however many
    levels deep: when a piece after it is kept (or forgotten), the expired ones before it are stored again, as any
    expired request a replay meets, and the kept one is not stored a second time.

    The known prefix whose chain covers the most of the group is taken (the longest of those that cover as much): a
    group replayed again after it grew was stored as its earlier group and chained requests, all known; a later group
    of the file equal to one of its prefixes may have taken that prefix's id since (the file went on after the
    group), but nothing was ever chained on it for this group."""
    if request_id in known:
        return None
    # (made when a prefix is known) the group counts as each of its shorter prefixes (count_split): a group of its
    # own inside it is numbered after them
    numbering: _Numbering | None = None
    best: Split | None = None
    covered = -1
    for k in range(len(prefixes), 0, -1):
        if prefixes[k - 1] in known:
            numbering = numbering or _numbering(repeats, added, prefixes)
            first = Piece(0, k, prefixes[k - 1], known[prefixes[k - 1]])
            split, cover = _chain(user_id, session_id, messages, first, lookup, numbering, ever)
            if cover > covered:
                best, covered = split, cover
            if cover == len(messages):
                break
    if best is None and ever is not None and prefixes:
        stored = ever(user_id, prefixes)  # none of them is known: each of these expired since
        for k in range(len(prefixes), 0, -1):
            if prefixes[k - 1] in stored:
                numbering = numbering or _numbering(repeats, added, prefixes)
                first = Piece(0, k, prefixes[k - 1], None, again=True)
                split, cover = _chain(user_id, session_id, messages, first, lookup, numbering, ever)
                kept = cover == len(messages) or any(not piece.again for piece in split.known)
                if kept and cover > covered:  # (all of it expired: stored whole, as any expired request)
                    best, covered = split, cover
    return best


def chain_after(
    user_id: str, session_id: str, messages: Sequence[Said], first: Piece, lookup: Lookup
) -> tuple[Split, int]:
    """The split of a group that begins with the known piece ``first``, following the requests chained on it."""
    return _chain(user_id, session_id, messages, first, lookup, None, None)


@dataclass(frozen=True)
class Fixed:
    """A group stored by an earlier replay without its invalid lines, which are valid now: the stored group's id and
    what the store says of it, and each run of fixed lines (start, stop in the group; the id it is stored under:
    chained on the stored group and its place, ``auto+``)."""

    request_id: str
    stone: Stone | None
    fixes: tuple[tuple[int, int, str], ...]
    span: int  # the group's messages up to the stored group's last (fixed lines included)


def fixed_lines(
    user_id: str,
    session_id: str,
    messages: Sequence[Said],
    stored: Sequence[tuple[str, int, tuple[tuple[int, int], ...]]],
    repeats: Repeats,
    lookup: Lookup,
) -> Fixed | None:
    """The stored group (request id, messages, runs of invalid lines: (messages before, lines)) this group is, once
    the lines of every run are taken out of it: its id (repeat suffix and all, as the file gives it here) and that
    group's messages must match. None when none is, or it is no longer known (expired: stored whole again)."""
    for request_id, count, runs in stored:
        inserted = sum(lines for _, lines in runs)
        if len(messages) < count + inserted or not runs:
            continue
        fixes, shift = [], 0
        for before, lines in runs:
            fixes.append((before + shift, before + shift + lines))
            shift += lines
        dropped = {i for start, stop in fixes for i in range(start, stop)}
        kept = [said for i, said in enumerate(messages[: count + inserted]) if i not in dropped]
        base = auto_request_id(user_id, session_id, kept)
        if _suffixed(base, repeats.so_far(base) + 1) != request_id:
            continue
        found = lookup(user_id, [request_id])
        if request_id not in found:
            return None
        ids = tuple(
            (start, stop, prefix_ids(user_id, session_id, messages[start:stop], after=f"{request_id}@{before}")[-1])
            for (start, stop), (before, _) in zip(fixes, runs)
        )
        return Fixed(request_id, found[request_id], ids, count + inserted)
    return None


def _chain(
    user_id: str,
    session_id: str,
    messages: Sequence[Said],
    first: Piece,
    lookup: Lookup,
    numbering: _Numbering | None,
    ever: Ever | None,
) -> tuple[Split, int]:
    """The split that begins with the piece ``first`` and follows the requests chained on it, and how many of the
    group's messages it finds known (all of them when the request after the last piece is known too). At each step
    a chained request known is taken first, then (``ever``) one stored once and expired, then (``repeats``) a group
    of its own."""
    pieces = [first]
    start = first.stop
    closed: list[str] = []  # the groups of other files before the last one found, as count_split counts them
    last: Piece | None = None  # the last of them found
    while True:
        ids = prefix_ids(user_id, session_id, messages[start:], after=pieces[-1].request_id)
        plain: list[str] = []
        if numbering is not None:  # had a group of its own begun here, the one before it would end here
            ending = [] if last is None else _counted(user_id, session_id, messages, last, start)
            plain = numbering.candidates(user_id, session_id, messages[start:], [*closed, *ending])
        known = lookup(user_id, [*ids, *plain])
        if ids[-1] in known:  # all that follows is known too: the store says stored or forgotten
            return Split(tuple(pieces), start, ids[-1]), len(messages)
        found = _longest(ids, known)
        if found is not None:
            pieces.append(Piece(start, start + found, ids[found - 1], known[ids[found - 1]]))
            start += found
            continue
        expired = _longest(ids, ever(user_id, ids)) if ever is not None else None
        if expired is not None:
            pieces.append(Piece(start, start + expired, ids[expired - 1], None, again=True))
            start += expired
            continue
        whole = _longest(plain, known, whole=True)
        if whole is not None and numbering is not None:  # stored after the group's first piece: of a later file
            when = numbering.added(user_id, [pieces[0].request_id, plain[whole - 1]])
            before, after = when.get(pieces[0].request_id), when.get(plain[whole - 1])
            if before is None or after is None or after[1] < before[0]:
                whole = None
        if whole is None:
            return Split(tuple(pieces), start, ids[-1]), start
        if last is not None:
            closed += _counted(user_id, session_id, messages, last, start)
        last = Piece(start, start + whole, plain[whole - 1], known[plain[whole - 1]], plain=True)
        pieces.append(last)
        start += whole
        if start == len(messages):
            return Split(tuple(pieces), start, None), start


_BASE = len("auto-") + 20  # an auto id without its repeat suffix


@dataclass(frozen=True)
class _Numbering:
    """The repeats of the file before a group, and what the group counts as (count_split): each of its shorter
    prefixes."""

    repeats: Repeats
    counted: Counter[str]
    added: Added

    def candidates(self, user_id: str, session_id: str, messages: Sequence[Said], before: Sequence[str]) -> list[str]:
        """:func:`plain_candidates` numbered after the group's prefixes and the groups ``before`` (ids without a
        repeat suffix) it holds before them."""
        more = Counter(before)
        return [
            _suffixed(p, self.repeats.so_far(p) + self.counted[p] + more[p] + 1)
            for p in prefix_ids(user_id, session_id, messages)
        ]


def _numbering(repeats: Repeats | None, added: Added | None, prefixes: Sequence[str]) -> _Numbering | None:
    return (
        None if repeats is None or added is None else _Numbering(repeats, Counter(p[:_BASE] for p in prefixes), added)
    )


def _counted(user_id: str, session_id: str, messages: Sequence[Said], piece: Piece, stop: int) -> list[str]:
    """What the group of another file that begins with the plain ``piece`` and ends at ``stop`` counts as: its own id
    when it is the piece alone (stored whole), else each of its prefixes (it grew: a prefix and chained pieces)."""
    if piece.stop == stop:
        return [piece.request_id[:_BASE]]
    return prefix_ids(user_id, session_id, messages[piece.start : stop])


def _longest(ids: Sequence[str], found: Known | set[str], *, whole: bool = False) -> int | None:
    """How many messages the longest of ``ids`` found covers (the last one, all of them, only when ``whole``)."""
    last = len(ids) if whole else len(ids) - 1
    return next((k for k in range(last, 0, -1) if ids[k - 1] in found), None)


def plain_candidates(user_id: str, session_id: str, messages: Sequence[Said], repeats: Repeats) -> list[str]:
    """The ids the groups of ``messages``' prefixes (the whole included) would get next in the file (nothing
    recorded): what a replay of another file gave them, had they been a group of their own there (``cat``)."""
    return [_suffixed(p, repeats.so_far(p) + 1) for p in prefix_ids(user_id, session_id, messages)]


def count_split(
    user_id: str, session_id: str, messages: Sequence[Said], split: Split, candidates: Sequence[str], repeats: Repeats
) -> None:
    """Count a split group in ``repeats`` as the replays that stored its pieces counted them, so that the file's later
    groups keep their numbers: as each of its shorter prefixes (``candidates``), and each group of another file it
    holds (a ``plain`` piece and the pieces chained on it, up to the next plain one) as its own group, and as its
    prefixes when pieces were chained on it (that group had grown)."""
    for candidate in candidates:
        repeats.count(candidate)
    plain = [piece for piece in split.known if piece.plain]
    for piece, stop in zip(plain, [*(p.start for p in plain[1:]), len(messages)]):
        for rid in _counted(user_id, session_id, messages, piece, stop):
            repeats.count(rid)
