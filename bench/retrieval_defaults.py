"""Why refind's SearchConfig defaults are what they are: each default undone alone, on the four shared sets (and the
LongMemEval oracle split, which no default was tuned on), against plain BM25 in the same run.

    .venv/bin/python bench/retrieval_defaults.py [--datasets ../shared/datasets] [--only locomo,realtalk]

Runs `refind eval DATASET --json -V KEY=VALUE` per row and prints a Markdown table of recall at 2k / 8k / 32k.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SETS = {
    "locomo": "locomo10.json",
    "longmemeval_s": "longmemeval_s_dev.json.gz",
    "memdaily": "memdaily_dev",
    "realtalk": "realtalk_dev",
    "longmemeval_oracle": "longmemeval_oracle.json.gz",
}

# (label, variants): the defaults, then each chosen default undone alone, then the paper-like original
ROWS = [
    ("defaults", []),
    ("index_dates=off", ["index_dates=false"]),
    ("context_blocks=none (±2 for every block)", ["context_blocks=none"]),
    ("lead_chars=0 (no plain-BM25 lead)", ["lead_chars=0"]),
    ("neighbour_filter=all (every neighbour)", ["neighbour_filter=all"]),
    ("defer_chars=none (long anchors not deferred)", ["defer_chars=none"]),
    ("fuzzy=off", ["fuzzy=false"]),
    ("backfill=off", ["backfill=false"]),
    ("rm3_terms=10 (pseudo-relevance feedback)", ["rm3_terms=10"]),
    ("neighbour_max_chars=none (long neighbours kept)", ["neighbour_max_chars=none"]),
    ("neighbours=0", ["neighbours=0", "late_neighbours=0"]),
    ("session_fusion=off", ["session_fusion=false"]),
    ("session_top=3", ["session_top=3"]),
    ("b=1.0", ["b=1.0"]),
    (
        "first prototype (±2 everywhere, no caps, no dates, no lead)",
        [
            "index_dates=false",
            "context_blocks=none",
            "defer_chars=none",
            "neighbour_max_chars=none",
            "lead_chars=0",
            "neighbour_filter=all",
            "fuzzy=false",
            "backfill=false",
        ],
    ),
]


def run(path: Path, variants: list[str]) -> dict:
    cmd = [sys.executable, "-m", "refind_cli", "eval", str(path), "--json", "-q"]
    for v in variants:
        cmd += ["-V", v]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "datasets"))
    ap.add_argument("--only", default=",".join(SETS))
    args = ap.parse_args()
    names = args.only.split(",")
    header = " | ".join(f"{n} R@2k / 8k / 32k" for n in names)
    print(f"| variant | {header} |")
    print("|---|" + "---|" * len(names))
    base_row = []
    rows = []
    for label, variants in ROWS:
        cells = []
        for name in names:
            report = run(Path(args.datasets) / SETS[name], variants)
            r = report["systems"]["refind"]["recall"]
            cells.append(f"{r['2000']:.3f} / {r['8000']:.3f} / {r['32000']:.3f}")
            if label == "defaults":
                b = report["systems"]["baseline"]["recall"]
                base_row.append(f"{b['2000']:.3f} / {b['8000']:.3f} / {b['32000']:.3f}")
        rows.append(f"| {label} | {' | '.join(cells)} |")
        if label == "defaults":
            rows.insert(0, f"| plain BM25 baseline | {' | '.join(base_row)} |")
        print(rows[-1] if label != "defaults" else "\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
