"""Small builders for retrieval tests: add messages to a real store with explicit times."""

from __future__ import annotations

import hashlib

from refind_cli.contract import parse_add

T0 = 1_685_606_400_000  # 2023-06-01 08:00 UTC
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
