"""Half-sent requests against `refind serve` (README "Security"): can one client holding many sockets that never
finish their headers take the server down? Compared in the same run with the same server under uvicorn's plain h11
protocol (no read deadline, no connection cap) — the baseline.

  .venv/bin/python bench/slowloris.py                     # 1,200 sockets against a server limited to 1,024 files
  .venv/bin/python bench/slowloris.py --sockets 3000 --file-limit 2048

For each protocol: start `refind serve` with its open-file limit (soft = hard) at ``--file-limit``, open
``--sockets`` connections that each send a request line and one header and then nothing, then ask ``/health`` and
store one Add (10 s timeout each), and count what the server wrote to stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
ADD = {"request_id": "r", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "hi"}]}


def attack(protocol: str, sockets: int, file_limit: int) -> dict[str, object]:
    db = Path(tempfile.mkdtemp()) / "slowloris.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    env["PYTHONPATH"] = str(ROOT)
    code = (
        "import resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({file_limit}, {file_limit})); "
        "from refind_cli.server import app as server; from refind_cli.cli import main; "
        f"server.PROTOCOL_OVERRIDE = {protocol!r}; sys.argv[0] = 'refind'; main()"
    )

    args = ["serve", "--port", "0", "--db", str(db), "--mode", "bm25", "--retention-days", "off"]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    port = 0
    while not port:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("server exited:\n" + "".join(lines))
        lines.append(line)
        match = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
        port = int(match.group(1)) if match else 0
    threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True).start()
    held, failed = [], 0
    for _ in range(sockets):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
            sock.sendall(b"POST /v1/memories/add HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append(sock)
        except OSError:
            failed += 1
    time.sleep(1)
    result: dict[str, object] = {"protocol": protocol, "sockets": sockets, "connect_failed": failed}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        for name, call in (
            ("health", lambda: http.get("/health")),
            ("add", lambda: http.post("/v1/memories/add", json=ADD)),
        ):
            started = time.perf_counter()
            try:
                result[name] = call().status_code
            except httpx.HTTPError as exc:
                result[name] = type(exc).__name__
            result[f"{name}_s"] = round(time.perf_counter() - started, 2)
    for sock in held:
        sock.close()
    proc.terminate()
    proc.wait(30)
    text = "".join(lines)
    result.update(
        emfile_lines=text.count("Too many open files"),
        tracebacks=text.count("Traceback"),
        stderr_lines=len(lines),
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sockets", type=int, default=1200)
    parser.add_argument("--file-limit", type=int, default=1024)
    opts = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, opts.sockets + 256), hard))
    for protocol in ("h11", "refind_cli.server.connections:GuardedH11Protocol"):
        print(attack(protocol, opts.sockets, opts.file_limit), flush=True)


if __name__ == "__main__":
    main()
