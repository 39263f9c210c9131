"""What reading a request body costs at the server's edge (``server.asgi.load_json``), this checkout against another
one in the same run: hostile bodies (a repeated key at the end of thousands; a body of empty arrays in an ignored
field) and a legitimate Add of 10,000 messages.

    git worktree add --detach ../before <commit>
    .venv/bin/python bench/parse_edge.py --baseline ../before

Each checkout runs in a process of its own (``python -P``, the checkout on PYTHONPATH); each body is read 3 times
there and the best time kept, with the peak of memory Python allocated while reading (tracemalloc; the parsed object
is dropped before the next). Prints a markdown table: ms and peak MiB for each, and the outcome (parsed, or the 422
and its message's start).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def bodies() -> dict[str, bytes]:
    def keys(n: int) -> bytes:
        listed = ",".join(f'"{i:x}":0' for i in range(n))
        return ('{"query":"x","user_id":"u","top_k":1,' + listed + f',"{n - 1:x}":0}}').encode()

    add = {"request_id": "r", "user_id": "u", "session_id": "s"}
    messages = [{"role": "user", "content": f"Caroline: message {i} about a cat"} for i in range(10_000)]
    arrays = json.dumps(add | {"messages": messages[:1]})[:-1] + ', "junk": [' + "[]," * (4 * 1024 * 1024) + "[]]}"
    return {
        "6,500 keys, one repeated last (53 KB)": keys(6_500),
        "30,000 keys, one repeated last (259 KB)": keys(30_000),
        "4 Mi empty arrays in an ignored field (12 MiB)": arrays.encode(),
        "an Add of 10,000 messages (legitimate)": json.dumps(add | {"messages": messages}).encode(),
    }


def worker() -> None:
    import time
    import tracemalloc

    from refind_cli.errors import InvalidInput
    from refind_cli.server.asgi import load_json

    out = {}
    for name, body in bodies().items():
        best, peak, outcome = float("inf"), 0, ""
        for _ in range(3):
            tracemalloc.start()
            t = time.perf_counter()
            try:
                parsed = load_json(body)
                outcome = "parsed"
            except InvalidInput as exc:
                parsed, outcome = None, "422: " + exc.message[:48]
            best = min(best, time.perf_counter() - t)
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            del parsed
        out[name] = (best * 1000, peak / 2**20, outcome)
    print(json.dumps(out))


def run(checkout: Path) -> dict[str, list]:
    env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{HERE}"}
    done = subprocess.run(
        [sys.executable, "-P", __file__, "--worker"], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, required=False)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker()
        return
    if args.baseline is None or not (args.baseline / "refind_cli").is_dir():
        raise SystemExit("--baseline: a checkout of refind (a directory holding refind_cli) is needed")
    before, now = run(args.baseline.resolve()), run(HERE.parent)
    print("| body | baseline ms | this ms | baseline peak MiB | this peak MiB | baseline | this |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name in now:
        (b_ms, b_mib, b_out), (n_ms, n_mib, n_out) = before[name], now[name]
        print(f"| {name} | {b_ms:,.1f} | {n_ms:,.1f} | {b_mib:,.1f} | {n_mib:,.1f} | {b_out} | {n_out} |")


if __name__ == "__main__":
    main()
