"""A message's id, derived from where it came from: (user, request, index). Its own module, so that a migration
(m011, which renames requests) derives ids as the store does without importing the store."""

from __future__ import annotations

import hashlib
from json.encoder import encode_basestring_ascii


def message_id(user_id: str, request_id: str, index: int) -> str:
    """A message's stable id: derived from its source, never from how turns are grouped when read.

    The source is encoded as a JSON array, so no choice of ids can make two sources encode alike (the first
    derivation joined them with ``\\x1f``: user ``a\\x1fb`` + request ``c`` met user ``a`` + request ``b\\x1fc``).
    Stored ids are never re-derived: a database written before keeps its ids, and a replay is matched by its
    (user, request) row and payload hash, not by ids."""
    return message_ids(user_id, request_id, index, index + 1)[0]


def message_ids(user_id: str, request_id: str, start: int, stop: int) -> list[str]:
    """``[message_id(user_id, request_id, i) for i in range(start, stop)]``, the same bytes hashed: the JSON array's
    prefix ``["user","request",`` is encoded and hashed once, then each index is appended to a copy of that hash
    (a replay derives one id per message; json.dumps per id was an eighth of its time)."""
    prefix = hashlib.sha256(f"[{_ascii_json(user_id)},{_ascii_json(request_id)},".encode())
    out = []
    for i in range(start, stop):
        h = prefix.copy()
        h.update(b"%d]" % i)
        out.append(h.hexdigest()[:24])
    return out


# json.dumps([...], ensure_ascii=True, separators=(",", ":")) writes a string exactly as this does
_ascii_json = encode_basestring_ascii
