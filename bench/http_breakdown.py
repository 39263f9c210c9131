"""Where a contest Add and Search spend the server's CPU: a real `refind serve` (loopback, one worker, bm25), a
labelled set replayed over HTTP as the platform sends it (each user's Adds one after another, users on ``--workers``
threads; then every question, ``--passes`` times), and py-spy sampling the server process in each phase: the Adds,
the first pass (each user's first question: what the contest asks) and the later passes (the same questions again).

  .venv/bin/pip install py-spy          # into the venv only: not a requirement of refind
  .venv/bin/python bench/http_breakdown.py ../shared/datasets/longmemeval_s_dev.json.gz
  .venv/bin/python bench/http_breakdown.py ../shared/datasets/locomo10.json --baseline ../base --repeat 2

py-spy runs with ``--gil``: only the thread holding the GIL is sampled, so the samples add up to the CPU the server
spends holding it (printed beside the process's user + system time from /proc; an Add's SQLite work runs without the
GIL and is not sampled). Each sample is put in one bucket — the innermost frame that names one (``BUCKETS``, first
match from the leaf outward) — and shown as milliseconds per request. When the samples and /proc disagree by more
than a quarter, the machine was busy (a thread holding the GIL while the OS runs another process is sampled all the
same): the shares then say little of CPU. Without py-spy, only the CPU per Add and per search is printed.

``--baseline DIR``: the same replay against a server run from another checkout (e.g. a detached worktree of main),
alternating with this tree's, ``--repeat`` times each: the CPU per request of both under the same load.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_http import TOKEN, Client, ServerProcess, ask, replay

RATE = 1000  # py-spy samples per second

# (a substring of a frame, its bucket): the innermost frame that holds one names the sample's bucket
BUCKETS = [
    ("logging/__init__", "access log (logging)"),
    ("printable", "access log (logging)"),
    ("read_add", "parse + validate the body"),
    ("read_search", "parse + validate the body"),
    ("Runtime.parse", "parse + validate the body"),
    ("Request.body", "read the body (starlette)"),
    ("encode_items", "encode the response (orjson)"),
    ("contract_items", "contract items"),
    ("JSONResponse", "encode the response (json)"),
    ("render_blocks", "search: render blocks"),
    ("UserIndex.rank", "search: rank"),
    ("user_index", "index lookup / refresh"),
    ("search (refind_cli/search.py", "search: other"),
    ("retrieve", "search: other"),
    ("StorePool", "store pool"),
    ("segments_of_rows", "add: index on write (new segments)"),
    ("write_segments", "add: index on write (write, merge)"),
    ("_merge", "add: index on write (write, merge)"),
    ("Store.add_prepared", "add: store (SQL)"),
    ("GroupWriter", "add: group writer"),
    ("Warmer", "warmer thread"),
    ("Runtime.add", "route handler"),
    ("Runtime.search", "route handler (executor hand-off)"),
    ("ContractRoutes", "route handler"),
    ("EdgeGuard", "guard (token, headers)"),
    ("BodyLimit", "body limit"),
    ("RequestLog", "access log (middleware)"),
    ("fastapi", "FastAPI / Starlette middleware"),
    ("starlette", "FastAPI / Starlette middleware"),
    ("proxy_headers", "uvicorn middleware"),
    ("h11", "uvicorn HTTP/1.1 (h11)"),
    ("concurrent/futures", "executor threads"),
    ("asyncio", "event loop"),
]


def bucket(stack: str) -> str:
    for frame in reversed(stack.split(";")):
        for needle, name in BUCKETS:
            if needle in frame:
                return name
    return "other"


def buckets(raw: Path) -> collections.Counter[str]:
    """Samples per bucket of py-spy's raw (collapsed) output."""
    counts: collections.Counter[str] = collections.Counter()
    if raw.exists():
        for line in raw.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            counts[bucket(stack)] += int(n)
    return counts


class Spy:
    """py-spy recording a process until stopped (a no-op without py-spy)."""

    def __init__(self, pid: int, out: Path) -> None:
        exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        self.proc = None
        if exe:
            cmd = [exe, "record", "--pid", str(pid), "--gil", "-r", str(RATE), "-f", "raw", "-o", str(out)]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # (attached before the phase starts)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(2)  # SIGINT: py-spy writes its file and exits
            self.proc.wait(60)


def one_run(samples: list, *, workers: int, passes: int, tree: str | None, out: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="refind-breakdown-") as tmp:
        server = ServerProcess(Path(tmp) / "served.db", tree=tree)
        try:
            client = Client(server.url, TOKEN)
            spy = Spy(server.proc.pid, out / "add.txt")
            before = server.cpu_s()
            adds = replay(client, samples, workers)
            add_cpu = server.cpu_s() - before
            spy.stop()
            time.sleep(1)  # (the warmer's last passes: counted with neither phase)
            cpu = [server.cpu_s()]
            faults = list(adds["faults"])
            for n in range(passes):  # the first pass (each user's first questions) sampled apart from the others
                if n < 2:
                    spy = Spy(server.proc.pid, out / ("first.txt" if n == 0 else "later.txt"))
                asked = ask(client, samples, workers, 100)
                faults += asked["faults"]
                cpu.append(server.cpu_s())
                if n == 0 or n == passes - 1:
                    spy.stop()
        finally:
            server.stop()
    questions = asked["questions"]
    return {
        "server": Path(tree).name if tree else "this tree",
        "adds": adds["requests"],
        "questions": questions,
        "faults": len(faults),
        "add_cpu_ms": add_cpu * 1000 / adds["requests"],
        "first_pass_cpu_ms": (cpu[1] - cpu[0]) * 1000 / questions,
        "later_pass_cpu_ms": (cpu[-1] - cpu[1]) * 1000 / (questions * (passes - 1)) if passes > 1 else None,
        "search_cpu_ms": (cpu[-1] - cpu[0]) * 1000 / (questions * passes),
        "add": buckets(out / "add.txt"),
        "first": buckets(out / "first.txt"),
        "later": buckets(out / "later.txt"),
    }


def table(run: dict, phase: str, requests: int, title: str, cpu_ms: float) -> None:
    counts: collections.Counter[str] = run[phase]
    total = sum(counts.values())
    if not total:
        return
    sampled = total / RATE * 1000 / requests
    print(f"\n{run['server']}, {title}: GIL samples {sampled:.2f} ms per request, process CPU {cpu_ms:.2f} ms")
    if abs(sampled - cpu_ms) > 0.25 * cpu_ms:  # the GIL held by a thread the OS has not scheduled: a busy machine
        print("(the samples and the CPU disagree by over 25 %: the machine is busy, shares are not CPU's)")
    print("| bucket | ms per request | share |\n|---|---:|---:|")
    for name, n in counts.most_common():
        print(f"| {name} | {n / RATE * 1000 / requests:.3f} | {100 * n / total:.1f} % |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", help="a LoCoMo / LongMemEval / MemDaily file (../shared/datasets/…)")
    parser.add_argument("--workers", type=int, default=8, help="parallel clients (default 8)")
    parser.add_argument("--passes", type=int, default=4, help="times every question is asked (default 4)")
    parser.add_argument("--baseline", help="also a server run from this checkout, alternating")
    parser.add_argument("--repeat", type=int, default=1, help="runs per server (default 1)")
    parser.add_argument("--out", help="keep py-spy's raw samples here (default: a temporary directory)")
    args = parser.parse_args(argv)
    from refind_cli import datasets

    samples = list(datasets.load(args.dataset))
    runs = []
    with tempfile.TemporaryDirectory(prefix="refind-spy-") as tmp:
        base = Path(args.out or tmp)
        for r in range(args.repeat):
            for tree in [args.baseline, None] if args.baseline else [None]:
                out = base / f"{'baseline' if tree else 'this'}-{r}"
                out.mkdir(parents=True, exist_ok=True)
                runs.append(one_run(samples, workers=args.workers, passes=args.passes, tree=tree, out=out))
    print(
        "| server | adds | CPU ms per Add | questions × passes | CPU ms per search: all / first pass / later | faults |"
    )
    print("|---|---:|---:|---|---|---:|")
    for run in runs:
        later = f"{run['later_pass_cpu_ms']:.2f}" if run["later_pass_cpu_ms"] is not None else "-"
        print(
            f"| {run['server']} | {run['adds']} | {run['add_cpu_ms']:.2f} | {run['questions']} × {args.passes} | "
            f"{run['search_cpu_ms']:.2f} / {run['first_pass_cpu_ms']:.2f} / {later} | {run['faults']} |"
        )
    for run in runs:
        table(run, "add", run["adds"], "Add", run["add_cpu_ms"])
        table(run, "first", run["questions"], "search, first pass", run["first_pass_cpu_ms"])
        if run["later_pass_cpu_ms"] is not None:
            table(run, "later", run["questions"] * (args.passes - 1), "search, later passes", run["later_pass_cpu_ms"])
    return 1 if any(run["faults"] for run in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
