"""Agent mode under the platform's search load: 256 planner searches in flight, each waiting seconds on the model,
while Adds and /health keep being answered — against a real `refind serve --mode agent` and a stub model server.

  .venv/bin/python bench/serve_agent.py                      # 256 searches, 2 s of model time per call
  .venv/bin/python bench/serve_agent.py --inflight 64 --model-seconds 5

The stub is an OpenAI-compatible server on loopback that sleeps ``--model-seconds`` and then answers every call
with ``{"action": "finish_search"}`` (one model call per search). Baseline, same run: /health and Adds measured
on the same server with nothing else in flight. The numbers that matter: every search answered, the wall time
against the ideal (one model call), and Add / health latency during the burst against the idle baseline.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_http import Client, ServerProcess

from refind_cli.evaluate import percentile


def start_stub_model(seconds: float) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            time.sleep(seconds)
            body = json.dumps(
                {
                    "id": "stub",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "stub",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": '{"action": "finish_search"}'},
                        }
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 8, "total_tokens": 108},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 1024
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def probe(client: Client, n: int, tag: str) -> tuple[list[float], list[float], list[int]]:
    """n Adds and n /health calls, one after another: their latencies and any non-200 statuses."""
    import http.client

    add_ms, health_ms, bad = [], [], []
    conn = http.client.HTTPConnection(client.host, client.port, timeout=60)
    for i in range(n):
        body = {
            "request_id": f"{tag}-{i}",
            "user_id": "prober",
            "session_id": "s",
            "messages": [{"role": "user", "content": f"Jon: probe {tag} {i}"}],
        }
        status, _, took = client.post("/v1/memories/add", body)
        add_ms.append(took)
        if status != 200:
            bad.append(status)
        started = time.perf_counter()
        conn.request("GET", "/health")
        response = conn.getresponse()
        response.read()
        health_ms.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            bad.append(response.status)
    conn.close()
    return add_ms, health_ms, bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inflight", type=int, default=256)
    parser.add_argument("--model-seconds", type=float, default=2.0)
    parser.add_argument("--probes", type=int, default=40, help="Adds and /health calls measured in each phase")
    args = parser.parse_args(argv)

    import tempfile

    stub, base = start_stub_model(args.model_seconds)
    with tempfile.TemporaryDirectory(prefix="refind-agent-bench-") as tmp:
        server = ServerProcess(Path(tmp) / "agent.db", "--mode", "agent", "--model", "openai/stub", "--api-base", base)
        try:
            client = Client(server.url)
            client.post(
                "/v1/memories/add",
                {
                    "request_id": "seed",
                    "user_id": "asker",
                    "session_id": "s",
                    "messages": [{"role": "user", "content": "Jon: I went to Lisbon"}],
                },
            )
            for i in range(2):  # litellm's first call loads its provider code: keep that out of the burst
                client.post("/v1/memories/search", {"query": f"warm up {i}", "user_id": "asker", "top_k": 10})
            idle_add, idle_health, idle_bad = probe(client, args.probes, "idle")

            statuses: list[int] = []
            search_ms: list[float] = []
            lock = threading.Lock()
            barrier = threading.Barrier(args.inflight + 1)

            def ask(i: int) -> None:
                client._conn()
                barrier.wait()
                status, _, took = client.post(
                    "/v1/memories/search", {"query": f"where did Jon go {i}", "user_id": "asker", "top_k": 10}
                )
                with lock:
                    statuses.append(status)
                    search_ms.append(took)

            threads = [threading.Thread(target=ask, args=(i,)) for i in range(args.inflight)]
            for t in threads:
                t.start()
            barrier.wait()
            started = time.perf_counter()
            time.sleep(min(0.5, args.model_seconds / 4))  # let the burst reach the model
            busy_add, busy_health, busy_bad = probe(client, args.probes, "busy")
            probes_done = time.perf_counter() - started
            for t in threads:
                t.join()
            wall = time.perf_counter() - started
        finally:
            server.stop()
            stub.shutdown()
    ok_searches = statuses.count(200)
    print(
        f"{args.inflight} agent searches in flight, {args.model_seconds:g} s per model call "
        f"(ideal wall time: one call):\n"
    )
    print(
        f"- searches answered 200: {ok_searches} of {len(statuses)}; all done in {wall:.2f} s "
        f"(search p50 {percentile(search_ms, 50) / 1000:.2f} s, slowest {max(search_ms) / 1000:.2f} s)"
    )
    print(
        f"- the probes ran while the burst was in flight ({probes_done:.2f} s for {args.probes} Adds + "
        f"{args.probes} health checks)\n"
    )
    print("| | idle p50 ms | idle p95 ms | during burst p50 ms | during burst p95 ms |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| Add | {percentile(idle_add, 50):.1f} | {percentile(idle_add, 95):.1f} | "
        f"{percentile(busy_add, 50):.1f} | {percentile(busy_add, 95):.1f} |"
    )
    print(
        f"| GET /health | {percentile(idle_health, 50):.1f} | {percentile(idle_health, 95):.1f} | "
        f"{percentile(busy_health, 50):.1f} | {percentile(busy_health, 95):.1f} |"
    )
    print(f"\nnon-200 probes: {len(idle_bad) + len(busy_bad)}")
    return 0 if ok_searches == len(statuses) and not idle_bad and not busy_bad else 1


if __name__ == "__main__":
    sys.exit(main())
