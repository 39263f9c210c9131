"""A log replayed after an earlier replay stored it without some of its lines (an older refind refused them: a
timestamp it could not read) — what the whole log's replay costs and stores, against another refind in the same run.

    .venv/bin/python bench/refused_lines.py --baseline PYTHONPATH [--messages 50000] [--sessions 400] [--every 50]
        [--repeat 3]

Writes a log of message lines without request ids, each with a timestamp (``--sessions`` sessions, in runs of 1-40
lines, as bench/grown_log.py writes one), and a copy without every ``--every``-th line of each session (what the
older refind stored; later groups of 20 of a session shift by each missing line). Each refind, in its own process on a
new database: replays the copy (``old``), then the whole log (``fixed``: messages added, seconds wall and CPU), then
the whole log again (``again``: messages added). Round 31's fix stores only the missing lines at ``fixed`` and nothing
at ``again``; a refind before it stores each affected group whole again (duplicates). ABBA order; medians last.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def one(log: str, old: str) -> dict[str, Any]:
    from refind_cli.replay import replay
    from refind_cli.store import Store

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "m.db")
        for name, path in (("old", old), ("fixed", log), ("again", log)):
            wall, cpu = time.perf_counter(), _cpu()
            summary = replay(store, path, parallel=False)
            out[name] = {
                "wall_s": time.perf_counter() - wall,
                "cpu_s": _cpu() - cpu,
                "added": summary.messages_added,
            }
        out["stored"] = store.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="PYTHONPATH", help="the other refind's checkout")
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--sessions", type=int, default=400)
    ap.add_argument("--every", type=int, default=50, help="each session's every N-th line is missing from the copy")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--one", nargs=2, metavar=("LOG", "OLD"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(*args.one)))
        return
    if not args.baseline:
        ap.error("--baseline is required")
    sys.path.insert(0, str(HERE))
    from grown_log import write_log

    print(f"`python bench/refused_lines.py {' '.join(sys.argv[1:])}`\n")
    with tempfile.TemporaryDirectory() as tmp:
        log, old = Path(tmp) / "log.jsonl", Path(tmp) / "old.jsonl"
        write_log(log, args.messages, args.sessions)
        lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [ln for ln in lines if int(json.loads(ln)["content"].rsplit(".", 1)[1][:-1]) % args.every != 3]
        old.write_text("".join(kept), encoding="utf-8")
        print(f"{len(lines):,} lines, {len(lines) - len(kept):,} missing from the copy\n")
        runs: dict[str, list[dict[str, Any]]] = {"this refind": [], "baseline": []}
        print("| run | refind | old: s | fixed: added, s wall / CPU | again: added | stored |")
        print("|---|---|---:|---:|---:|---:|")
        for r in range(args.repeat):
            order = [("this refind", str(HERE.parent)), ("baseline", args.baseline)]
            for name, where in order if r % 2 == 0 else order[::-1]:
                proc = subprocess.run(
                    [sys.executable, "-P", __file__, "--one", str(log), str(old)],
                    env={"PYTHONPATH": where, "PATH": "/usr/bin:/bin"},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                res = json.loads(proc.stdout.strip().splitlines()[-1])
                runs[name].append(res)
                fixed = res["fixed"]
                print(
                    f"| {r + 1} | {name} | {res['old']['wall_s']:.2f} | {fixed['added']:,}, {fixed['wall_s']:.2f} / "
                    f"{fixed['cpu_s']:.2f} | {res['again']['added']:,} | {res['stored']:,} |"
                )
        print("\nmedians (this refind / baseline, ratio):")
        for label, key in (("old, CPU s", ("old", "cpu_s")), ("fixed, CPU s", ("fixed", "cpu_s"))):
            mine = statistics.median(r[key[0]][key[1]] for r in runs["this refind"])
            theirs = statistics.median(r[key[0]][key[1]] for r in runs["baseline"])
            print(f"- {label}: {mine:.2f} / {theirs:.2f} ({mine / theirs:.2f})")


if __name__ == "__main__":
    main()
