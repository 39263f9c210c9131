"""Soak: mixed Add / Search / forget / expire traffic against a real `refind serve` over loopback, for a duration.

  .venv/bin/python bench/soak.py                                # 10 minutes, 1,580 users (the contest's size)
  .venv/bin/python bench/soak.py --duration 120 --rss-every 20  # a shorter run
  .venv/bin/python bench/soak.py --new-words 5                  # every Add also brings words never seen before

1. Seed ``--users`` users of ``--messages`` synthetic messages each (bench/synth.py) straight into the database.
2. Start `refind serve` (bm25, retention 30 days, a retention sweep every ``--expire-interval`` seconds).
3. For ``--duration`` seconds: ``--add-workers`` threads send 20-message Adds for random users; ``--search-workers``
   threads search random users (top_k 10-100); one thread forgets, every ``--forget-every`` seconds, one request
   the Add threads stored (``DELETE /v1/memories?user_id&request_id``); one thread plants, every sweep interval,
   a few requests recorded 31 days ago (as a store left running for a month would hold), which the server's
   sweep must expire.
4. Every non-2xx answer is an error (goal: 0). Latency p50/p95 per route. The server's RSS is read from /proc
   every ``--rss-every`` seconds (goal: flat after warm-up). At the end: integrity_check, and how many planted old
   requests the sweep left (at most the last planting).

The client runs on the same cores as the server: the latencies are a floor, not the server alone.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_http import TOKEN, Client, ServerProcess, proc_status_kb
from synth import queries, requests

from refind_cli.contract import AddRequest, parse_add
from refind_cli.evaluate import percentile
from refind_cli.store import DAY_MS, Store, system_clock


def pool(n_messages: int, seed: int) -> list[dict]:
    """Synthetic 20-message request bodies, made once (making them per request would load the client, not the
    server): users and request ids are filled in per use."""
    return [r.canonical() for r in requests("pool", n_messages, seed=seed)]


def as_request(body: dict, user_id: str, request_id: str) -> AddRequest:
    return parse_add({**body, "user_id": user_id, "request_id": request_id, "session_id": request_id})


def seed(db: Path, users: int, messages: int) -> list[str]:
    ids = [f"soak-{u}" for u in range(users)]
    bodies = pool(40_000, seed=1)
    per_user = max(1, messages // 20)
    with Store(db, retention_days=None) as store:
        pending = []
        for u, uid in enumerate(ids):
            for k in range(per_user):
                pending.append(as_request(bodies[(u * per_user + k) % len(bodies)], uid, f"seed-{k}"))
            if len(pending) >= 500:
                store.add_many(pending)
                pending = []
        if pending:
            store.add_many(pending)
    return ids


def new_word(rng: random.Random) -> str:
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(5, 10)))


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ms: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter[str] = Counter()

    def record(self, route: str, status: int, ms: float) -> None:
        with self.lock:
            self.ms[route].append(ms)
            if not 200 <= status < 300:
                self.errors[f"{route} {status}"] += 1


def delete(client: Client, path: str) -> tuple[int, float]:
    conn = client._conn()
    started = time.perf_counter()
    try:
        conn.request("DELETE", path, headers=client.headers)
        response = conn.getresponse()
        response.read()
    except (ConnectionError, http.client.HTTPException):
        conn = client._conn(fresh=True)
        started = time.perf_counter()
        conn.request("DELETE", path, headers=client.headers)
        response = conn.getresponse()
        response.read()
    return response.status, (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of mixed traffic (default 600)")
    ap.add_argument("--users", type=int, default=1580)
    ap.add_argument("--messages", type=int, default=40, help="seeded messages per user")
    ap.add_argument("--add-workers", type=int, default=4)
    ap.add_argument("--search-workers", type=int, default=4)
    ap.add_argument("--forget-every", type=float, default=2.0, help="seconds between forgets")
    ap.add_argument("--expire-interval", type=float, default=30.0, help="the server's retention sweep period")
    ap.add_argument("--rss-every", type=float, default=60.0, help="seconds between RSS samples")
    ap.add_argument(
        "--new-words",
        type=int,
        default=0,
        help="random new words appended to each Added message (text the server has never seen: growing vocabularies)",
    )
    ap.add_argument(
        "--index-cache-mb",
        type=float,
        default=None,
        help="the server's REFIND_INDEX_CACHE_MB (default: the server's own, 512): a small cap shows RSS level off sooner",
    )
    ap.add_argument("--json", action="store_true", help="print the result as JSON only")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="refind-soak-") as tmp:
        db = Path(tmp) / "soak.db"
        started = time.perf_counter()
        user_ids = seed(db, args.users, args.messages)
        seed_s = time.perf_counter() - started
        server = ServerProcess(
            db,
            "--retention-days",
            "30",
            "--expire-interval",
            str(args.expire_interval),
            "--search-threads",
            "4",
            env_extra={"REFIND_INDEX_CACHE_MB": str(args.index_cache_mb)} if args.index_cache_mb is not None else None,
        )
        client = Client(server.url, TOKEN)
        rec = Recorder()
        stop = threading.Event()
        added: list[tuple[str, str]] = []  # (user, request id) the Add threads stored, for forget
        added_lock = threading.Lock()
        qs = queries(500, seed=4)
        add_bodies = pool(8_000, seed=2)
        planted = [0]
        rss: list[tuple[float, int]] = [(0.0, proc_status_kb(server.proc.pid))]

        def adder(worker: int) -> None:
            rng = random.Random(f"add{worker}")
            n = 0
            while not stop.is_set():
                uid = rng.choice(user_ids)
                n += 1
                rid = f"soak-w{worker}-{n}"
                body = {**rng.choice(add_bodies), "user_id": uid, "request_id": rid, "session_id": rid}
                if args.new_words:
                    body["messages"] = [
                        {**m, "content": m["content"] + " " + " ".join(new_word(rng) for _ in range(args.new_words))}
                        for m in body["messages"]
                    ]
                status, _, ms = client.post("/v1/memories/add", body)
                rec.record("add", status, ms)
                if status == 200:
                    with added_lock:
                        added.append((uid, body["request_id"]))

        def searcher(worker: int) -> None:
            rng = random.Random(f"search{worker}")
            while not stop.is_set():
                body = {"query": rng.choice(qs), "user_id": rng.choice(user_ids), "top_k": rng.choice((10, 30, 100))}
                status, _, ms = client.post("/v1/memories/search", body)
                rec.record("search", status, ms)

        def forgetter() -> None:
            rng = random.Random("forget")
            while not stop.wait(args.forget_every):
                with added_lock:
                    if not added:
                        continue
                    uid, rid = added.pop(rng.randrange(len(added)))
                status, ms = delete(client, "/v1/memories?" + urlencode({"user_id": uid, "request_id": rid}))
                rec.record("forget", status, ms)

        def planter() -> None:
            # what the sweep should expire: requests recorded 31 days ago, written by another connection
            old = Store(db, retention_days=None, clock=lambda: system_clock() - 31 * DAY_MS)
            try:
                round_ = 0
                while not stop.is_set():
                    round_ += 1
                    batch = [as_request(b, f"old-{round_}", f"old-{round_}-{k}") for k, b in enumerate(add_bodies[:2])]
                    old.add_many(batch)
                    planted[0] += len(batch)
                    stop.wait(args.expire_interval)
            finally:
                old.close()

        def sampler() -> None:
            t0 = time.perf_counter()
            while not stop.wait(args.rss_every):
                rss.append((time.perf_counter() - t0, proc_status_kb(server.proc.pid)))

        threads = [threading.Thread(target=adder, args=(i,)) for i in range(args.add_workers)]
        threads += [threading.Thread(target=searcher, args=(i,)) for i in range(args.search_workers)]
        threads += [threading.Thread(target=f) for f in (forgetter, planter, sampler)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(args.duration)
        stop.set()
        for t in threads:
            t.join(120)
        elapsed = time.perf_counter() - t0
        rss.append((elapsed, proc_status_kb(server.proc.pid)))
        server.stop()

        conn = sqlite3.connect(db)
        cutoff = system_clock() - 30 * DAY_MS
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        old_left = conn.execute("SELECT count(*) FROM requests WHERE recorded_at < ?", (cutoff,)).fetchone()[0]
        expire_events = conn.execute("SELECT count(*) FROM events WHERE kind = 'expire'").fetchone()[0]
        conn.close()

    result = {
        "users": args.users,
        "new_words_per_message": args.new_words,
        "seeded_messages": args.users * args.messages,
        "seed_s": round(seed_s, 1),
        "duration_s": round(elapsed, 1),
        "workers": {"add": args.add_workers, "search": args.search_workers},
        "routes": {
            route: {
                "requests": len(ms),
                "per_s": round(len(ms) / elapsed, 1),
                "p50_ms": round(percentile(ms, 50), 1),
                "p95_ms": round(percentile(ms, 95), 1),
            }
            for route, ms in sorted(rec.ms.items())
        },
        "errors": dict(rec.errors),
        "rss_mb": [(round(t), round(kb / 1024, 1)) for t, kb in rss],
        "planted_old_requests": planted[0],
        "old_requests_left": old_left,
        "expire_events": expire_events,
        "integrity": integrity,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0 if not rec.errors and integrity == "ok" else 1
    print(json.dumps(result, indent=2))
    print()
    print("| route | requests | per s | p50 ms | p95 ms |")
    print("|---|---:|---:|---:|---:|")
    for route, row in result["routes"].items():
        print(f"| {route} | {row['requests']:,} | {row['per_s']} | {row['p50_ms']} | {row['p95_ms']} |")
    print(f"\nerrors: {sum(rec.errors.values())} {dict(rec.errors)}")
    print("RSS (s → MiB): " + ", ".join(f"{t}s {mb}" for t, mb in result["rss_mb"]))
    return 0 if not rec.errors and integrity == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
