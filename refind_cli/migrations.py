"""The schema, as one ordered list of small named migrations applied on open.

Never rename, reorder or edit a migration that has shipped: append a new one. ``_migrations`` records what ran.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from .errors import NotFound, OlderDatabase, RefindError

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[tuple[str, Migration]] = []


# Migrations that shipped on main and were withdrawn with what they served (the replay11 merge, 124e2a7, reverted by
# f07859f; 143c6da wrote them too): a database written in between records them beside m001-m007, and was refused as a
# newer refind's ("upgrade refind": there is none). The next open that upgrades undoes them — the statement drops what
# each made, its row goes — before the migrations it lacks run. replay_gaps held text-derived request ids unsealed,
# and nothing of this version keeps it in step with forget and expire.
WITHDRAWN = {
    "m008_add_events_by_request": "DROP INDEX IF EXISTS events_add_by_request",
    "m009_replay_gaps": "DROP TABLE IF EXISTS replay_gaps",
}


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append((fn.__name__, fn))
    return fn


def _script(conn: sqlite3.Connection, sql: str) -> None:
    """Run ``;``-separated statements inside the caller's transaction (``executescript`` would commit it)."""
    for statement in sql.split(";"):
        if statement.strip():
            conn.execute(statement)


@migration
def m001_core(conn: sqlite3.Connection) -> None:
    _script(
        conn,
        """
        -- One row per Add request: the idempotency key is (user_id, request_id), never request_id alone.
        CREATE TABLE requests (
            user_id       TEXT NOT NULL,
            request_id    TEXT NOT NULL,
            session_id    TEXT NOT NULL,
            payload_hash  TEXT NOT NULL,
            message_count INTEGER NOT NULL,
            recorded_at   INTEGER NOT NULL,
            PRIMARY KEY (user_id, request_id)
        ) WITHOUT ROWID;

        -- Messages verbatim. seq is arrival order, id is stable: derived from (user, request, index).
        CREATE TABLE messages (
            seq         INTEGER PRIMARY KEY,
            id          TEXT NOT NULL UNIQUE,
            user_id     TEXT NOT NULL,
            session_id  TEXT NOT NULL,
            request_id  TEXT NOT NULL,
            idx         INTEGER NOT NULL,
            role        TEXT NOT NULL,
            content     TEXT NOT NULL,
            said_at     INTEGER,
            recorded_at INTEGER NOT NULL,
            FOREIGN KEY (user_id, request_id) REFERENCES requests (user_id, request_id) ON DELETE CASCADE
        );
        CREATE INDEX messages_by_user ON messages (user_id, seq);
        CREATE INDEX messages_by_session ON messages (user_id, session_id);
        CREATE INDEX messages_by_request ON messages (user_id, request_id);
        CREATE INDEX messages_by_recorded ON messages (recorded_at);

        -- A per-user counter bumped by every mutation of that user's data: caches key on it.
        CREATE TABLE users (
            user_id TEXT PRIMARY KEY,
            version INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;

        -- The audit log: every mutation appends one event. Never message text.
        CREATE TABLE events (
            id         INTEGER PRIMARY KEY,
            at         INTEGER NOT NULL,
            kind       TEXT NOT NULL,
            user_id    TEXT,
            session_id TEXT,
            request_id TEXT,
            rows       INTEGER NOT NULL DEFAULT 0,
            detail     TEXT
        );
        CREATE INDEX events_by_user ON events (user_id, id);

        -- What forget removed: scope, ids, counts and content hashes. Never message text.
        CREATE TABLE tombstones (
            id             INTEGER PRIMARY KEY,
            at             INTEGER NOT NULL,
            scope          TEXT NOT NULL,
            user_id        TEXT NOT NULL,
            session_id     TEXT,
            request_id     TEXT,
            rows           INTEGER NOT NULL,
            message_ids    TEXT NOT NULL,
            content_hashes TEXT NOT NULL
        );
        CREATE INDEX tombstones_by_user ON tombstones (user_id, request_id);

        -- Stored planner runs, re-viewable with `refind inspect search ID`.
        CREATE TABLE searches (
            id                TEXT PRIMARY KEY,
            user_id           TEXT NOT NULL,
            at                INTEGER NOT NULL,
            query             TEXT NOT NULL,
            mode              TEXT NOT NULL,
            model             TEXT,
            duration_ms       REAL NOT NULL,
            llm_calls         INTEGER NOT NULL DEFAULT 0,
            prompt_tokens     INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            cost              REAL,
            returned_ids      TEXT NOT NULL,
            trace             TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX searches_by_user ON searches (user_id, at);
        """,
    )


def apply(conn: sqlite3.Connection, now_ms: int) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction. Returns the names applied."""
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    _refuse_newer(done)
    if all(name in done for name, _ in MIGRATIONS) and not done & WITHDRAWN.keys():
        return []
    applied = []
    conn.execute("BEGIN IMMEDIATE")  # serialise concurrent first opens; re-read under the lock
    try:
        done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
        for name in sorted(done & WITHDRAWN.keys()):  # undone first: the file's schema then is m001-m007's
            conn.execute(WITHDRAWN[name])
            conn.execute("DELETE FROM _migrations WHERE name = ?", (name,))
            conn.execute(
                "INSERT INTO events (at, kind, rows, detail) VALUES (?, 'migrate', 0, ?)", (now_ms, f"{name} undone")
            )
            applied.append(f"{name} undone")
        for name, fn in MIGRATIONS:
            if name in done:
                continue
            fn(conn)
            conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, now_ms))
            conn.execute("INSERT INTO events (at, kind, rows, detail) VALUES (?, 'migrate', 0, ?)", (now_ms, name))
            applied.append(name)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return applied


EMPTY = "the file is empty, not a refind database; nothing was changed (refind add creates one)"


def refuse_foreign(conn: sqlite3.Connection) -> None:
    """RefindError when the file is a SQLite database of another program (tables, but no ``_migrations``): refind
    neither adds its tables to it nor turns it to WAL. An empty database (a new or zero-byte file) is not refused."""
    # one read: another process's first open may create _migrations between two (its tables alone then refused
    # a new refind database as another program's)
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    if tables and "_migrations" not in tables:
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise RefindError(
            f"not a refind database but another program's (tables {shown}); nothing was changed — give --db the "
            "path of a refind database, or of a new file"
        )


def refuse_not_refind(conn: sqlite3.Connection) -> None:
    """For a reader that must not write: NotFound when the file holds no database (zero bytes, or no tables),
    RefindError when it is another program's. Reads only."""
    refuse_foreign(conn)
    if not _has_migrations(conn):
        raise NotFound(EMPTY)


def refuse_unknown(conn: sqlite3.Connection) -> set[str]:
    """For a reader of the whole file (``inspect --check``, ``backup``): :func:`refuse_not_refind`, and RefindError
    when a newer refind wrote it (an older schema is read as it is). The migrations done. Reads only."""
    refuse_not_refind(conn)
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    _refuse_newer(done)
    return done


def check_current(conn: sqlite3.Connection) -> None:
    """For a reader that must not write (``refind inspect``): :func:`refuse_unknown`, and OlderDatabase when the
    schema is older than this version's. Reads only."""
    done = refuse_unknown(conn)
    missing = [name for name, _ in MIGRATIONS if name not in done]
    if missing:
        raise OlderDatabase(
            f"written by an older refind (schema version {len(done - WITHDRAWN.keys())}; this version's is "
            f"{len(MIGRATIONS)}); this "
            "command changes nothing; any other but refind backup upgrades it, for good (add, search, serve, mcp, "
            "export, expire, forget): refind backup copies it as it is first"
        )


def _has_migrations(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'").fetchone() is not None
    )


def _refuse_newer(done: set[str]) -> None:
    unknown = sorted(done - {name for name, _ in MIGRATIONS} - WITHDRAWN.keys())
    if unknown:  # a newer refind's schema: this version's writes would not keep what that one added
        raise RefindError(
            f"written by a newer refind (migration{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} unknown to "
            "this version); upgrade refind to use it — nothing was changed"
        )


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM _migrations").fetchone()[0])


@migration
def m002_search_index(conn: sqlite3.Connection) -> None:
    # Persisted per-user BM25 indexes: a cache derived from messages, rebuilt whenever missing.
    # Every mutation of a user bumps users.version; the triggers then delete that user's indexes in the same
    # transaction, so nothing derived from changed, forgotten or expired messages outlives the change.
    conn.execute(
        """
        CREATE TABLE search_index (
            user_id   TEXT NOT NULL,
            config    TEXT NOT NULL,
            version   INTEGER NOT NULL,
            turns     INTEGER NOT NULL,
            built_at  INTEGER NOT NULL,
            blob      BLOB NOT NULL,
            PRIMARY KEY (user_id, config)
        ) WITHOUT ROWID
        """
    )
    # (triggers hold ';' inside BEGIN … END, so they cannot go through _script)
    conn.execute(
        "CREATE TRIGGER search_index_stale_on_bump AFTER UPDATE OF version ON users "
        "BEGIN DELETE FROM search_index WHERE user_id = NEW.user_id; END"
    )
    conn.execute(
        "CREATE TRIGGER search_index_stale_on_user_delete AFTER DELETE ON users "
        "BEGIN DELETE FROM search_index WHERE user_id = OLD.user_id; END"
    )


@migration
def m003_security_tombstone_key(conn: sqlite3.Connection) -> None:
    # A per-database secret for the keyed hashes in tombstones (HMAC-SHA256): an unsalted SHA-256 of a short message
    # ("yes", "My PIN is 4417") is found by guessing in milliseconds from `refind inspect tombstones`. The hashes
    # written before are unkeyed and cannot be re-keyed (the text is gone): they are dropped.
    conn.execute("CREATE TABLE secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
    conn.execute("INSERT INTO secrets (name, value) VALUES ('tombstone_hmac', randomblob(32))")
    conn.execute("UPDATE tombstones SET content_hashes = '[]'")


@migration
def m004_maintained_index(conn: sqlite3.Connection) -> None:
    # The per-user BM25 index maintained on write (index_store.py) replaces the persisted whole-user blobs.
    # Segments are immutable and never reuse an id (AUTOINCREMENT), so a process can cache one by id. index_meta
    # holds the analyzer version, the watermark below which every message is indexed (0: the existing messages are
    # indexed once on the next open, by index_store.catch_up) and this database's random id (cache keys).
    import secrets

    conn.execute("DROP TRIGGER IF EXISTS search_index_stale_on_bump")
    conn.execute("DROP TRIGGER IF EXISTS search_index_stale_on_user_delete")
    conn.execute("DROP TABLE IF EXISTS search_index")
    _script(
        conn,
        """
        CREATE TABLE index_segments (
            id      INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id TEXT NOT NULL,
            docs    INTEGER NOT NULL,
            min_seq INTEGER NOT NULL,
            max_seq INTEGER NOT NULL,
            blob    BLOB NOT NULL
        );
        CREATE INDEX index_segments_by_user ON index_segments (user_id, id);
        CREATE TABLE index_meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID
        """,
    )
    conn.execute("INSERT INTO index_meta (key, value) VALUES ('db_id', ?)", (secrets.token_hex(16),))
    conn.execute("INSERT INTO index_meta (key, value) VALUES ('indexed_through', '0')")
    conn.execute("INSERT INTO index_meta (key, value) VALUES ('analyzer', '')")


@migration
def m005_index_segment_metadata(conn: sqlite3.Connection) -> None:
    # Segments also hold each message's session, said-at, recorded-at and index in its Add (index_store.DocMeta),
    # so a process lays a user's turns out from the segments alone and reads the text only of the turns it shows.
    # The segments written before lack them: they are dropped and the messages indexed once more on the next open
    # (index_store.catch_up, with its progress bar), as m004 did.
    conn.execute("DELETE FROM index_segments")
    conn.execute("UPDATE index_meta SET value = '0' WHERE key = 'indexed_through'")


@migration
def m006_index_parts(conn: sqlite3.Connection) -> None:
    # A segment's postings move to index_parts, a part (~4096 postings) per row, keyed by the segment and the part
    # a term's postings start in: a search reads its query terms' parts, not every posting of the user (what a
    # process that holds nothing paid on its first search). index_segments keeps the head: documents, lengths,
    # vocabulary, indptr and DocMeta. A trigger drops a segment's parts with it, on every path that deletes one.
    # A segment of at most one part's postings stays whole in its row (what every Add writes and merges: one row to
    # write and read); the bigger segments written before are rewritten here as head and parts (no message is read or
    # tokenized again).
    from . import index_store

    conn.execute(
        """
        CREATE TABLE index_parts (
            segment_id INTEGER NOT NULL,
            part       INTEGER NOT NULL,
            blob       BLOB NOT NULL,
            PRIMARY KEY (segment_id, part)
        )
        """
    )
    conn.execute(
        "CREATE TRIGGER index_parts_follow_segment AFTER DELETE ON index_segments "
        "BEGIN DELETE FROM index_parts WHERE segment_id = OLD.id; END"
    )
    for (seg_id,) in conn.execute("SELECT id FROM index_segments ORDER BY id").fetchall():
        seg = index_store.decode(conn.execute("SELECT blob FROM index_segments WHERE id = ?", (seg_id,)).fetchone()[0])
        blob, parts = index_store.encode_row(seg)  # (a small segment stays whole in its row)
        if parts:
            conn.execute("UPDATE index_segments SET blob = ? WHERE id = ?", (blob, seg_id))
            index_store.write_parts(conn, seg_id, parts)


@migration
def m007_settings(conn: sqlite3.Connection) -> None:
    # What the database itself remembers of how it is kept: one row, present once a writer (add, serve, mcp, a
    # Memory) was given a retention explicitly (--retention-days, REFIND_RETENTION_DAYS, retention_days=). A later
    # command given none applies it, so `refind expire` run plainly after `refind serve --retention-days 90` does not
    # delete what the server still serves. retention_days NULL: retention off; set_by and set_at say who set it, when.
    conn.execute(
        """
        CREATE TABLE settings (
            id             INTEGER PRIMARY KEY CHECK (id = 1),
            retention_days REAL,
            set_by         TEXT NOT NULL,
            set_at         INTEGER NOT NULL
        )
        """
    )


@migration
def m008_write_log(conn: sqlite3.Connection) -> None:
    # Which writes this file's content descends from: every write transaction (Store.write) adds a random id, the
    # last WRITE_LOG of them kept (index_store.mark_written). An index a process keeps in memory remembers the latest
    # write when it was read, and is served only while that write is in the log: a copy restored into the file (cp)
    # repeats the versions, seqs and segment ids of what it replaced for other messages, and lacks the writes made
    # after it was taken. The first id is written here, so every file has one.
    import secrets

    conn.execute("CREATE TABLE write_log (n INTEGER PRIMARY KEY, id INTEGER NOT NULL UNIQUE)")
    conn.execute("INSERT INTO write_log (id) VALUES (?)", (secrets.randbits(63),))


# What an older refind that writes this database is told (inside its own error): refind before fe18529 did not refuse a
# newer refind's schema on open, so its writes reach the triggers of m009.
def _older_writer(migration: str) -> str:
    return (
        f"written by a newer refind (migration {migration} unknown to this version); upgrade refind to change it — "
        "nothing was changed"
    )


OLDER_WRITER = _older_writer("m011_keyed_chains")  # what the guard says now (m011); m009's and m010's own named theirs
# The migration a grant speaks for (write_grant.version, m010): a refind that knows m009 but not a later migration
# that changes what a write must do inserts its grant without it (or with its own, lower), and is refused as m009
# refuses one before it.
GRANT_VERSION = 11
# What m009's triggers refuse without a grant: every change of requests and tombstones, and of messages but an
# insert (a message's row needs its request's, which its Add inserts first: FOREIGN KEY, on in every refind
# connection; a trigger on each message inserted made a replay's inserts ~1.9× as slow, measured).
GUARDED = {
    "requests": ("INSERT", "UPDATE", "DELETE"),
    "messages": ("UPDATE", "DELETE"),
    "tombstones": ("INSERT", "UPDATE", "DELETE"),
}


@migration
def m009_older_writers_refused(conn: sqlite3.Connection) -> None:
    # refind before fe18529 (c75912f among them) opens a newer refind's database without a word and writes it as its
    # own: its Add gives a message the seq of a forgotten one (SQLite's max(seq) + 1, at or below the index's
    # watermark: never indexed, never found), its forget and expire leave the removed words in the index segments,
    # its tombstones hold unkeyed hashes. A change of requests, messages or tombstones (GUARDED) is now refused unless
    # its transaction holds the grant: the one row of write_grant, which Store.write inserts after BEGIN and deletes
    # before COMMIT, so no committed state ever holds it (a kill -9 rolls it back with the rest). An older writer
    # meets the refusal at its first change (an Add's INSERT INTO requests, a forget's or expire's DELETE FROM
    # messages) and rolls its transaction back. A later migration that changes these tables grants itself.
    conn.execute("CREATE TABLE write_grant (id INTEGER PRIMARY KEY CHECK (id = 1))")
    for table, ops in GUARDED.items():
        for op in ops:
            conn.execute(
                f"CREATE TRIGGER {table}_{op.lower()}_granted BEFORE {op} ON {table} "
                "WHEN NOT EXISTS (SELECT 1 FROM write_grant) "
                f"BEGIN SELECT RAISE(ABORT, '{_older_writer('m009_older_writers_refused')}'); END"
            )


def _grants_from(conn: sqlite3.Connection, version: int, migration: str) -> None:
    """m009's guards made again to refuse a grant older than ``version``, naming ``migration`` (each migration that
    changes what a write must do passes its own, as it shipped)."""
    for table, ops in GUARDED.items():
        for op in ops:
            conn.execute(f"DROP TRIGGER {table}_{op.lower()}_granted")
            conn.execute(
                f"CREATE TRIGGER {table}_{op.lower()}_granted BEFORE {op} ON {table} "
                f"WHEN NOT EXISTS (SELECT 1 FROM write_grant WHERE version >= {version}) "
                f"BEGIN SELECT RAISE(ABORT, '{_older_writer(migration)}'); END"
            )


def grant(conn: sqlite3.Connection) -> None:
    """Allow this transaction to change the GUARDED tables (m009; a grant of this version's writes, m010);
    :func:`revoke` before it commits."""
    conn.execute("INSERT INTO write_grant (id, version) VALUES (1, ?)", (GRANT_VERSION,))


def revoke(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM write_grant")


@migration
def m010_sealed_ids(conn: sqlite3.Connection) -> None:
    # A request id derived from its text (auto-, auto+, cli-, api-) and its messages' ids are hashes of the text
    # without a key: kept after forget (the tombstone's request id and message ids) or forget and expire (the audit
    # log's events), they let a guess of the removed text be checked in milliseconds (a probe of round 24: a forgotten
    # "my bank pin is 4417" found among 10,000 guesses from `refind inspect events`). What is kept of removed
    # requests is sealed now (sealed.py): the tombstones' message ids all, their text-derived request ids, and the
    # text-derived request ids of events whose request is stored no more. A replay is refused as before: its ids are
    # sealed the same way and compared.
    #
    # A refind that knows m009 but not this migration, left running while this one upgrades the file, would go on
    # writing unsealed ids and comparing a replay's plain ids with sealed tombstones — storing a forgotten request
    # again (found by a review with a fuzzer). Its grant (m009's write_grant row) is refused now: a grant names the
    # migration it speaks for (write_grant.version, GRANT_VERSION), an older writer's row holds the default 9.
    import json

    from . import sealed

    conn.execute("ALTER TABLE write_grant ADD COLUMN version INTEGER NOT NULL DEFAULT 9")
    _grants_from(conn, 10, "m010_sealed_ids")
    secret = sealed.key(conn)
    grant(conn)
    stones = conn.execute("SELECT id, request_id, message_ids FROM tombstones").fetchall()
    conn.executemany(
        "UPDATE tombstones SET request_id = ?, message_ids = ? WHERE id = ?",
        [
            (
                None if rid is None else sealed.request_id(secret, rid),
                json.dumps([sealed.seal(secret, mid) for mid in json.loads(ids)]),
                tid,
            )
            for tid, rid, ids in stones
        ],
    )
    gone = conn.execute(
        "SELECT e.id, e.request_id FROM events e WHERE e.request_id IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM requests r WHERE r.user_id = e.user_id AND r.request_id = e.request_id)"
    ).fetchall()
    conn.executemany(
        "UPDATE events SET request_id = ? WHERE id = ?",
        [(sealed.request_id(secret, rid), eid) for eid, rid in gone if sealed.text_derived(rid)],
    )
    revoke(conn)


@migration
def m011_keyed_chains(conn: sqlite3.Connection) -> None:
    # A replay's chained request (auto+, what a grown log adds after a known group: auto_ids.py) had an id hashed,
    # without a key, from the id of the piece before it — itself a hash of that piece's text. Kept after that piece
    # was forgotten (or expired), the id and its messages' ids (shown by search results, `inspect events`, export)
    # confirmed a guess of the removed text offline in milliseconds (a probe of round 24). A chained request is stored
    # keyed now (auto_ids.stored_chained: the computed id's HMAC under the database's secret); the ones stored before
    # are renamed here, with their messages' ids and wherever those are quoted: the audit log's events, the stored
    # planner runs (returned ids, trace). The index segments hold neither ids (messages keep their seq). A tombstone
    # keeps what it sealed (the replay still finds it: it asks for the unkeyed form too).
    #
    # A refind that knows m010 but not this one, left running, would compute unkeyed chained ids and find none of the
    # renamed requests (storing their messages again): its grant (version 10) is refused now.
    import json
    import re

    from . import index_store, sealed
    from .auto_ids import CHAINED, stored_chained
    from .derived_ids import message_id

    _grants_from(conn, 11, "m011_keyed_chains")
    secret = sealed.key(conn)
    span = (CHAINED, CHAINED[:-1] + chr(ord(CHAINED[-1]) + 1))  # the ids that begin with auto+
    chained = {
        (user, rid)
        for user, rid in conn.execute(
            "SELECT user_id, request_id FROM requests WHERE request_id >= ? AND request_id < ?", span
        ).fetchall()
        if sealed.text_derived(rid)
    }
    if not chained:
        return
    grant(conn)
    (cache,) = conn.execute("PRAGMA cache_size").fetchone()
    conn.execute("PRAGMA cache_size = -65536")  # (new message ids land all over their index: half the time, measured)
    renamed: dict[str, str] = {}  # old id → new, message ids and request ids alike
    users: dict[str, int] = {}
    for user, rid in sorted(chained):
        new = stored_chained(secret, rid)
        renamed[rid] = new
        users[user] = users.get(user, 0) + 1
        # the new row first, the messages moved onto it, the old row last (FOREIGN KEY ... ON DELETE CASCADE)
        conn.execute(
            "INSERT INTO requests (user_id, request_id, session_id, payload_hash, message_count, recorded_at) "
            "SELECT user_id, ?, session_id, payload_hash, message_count, recorded_at FROM requests "
            "WHERE user_id = ? AND request_id = ?",
            (new, user, rid),
        )
        messages = conn.execute(
            "SELECT seq, id, idx FROM messages WHERE user_id = ? AND request_id = ?", (user, rid)
        ).fetchall()
        moved = [(new, message_id(user, new, idx), seq) for seq, _, idx in messages]
        renamed.update((old, mid) for (_, old, _), (_, mid, _) in zip(messages, moved))
        conn.executemany("UPDATE messages SET request_id = ?, id = ? WHERE seq = ?", moved)
        conn.execute("DELETE FROM requests WHERE user_id = ? AND request_id = ?", (user, rid))
    events = conn.execute(  # (one pass: events are indexed by user and id alone)
        "SELECT id, user_id, request_id FROM events WHERE request_id >= ? AND request_id < ?", span
    ).fetchall()
    conn.executemany(
        "UPDATE events SET request_id = ? WHERE id = ?",
        [(renamed[rid], eid) for eid, user, rid in events if (user, rid) in chained and rid in renamed],
    )
    quoted = re.compile(r"(?<![0-9a-z+])(?:auto\+[0-9a-f]{20}|[0-9a-f]{24})(?![0-9a-f])")

    def requoted(text: str) -> str:
        return quoted.sub(lambda m: renamed.get(m[0], m[0]), text)

    for user in users:
        searches = conn.execute("SELECT id, returned_ids, trace FROM searches WHERE user_id = ?", (user,)).fetchall()
        conn.executemany(
            "UPDATE searches SET returned_ids = ?, trace = ? WHERE id = ?",
            [
                (json.dumps([renamed.get(i, i) for i in json.loads(returned)]), requoted(trace), sid)
                for sid, returned, trace in searches
                if requoted(returned) != returned or requoted(trace) != trace
            ],
        )
    conn.executemany(  # every cache keyed on a user's version (a process's turns, their ids) is stale
        "INSERT INTO users (user_id, version) VALUES (?, ?) "
        "ON CONFLICT (user_id) DO UPDATE SET version = version + excluded.version",
        users.items(),
    )
    index_store.mark_written(conn)
    revoke(conn)
    conn.execute(f"PRAGMA cache_size = {int(cache)}")


@migration
def m012_said_hashes(conn: sqlite3.Connection) -> None:
    # A tombstone kept a keyed hash of each forgotten message's text only: a shorter, older copy of a log replayed
    # after a forget (a backup restored) makes a group whose id no tombstone names, and brought the text back. A
    # tombstone now keeps, per message, a keyed hash of its role, text and said-at too (lifecycle.said_hash), which a
    # replay matches such a group against (replay._copy_of_forgotten). The text of what was forgotten before is gone:
    # those tombstones keep '[]' and are matched by their content hashes alone, more cautiously.
    #
    # No grant version: a refind that knows m011 but not this one, left running, writes tombstones with the default
    # '[]' (matched as those written before) and replays as it did before; nothing it writes is wrong for this one.
    conn.execute("ALTER TABLE tombstones ADD COLUMN said_hashes TEXT NOT NULL DEFAULT '[]'")


@migration
def m013_said_sessions(conn: sqlite3.Connection) -> None:
    # A user's tombstone covers every session of the user, and its said hashes (m012) name no session: a new message
    # of the same role, text and millisecond in another session was refused as a copy of a forgotten one (a review of
    # round 25). A tombstone now keeps, per forgotten message, its session id sealed (sealed.seal, in the order of
    # said_hashes), and a replay matches a group only against the messages forgotten from its own session. A
    # tombstone written before keeps '[]': its said hashes are matched in any session it covers, as before.
    #
    # No grant version: a refind that knows m012 but not this one, left running, writes tombstones with the default
    # '[]' (matched as those written before) and replays as it did before; nothing it writes is wrong for this one.
    # (Started anew, such a refind refuses the file, as every refind refuses a schema newer than its own.)
    conn.execute("ALTER TABLE tombstones ADD COLUMN said_sessions TEXT NOT NULL DEFAULT '[]'")
