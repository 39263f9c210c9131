"""What rendering a search's blocks costs, this refind against another, alternating in the same run.

    .venv/bin/python bench/render_blocks.py --baseline ../base [--set longmemeval] [--limit 48] [--rounds 4]
        [--repeat 5] [--profile]

A shared set is replayed contest-style (as ``bench/differential.py`` does) into a temporary database by this refind
and, in a process of its own, by the one on ``--baseline`` (its checkout, run with ``python -P``). Each process asks
every question once untimed at top_k 100 (so both find their turns' text already read: a warm search), then, in
``--rounds`` rounds that alternate between the two processes so that machine load falls on both alike, times every
question ``--repeat`` times: the whole warm search (``search.search``) and the rendering alone (``UserIndex.render``
of the question's ranking, which is what ``render_blocks`` is given). Prints the median per question of each, per
process, and the ratios this ÷ baseline. ``--profile`` prints a cProfile of the rendering alone in this refind.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATASETS = Path(os.environ.get("REFIND_DATASETS", HERE.parent.parent / "shared" / "datasets"))
NOW = 1_767_225_600_000  # 2026-01-01 UTC
SETS = {
    "locomo": ("locomo10.json", "locomo"),
    "longmemeval": ("longmemeval_s_dev.json.gz", "longmemeval"),
    "memdaily": ("memdaily_dev", "memdaily"),
    "realtalk": ("realtalk_dev", "realtalk"),
}
TOP_K = 100


def worker(path: str, fmt: str, limit: int | None, profile: bool) -> None:
    """Load the set, then answer "round R" lines on stdin with one JSON line of timings (µs per question)."""
    from refind_cli import datasets
    from refind_cli import evaluate as E
    from refind_cli import search as S
    from refind_cli.store import Store

    samples = E.take(list(datasets.load(path, fmt, role_faithful=False, skipped=E.Skipped())), limit)
    tmp = tempfile.TemporaryDirectory(prefix="refind-render-")
    store = Store(Path(tmp.name) / "d.db", retention_days=None, clock=lambda: NOW)
    questions = []
    for sample in samples:
        E.replay_sample(store, sample)
        questions += [(q.user_id, q.text, tuple(q.options)) for q in sample.questions]

    def render_once(user: str, text: str, options: tuple[str, ...]) -> float:
        with store.reading():
            ui = S.user_index(store, user, lazy=True)
            ranked = ui.rank(text, top_k=TOP_K, options=options)
            if ranked is None:
                return 0.0
            t0 = time.perf_counter()
            ui.render(ranked, top_k=TOP_K)
            return time.perf_counter() - t0

    for user, text, options in questions:  # warm: every turn shown is read once
        S.search(store, user, text, top_k=TOP_K, options=options)
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        for user, text, options in questions:
            render_once(user, text, options)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats(os.environ.get("SORT", "tottime")).print_stats(30)
    print("ready", flush=True)
    for line in sys.stdin:
        repeat = int(line.split()[1])
        whole, render = [], []
        for user, text, options in questions:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                S.search(store, user, text, top_k=TOP_K, options=options)
                times.append(time.perf_counter() - t0)
            whole.append(min(times))
            render.append(min(render_once(user, text, options) for _ in range(repeat)))
        print(json.dumps({"whole": statistics.median(whole) * 1e6, "render": statistics.median(render) * 1e6}))
        sys.stdout.flush()
    store.close()
    tmp.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="PYTHONPATH", help="the other refind's checkout")
    ap.add_argument("--set", default="longmemeval", choices=sorted(SETS))
    ap.add_argument("--limit", type=int, default=None, help="questions of the set")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5, help="times each question is timed in a round (the least counts)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--worker", nargs=2, metavar=("PATH", "FORMAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.limit, args.profile)
        return
    if not args.baseline:
        ap.error("--baseline is required")
    file, fmt = SETS[args.set]
    common = ["--worker", str(DATASETS / file), fmt] + (["--limit", str(args.limit)] if args.limit else [])
    procs = {}
    for name, pythonpath in (("this", str(HERE.parent)), ("baseline", args.baseline)):
        extra = ["--profile"] if args.profile and name == "this" else []
        procs[name] = subprocess.Popen(
            [sys.executable, "-P", __file__, *common, *extra],
            env={**os.environ, "PYTHONPATH": pythonpath},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    for proc in procs.values():
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    results: dict[str, list[dict[str, float]]] = {name: [] for name in procs}
    for r in range(args.rounds):
        names = list(procs) if r % 2 == 0 else list(reversed(procs))
        for name in names:
            proc = procs[name]
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(f"round {args.repeat}\n")
            proc.stdin.flush()
            results[name].append(json.loads(proc.stdout.readline()))
            print(f"round {r + 1} {name}: {results[name][-1]}", file=sys.stderr)
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    print(f"`python bench/render_blocks.py {' '.join(sys.argv[1:])}` (top_k {TOP_K}, median µs per question)\n")
    print("| refind | whole warm search | render_blocks alone |")
    print("|---|---:|---:|")
    med = {n: {k: statistics.median(x[k] for x in results[n]) for k in ("whole", "render")} for n in results}
    for name in procs:
        print(f"| {name} | {med[name]['whole']:.0f} | {med[name]['render']:.0f} |")
    print(
        f"| this ÷ baseline | {med['this']['whole'] / med['baseline']['whole']:.2f} "
        f"| {med['this']['render'] / med['baseline']['render']:.2f} |"
    )


if __name__ == "__main__":
    main()
