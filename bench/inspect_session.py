"""`refind inspect session` on one big session: the plain text it prints past TABLE_MAX_CHARS against the table it
drew before (`--table`), in the same run.

    .venv/bin/python bench/inspect_session.py [--messages 3000] [--chars 700] [--runs 3]
    .venv/bin/python bench/inspect_session.py --baseline ../base --forms=--table [--messages 50000 --chars 20]

Writes a JSONL of one session (``--messages`` messages of ~``--chars`` characters of words, 20 to an Add), stores it
with `refind add` in a temporary database, then times each form of `refind inspect session` as a whole process
(best of ``--runs``), stdout to a pipe read to its end (80 columns): the whole run, the time to its first line, the
process's peak RSS, and the output's size. With ``--baseline`` (another checkout, e.g. a worktree of main) each form
runs in both trees, one after the other in each run, the database made by this one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_685_606_400_000  # 2023-06-01 08:00 UTC
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "Alice",
    "plans",
    "her",
    "trip",
    "to",
    "Lisbon",
    "with",
    "Maya",
    "and",
    "Biscuit",
]


def write_session(path: Path, messages: int, chars: int) -> int:
    rng = random.Random(1)
    total = 0
    with path.open("w", encoding="utf-8") as f:
        for r in range(0, messages, 20):
            batch = []
            for i in range(r, min(r + 20, messages)):
                text = ""
                while len(text) < chars:
                    text += rng.choice(WORDS) + " "
                total += len(text)
                batch.append(
                    {"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": T0 + i * 60_000}
                )
            f.write(json.dumps({"request_id": f"r{r}", "user_id": "u", "session_id": "big", "messages": batch}) + "\n")
    return total


def refind(*args: str, root: Path = ROOT) -> tuple[float, float, int, int]:
    """(seconds, seconds to the first output, peak RSS in bytes, output bytes) of one `refind` process."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "80"}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "refind_cli", *args], env=env, stdout=subprocess.PIPE, cwd=root)
    assert proc.stdout is not None
    first = proc.stdout.read1(65536)
    first_at = time.perf_counter() - start
    size = len(first)
    while chunk := proc.stdout.read1(1 << 20):
        size += len(chunk)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"refind {' '.join(args)} exited {proc.returncode}")
    return elapsed, first_at, usage.ru_maxrss * 1024, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--chars", type=int, default=700)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout to run each form in too")
    parser.add_argument("--forms", default="default,--table,--json", help="comma-separated: default, --table, --json")
    args = parser.parse_args()
    trees = {"this": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        chars = write_session(folder / "big.jsonl", args.messages, args.chars)
        db = str(folder / "big.db")
        subprocess.run(
            [sys.executable, "-m", "refind_cli", "add", "--file", str(folder / "big.jsonl"), "--db", db, "--quiet"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            check=True,
        )
        forms = {"default": [], "--table": ["--table"], "--json": ["--json"]}
        print(f"one session of {args.messages:,} messages, {chars:,} characters\n")
        print("| form | tree | best of runs, s | first output, s | peak RSS, MiB | output bytes |")
        print("|---|---|---:|---:|---:|---:|")
        times: dict[tuple[str, str], float] = {}
        for form in args.forms.split(","):
            results: dict[str, list[tuple[float, float, int, int]]] = {tree: [] for tree in trees}
            for _ in range(args.runs):
                for tree, root in trees.items():
                    results[tree].append(refind("inspect", "session", "u", "big", "--db", db, *forms[form], root=root))
            for tree, runs in results.items():
                best = min(runs)
                times[(form, tree)] = best[0]
                print(
                    f"| {form} | {tree} | {best[0]:.2f} | {min(r[1] for r in runs):.2f} | "
                    f"{max(r[2] for r in runs) / 2**20:.0f} | {best[3]:,} |"
                )
        if ("default", "this") in times and ("--table", "this") in times:
            print(f"\ndefault ÷ --table: {times[('default', 'this')] / times[('--table', 'this')]:.3f}")
        if args.baseline:
            for form in args.forms.split(","):
                print(f"{form}: this ÷ baseline {times[(form, 'this')] / times[(form, 'baseline')]:.3f}")


if __name__ == "__main__":
    main()
