"""Startup of `refind mcp`: from spawning the process to its first answered ``tools/list``, whole process, against
`refind --help` (the cheapest thing the CLI does) and bare imports, measured in the same run.

  .venv/bin/python bench/mcp_startup.py                 # 5 rounds
  .venv/bin/python bench/mcp_startup.py --rounds 9

Each round, in turn: ``python -c pass`` (the interpreter alone); ``python -c "import mcp_types.methods"`` (the
protocol's pydantic types for both protocol versions, which every server path of the SDK loads: the floor of any
SDK server); ``python -c "import mcp.server.lowlevel, mcp.server.stdio"`` (the SDK's low-level server, the
alternative to ``MCPServer``); ``python -c "import mcp.server.mcpserver"`` (what refind imports);
``python -m refind_cli --help``; and ``python -m refind_cli mcp --user bench --db TMP`` spoken to over its
stdin/stdout as an MCP client does — ``initialize``, ``notifications/initialized``, ``tools/list``, then one
``tools/call`` — timed until the tools/list answer and until the tool call's answer is read (the client is plain
JSON-RPC lines in this process, so it adds no import of its own). `refind mcp` is launched three ways: with an empty
``REFIND_MCP_CACHE`` (a first launch: nothing recorded, the SDK answers everything and its first answers are
recorded), after one such launch (the recorded answers are sent while the SDK loads; refind_cli/mcp_start.py), and
with ``REFIND_MCP_CACHE=off`` (the SDK alone, as before the record existed). Besides wall time each process's CPU
time (user + sys, from the OS) is shown, in all and up to the tools/list answer: wall time moves with the machine's
load, CPU time much less. Goal (issue 12): wall ≤ 1.0 s to the tools/list answer.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = "2025-11-25"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_command(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    cpu0, t0 = _cpu(), time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0, _cpu() - cpu0


def mcp_until_tools(db: Path, env: dict[str, str]) -> tuple[float, float, float, float]:
    """Spawn `refind mcp`, initialize, list tools, call one tool: wall seconds to the tools/list answer and to the
    tools/call answer (the SDK's, always), the process's CPU seconds to the end, and its CPU seconds up to the
    tools/list answer (from /proc, Linux; NaN elsewhere)."""
    argv = [sys.executable, "-m", "refind_cli", "mcp", "--user", "bench", "--db", str(db)]
    cpu0, t0 = _cpu(), time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def answer(request_id: int) -> dict:
        assert proc.stdout is not None
        for line in proc.stdout:
            message = json.loads(line)
            if message.get("id") == request_id:
                if "error" in message:
                    raise RuntimeError(f"refind mcp answered an error: {message['error']}")
                return message["result"]
        raise RuntimeError("refind mcp closed its output before answering")

    client = {"name": "bench", "version": "0"}
    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": client},
        }
    )
    answer(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    tools = answer(2)["tools"]
    wall = time.perf_counter() - t0
    cpu_at_tools = _proc_cpu(proc.pid)
    assert len(tools) >= 4, tools
    send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recent_sessions", "arguments": {}}})
    assert not answer(3).get("isError")
    wall_call = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait(30)
    return wall, wall_call, _cpu() - cpu0, cpu_at_tools


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds a running process has used so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# In one process, the CPU each step of `refind mcp`'s startup adds, in the order the command takes them (the SDK
# first here, so that refind's own steps show only what they add on top of it).
SECTIONS = """
import json, sys, time
steps = []
def step(name):
    steps.append((name, time.process_time()))
step("interpreter start")
import pydantic
step("pydantic")
import mcp_types
step("mcp_types: the protocol's pydantic models")
import mcp_types.methods
step("mcp_types.methods: both protocol versions' models")
import mcp
step("rest of `import mcp`: client, transports, HTTP/auth stack, MCPServer")
import refind_cli.cli.root as root
root.command_app("mcp")
step("refind's CLI (typer, the mcp command)")
import refind_cli.api, refind_cli.mcp_server as ms, refind_cli.mcp_start as start
step("refind's API and mcp_server modules")
memory = refind_cli.api.Memory(sys.argv[1])
ms.build(memory, start.McpSettings(user="bench", session="bench"))
step("open the database, build the server and its tools")
print(json.dumps(steps))
"""


def sections(db: Path, env: dict[str, str], rounds: int) -> list[tuple[str, float]]:
    """Median CPU seconds each startup step adds, measured inside one process per round."""
    runs = []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", SECTIONS, str(db)], env=env, capture_output=True, text=True)
        out.check_returncode()
        steps = json.loads(out.stdout)
        runs.append([(name, at - (steps[i - 1][1] if i else 0.0)) for i, (name, at) in enumerate(steps)])
    return [(name, statistics.median(run[i][1] for run in runs)) for i, (name, _) in enumerate(runs[0])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("REFIND_MODEL", None)  # bm25 mode: agent mode resolves its model (and imports litellm) at launch
    rows: dict[str, list[tuple[float, float]]] = {
        "python -c pass": [],
        "import mcp_types.methods": [],
        "import mcp.server.lowlevel, mcp.server.stdio": [],
        "import mcp.server.mcpserver": [],
        "refind --help": [],
    }
    launches = {
        "first launch (nothing recorded)": "first",
        "recorded answers": "recorded",
        "REFIND_MCP_CACHE=off (the SDK alone)": "off",
    }
    mcp_rows: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in launches}
    with tempfile.TemporaryDirectory(prefix="refind-mcp-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        for i in range(args.rounds):
            rows["python -c pass"].append(run_command([sys.executable, "-c", "pass"], env))
            for code in (
                "import mcp_types.methods",
                "import mcp.server.lowlevel, mcp.server.stdio",
                "import mcp.server.mcpserver",
            ):
                rows[code].append(run_command([sys.executable, "-c", code], env))
            rows["refind --help"].append(run_command([sys.executable, "-m", "refind_cli", "--help"], env))
            for name, kind in launches.items():
                cache = "off" if kind == "off" else str(Path(tmp) / f"cache-{kind}-{i}")
                if kind == "recorded":  # a launch before, whose answers this one finds
                    mcp_until_tools(db, {**env, "REFIND_MCP_CACHE": cache})
                mcp_rows[name].append(mcp_until_tools(db, {**env, "REFIND_MCP_CACHE": cache}))
        steps = sections(db, env, args.rounds)
    help_wall = statistics.median(w for w, _ in rows["refind --help"])
    print(f"`refind mcp` startup, {args.rounds} rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}\n")
    print("| process | wall median (s) | wall min (s) | CPU median (s) | wall / `refind --help` |")
    print("|---|---|---|---|---|")
    for name, values in rows.items():
        walls = [w for w, _ in values]
        cpus = [c for _, c in values]
        median = statistics.median(walls)
        print(
            f"| {name} | {median:.2f} | {min(walls):.2f} | {statistics.median(cpus):.2f} | {median / help_wall:.1f}× |"
        )
    print("\n`refind mcp`, spawn → answers (median of each column; CPU: the process's user + system time):\n")
    print(
        "| launch | → tools/list, wall (s) | wall min (s) | CPU until then (s) | → first tools/call, wall (s) "
        "| process CPU in all (s) |"
    )
    print("|---|---|---|---|---|---|")
    for name, values in mcp_rows.items():
        walls = [v[0] for v in values]
        print(
            f"| {name} | {statistics.median(walls):.2f} | {min(walls):.2f} | "
            f"{statistics.median(v[3] for v in values):.2f} | {statistics.median(v[1] for v in values):.2f} | "
            f"{statistics.median(v[2] for v in values):.2f} |"
        )
    print("\nIn one process, CPU each step adds (median; the SDK imported first):\n")
    print("| step | CPU (s) |")
    print("|---|---|")
    for name, cpu in steps:
        print(f"| {name} | {cpu:.2f} |")
    print(f"| total | {sum(cpu for _, cpu in steps):.2f} |")
    recorded = mcp_rows["recorded answers"]
    wall, cpu = statistics.median(v[0] for v in recorded), statistics.median(v[3] for v in recorded)
    print(
        f"\nGoal: `refind mcp` to its first answered tools/list ≤ 1.0 s wall. With recorded answers: wall {wall:.2f} s "
        f"({'meets' if wall <= 1.0 else 'misses'}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs), CPU to "
        f"that answer {cpu:.2f} s ({'meets' if cpu <= 1.0 else 'misses'}: the process runs one thread at a time, so "
        "this is its wall time on an idle core)."
    )


if __name__ == "__main__":
    main()
