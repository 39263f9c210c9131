"""Two designs for the index maintained on write, measured side by side on the same messages.

    .venv/bin/python bench/index_alternatives.py [--messages 20000] [--batch 500] [--queries 20]

* segments (chosen, refind_cli/index_store.py) — one immutable segment of term frequencies per user per batch,
  merged like a binary counter (its head in ``index_segments``, its postings in parts in ``index_parts``); a search
  decodes the heads it lacks, reads its query terms' parts and scores them in numpy;
* postings rows — one SQLite row per (user, term, message) with its term frequency (WITHOUT ROWID, primary key
  (user, term, seq)) plus one row per message with its length; a search reads the query terms' rows.

Both write inside the batch's transaction. Reported: write throughput (messages/s, tokenizing included), the
index's bytes on disk ÷ the messages' content bytes, and a search's latency from a process that holds nothing
(segments: decode every segment; postings: read the query terms' rows and every visible length) and warm.
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import synth

from refind_cli import index_store, migrations
from refind_cli.tokenize import analyze


def _size(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE ?", (f"{table}%",)).fetchone()[0] or 0
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def corpus(n: int) -> list[tuple[int, str, int]]:
    out = []
    seq = 0
    for req in synth.requests("u", n):
        for m in req.messages:
            seq += 1
            out.append((seq, m.content, m.timestamp))
    return out


def segments(db: Path, msgs, batch: int, queries: list[str]) -> dict[str, float]:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    migrations.apply(conn, 0)  # refind's schema: index_segments, index_parts and the trigger between them
    t = time.perf_counter()
    for i in range(0, len(msgs), batch):
        conn.execute("BEGIN IMMEDIATE")
        docs = [(seq, index_store.message_tokens(c, s)) for seq, c, s in msgs[i : i + batch]]
        index_store.write_segments(conn, {"u": index_store.build_segment(docs)})  # written, then merged
        conn.execute("COMMIT")
    write = time.perf_counter() - t
    conn.close()

    def cold(q: str) -> None:
        c = sqlite3.connect(db)
        ids = index_store.segment_ids(c, "u")
        segs = index_store.load_segments(c, ids)
        n = sum(len(s.seqs) for s in segs.values())
        lengths = np.concatenate([s.lengths for s in segs.values()]).astype(np.int64)
        avgdl = float(lengths.sum()) / n
        scores = np.zeros(n, dtype=np.float32)
        offset = 0
        for s in segs.values():
            for tok in analyze(q):
                hit = s.postings(tok, lambda i, parts: index_store.read_parts(c, i, parts))
                if hit is not None:
                    d, tf = hit
                    tfc = tf / (1.2 * (0.25 + 0.75 * s.lengths[d] / avgdl) + tf)
                    np.add.at(scores, d + offset, (math.log(1 + n / len(d)) * tfc).astype(np.float32))
            offset += len(s.seqs)
        c.close()

    cold_s = statistics.median(_timed(lambda q=q: cold(q)) for q in queries)
    return {"write": write, "cold": cold_s, "bytes": _size(db, "index_segments") + _size(db, "index_parts")}


def postings(db: Path, msgs, batch: int, queries: list[str]) -> dict[str, float]:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(
        "CREATE TABLE postings (user_id TEXT, term TEXT, seq INTEGER, tf INTEGER, "
        "PRIMARY KEY (user_id, term, seq)) WITHOUT ROWID"
    )
    conn.execute("CREATE TABLE doclen (seq INTEGER PRIMARY KEY, user_id TEXT, len INTEGER)")
    t = time.perf_counter()
    from collections import Counter

    for i in range(0, len(msgs), batch):
        conn.execute("BEGIN IMMEDIATE")
        rows, lens = [], []
        for seq, c, s in msgs[i : i + batch]:
            tokens = index_store.message_tokens(c, s)
            lens.append((seq, "u", len(tokens)))
            rows += [("u", term, seq, f) for term, f in Counter(tokens).items()]
        conn.executemany("INSERT INTO postings VALUES (?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO doclen VALUES (?, ?, ?)", lens)
        conn.execute("COMMIT")
    write = time.perf_counter() - t
    conn.close()

    def cold(q: str) -> None:
        c = sqlite3.connect(db)
        seqs, lens = zip(*c.execute("SELECT seq, len FROM doclen WHERE user_id = 'u' ORDER BY seq"), strict=True)
        seq_arr = np.asarray(seqs)
        len_arr = np.asarray(lens, dtype=np.int64)
        n = len(seq_arr)
        avgdl = float(len_arr.sum()) / n
        scores = np.zeros(n, dtype=np.float32)
        for tok in analyze(q):
            got = c.execute("SELECT seq, tf FROM postings WHERE user_id = 'u' AND term = ?", (tok,)).fetchall()
            if not got:
                continue
            s, tf = (np.asarray(x) for x in zip(*got, strict=True))
            pos = np.searchsorted(seq_arr, s)
            tfc = tf / (1.2 * (0.25 + 0.75 * len_arr[pos] / avgdl) + tf)
            np.add.at(scores, pos, (math.log(1 + n / len(pos)) * tfc).astype(np.float32))
        c.close()

    cold_s = statistics.median(_timed(lambda q=q: cold(q)) for q in queries)
    return {"write": write, "cold": cold_s, "bytes": _size(db, "postings") + _size(db, "doclen")}


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--queries", type=int, default=20)
    args = ap.parse_args()
    msgs = corpus(args.messages)
    content = sum(len(c.encode()) for _, c, _ in msgs)
    queries = synth.queries(args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        a = segments(Path(tmp) / "a.db", msgs, args.batch, queries)
        b = postings(Path(tmp) / "b.db", msgs, args.batch, queries)
    print(
        f"`python bench/index_alternatives.py --messages {args.messages} --batch {args.batch}` (load {os.getloadavg()[0]:.1f}):\n"
    )
    print(
        "| design | write (msg/s, tokenizing included) | index ÷ content bytes | search from a cold process (median) |"
    )
    print("|---|---:|---:|---:|")
    for name, r in (("segments (chosen)", a), ("postings rows", b)):
        print(f"| {name} | {len(msgs) / r['write']:,.0f} | {r['bytes'] / content:.2f}× | {r['cold'] * 1000:,.1f} ms |")


if __name__ == "__main__":
    main()
