"""Replay throughput: `refind add --file` against plain `sqlite3.executemany` of the same rows, in the same run.

    .venv/bin/python bench/replay.py [--messages 100000] [--per-request 20] [--repeat 3]

Writes a synthetic contest-shaped JSONL (one Add request per line), then times, ``--repeat`` times over:
  baseline  — json.loads every line, one executemany of all rows into a bare table of the same columns, one commit;
  refind    — the real replay path (validation, idempotency check, per-request savepoints, audit events, ids, the
              maintained index written in the same transactions);
  re-replay — the same file again, which must add nothing.
Prints a markdown table per run and the medians; numbers are messages per second (higher is better) by the wall
clock and by this process's CPU time (user + sys: what the replay itself spent, whatever else the machine runs),
and the ratio refind / baseline of the same run. CPU counts the replay's reader process too (``refind add --file``
parses and tokenizes in a second process while the first writes; ``--inline`` keeps it in one).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
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


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its children that have ended (the replay's reader)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def baseline(source: Path, db: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds)."""
    start, cpu = time.perf_counter(), cpu_seconds()
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
    return time.perf_counter() - start, cpu_seconds() - cpu


def refind_replay(source: Path, db: Path, parallel: bool | None = None) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds, the replay's summary)."""
    start, cpu = time.perf_counter(), cpu_seconds()
    with Store(db, retention_days=None) as store:
        summary = replay(store, str(source), parallel=parallel)
    return time.perf_counter() - start, cpu_seconds() - cpu, summary.as_dict()


def one_run(
    tmp_path: Path, source: Path, total: int, per_request: int, parallel: bool | None = None
) -> dict[str, tuple[float, float]]:
    """One baseline, one first replay and one re-replay into fresh databases: {path: (wall s, CPU s)}."""
    for old in tmp_path.glob("*.db*"):
        old.unlink()
    base = baseline(source, tmp_path / "baseline.db")
    *first_t, first = refind_replay(source, tmp_path / "refind.db", parallel)
    *second_t, second = refind_replay(source, tmp_path / "refind.db", parallel)
    conn = sqlite3.connect(tmp_path / "refind.db")
    stored = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    distinct = conn.execute("SELECT count(DISTINCT id) FROM messages").fetchone()[0]
    conn.close()
    assert first["messages_added"] == total == stored == distinct, (first, stored, distinct)
    assert second["messages_added"] == 0 and second["duplicates"] == total // per_request, second
    return {"baseline": base, "first": (first_t[0], first_t[1]), "again": (second_t[0], second_t[1])}


ROWS = [
    ("baseline", "baseline: json.loads + one `executemany`"),
    ("first", "`refind add --file` (first replay)"),
    ("again", "same file again (adds nothing)"),
]


def table(total: int, runs: list[dict[str, tuple[float, float]]]) -> str:
    """One row per path: seconds and messages/s by wall clock and by CPU, and ÷ the baseline of the same run."""
    out = [
        "| path | wall s | msg/s (wall) | ÷ baseline (wall) | CPU s | msg/s (CPU) | ÷ baseline (CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in ROWS:
        wall = statistics.median(r[key][0] for r in runs)
        cpu = statistics.median(r[key][1] for r in runs)
        ratio_wall = statistics.median(r["baseline"][0] / r[key][0] for r in runs)
        ratio_cpu = statistics.median(r["baseline"][1] / r[key][1] for r in runs)
        out.append(
            f"| {label} | {wall:.2f} | {total / wall:,.0f} | {ratio_wall:.2f} | {cpu:.2f} | {total / cpu:,.0f} "
            f"| {ratio_cpu:.2f} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--per-request", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1, help="runs of all three paths; medians are printed last")
    parser.add_argument("--inline", action="store_true", help="replay in one process (no reader process)")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="refind-bench-") as tmp:
        tmp_path = Path(tmp)
        source = tmp_path / "replay.jsonl"
        total = write_source(source, args.messages, args.per_request)
        mode = "one process" if args.inline else "a reader process beside the writer"
        print(f"{total:,} messages, {args.per_request} per request, file database, synchronous=FULL, {mode}")
        for n in range(1, args.repeat + 1):
            runs.append(one_run(tmp_path, source, total, args.per_request, False if args.inline else None))
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            print(f"\nrun {n} (load average {load:.1f}):\n\n{table(total, runs[-1:])}", flush=True)
    if len(runs) > 1:
        print(
            f"\nmedians of {len(runs)} runs (each ratio is the median of the runs' own ratios):\n\n{table(total, runs)}"
        )
    print(f"\nevery run stored {total:,} messages with {total:,} distinct ids; every second replay added 0")


if __name__ == "__main__":
    main()
