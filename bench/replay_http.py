"""A black-box HTTP client for the Add/Search contract: replay a labelled dataset into a server, ask its questions.

It speaks only HTTP and JSON to the server (``refind serve`` started here on a free loopback port, or any server
given with ``--url``) and checks every answer against the contract: an Add answers 200 with exactly
``{"success": true, "request_id", "user_id", "session_id"}`` echoing the request; a Search answers 200 with
``{"data": [...]}``, at most ``top_k`` items, each with non-empty string ``id`` and ``content`` (``score`` a number
and ``created_at`` a string when present). Anything else is a contract fault, counted and shown (no retries).

As the platform does: each user's Adds are sent one after another, users in parallel on ``--workers`` threads;
then the questions, on ``min(workers, 32)`` threads. Recall is scored with the evaluation's own metric
(``refind_cli.evaluate``) and compared with ``refind eval`` (in-process ``evaluate``) on the same data.

  .venv/bin/python bench/replay_http.py ../shared/datasets/locomo10.json --workers 8 --workers 64
  .venv/bin/python bench/replay_http.py ../shared/datasets/longmemeval_s_dev.json.gz --workers 64

``--baseline DIR`` also replays each dataset into a server run from another checkout's ``refind_cli`` (e.g. the
main branch's worktree), alternating with this one, so both are measured under the same load (``--repeat N``
times each). Each row also shows the CPU time the server process used per Add and per search (from /proc: unlike
latency, hardly moved by other processes on the same cores) and its resident memory (VmRSS) when the replay ended.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

TOKEN = "bench-token"


# ---- the client ------------------------------------------------------------------------------------------------


class Client:
    """One keep-alive HTTP/1.1 connection per thread (as a platform worker holds one)."""

    def __init__(self, url: str, token: str | None = TOKEN) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._local = threading.local()

    def _conn(self, fresh: bool = False) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
            self._local.conn = conn
        return conn

    def post(self, path: str, body: dict) -> tuple[int, bytes, float]:
        """(status, raw body, milliseconds). A dropped keep-alive connection is reopened once."""
        payload = json.dumps(body, ensure_ascii=False).encode()
        for attempt in (0, 1):
            conn = self._conn(fresh=attempt == 1)
            started = time.perf_counter()
            try:
                conn.request("POST", path, payload, self.headers)
                response = conn.getresponse()
                raw = response.read()
                return response.status, raw, (time.perf_counter() - started) * 1000
            except (ConnectionError, http.client.HTTPException):
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")


# ---- the contract checks ---------------------------------------------------------------------------------------


def add_faults(body: dict, status: int, raw: bytes) -> list[str]:
    if status != 200:
        return [f"add {status}: {raw[:200]!r}"]
    try:
        data = json.loads(raw)
    except ValueError:
        return ["add 200 with a body that is not JSON"]
    expected = {
        "success": True,
        "request_id": body["request_id"],
        "user_id": body["user_id"],
        "session_id": body["session_id"],
    }
    return [] if data == expected else [f"add answered {data!r}, expected {expected!r}"]


def search_faults(top_k: int, status: int, raw: bytes) -> tuple[list[str], list[str]]:
    """(faults, contents)."""
    if status != 200:
        return [f"search {status}: {raw[:200]!r}"], []
    try:
        data = json.loads(raw)
    except ValueError:
        return ["search 200 with a body that is not JSON"], []
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return [f"search answered without a data list: {str(data)[:200]}"], []
    faults = [f"search returned {len(items)} items for top_k={top_k}"] if len(items) > top_k else []
    contents = []
    for item in items:
        if not isinstance(item, dict):
            faults.append("search item is not an object")
            continue
        for key in ("id", "content"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                faults.append(f"search item without a non-empty string {key}")
        score = item.get("score")
        if score is not None and (
            isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)
        ):
            faults.append(f"search item score {score!r} is not a number")
        if "created_at" in item and not isinstance(item["created_at"], str):
            faults.append("search item created_at is not a string")
        contents.append(item.get("content") or "")
    return faults, contents


# ---- a server to talk to ---------------------------------------------------------------------------------------


class ServerProcess:
    """`refind serve` on a free loopback port (read from uvicorn's startup line), bm25 mode, a token."""

    def __init__(self, db: Path, *extra: str, env_extra: dict[str, str] | None = None, tree: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")} | (env_extra or {})
        cwd = None
        if tree is not None:  # the server's code from another checkout (a baseline in the same run); `python -m`
            cwd = Path(tree).resolve()  # puts the working directory first on sys.path, so run it from there
            env["PYTHONPATH"] = str(cwd)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "refind_cli",
                "serve",
                "--port",
                "0",
                "--db",
                str(db),
                "--mode",
                "bm25",
                "--token",
                TOKEN,
                "--retention-days",
                "off",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        self.log: list[str] = []
        for line in self.proc.stderr:
            self.log.append(line)
            match = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
            if match:
                self.url = match.group(1)
                break
        else:
            raise RuntimeError("refind serve did not start:\n" + "".join(self.log))
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def cpu_s(self) -> float:
        """CPU seconds the server has used so far (user + system; Linux /proc): unlike latency, hardly moved by
        other processes sharing the cores."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        """The server's resident memory now (MiB; Linux /proc)."""
        return proc_status_kb(self.proc.pid) / 1024

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def proc_status_kb(pid: int, field: str = "VmRSS") -> int:
    """A kB field of /proc/PID/status (VmRSS: resident memory now; VmHWM: its peak); 0 when absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


# ---- replay and ask --------------------------------------------------------------------------------------------


def request_body(request) -> dict:  # an AddRequest of the loaders, as the platform would send it
    return request.canonical()


def replay(client: Client, samples: list, workers: int) -> dict:
    faults: list[str] = []
    ms: list[float] = []
    lock = threading.Lock()

    def one_user(sample) -> None:
        for request in sample.requests:  # one after another, as the platform sends one user's Adds
            body = request_body(request)
            status, raw, took = client.post("/v1/memories/add", body)
            with lock:
                ms.append(took)
                faults.extend(add_faults(body, status, raw))

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one_user, samples))
    return {"requests": len(ms), "faults": faults, "ms": ms, "seconds": time.perf_counter() - started}


def ask(client: Client, samples: list, workers: int, top_k: int) -> dict:
    from refind_cli.evaluate import Hits, Tally

    tally, faults, lock = Tally(), [], threading.Lock()
    questions = [q for s in samples for q in s.questions]

    def one(question) -> tuple:
        body = {"query": question.text, "user_id": question.user_id, "top_k": top_k}
        if question.options:
            body["options"] = list(question.options)
        status, raw, took = client.post("/v1/memories/search", body)
        return question, took, *search_faults(top_k, status, raw)

    started = time.perf_counter()
    with ThreadPoolExecutor(min(workers, 32)) as pool:
        results = list(pool.map(one, questions))
    for question, took, bad, contents in results:  # in question order: the tally matches refind eval's
        with lock:
            faults.extend(bad)
            tally.record(question, Hits(contents), took)
    return {
        "questions": len(questions),
        "faults": faults,
        "summary": tally.summary(),
        "seconds": time.perf_counter() - started,
    }


def run_dataset(
    path: str,
    workers: int,
    *,
    top_k: int,
    limit: int | None,
    url: str | None,
    token: str = TOKEN,
    tree: str | None = None,
    env: dict[str, str] | None = None,
) -> dict:
    from refind_cli import datasets
    from refind_cli.evaluate import take

    samples = take(list(datasets.load(path)), limit)
    rss = None
    with tempfile.TemporaryDirectory(prefix="refind-http-") as tmp:
        server = None if url else ServerProcess(Path(tmp) / "served.db", env_extra=env, tree=tree)
        try:
            client = Client(url or server.url, token or None)
            cpu = [server.cpu_s() if server is not None else math.nan]
            adds = replay(client, samples, workers)
            cpu.append(server.cpu_s() if server is not None else math.nan)
            asked = ask(client, samples, workers, top_k)
            cpu.append(server.cpu_s() if server is not None else math.nan)
            rss = server.rss_mb() if server is not None else None
            adds["server_cpu_ms"] = (cpu[1] - cpu[0]) * 1000 / max(1, adds["requests"])
            asked["server_cpu_ms"] = (cpu[2] - cpu[1]) * 1000 / max(1, asked["questions"])
        finally:
            if server is not None:
                server.stop()
        locked = sum("database is locked" in line for line in (server.log if server else []))
    return {
        "dataset": Path(path).name,
        "server": Path(tree).name if tree else "this tree",
        "workers": workers,
        "users": len(samples),
        "adds": adds,
        "searches": asked,
        "locked_in_log": locked,
        "rss_mb": rss,
    }


def in_process_recall(path: str, *, top_k: int, limit: int | None) -> dict:
    from refind_cli.evaluate import EvalSettings, evaluate

    report = evaluate(path, settings=EvalSettings(top_k=top_k, limit=limit, mode="bm25", baseline=False))
    return report["systems"]["refind"]["recall"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+", help="LoCoMo / LongMemEval / MemDaily files (../shared/datasets/…)")
    parser.add_argument("--workers", type=int, action="append", help="parallel workers (repeatable; default 8, 64)")
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--limit", type=int, default=None, help="at most this many questions per dataset")
    parser.add_argument("--url", help="an already running server (token from REFIND_SERVER_TOKEN)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--baseline", help="also run the server from this checkout (e.g. ../main), alternating")
    parser.add_argument("--repeat", type=int, default=1, help="replays per server and worker count (default 1)")
    parser.add_argument(
        "--server-env", action="append", default=[], help="KEY=VALUE for the servers started here (repeatable)"
    )
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.server_env)
    token = os.environ.get("REFIND_SERVER_TOKEN", "") if args.url else TOKEN
    trees = [args.baseline, None] if args.baseline and not args.url else [None]
    results, ok = [], True
    print(
        "| dataset | server | workers | users | adds | add p50/p95 ms | questions | search p50/p95 ms | faults | "
        "R@2k | R@8k | R@32k | `refind eval` R@2k/8k/32k | equal | server CPU ms per add / search | RSS MiB | load |"
    )
    print("|---|---|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---|---|---|---:|---:|")
    for path in args.datasets:
        expected = in_process_recall(path, top_k=args.top_k, limit=args.limit)
        for workers in args.workers or [8, 64]:
            for _, tree in ((i, t) for i in range(args.repeat) for t in trees):
                r = run_dataset(
                    path, workers, top_k=args.top_k, limit=args.limit, url=args.url, token=token, tree=tree, env=env
                )
                from refind_cli.evaluate import percentile

                got = r["searches"]["summary"]["recall"]
                faults = r["adds"]["faults"] + r["searches"]["faults"]
                equal = got == expected
                ok &= equal and not faults and not r["locked_in_log"]
                s = r["searches"]["summary"]
                rss = "–" if r["rss_mb"] is None else f"{r['rss_mb']:.0f}"
                print(
                    f"| {r['dataset']} | {r['server']} | {workers} | {r['users']} | {r['adds']['requests']} | "
                    f"{percentile(r['adds']['ms'], 50):.1f} / {percentile(r['adds']['ms'], 95):.1f} | "
                    f"{r['searches']['questions']} | {s['p50_ms']:.1f} / {s['p95_ms']:.1f} | {len(faults)} | "
                    + " | ".join(f"{got[k]:.3f}" for k in sorted(got, key=int))
                    + f" | {' / '.join(f'{expected[k]:.3f}' for k in sorted(expected, key=int))} | "
                    f"{'yes' if equal else 'NO'} | "
                    f"{r['adds']['server_cpu_ms']:.1f} / {r['searches']['server_cpu_ms']:.1f} | "
                    f"{rss} | {os.getloadavg()[0]:.1f} |",
                    flush=True,
                )
                for fault, n in Counter(faults).most_common(5):
                    print(f"    fault ×{n}: {fault}", file=sys.stderr)
                r["adds"].pop("ms")
                r["expected_recall"] = expected
                results.append(r)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
