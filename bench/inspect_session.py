"""`refind inspect session` on one big session: the plain text it prints past TABLE_MAX_CHARS against the table it
drew before (`--table`), in the same run.

    .venv/bin/python bench/inspect_session.py [--messages 3000] [--chars 700] [--runs 3]

Writes a JSONL of one session (``--messages`` messages of ~``--chars`` characters of words, 20 to an Add), stores it
with `refind add` in a temporary database, then times each form of `refind inspect session` as a whole process
(best of ``--runs``), stdout to a file, as a pipe sees it (80 columns). Prints the output sizes too.
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


def refind(*args: str, stdout: Path | None = None) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    start = time.perf_counter()
    with open(stdout or os.devnull, "w", encoding="utf-8") as out:
        subprocess.run([sys.executable, "-m", "refind_cli", *args], env=env, stdout=out, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--chars", type=int, default=700)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        chars = write_session(folder / "big.jsonl", args.messages, args.chars)
        db = str(folder / "big.db")
        refind("add", "--file", str(folder / "big.jsonl"), "--db", db, "--quiet")
        forms = {"default": [], "--table": ["--table"], "--json": ["--json"]}
        print(f"one session of {args.messages:,} messages, {chars:,} characters\n")
        print("| form | best of runs, s | output bytes |")
        print("|---|---:|---:|")
        times: dict[str, float] = {}
        for form, extra in forms.items():
            out = folder / "out.txt"
            runs = [refind("inspect", "session", "u", "big", "--db", db, *extra, stdout=out) for _ in range(args.runs)]
            times[form] = min(runs)
            print(f"| {form} | {times[form]:.2f} | {out.stat().st_size:,} |")
        print(f"\ndefault ÷ --table: {times['default'] / times['--table']:.3f}")


if __name__ == "__main__":
    main()
