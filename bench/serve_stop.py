"""`refind serve` stopped under load: is every Add answered 200 stored, and does the server end?

    .venv/bin/python bench/serve_stop.py [--rounds 2] [--workers 1] [--plans TERM,INT,TERM+TERM,INT+INT,GROUP_INT]

Each round of each plan starts `refind serve` (bm25, a temporary database) on a free loopback port, has 16 client
threads post Adds of three messages (unique request ids, keep-alive connections) as fast as they are answered, and
after 0.3–1.5 s (seeded by the round) sends the plan's signals to the server (``TERM``, ``INT``; ``GROUP_INT`` is a
terminal's Ctrl-C, to the whole process group: with ``--workers 2`` the workers get it from the terminal and
SIGTERM from their supervisor; ``A+B``: B 0–0.3 s after A). The clients go on until the process has ended (or 90 s
passed: "hung", then killed). Then it counts: Adds answered 200 and not stored ("lost"), stored requests without all
their messages ("partial"), messages without their request ("orphans"), and what the clients got (status codes,
httpx errors: a closed connection is an answer here, a 200 then lost is not). A line per round; "BAD" when any of
lost, partial, orphans or hung.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

TOKEN = "probe-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MSGS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def body(rid: str, user: str) -> dict[str, object]:
    return {
        "request_id": rid,
        "user_id": user,
        "session_id": "s1",
        "messages": [{"role": "user", "content": f"m{i} of {rid} hiking", "timestamp": None} for i in range(MSGS)],
    }


def one_round(repo: Path, plan: list[str], workers: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="refind-serve-stop-"))
    db = tmp / "p.db"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    cmd = [
        sys.executable,
        "-m",
        "refind_cli",
        "serve",
        "--port",
        str(port),
        "--db",
        str(db),
        "--mode",
        "bm25",
        "--token",
        TOKEN,
        "--expire-interval",
        "0",
        "--retention-days",
        "off",
        "--workers",
        str(workers),
    ]
    with open(tmp / "log", "w") as log:  # (the child holds its own copy)
        proc = subprocess.Popen(cmd, cwd=repo, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError((tmp / "log").read_text())
        time.sleep(0.1)
    results: list[tuple[str, object]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(w: int) -> None:
        n = 0
        with httpx.Client(base_url=url, timeout=60, headers=AUTH) as http:
            while not stop.is_set():
                rid = f"w{w}-{n}"
                n += 1
                try:
                    r = http.post("/v1/memories/add", json=body(rid, f"u{w % 4}"))
                    out: object = r.status_code
                except httpx.HTTPError as exc:
                    out = type(exc).__name__
                    time.sleep(0.01)
                with lock:
                    results.append((rid, out))

    pool = [threading.Thread(target=client, args=(w,)) for w in range(16)]
    for t in pool:
        t.start()
    time.sleep(rng.uniform(0.3, 1.5))
    for i, sig in enumerate(plan):
        if i:
            time.sleep(rng.uniform(0.0, 0.3))
        try:
            if sig == "GROUP_INT":  # a terminal's Ctrl-C: the whole process group
                os.killpg(proc.pid, signal.SIGINT)
            else:
                proc.send_signal(getattr(signal, "SIG" + sig))
        except ProcessLookupError:
            pass
    try:
        rc = proc.wait(90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = "hung"
    time.sleep(0.3)  # requests after the end: connection refused
    stop.set()
    for t in pool:
        t.join()
    conn = sqlite3.connect(db)
    stored = dict(conn.execute("SELECT request_id, message_count FROM requests"))
    per = dict(conn.execute("SELECT request_id, count(*) FROM messages GROUP BY user_id, request_id"))
    conn.close()
    ok = [rid for rid, out in results if out == 200]
    lost = [rid for rid in ok if rid not in stored]
    partial = [rid for rid in stored if stored[rid] != MSGS or per.get(rid) != MSGS]
    orphans = [rid for rid in per if rid not in stored]
    outs: dict[str, int] = {}
    for _, out in results:
        outs[str(out)] = outs.get(str(out), 0) + 1
    text = (tmp / "log").read_text()
    return {
        "plan": "+".join(plan),
        "workers": workers,
        "rc": rc,
        "acked": len(ok),
        "stored": len(stored),
        "lost": lost[:5],
        "n_lost": len(lost),
        "partial": partial[:5],
        "orphans": orphans[:5],
        "outs": outs,
        "traceback": "Traceback" in text,
        "dir": str(tmp),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent, help="the checkout to serve")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--plans", default="TERM,INT,TERM+TERM,INT+INT,TERM+INT")
    a = ap.parse_args()
    bad = 0
    for r in range(a.rounds):
        for plan in a.plans.split(","):
            res = one_round(a.repo, plan.split("+"), a.workers, seed=r)
            flag = res["n_lost"] or res["partial"] or res["orphans"] or res["rc"] == "hung"
            bad += bool(flag)
            if not flag:  # (a bad round's folder is kept: its database and the server's log)
                shutil.rmtree(str(res.pop("dir")))
            print(("BAD " if flag else "ok  ") + str(res), flush=True)
    print("bad rounds:", bad)


if __name__ == "__main__":
    main()
