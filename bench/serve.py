"""Load on `refind serve`: Add and Search p50/p95 and throughput at 64 Add + 32 Search workers, and 256 searches
in flight at once — over real HTTP against a real server process, with a baseline measured in the same run.

  .venv/bin/python bench/serve.py                       # defaults below; about a minute
  .venv/bin/python bench/serve.py --users 128 --messages 400 --seconds 20

1. Seed ``--users`` users of ``--messages`` synthetic messages each (bench/synth.py) straight into the database.
2. Baseline, in this process without HTTP or threads: the same domain calls the server makes — ``Store.add`` of
   one 20-message request per call, ``search.search`` with top_k 100 — one at a time.
3. Adds alone for ``--seconds``/2 (``--add-workers`` threads, as below, no searches); then
   mixed load, ``--seconds`` long: ``--add-workers`` threads each send 20-message Adds for their own new users, one
   after another with no pause (harder than the platform's ~0.8 s between a user's Adds), while
   ``--search-workers`` threads search the seeded users (top_k 100). Every non-200 is an error.
4. Burst: ``--inflight`` searches released at once (a barrier); the slowest answer is what counts (goal: < 10 s).

The client runs on the same 2 cores as the server, so the server's numbers here are a floor.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_http import Client, ServerProcess
from synth import queries, requests

from refind_cli.evaluate import percentile
from refind_cli.store import Store


def seed(db: Path, users: int, messages: int) -> list[str]:
    ids = [f"seed-{u}" for u in range(users)]
    with Store(db, retention_days=None) as store:
        for uid in ids:
            store.add_many(list(requests(uid, messages, seed=1)))
    return ids


def baseline(db: Path, user_ids: list[str], qs: list[str], n_adds: int, n_searches: int) -> dict:
    from refind_cli import search

    with Store(db, retention_days=None) as store:
        batch = list(requests("baseline-user", n_adds * 20, seed=2))[:n_adds]
        started = time.perf_counter()
        for request in batch:
            store.add(request)
        add_s = time.perf_counter() - started
        rng = random.Random(3)
        started = time.perf_counter()
        for i in range(n_searches):
            search.search(store, rng.choice(user_ids), qs[i % len(qs)], top_k=100)
        search_s = time.perf_counter() - started
    return {
        "adds_per_s": n_adds / add_s,
        "searches_per_s": n_searches / search_s,
        "add_ms": add_s / n_adds * 1000,
        "search_ms": search_s / n_searches * 1000,
    }


def mixed(
    client: Client, user_ids: list[str], qs: list[str], add_workers: int, search_workers: int, seconds: float
) -> dict:
    stop = threading.Event()
    lock = threading.Lock()
    add_ms: list[float] = []
    search_ms: list[float] = []
    errors: list[str] = []

    template = [r.canonical() for r in requests("template", 200, seed=4)]  # 10 Adds of 20 messages

    def adder(w: int) -> None:
        user = 0
        while not stop.is_set():
            for body in template:  # a new user every 10 Adds; generated up front, not inside the timing
                if stop.is_set():
                    return
                body = body | {"user_id": f"load-{w}-{user}", "request_id": f"{body['request_id']}-{w}-{user}"}
                status, raw, took = client.post("/v1/memories/add", body)
                with lock:
                    add_ms.append(took)
                    if status != 200:
                        errors.append(f"add {status} {raw[:120]!r}")
            user += 1

    def searcher(w: int) -> None:
        rng = random.Random(w)
        while not stop.is_set():
            body = {"query": rng.choice(qs), "user_id": rng.choice(user_ids), "top_k": 100}
            status, raw, took = client.post("/v1/memories/search", body)
            with lock:
                search_ms.append(took)
                if status != 200 or len(json.loads(raw).get("data", [])) > 100:
                    errors.append(f"search {status} {raw[:120]!r}")

    threads = [threading.Thread(target=adder, args=(w,)) for w in range(add_workers)]
    threads += [threading.Thread(target=searcher, args=(w,)) for w in range(search_workers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    return {
        "seconds": elapsed,
        "adds": len(add_ms),
        "searches": len(search_ms),
        "errors": errors,
        "add_p50": percentile(add_ms, 50),
        "add_p95": percentile(add_ms, 95),
        "search_p50": percentile(search_ms, 50),
        "search_p95": percentile(search_ms, 95),
        "adds_per_s": len(add_ms) / elapsed,
        "searches_per_s": len(search_ms) / elapsed,
    }


def burst(client: Client, user_ids: list[str], qs: list[str], inflight: int) -> dict:
    barrier = threading.Barrier(inflight)
    ms: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        rng = random.Random(100 + i)
        body = {"query": rng.choice(qs), "user_id": rng.choice(user_ids), "top_k": 100}
        client._conn()  # connect before the barrier: measure the server, not 256 TCP handshakes
        barrier.wait()
        status, _, took = client.post("/v1/memories/search", body)
        with lock:
            ms.append(took)
            if status != 200:
                errors.append(str(status))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(inflight)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {
        "inflight": inflight,
        "wall_s": time.perf_counter() - started,
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "max": max(ms),
        "errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--messages", type=int, default=400, help="messages per seeded user")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--add-workers", type=int, default=64)
    parser.add_argument("--search-workers", type=int, default=32)
    parser.add_argument("--inflight", type=int, default=256)
    parser.add_argument("--search-threads", type=int, help="the server's --search-threads (default: its own)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)

    qs = queries(200, seed=5)
    with tempfile.TemporaryDirectory(prefix="refind-serve-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        user_ids = seed(db, args.users, args.messages)
        base = baseline(db, user_ids, qs, n_adds=200, n_searches=200)
        server = ServerProcess(db, *(["--search-threads", str(args.search_threads)] if args.search_threads else []))
        try:
            client = Client(server.url)
            client.post("/v1/memories/search", {"query": qs[0], "user_id": user_ids[0], "top_k": 100})  # warm
            adds_only = mixed(client, user_ids, qs, args.add_workers, 0, args.seconds / 2)
            load = mixed(client, user_ids, qs, args.add_workers, args.search_workers, args.seconds)
            peak = burst(client, user_ids, qs, args.inflight)
        finally:
            server.stop()
        log = "".join(server.log)
    locked = log.count("database is locked")
    internal = log.count("internal error")
    results = {
        "args": vars(args),
        "baseline": base,
        "adds_only": adds_only | {"errors": len(adds_only["errors"])},
        "mixed": load | {"errors": load["errors"][:5], "error_count": len(load["errors"])},
        "burst": peak,
        "locked_in_log": locked,
        "internal_errors_in_log": internal,
    }
    print(
        f"seeded {args.users} users × {args.messages} messages; {args.add_workers} Add + {args.search_workers} "
        f"Search workers for {load['seconds']:.0f} s\n"
    )
    print("| | p50 ms | p95 ms | per second | baseline (direct call) per second | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    print(
        f"| Add (20 messages), alone | {adds_only['add_p50']:.1f} | {adds_only['add_p95']:.1f} | "
        f"{adds_only['adds_per_s']:.1f} | {base['adds_per_s']:.1f} | "
        f"{adds_only['adds_per_s'] / base['adds_per_s']:.2f}× |"
    )
    print(
        f"| Add (20 messages), with searches | {load['add_p50']:.1f} | {load['add_p95']:.1f} | "
        f"{load['adds_per_s']:.1f} | "
        f"{base['adds_per_s']:.1f} | {load['adds_per_s'] / base['adds_per_s']:.2f}× |"
    )
    print(
        f"| Search (top_k 100), with Adds | {load['search_p50']:.1f} | {load['search_p95']:.1f} | "
        f"{load['searches_per_s']:.1f} | {base['searches_per_s']:.1f} | "
        f"{load['searches_per_s'] / base['searches_per_s']:.2f}× |"
    )
    errors = len(load["errors"]) + len(adds_only["errors"])
    print(f"\nerrors: {errors}; 'database is locked' in the server log: {locked}; internal errors: {internal}")
    print(
        f"{peak['inflight']} searches in flight: all answered in {peak['wall_s']:.2f} s; p50 {peak['p50']:.0f} ms, "
        f"p95 {peak['p95']:.0f} ms, slowest {peak['max']:.0f} ms; errors {len(peak['errors'])}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if not errors and not peak["errors"] and not locked and peak["max"] < 10_000 else 1


if __name__ == "__main__":
    sys.exit(main())
