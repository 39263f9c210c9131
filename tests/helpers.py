"""The one set of test builders: add messages to a real store with explicit said-at times (``add``), or as one
request of alternating roles (``add_request``), and a store clock moved by hand (``Clock``)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from refind_cli.contract import parse_add
from refind_cli.store import Store

T0 = 1_685_606_400_000  # 2023-06-01 08:00 UTC: when the test conversations were said
MIN = 60_000
DAY = 86_400_000


def add(store, user, session, *messages, request_id=None, at=None):
    """messages: (role, content) or (role, content, said_at) tuples."""
    msgs = []
    for i, m in enumerate(messages):
        role, content = m[0], m[1]
        ts = m[2] if len(m) > 2 else (None if at is None else at + i * MIN)
        msgs.append({"role": role, "content": content, "timestamp": ts})
    digest = hashlib.sha256(repr(messages).encode()).hexdigest()[:8]  # stable across runs, unlike hash()
    rid = request_id or f"{session}-{len(store.user_messages(user))}-{digest}"
    return store.add(parse_add({"request_id": rid, "user_id": user, "session_id": session, "messages": msgs}))


CLOCK_T0 = 1_750_000_000_000  # a recorded-at to start the store's clock from (Unix ms)


class Clock:
    """The store's clock, moved by hand: ``clock.now = …``."""

    def __init__(self, now: int = CLOCK_T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def add_request(
    store: Store, request_id: str, user: str, session: str, *contents: str, ts: int | None = 1_700_000_000_000
):
    """One Add request of ``contents`` (user, assistant, user, … roles; said-at ts, ts+1, … or None)."""
    return store.add(
        parse_add(
            {
                "request_id": request_id,
                "user_id": user,
                "session_id": session,
                "messages": [
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": c,
                        "timestamp": None if ts is None else ts + i,
                    }
                    for i, c in enumerate(contents)
                ],
            }
        )
    )


def sound(db: Path) -> int:
    """The file passes integrity_check, holds no partial request and no write grant; returns how many requests it
    holds."""
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        partial = conn.execute(
            "SELECT count(*) FROM requests r WHERE message_count != "
            "(SELECT count(*) FROM messages m WHERE m.user_id = r.user_id AND m.request_id = r.request_id)"
        ).fetchone()[0]
        assert partial == 0
        orphans = conn.execute(
            "SELECT count(*) FROM messages m WHERE NOT EXISTS "
            "(SELECT 1 FROM requests r WHERE r.user_id = m.user_id AND r.request_id = m.request_id)"
        ).fetchone()[0]
        assert orphans == 0
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'write_grant'").fetchone():
            assert conn.execute("SELECT count(*) FROM write_grant").fetchone()[0] == 0  # never committed (m009)
        return conn.execute("SELECT count(*) FROM requests").fetchone()[0]
    finally:
        conn.close()


def agent_cli(cli, llm, *extra, query: str = "where did Caroline go hiking", user: str = "alice"):
    """``refind search QUERY --mode agent`` through the CliRunner ``cli``, its planner on the scripted model ``llm``."""
    return cli(
        "search", query, "--user", user, "--mode", "agent", "--model", "openai/scripted", "--api-base", llm.url, *extra
    )


def agent_app(db_path, llm, **settings):
    """A ``refind serve --mode agent`` app (FastAPI, for a TestClient) over ``db_path``, its planner on the scripted
    model ``llm``, alice holding one hike; ``settings``: ServerSettings fields besides."""
    from refind_cli.server import ServerSettings, create_app

    with Store(db_path, retention_days=None) as store:
        add(store, "alice", "hike", ("user", "Caroline: I went hiking at Mount Rainier", T0))
    return create_app(
        ServerSettings(
            db=db_path,
            retention_days=None,
            mode="agent",
            model="openai/scripted",
            api_base=llm.url,
            expire_interval_s=0,
            **settings,
        )
    )


def cached_words() -> set[str]:
    """Every word the query expansion's per-segment cache holds (term_groups.GROUPS: dicts' keys and values, lists,
    tuples, sets), for tests that a forgotten user's words are gone from memory."""
    from refind_cli import term_groups

    def words_in(value: object) -> set[str]:
        if isinstance(value, str):
            return {value}
        if isinstance(value, dict):
            return set().union(*(words_in(k) | words_in(v) for k, v in value.items())) if value else set()
        if isinstance(value, list | tuple | set | frozenset):
            return set().union(*(words_in(v) for v in value)) if value else set()
        return set()

    return set().union(*(words_in(v) for v in term_groups.GROUPS.values()))


# The start of a script run with `python -c` whose replay forks its reader process: it prints the reader's pid
PRINTS_READER_PID = """
import os, signal, sys, time

real_fork = os.fork

def fork():
    pid = real_fork()
    if pid:
        print(pid, flush=True)
    return pid

os.fork = fork
"""


def ended(pid: int) -> bool:
    """Gone, or a zombie (dead, not yet reaped by whoever inherited it)."""
    from pathlib import Path

    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
