"""A log of message lines that grows between replays (an agent appends to it, a cron replays it): what each replay
costs and what it stores, against another refind in the same run.

    .venv/bin/python bench/grown_log.py --baseline PYTHONPATH [--messages 100000] [--sessions 400] [--grow 7]
        [--steps 6] [--repeat 3]

Writes a synthetic JSONL of message lines without request ids, each with a timestamp (each request's id is derived
from its group of lines): ``--sessions`` sessions of 8 users, alternating roles, written in runs of 1-40 consecutive
lines, so groups end at 20 messages and where another session's lines begin. Then each refind, in its own process (``python -P`` with
its checkout on PYTHONPATH), on a new database:

  first  — replays the log into the empty database (messages per second by the wall clock and by CPU time, the
           replay's reader process included);
  again  — replays the same log again (nothing is added);
  grown  — ``--steps`` times: appends ``--grow`` lines to the session written last (its last group grows, as an
           agent's log does) and replays the whole log again: seconds per replay, and messages added;
  next   — replays the next day's log (``--messages``/2 new lines in the same sessions: groups whose sessions are
           stored already, each looked up as a possibly grown one);
  older  — replays an older copy of the first log (its first nine tenths: a snapshot taken mid-group), which holds
           nothing new: messages added (0 when an older copy is recognised) and seconds.

At the end: how many messages are stored against the lines of both logs (stored twice = the difference). ``--repeat``
alternates the two refinds (ABBA order); medians are printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORDS = [
    "hiking",
    "lisbon",
    "cello",
    "garden",
    "tomato",
    "marathon",
    "sister",
    "recipe",
    "guitar",
    "train",
    "paris",
    "dentist",
    "yoga",
    "novel",
]


def write_log(path: Path, messages: int, sessions: int, seed: int = 7, day: int = 0) -> None:
    rnd = random.Random(seed)
    left = messages
    counts = dict.fromkeys(range(sessions), 0)
    with path.open("w", encoding="utf-8") as f:
        while left > 0:
            s = rnd.randrange(sessions)
            for _ in range(min(left, rnd.randint(1, 40))):
                f.write(_line(s, counts[s], rnd, day) + "\n")
                counts[s] += 1
                left -= 1


T0 = 1_700_000_000_000  # each line's timestamp: a second per line of its session, a day per log


def _line(session: int, i: int, rnd: random.Random, day: int = 0) -> str:
    content = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 30)))
    return json.dumps(
        {
            "user_id": f"user-{session % 8}",
            "session_id": f"s{session}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"{content} ({session}.{i})",
            "timestamp": T0 + day * 86_400_000 + i * 1000 + session,
        }
    )


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one(log: str, grow: int, steps: int, following: str) -> dict[str, Any]:
    """One refind's run (the one on sys.path), in a temporary folder."""
    from refind_cli.replay import replay
    from refind_cli.store import Store

    rnd = random.Random(11)
    lines = Path(log).read_text(encoding="utf-8").count("\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agent.jsonl"
        path.write_bytes(Path(log).read_bytes())
        last = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
        session, start = int(last["session_id"][1:]), int(last["content"].rsplit(".", 1)[1][:-1]) + 1
        store = Store(Path(tmp) / "m.db")
        out: dict[str, Any] = {}
        for name in ("first", "again"):
            wall, cpu = time.perf_counter(), _cpu()
            summary = replay(store, str(path))
            wall, cpu = time.perf_counter() - wall, _cpu() - cpu
            out[name] = {"wall_s": wall, "cpu_s": cpu, "added": summary.messages_added}
        grown = []
        for step in range(steps):
            with path.open("a", encoding="utf-8") as f:
                f.writelines(_line(session, start + step * grow + i, rnd) + "\n" for i in range(grow))
            lines += grow
            wall, cpu = time.perf_counter(), _cpu()
            summary = replay(store, str(path))
            grown.append({"wall_s": time.perf_counter() - wall, "cpu_s": _cpu() - cpu, "added": summary.messages_added})
        out["grown"] = grown
        wall, cpu = time.perf_counter(), _cpu()
        summary = replay(store, following)
        out["next"] = {"wall_s": time.perf_counter() - wall, "cpu_s": _cpu() - cpu, "added": summary.messages_added}
        lines += Path(following).read_text(encoding="utf-8").count("\n")
        older = Path(tmp) / "older.jsonl"
        kept = Path(log).read_text(encoding="utf-8").splitlines(keepends=True)
        older.write_text("".join(kept[: len(kept) * 9 // 10]), encoding="utf-8")
        wall, cpu = time.perf_counter(), _cpu()
        summary = replay(store, str(older))
        out["older"] = {"wall_s": time.perf_counter() - wall, "cpu_s": _cpu() - cpu, "added": summary.messages_added}
        store.close()
        conn = sqlite3.connect(Path(tmp) / "m.db")
        out["stored"] = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        conn.close()
        out["lines"] = lines
    return out


def _run(pythonpath: str, args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    proc = subprocess.run(
        [sys.executable, "-P", __file__, "--one", *args], env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="PYTHONPATH", help="the other refind's checkout")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--sessions", type=int, default=400)
    ap.add_argument("--grow", type=int, default=7, help="lines appended before each grown replay")
    ap.add_argument("--steps", type=int, default=6, help="grown replays")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--one", nargs=4, metavar=("LOG", "GROW", "STEPS", "NEXT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), int(args.one[2]), args.one[3])))
        return
    if not args.baseline:
        ap.error("--baseline is required")
    print(f"`python bench/grown_log.py {' '.join(sys.argv[1:])}`\n")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        write_log(log, args.messages, args.sessions)
        following = Path(tmp) / "next.jsonl"  # the next day's log: new lines in the same sessions
        write_log(following, args.messages // 2, args.sessions, seed=8, day=1)
        common = [str(log), str(args.grow), str(args.steps), str(following)]
        runs: dict[str, list[dict[str, Any]]] = {"this refind": [], "baseline": []}
        print(
            "| run | refind | first: msg/s wall / CPU | again: s | grown: s per replay | added per grown replay "
            "| next: s | older copy: added, s | stored / lines |"
        )
        print("|---|---|---:|---:|---:|---|---:|---:|---:|")
        for r in range(args.repeat):
            order = [("this refind", str(HERE.parent)), ("baseline", args.baseline)]
            for name, where in order if r % 2 == 0 else order[::-1]:  # ABBA: neither always runs first
                res = _run(where, common)
                runs[name].append(res)
                first, again, grown = res["first"], res["again"], res["grown"]
                print(
                    f"| {r + 1} | {name} | {args.messages / first['wall_s']:,.0f} / "
                    f"{args.messages / first['cpu_s']:,.0f} | {again['wall_s']:.2f} | "
                    f"{statistics.median(g['wall_s'] for g in grown):.2f} | "
                    f"{', '.join(str(g['added']) for g in grown)} | {res['next']['wall_s']:.2f} | "
                    f"{res['older']['added']}, {res['older']['wall_s']:.2f} | {res['stored']:,} / {res['lines']:,} |"
                )
        print("\nmedians over the runs (this refind / baseline, ratio):")
        for label, pick in (
            ("first, wall s", lambda r: r["first"]["wall_s"]),
            ("first, CPU s", lambda r: r["first"]["cpu_s"]),
            ("again, wall s", lambda r: r["again"]["wall_s"]),
            ("grown, wall s per replay", lambda r: statistics.median(g["wall_s"] for g in r["grown"])),
            ("next, wall s", lambda r: r["next"]["wall_s"]),
            ("next, CPU s", lambda r: r["next"]["cpu_s"]),
            ("older copy, wall s", lambda r: r["older"]["wall_s"]),
        ):
            mine = statistics.median(pick(r) for r in runs["this refind"])
            theirs = statistics.median(pick(r) for r in runs["baseline"])
            print(f"- {label}: {mine:.2f} / {theirs:.2f} ({mine / theirs:.2f})")


if __name__ == "__main__":
    main()
