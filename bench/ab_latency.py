"""Is this refind faster than another checkout? Warm search latency of the two, in the same run, taking turns.

    .venv/bin/python bench/ab_latency.py --baseline PYTHONPATH [--datasets ../shared/datasets] [--rounds 7]
                                         [--every 4]

For a change meant to keep every answer and save time (``bench/differential.py`` proves the first part; this the
second). Two worker processes, one importing this checkout and one the checkout at ``--baseline`` (``python -P``, so
the working directory's package does not shadow it), each replay the same data into a temporary database and ask
every question once untimed; then the parent asks them for one round at a time, in turn (ABBA order), so that both
meet the same load of this shared machine. Never both at once. Per question the median of its rounds is kept; the
table gives p50 and p95 over the questions and this/baseline ratios. Workloads:

* ``locomo top_k 100`` — every ``--every``-th LoCoMo question against its own chat (the contest's traffic);
* ``category top_k 10`` — LoCoMo's what/which questions (every ``--every``-th) against all ten chats as one
  5,882-turn user (what ``bench/category_latency.py`` asks, where the kinds stage costs most);
* ``realtalk top_k 100`` — every ``--every``-th REALTALK dev question against its chat.

``--cold N`` also times whole cold commands, ``refind search --mode bm25 --json`` in a new process, N times each
for a category question and a keyword question against LoCoMo's first chat (each checkout's own database, so
neither re-indexes the other's), the two checkouts taking turns; the table gives the median CPU of the process.
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
from dataclasses import replace
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
DATASETS = Path(os.environ.get("REFIND_DATASETS", HERE.parent.parent / "shared" / "datasets"))


def _worker(datasets_dir: Path, every: int) -> None:
    """Build the workloads, answer "go" with one timed round (JSON: workload → ms per question), stop on EOF."""
    from refind_cli import datasets
    from refind_cli import search as S
    from refind_cli.evaluate import replay_sample, warm_up
    from refind_cli.store import Store

    warm_up()
    with tempfile.TemporaryDirectory(prefix="refind-ab-") as tmp:
        store = Store(Path(tmp) / "ab.db", retention_days=None)
        work: dict[str, tuple[int, list[tuple[str, str]]]] = {}
        locomo = list(datasets.load(str(datasets_dir / "locomo10.json")))
        asked: list[tuple[str, str]] = []
        category: list[tuple[str, str]] = []
        for sample in locomo:
            replay_sample(store, sample)
            asked += [(sample.user_id, q.text) for q in sample.questions]
            one_user = tuple(replace(r, user_id="all-chats") for r in sample.requests)
            replay_sample(store, replace(sample, user_id="all-chats", requests=one_user))
            category += [
                ("all-chats", q.text) for q in sample.questions if q.text.lower().startswith(("what", "which"))
            ]
        work["locomo top_k 100"] = (100, asked[::every])
        work["category top_k 10"] = (10, category[::every])
        realtalk: list[tuple[str, str]] = []
        for sample in datasets.load(str(datasets_dir / "realtalk_dev")):
            replay_sample(store, sample)
            realtalk += [(sample.user_id, q.text) for q in sample.questions]
        work["realtalk top_k 100"] = (100, realtalk[::every])
        indexes = {user: S.user_index(store, user) for _, qs in work.values() for user, _ in qs}
        for top_k, qs in work.values():  # warm: every question once, untimed
            for user, text in qs:
                indexes[user].search(text, top_k=top_k)
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                break
            out: dict[str, list[float]] = {}
            for name, (top_k, qs) in work.items():
                times = out[name] = []
                for user, text in qs:
                    t = time.perf_counter()
                    indexes[user].search(text, top_k=top_k)
                    times.append((time.perf_counter() - t) * 1000)
            print(json.dumps(out), flush=True)
        store.close()


def _start(pythonpath: str, datasets_dir: Path, every: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    cmd = [sys.executable, "-P", __file__, "--worker", "--datasets", str(datasets_dir), "--every", str(every)]
    return subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _ask(proc: subprocess.Popen[str]) -> dict[str, list[float]]:
    stdin: IO[str] | None = proc.stdin
    stdout: IO[str] | None = proc.stdout
    assert stdin is not None and stdout is not None
    stdin.write("go\n")
    stdin.flush()
    return dict(json.loads(stdout.readline()))


def _ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        raise SystemExit(f"a worker failed to start (exit {proc.wait()})")


COLD_QUESTIONS = {
    "category question": "What events has Caroline participated in to help children?",
    "keyword question": "What did Caroline research?",
}


def _make_db(datasets_dir: Path, db: Path) -> None:
    """LoCoMo's first chat stored in ``db`` by the refind this process imports (prints its user id)."""
    from refind_cli import datasets
    from refind_cli.evaluate import replay_sample
    from refind_cli.store import Store

    sample = next(iter(datasets.load(str(datasets_dir / "locomo10.json"))))
    with Store(db, retention_days=None) as store:
        replay_sample(store, sample)
    print(sample.user_id, flush=True)


def _cold(checkouts: dict[str, str], datasets_dir: Path, runs: int) -> dict[str, dict[str, float]]:
    """Median CPU ms of a cold ``refind search`` per checkout and question, the checkouts taking turns."""
    import resource

    cpu: dict[str, dict[str, list[float]]] = {side: {q: [] for q in COLD_QUESTIONS} for side in checkouts}
    with tempfile.TemporaryDirectory(prefix="refind-ab-cold-") as tmp:
        dbs: dict[str, tuple[Path, str]] = {}
        for side, path in checkouts.items():
            db = Path(tmp) / f"{side}.db"
            made = subprocess.run(
                [sys.executable, "-P", __file__, "--make-db", str(db), "--datasets", str(datasets_dir)],
                env={**os.environ, "PYTHONPATH": path},
                capture_output=True,
                text=True,
                check=True,
            )
            dbs[side] = (db, made.stdout.strip().splitlines()[-1])
        for r in range(runs):
            for side in list(checkouts) if r % 2 == 0 else list(reversed(checkouts)):
                db, user = dbs[side]
                for name, text in COLD_QUESTIONS.items():
                    cmd = [sys.executable, "-P", "-m", "refind_cli", "search", "--mode", "bm25", "--json"]
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    subprocess.run(
                        [*cmd, "--db", str(db), "--user", user, text],
                        env={**os.environ, "PYTHONPATH": checkouts[side]},
                        stdout=subprocess.DEVNULL,
                        check=True,
                    )
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                    cpu[side][name].append(used * 1000)
    return {side: {q: statistics.median(v) for q, v in per.items()} for side, per in cpu.items()}


def _summary(rounds: list[dict[str, list[float]]]) -> dict[str, tuple[float, float]]:
    """Per workload: p50 and p95 over questions of each question's median over rounds."""
    from refind_cli.evaluate import percentile

    out: dict[str, tuple[float, float]] = {}
    for name in rounds[0]:
        per_q = [statistics.median(r[name][i] for r in rounds) for i in range(len(rounds[0][name]))]
        out[name] = (percentile(per_q, 50), percentile(per_q, 95))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="PYTHONPATH", help="the other refind's checkout")
    ap.add_argument("--datasets", type=Path, default=DATASETS)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--every", type=int, default=4, help="ask every Nth question of each workload")
    ap.add_argument("--cold", type=int, default=0, metavar="N", help="also time N cold `refind search` commands")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--make-db", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.datasets, args.every)
        return
    if args.make_db:
        _make_db(args.datasets, args.make_db)
        return
    if not args.baseline:
        ap.error("--baseline is required")
    procs = {"this": _start(str(HERE.parent), args.datasets, args.every)}
    _ready(procs["this"])  # one at a time: building both at once would slow the other's replay, nothing else
    procs["baseline"] = _start(args.baseline, args.datasets, args.every)
    _ready(procs["baseline"])
    rounds: dict[str, list[dict[str, list[float]]]] = {"this": [], "baseline": []}
    try:
        for r in range(args.rounds):
            order = ["this", "baseline"] if r % 2 == 0 else ["baseline", "this"]
            for side in order:
                rounds[side].append(_ask(procs[side]))
    finally:
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
    mine, theirs = _summary(rounds["this"]), _summary(rounds["baseline"])
    print(f"`python bench/ab_latency.py {' '.join(sys.argv[1:])}` — ms per search, warm, in-process\n")
    print("| workload | questions | baseline p50 / p95 | this p50 / p95 | ratio p50 / p95 |")
    print("|---|---:|---|---|---|")
    for name, (p50, p95) in mine.items():
        b50, b95 = theirs[name]
        n = len(rounds["this"][0][name])
        print(f"| {name} | {n} | {b50:.2f} / {b95:.2f} | {p50:.2f} / {p95:.2f} | {p50 / b50:.2f}× / {p95 / b95:.2f}× |")
    if args.cold:
        cold = _cold({"this": str(HERE.parent), "baseline": args.baseline}, args.datasets, args.cold)
        print(f"\nA cold `refind search --mode bm25 --json`, median CPU ms of the process ({args.cold} runs each)\n")
        print("| question | baseline | this | ratio |")
        print("|---|---:|---:|---:|")
        for name in COLD_QUESTIONS:
            b, m = cold["baseline"][name], cold["this"][name]
            print(f"| {name} | {b:.0f} | {m:.0f} | {m / b:.2f}× |")


if __name__ == "__main__":
    main()
