"""`make bench`: every benchmark, one after another, each printing its own markdown tables.

    .venv/bin/python bench/run_all.py [--quick] [--only replay,scale,...]

The datasets are read from ../shared/datasets (or REFIND_DATASETS); the quality benchmarks are skipped with a note
when that folder is missing. Run on a quiet machine: every script compares against a baseline in the same run, but
absolute numbers move with load. Results go into BENCHMARKS.md by hand, with the command that produced them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATASETS = Path(os.environ.get("REFIND_DATASETS", HERE.parent.parent / "shared" / "datasets"))

# name -> (arguments, quick arguments, needs the datasets)
BENCHES: dict[str, tuple[list[str], list[str], bool]] = {
    "replay": ([], ["--messages", "20000"], False),
    "replay_gzip": (
        ["--dataset", str(DATASETS / "longmemeval_s_dev.json.gz"), "--repeat", "7", "--replay", "10"],
        ["--dataset", str(DATASETS / "longmemeval_s_dev.json.gz"), "--limit", "5", "--repeat", "2"],
        True,
    ),
    "scale": ([], ["--sizes", "10000", "--users", "100", "--queries", "20"], False),
    "ranking_latency": ([], ["--turns", "2000", "--queries", "10", "--rounds", "1"], False),
    "planner": ([], ["--turns", "2000", "--queries", "10"], False),
    "reply": ([], ["--repeat", "50"], False),
    "lifecycle": ([], ["--users", "5", "--messages", "500"], False),
    "serve": ([], ["--seconds", "5"], False),
    "serve_agent": ([], ["--inflight", "32", "--model-seconds", "0.5"], False),
    "deadline_under_lock": ([], ["--only", "lock_index_pending"], False),
    "fill_resume": (
        [str(HERE.parent / "fixtures" / "blind" / n) for n in ("chat_zh", "chat_zh2", "chat_zh4")],
        [str(HERE.parent / "fixtures" / "blind" / "chat_zh4"), "--rounds", "1"],
        False,
    ),
    "mcp_startup": ([], ["--rounds", "2"], False),
    "restore": ([], ["--messages", "10000"], False),
    "backfill_size": (["--repeat", "9"], ["--pages", "40", "--repeat", "2"], False),
    "quoting": (["--repeat", "1"], ["--messages", "2000", "--traces", "40", "--repeat", "1"], False),
    "retrieval_defaults": (["--datasets", str(DATASETS)], ["--datasets", str(DATASETS), "--only", "locomo"], True),
    "quality": (["--datasets", str(DATASETS)], ["--datasets", str(DATASETS), "--limit", "50"], True),
    "ceiling": (
        ["--dataset", str(DATASETS / "realtalk_dev")],
        ["--dataset", str(DATASETS / "realtalk_dev"), "--limit", "50"],
        True,
    ),
    "per_user": (
        ["--dataset", str(DATASETS / "realtalk_dev")],
        ["--dataset", str(DATASETS / "realtalk_dev")],
        True,
    ),
    "category_latency": (
        ["--dataset", str(DATASETS / "locomo10.json")],
        ["--dataset", str(DATASETS / "locomo10.json"), "--questions", "20", "--rounds", "1"],
        True,
    ),
    "lone_units": (
        ["--dataset", str(DATASETS / "memdaily_dev")],
        ["--dataset", str(DATASETS / "memdaily_dev"), "--questions", "20", "--rounds", "1"],
        True,
    ),
    "independent_eval": (["--datasets", str(DATASETS)], ["--datasets", str(DATASETS), "--limit", "50"], True),
    "redaction_collisions": (["--datasets", str(DATASETS)], ["--datasets", str(DATASETS)], True),
    "long_query": ([], ["--turns", "5000", "--rounds", "1"], False),
    "languages": ([], [], False),
    "probes": (
        ["--dataset", str(DATASETS / "realtalk_dev"), "--probe", "speakers,split"],
        ["--dataset", str(DATASETS / "realtalk_dev"), "--probe", "speakers,split"],
        True,
    ),
    "replay_http": (
        [str(DATASETS / "longmemeval_s_dev.json.gz"), "--workers", "8"],
        [str(DATASETS / "locomo10.json"), "--workers", "8", "--limit", "50"],
        True,
    ),
    "server_memory": (
        [str(DATASETS / n) for n in ("locomo10.json", "longmemeval_s_dev.json.gz", "memdaily_dev", "realtalk_dev")],
        [str(DATASETS / "realtalk_dev"), "--index-cache-mb", "16"],
        True,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every script")
    parser.add_argument("--only", default="", help="comma-separated names: " + ", ".join(BENCHES))
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(BENCHES)
    failed = []
    for name in names:
        full, quick, needs_data = BENCHES[name]
        if needs_data and not DATASETS.is_dir():
            print(f"\n## {name}: skipped, no datasets at {DATASETS} (set REFIND_DATASETS)")
            continue
        argv = [sys.executable, str(HERE / f"{name}.py"), *(quick if args.quick else full)]
        print(f"\n## {name}\n\n$ {' '.join(argv[1:])}", flush=True)
        start = time.perf_counter()
        if subprocess.run(argv).returncode:
            failed.append(name)
        print(f"\n({name}: {time.perf_counter() - start:.0f} s)", flush=True)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
