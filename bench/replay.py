"""Replay throughput: `refind add --file` against plain `sqlite3.executemany` of the same rows, in the same run.

    .venv/bin/python bench/replay.py [--messages 100000] [--per-request 20]

Writes a synthetic contest-shaped JSONL (one Add request per line), then times:
  baseline  — json.loads every line, one executemany of all rows into a bare table of the same columns, one commit;
  refind    — the real replay path (validation, idempotency check, per-request savepoints, audit events, ids);
  re-replay — the same file again, which must add nothing.
Prints a markdown table; numbers are messages per second (higher is better) and the ratio refind / baseline.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli.replay import replay
from refind_cli.store import Store, message_id

WORDS = [
    "hiking",
    "lisbon",
    "cello",
    "garden",
    "tomato",
    "marathon",
    "porto",
    "vet",
    "salmon",
    "allergy",
    "recital",
    "bach",
    "tea",
    "hangzhou",
    "apartment",
    "montreal",
    "sister",
    "flight",
    "hotel",
    "fado",
    "basil",
    "pepper",
    "concert",
    "teacher",
]


def write_source(path: Path, messages: int, per_request: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    n_requests = messages // per_request
    with path.open("w", encoding="utf-8") as f:
        for r in range(n_requests):
            user = f"user{r % 50}"
            msgs = [
                {
                    "role": "user",
                    "content": f"Speaker{i % 2}: " + " ".join(rng.choices(WORDS, k=rng.randint(8, 40))),
                    "timestamp": 1_690_000_000_000 + r * 60_000 + i * 1000,
                }
                for i in range(per_request)
            ]
            f.write(
                json.dumps(
                    {"request_id": f"req-{r}", "user_id": user, "session_id": f"s{r // 10}", "messages": msgs},
                    ensure_ascii=False,
                )
                + "\n"
            )
    return n_requests * per_request


def baseline(source: Path, db: Path) -> float:
    start = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE messages (seq INTEGER PRIMARY KEY, id TEXT, user_id TEXT, session_id TEXT, "
        "request_id TEXT, idx INTEGER, role TEXT, content TEXT, said_at INTEGER, recorded_at INTEGER)"
    )
    rows = []
    now = int(time.time() * 1000)
    with source.open(encoding="utf-8") as f:
        for line in f:
            req = json.loads(line)
            for i, m in enumerate(req["messages"]):
                rows.append(
                    (
                        message_id(req["user_id"], req["request_id"], i),
                        req["user_id"],
                        req["session_id"],
                        req["request_id"],
                        i,
                        m["role"],
                        m["content"],
                        m.get("timestamp"),
                        now,
                    )
                )
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO messages (id, user_id, session_id, request_id, idx, role, content, said_at, "
        "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - start


def refind_replay(source: Path, db: Path) -> tuple[float, dict]:
    start = time.perf_counter()
    with Store(db, retention_days=None) as store:
        summary = replay(store, str(source))
    return time.perf_counter() - start, summary.as_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--per-request", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="refind-bench-") as tmp:
        tmp_path = Path(tmp)
        source = tmp_path / "replay.jsonl"
        total = write_source(source, args.messages, args.per_request)
        t_base = baseline(source, tmp_path / "baseline.db")
        t_first, first = refind_replay(source, tmp_path / "refind.db")
        t_second, second = refind_replay(source, tmp_path / "refind.db")
        conn = sqlite3.connect(tmp_path / "refind.db")
        stored = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        distinct = conn.execute("SELECT count(DISTINCT id) FROM messages").fetchone()[0]
        conn.close()
    assert first["messages_added"] == total == stored == distinct, (first, stored, distinct)
    assert second["messages_added"] == 0 and second["duplicates"] == total // args.per_request, second
    print(f"{total:,} messages, {args.per_request} per request, file database, synchronous=FULL\n")
    print("| path | seconds | messages/s | vs baseline |")
    print("|---|---:|---:|---:|")
    print(f"| baseline: json.loads + one `executemany` | {t_base:.2f} | {total / t_base:,.0f} | 1.00 |")
    print(f"| `refind add --file` (first replay) | {t_first:.2f} | {total / t_first:,.0f} | {t_base / t_first:.2f} |")
    print(f"| same file again (adds nothing) | {t_second:.2f} | {total / t_second:,.0f} | {t_base / t_second:.2f} |")
    print(f"\nstored {stored:,} messages, {distinct:,} distinct ids; second replay added {second['messages_added']}")


if __name__ == "__main__":
    main()
