"""What is kept of a removed request's ids: sealed under the database's key, where an id would tell its text.

A request stored without an id of its own gets one derived from its text — ``auto-…`` / ``auto+…`` (a replay's
groups, :mod:`refind_cli.auto_ids`), ``cli-…`` (``refind add TEXT``), ``api-…`` (``Memory.add``, MCP) — and its
messages' ids derive from it (:func:`refind_cli.derived_ids.message_id`). Such an id is a hash of the text without a key
(a chained ``auto+…`` is keyed under the secret below since m011, being chained on the piece before it, and is sealed
as the others all the same):
once forget or expire has removed the text, anyone reading ``refind inspect events`` or ``inspect tombstones`` could
check a guess ("my bank pin is 0000" … "9999") against it in milliseconds (a probe of round 24). So what is kept of a
removed request — the tombstone's request id and message ids, the audit log's events — holds them sealed: an
HMAC-SHA256 under the database's own secret (``secrets.tombstone_hmac``, migration m003), which never leaves the file.
A replay of the request is still refused: its ids are sealed the same way and compared. A request id given by the
caller (the platform's, ``--request-id``) tells nothing of the text and is kept as it is; message ids are sealed
whatever their request (a tombstone of a session does not say which request each message had).

Whoever holds the database file holds the key too, and can check a guess against the keyed hashes: sealing guards
what a listing shows, not the file.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import sqlite3

SEALED = "sealed:"  # follows the kind in a sealed request id: ``cli-sealed:<24 hex>``
# a request id derived from its request's text, as refind makes it: its kind, 20 hex digits of the hash, a replay's
# repeat suffix (an id the caller gave that merely begins so, "api-order-17", is the caller's own: kept as it is)
_DERIVED = re.compile(r"(auto-|auto\+|cli-|api-)[0-9a-f]{20}(?:-[0-9]+)?")


def key(conn: sqlite3.Connection) -> bytes:
    """The database's secret (migration m003_security_tombstone_key): never leaves the file."""
    return bytes(conn.execute("SELECT value FROM secrets WHERE name = 'tombstone_hmac'").fetchone()[0])


def seal(secret: bytes, value: str) -> str:
    """24 hex digits of HMAC-SHA256 of ``value`` under ``secret``."""
    return hmac.new(secret, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:24]


def text_derived(request_id: str) -> bool:
    """Whether a request id is one refind derived from its request's text (not sealed, not the caller's own)."""
    return _DERIVED.fullmatch(request_id) is not None


def request_id(secret: bytes, rid: str) -> str:
    """``rid`` as a removed request keeps it: sealed, its kind kept (``auto+`` ranges are looked up by kind), when
    derived from its text; else as it is."""
    derived = _DERIVED.fullmatch(rid)
    return rid if derived is None else f"{derived[1]}{SEALED}{seal(secret, rid)}"
