"""Reading a .gz replay: refind's reader (zlib, each read answering what it decompressed) against ``gzip.GzipFile``
(the reader before, which lost the last read's lines of a truncated file), on the same file in the same run.

    .venv/bin/python bench/replay_gzip.py [--dataset ../shared/datasets/longmemeval_s_dev.json.gz] [--limit 100]
        [--repeat 5] [--replay 20]
    .venv/bin/python bench/replay_gzip.py --baseline ../main [--repeat 5] [--replay 20]

With ``--baseline DIR`` (a checkout of another refind, e.g. main): the cost of checking the whole .gz before storing
any of it — that refind and this one alternating, each run a fresh process of this Python importing the one or
the other: every line read (``open_lines``: this one decompresses the file twice) from the file and from a pipe
(stdin: this one copies the .gz to a temporary file as it checks it), and with ``--replay N`` the first N questions'
requests replayed whole into a fresh database (``replay``, `refind add` 's path). Seconds by the clock and of CPU
(this process and its reader process), median of the runs, and the ratio this / baseline.

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
import os
import statistics
import subprocess
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
        lines, _, _ = replay_module.open_lines(str(path), check=False)  # the reader alone
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


TIMED = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from refind_cli import replay
from refind_cli.store import Store
mode, path = sys.argv[2], sys.argv[3]
def cpu():
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
started, used = time.perf_counter(), cpu()
if mode == "replay":
    with Store(sys.argv[4], retention_days=None) as store:
        count = replay.replay(store, path).messages_added
else:
    lines, _, _ = replay.open_lines(path)
    count = sum(1 for _ in lines)
print(json.dumps([time.perf_counter() - started, cpu() - used, count]))
"""


def timed(root: Path, mode: str, path: Path, folder: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, lines or messages stored) of one run in a fresh process importing refind from ``root``;
    ``pipe``: every line read from stdin, the file fed through a pipe."""
    db = folder / f"t{time.monotonic_ns()}.db"
    args = [sys.executable, "-c", TIMED, str(root), mode, "-" if mode == "pipe" else str(path), str(db)]
    with open(path, "rb") as source:
        feeder = subprocess.Popen(["cat"], stdin=source, stdout=subprocess.PIPE) if mode == "pipe" else None
        stdin = feeder.stdout if feeder is not None else subprocess.DEVNULL
        out = subprocess.run(args, stdin=stdin, capture_output=True, text=True, check=True).stdout
        if feeder is not None:
            feeder.wait()
    for leftover in folder.glob(f"{db.name}*"):
        os.remove(leftover)
    wall, cpu, count = json.loads(out)
    return wall, cpu, count


def against(baseline: Path, big: Path, small: Path | None, repeat: int, folder: Path) -> None:
    """The baseline refind and this one alternating on the same files: a table of medians and ratios."""
    here = Path(__file__).resolve().parent.parent
    modes = [("read", big), ("pipe", big)] + ([("replay", small)] if small is not None else [])
    runs: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for _ in range(repeat):
        for mode, path in modes:
            for name, root in (("baseline", baseline), ("this", here)):
                runs.setdefault((mode, name), []).append(timed(root, mode, path, folder))
    label = {
        "read": "every line, from the file",
        "pipe": "every line, from a pipe (stdin)",
        "replay": "replay into a fresh database",
    }
    print("| what | count | baseline s (clock / CPU) | this s (clock / CPU) | this ÷ baseline (clock / CPU) |")
    print("|---|---|---|---|---|")
    for mode, _ in modes:
        base, this = runs[(mode, "baseline")], runs[(mode, "this")]
        assert {r[2] for r in base} == {r[2] for r in this} and len({r[2] for r in this}) == 1, (base, this)
        cells = []
        for rows in (base, this):
            cells.append(f"{statistics.median(r[0] for r in rows):.2f} / {statistics.median(r[1] for r in rows):.2f}")
        ratios = [statistics.median(t[k] / b[k] for t, b in zip(this, base)) for k in (0, 1)]
        print(f"| {label[mode]} | {this[0][2]:,} | {cells[0]} | {cells[1]} | {ratios[0]:.2f}× / {ratios[1]:.2f}× |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="../shared/datasets/longmemeval_s_dev.json.gz")
    ap.add_argument("--limit", type=int, default=None, help="questions (users) of the set; default all")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--replay", type=int, default=0, help="also replay the first N questions whole, each reader")
    ap.add_argument("--baseline", type=Path, help="a checkout of the refind to compare with (see above)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        big = folder / "set.jsonl.gz"
        lines, packed = write_jsonl_gz(args.dataset, args.limit, big)
        if args.baseline is not None:
            small = None
            if args.replay:
                small = folder / "part.jsonl.gz"
                write_jsonl_gz(args.dataset, args.replay, small)
            print(f"{args.dataset}: {lines:,} Add requests, {packed / 1e6:.1f} MB .gz; baseline {args.baseline}")
            against(args.baseline.resolve(), big, small, args.repeat, folder)
            return
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
