"""The server's memory after every shared set: one `refind serve` is sent each dataset's Adds and questions in turn
(as bench/replay_http.py sends them: each user's Adds one after another, users on ``--workers`` threads, then the
questions), and its resident memory (VmRSS, from /proc) is read after each set, with its peak (VmHWM) at the end.

The per-process index cache (``REFIND_INDEX_CACHE_MB``, 512 MB by default) is what grows with the users a server
has seen; each ``--index-cache-mb`` value is a server of its own (default: the server's default, then 16 MB), so the
rows show where RSS levels off with the cap and how far below the default it stays with a small one. ``--rounds N``
sends every set N times, each round under new user ids (``<user>~<round>``): N times the users, the same data, so
RSS after each round shows whether memory grows with the number of users seen.

  .venv/bin/python bench/server_memory.py ../shared/datasets/locomo10.json \\
      ../shared/datasets/longmemeval_s_dev.json.gz ../shared/datasets/memdaily_dev ../shared/datasets/realtalk_dev
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from replay_http import Client, ServerProcess, ask, proc_status_kb, replay


def renamed(sample: Any, suffix: str) -> Any:
    """A datasets.Sample under user id + suffix."""
    from dataclasses import replace

    user = sample.user_id + suffix
    return replace(
        sample,
        user_id=user,
        requests=tuple(
            replace(r, user_id=r.user_id + suffix, request_id=r.request_id + suffix) for r in sample.requests
        ),
        questions=tuple(replace(q, user_id=q.user_id + suffix) for q in sample.questions),
    )


def one_server(
    paths: list[str], cache_mb: int | None, *, workers: int, top_k: int, tree: str | None, rounds: int = 1
) -> dict:
    from refind_cli import datasets

    env = {"REFIND_INDEX_CACHE_MB": str(cache_mb)} if cache_mb is not None else None
    after: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="refind-mem-") as tmp:
        db = Path(tmp) / "served.db"
        server = ServerProcess(db, env_extra=env, tree=tree)
        try:
            client = Client(server.url)
            start = server.rss_mb()
            users = messages = questions = 0
            faults = 0
            for path, round_ in ((p, r) for r in range(rounds) for p in paths):
                samples = [renamed(x, f"~{round_}") if round_ else x for x in datasets.load(path)]
                users += len(samples)
                messages += sum(len(r.messages) for s in samples for r in s.requests)
                questions += sum(len(s.questions) for s in samples)
                started = time.perf_counter()
                faults += len(replay(client, samples, workers)["faults"])
                faults += len(ask(client, samples, workers, top_k)["faults"])
                after.append(
                    {
                        "dataset": Path(path).name + (f" (round {round_ + 1})" if rounds > 1 else ""),
                        "users": users,
                        "messages": messages,
                        "rss_mb": server.rss_mb(),
                        "seconds": time.perf_counter() - started,
                    }
                )
            peak = proc_status_kb(server.proc.pid, "VmHWM") / 1024
        finally:
            server.stop()
        db_mb = sum(f.stat().st_size for f in Path(tmp).glob("served.db*")) / 2**20
    return {
        "index_cache_mb": cache_mb,
        "server": Path(tree).name if tree else "this tree",
        "start_rss_mb": start,
        "after": after,
        "peak_rss_mb": peak,
        "questions": questions,
        "faults": faults,
        "db_mb": db_mb,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+", help="the shared sets, replayed in this order into one server")
    parser.add_argument(
        "--index-cache-mb",
        type=int,
        action="append",
        help="REFIND_INDEX_CACHE_MB of a server (repeatable; default: the server's default, then 16)",
    )
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="servers per cache size (default 1)")
    parser.add_argument("--rounds", type=int, default=1, help="send every set this many times, new user ids each")
    parser.add_argument("--baseline", help="also run the server from this checkout (e.g. ../main), alternating")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    sizes: list[int | None] = args.index_cache_mb or [None, 16]
    trees = [args.baseline, None] if args.baseline else [None]
    names = [
        Path(p).name + (f" ({r + 1})" if args.rounds > 1 else "") for r in range(args.rounds) for p in args.datasets
    ]
    print(
        "| server | index cache MB | RSS at start | "
        + " | ".join(f"after {n}" for n in names)
        + " | peak (VmHWM) | users | messages | questions | faults | database MiB | load |"
    )
    print("|---|---:|---:|" + "---:|" * len(names) + "---:|---:|---:|---:|---:|---:|---:|")
    results = []
    for _ in range(args.repeat):
        for size in sizes:
            for tree in trees:
                r = one_server(
                    args.datasets, size, workers=args.workers, top_k=args.top_k, tree=tree, rounds=args.rounds
                )
                last = r["after"][-1]
                print(
                    f"| {r['server']} | {'default' if size is None else size} | {r['start_rss_mb']:.0f} | "
                    + " | ".join(f"{a['rss_mb']:.0f}" for a in r["after"])
                    + f" | {r['peak_rss_mb']:.0f} | {last['users']} | {last['messages']:,} | {r['questions']:,} | "
                    f"{r['faults']} | {r['db_mb']:.0f} | {os.getloadavg()[0]:.1f} |",
                    flush=True,
                )
                results.append(r)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if all(r["faults"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
