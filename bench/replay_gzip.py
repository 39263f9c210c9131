"""Reading a .gz replay: refind's reader (zlib, each read answering what it decompressed) against ``gzip.GzipFile``
(the reader before, which lost the last read's lines of a truncated file), on the same file in the same run.

    .venv/bin/python bench/replay_gzip.py [--dataset ../shared/datasets/longmemeval_s_dev.json.gz] [--limit 100]
        [--repeat 5] [--replay 20]

Writes the set's Add requests (one per line, as `refind add` reads them) to a .jsonl.gz, then, alternating the two
readers ``--repeat`` times: every line read (``open_lines``, the replay's own reader; the old one is gzip.GzipFile
under the same line splitter), MB of JSONL per second, median of the runs and the ratio new / old. With
``--replay N``: the first N questions' requests replayed whole into a fresh database (``refind add`` 's path: a reader
process, batches) with each reader, messages per second — the reader's share of a replay's time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any
from unittest.mock import patch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import datasets
from refind_cli import replay as replay_module
from refind_cli.store import Store

NEW = replay_module._Gunzip


def old_reader(raw: Any) -> IO[bytes]:
    """The reader before: gzip.GzipFile over the same (peeked) file."""
    return gzip.GzipFile(fileobj=raw)


def write_jsonl_gz(dataset: str, limit: int | None, path: Path) -> tuple[int, int]:
    lines = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as out:
        for i, sample in enumerate(datasets.load(dataset)):
            if limit is not None and i >= limit:
                break
            for request in sample.requests:
                out.write(json.dumps(request.canonical(), ensure_ascii=False) + "\n")
                lines += 1
    return lines, path.stat().st_size


def read_all(path: Path, reader: Any) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, lines, bytes) of reading every line of ``path`` with ``reader``."""
    with patch.object(replay_module, "_Gunzip", reader):
        started, cpu = time.perf_counter(), time.process_time()
        lines, _, _ = replay_module.open_lines(str(path))
        count = size = 0
        for _, line in lines:
            count += 1
            size += len(line) + 1
        return time.perf_counter() - started, time.process_time() - cpu, count, size


def replay_all(path: Path, reader: Any, folder: Path, name: str) -> tuple[float, int]:
    with patch.object(replay_module, "_Gunzip", reader), Store(folder / f"{name}.db", retention_days=None) as store:
        started = time.perf_counter()
        summary = replay_module.replay(store, str(path))
        return time.perf_counter() - started, summary.messages_added


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="../shared/datasets/longmemeval_s_dev.json.gz")
    ap.add_argument("--limit", type=int, default=None, help="questions (users) of the set; default all")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--replay", type=int, default=0, help="also replay the first N questions whole, each reader")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        big = folder / "set.jsonl.gz"
        lines, packed = write_jsonl_gz(args.dataset, args.limit, big)
        wall: dict[str, list[float]] = {"old": [], "new": []}
        cpu: dict[str, list[float]] = {"old": [], "new": []}
        seen: dict[str, tuple[int, int]] = {}
        for _ in range(args.repeat):
            for name, reader in (("old", old_reader), ("new", NEW)):
                seconds, cpu_seconds, count, size = read_all(big, reader)
                wall[name].append(size / seconds / 1e6)
                cpu[name].append(size / cpu_seconds / 1e6)
                seen[name] = (count, size)
        assert seen["old"] == seen["new"] and seen["new"][0] == lines, seen
        mb = seen["new"][1] / 1e6
        print(f"{args.dataset}: {lines:,} Add requests, {mb:.1f} MB of JSONL, {packed / 1e6:.1f} MB .gz")
        print(f"| reader | MB/s by the clock (median of {args.repeat}) | MB/s of CPU (median) | CPU runs |")
        print("|---|---|---|---|")
        for name in ("old", "new"):
            runs = ", ".join(f"{r:.0f}" for r in cpu[name])
            print(f"| {name} | {statistics.median(wall[name]):.0f} | {statistics.median(cpu[name]):.0f} | {runs} |")
        for label, rates in (("clock", wall), ("CPU", cpu)):
            ratio = statistics.median(n / o for n, o in zip(rates["new"], rates["old"]))
            print(f"new / old by the {label} (median of the runs' ratios): {ratio:.2f}x")
        if args.replay:
            small = folder / "part.jsonl.gz"
            write_jsonl_gz(args.dataset, args.replay, small)
            rates: dict[str, list[float]] = {"old": [], "new": []}
            for i in range(2):
                for name, reader in (("old", old_reader), ("new", NEW)):
                    seconds, added = replay_all(small, reader, folder, f"{name}{i}")
                    rates[name].append(added / seconds)
            print(
                f"replay of {args.replay} questions, messages/s: "
                + "; ".join(f"{n} {', '.join(f'{r:,.0f}' for r in rates[n])}" for n in rates)
            )


if __name__ == "__main__":
    main()
