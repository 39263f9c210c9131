"""`refind restore` of a large backup under a running `refind serve` taking Adds: how long the restore takes, and how
long the server's Adds wait meanwhile (they queue behind its write lock).

    .venv/bin/python bench/restore.py --messages 200000

Builds (or reuses, with --workdir) a database of synthetic users (bench/synth.py), backs it up, stores more Adds
into the database, then restores the backup while a client sends one Add every 20 ms; checks that the restored
database is sound and holds the backup's content plus exactly the Adds acknowledged after the restore.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth

from refind_cli.store import Store

TOKEN = "bench-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def refind(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "refind_cli", *args], capture_output=True, text=True, check=False)


def body(rid: str, text: str) -> dict[str, object]:
    return {"request_id": rid, "user_id": "live", "session_id": "s1", "messages": [{"role": "user", "content": text}]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--workdir", default=None, help="Keep the databases here (default: a temporary folder).")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="refind-restore-"))
    work.mkdir(parents=True, exist_ok=True)
    base = work / f"base-{args.messages}.db"
    if not base.exists():
        store = Store(base, retention_days=None)
        synth.fill_interleaved(store, {f"u{i}": 200 for i in range(args.messages // 200)})
        store.close()
    db, backup = work / "refind.db", work / "backup.db"
    for path in (db, backup, *(work / f"refind.db{s}" for s in ("-wal", "-shm"))):
        path.unlink(missing_ok=True)
    assert refind("backup", str(db), "--db", str(base)).returncode == 0  # (a working copy of the base)
    assert refind("backup", str(backup), "--db", str(db)).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "refind_cli", "serve", "--port", "0", "--db", str(db), "--mode", "bm25"]
        + ["--token", TOKEN, "--expire-interval", "0", "--retention-days", "off"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    url = ""
    while not url:
        line = proc.stderr.readline()
        found = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
        url = found.group(1) if found else url
        if not line:
            sys.exit("the server did not start")
    threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True).start()
    waits: list[tuple[float, float, str, int]] = []  # (sent at, seconds, request id, status)
    stop = threading.Event()

    def adder() -> None:
        with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
            i = 0
            while not stop.is_set():
                rid = f"a{i}"
                sent = time.perf_counter()
                status = http.post("/v1/memories/add", json=body(rid, f"marker{i} zebra")).status_code
                waits.append((sent, time.perf_counter() - sent, rid, status))
                i += 1
                time.sleep(0.02)

    try:
        thread = threading.Thread(target=adder)
        thread.start()
        time.sleep(2)
        started = time.perf_counter()
        done = refind("restore", str(backup), "--db", str(db), "--yes")
        ended = time.perf_counter()
        time.sleep(2)
        stop.set()
        thread.join()
        assert done.returncode == 0, done.stderr
        during = [w for sent, w, _, _ in waits if started <= sent + w and sent <= ended]
        after = [rid for sent, w, rid, status in waits if status == 200 and sent > ended]
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as http:
            found = http.post("/search", json={"query": "zebra", "user_id": "live", "top_k": 100000}).json()["data"]
        print(f"restore of {args.messages:,} messages ({backup.stat().st_size / 1e6:.0f} MB): {ended - started:.2f} s")
        print(
            f"adds overlapping it: {len(during)}, longest wait {max(during, default=0):.2f} s; all statuses "
            f"{sorted({s for *_, s in waits})}"
        )
        before = {rid for sent, w, rid, status in waits if status == 200 and sent + w < started}
        with Store(db, retention_days=None) as store:
            kept = {m.request_id for m in store.user_messages("live")}
        shown = set(re.findall(r"marker(\d+)", " ".join(hit["content"] for hit in found)))
        print(
            f"after: {len(kept)} Adds stored, {len(shown)} found by a search; all {len(after)} acknowledged after "
            f"the restore kept: {set(after) <= kept}; any of the {len(before)} acknowledged before it kept: "
            f"{bool(before & kept)}"
        )
    finally:
        stop.set()
        proc.terminate()
        proc.wait(30)
    check = refind("inspect", "--check", "--db", str(db))
    print("inspect --check exit", check.returncode)
    if not args.workdir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
