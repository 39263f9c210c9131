"""Differential check: does this refind return exactly the same evidence as another one, on every shared set?

    .venv/bin/python bench/differential.py --baseline PYTHONPATH [--sets locomo,longmemeval,memdaily,realtalk]
        [--limit N] [--parts N] [--ignore FIELD,…]

Each set is replayed contest-style (as ``refind eval`` does) into a temporary database, once by this refind and
once by the refind found on ``--baseline`` (its checkout, run with ``python -P`` so the working directory's package
does not shadow it), each in its own process; every question is asked at top_k 5 and 100, and every field of every
block (id, content, score, dates, message ids, anchor lines) is hashed in order. The two hashes of a set must be equal: a change meant to keep results
(speed, storage) proves it here over all ~3,000 questions, where recall, an average, can hide a changed ranking. A
change meant to change results (an analyzer's) is counted: the searches whose answers differ in any field, and
those whose evidence differs (the blocks' ids and contents in order, scores aside: a token more in one turn changes
the average turn length, so every score of that user).
``--parts N`` stores this refind's index with N postings per part and builds its layouts sorting each out-of-order
session alone, so the paths a small set never reaches are compared too. Exits 1 when any set differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATASETS = Path(os.environ.get("REFIND_DATASETS", HERE.parent.parent / "shared" / "datasets"))
NOW = 1_767_225_600_000  # 2026-01-01 UTC: the clock of both replays
SETS = {
    "locomo": ("locomo10.json", "locomo"),
    "longmemeval": ("longmemeval_s_dev.json.gz", "longmemeval"),
    "memdaily": ("memdaily_dev", "memdaily"),
    "realtalk": ("realtalk_dev", "realtalk"),
}


def digest(
    path: str, fmt: str, limit: int | None, parts: int | None, ignore: frozenset[str] = frozenset()
) -> tuple[int, str, list[str], list[str]]:
    """(searches, hash of every answer, each answer's own hash, each answer's evidence's hash) for one set, with the
    refind this process imports."""
    from refind_cli import datasets, index_cache, index_store
    from refind_cli import evaluate as E
    from refind_cli import search as S
    from refind_cli.store import Store

    if parts:
        index_store.PART_POSTINGS = parts
        index_cache.SORT_ALL_PAST = 0
    samples = E.take(list(datasets.load(path, fmt, role_faithful=False, skipped=E.Skipped())), limit)
    h = hashlib.sha256()
    n = 0
    each: list[str] = []
    evidence: list[str] = []
    with tempfile.TemporaryDirectory(prefix="refind-diff-") as tmp:
        store = Store(Path(tmp) / "d.db", retention_days=None, clock=lambda: NOW)  # recorded-at is in the answers
        try:
            for sample in samples:
                E.replay_sample(store, sample)
                for q in sample.questions:
                    for top_k in (5, 100):
                        blocks = S.search(store, q.user_id, q.text, top_k=top_k, options=q.options)
                        # score, ids, dates, lines too (a Block is a NamedTuple since round 16, a dataclass before)
                        answer = [b._asdict() if hasattr(b, "_asdict") else dataclasses.asdict(b) for b in blocks]
                        answer = [{k: v for k, v in a.items() if k not in ignore} for a in answer]
                        encoded = json.dumps(answer, ensure_ascii=False).encode()
                        h.update(encoded)
                        each.append(hashlib.sha256(encoded).hexdigest()[:12])
                        shown = json.dumps([(b.id, b.content) for b in blocks], ensure_ascii=False).encode()
                        evidence.append(hashlib.sha256(shown).hexdigest()[:12])
                        n += 1
        finally:
            store.close()
    return n, h.hexdigest()[:16], each, evidence


def _run(pythonpath: str, args: list[str]) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    out = subprocess.run(
        [sys.executable, "-P", __file__, "--one", *args], env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="PYTHONPATH", help="the other refind's checkout")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--limit", type=int, default=None, help="questions per set")
    ap.add_argument("--parts", type=int, default=None, help="postings per part in this refind's index")
    ap.add_argument(
        "--ignore", default="", metavar="FIELD,…", help="block fields left out of the hash (one the baseline lacks)"
    )
    ap.add_argument("--one", nargs=2, metavar=("PATH", "FORMAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    ignore = frozenset(f for f in args.ignore.split(",") if f)
    if args.one:
        n, h, each, evidence = digest(args.one[0], args.one[1], args.limit, args.parts, ignore)
        print(json.dumps({"searches": n, "hash": h, "each": each, "evidence": evidence}))
        return
    if not args.baseline:
        ap.error("--baseline is required")
    print(f"`python bench/differential.py {' '.join(sys.argv[1:])}`\n")
    print(
        "| set | searches | this refind | baseline | equal | answers that differ | evidence that differs, top 5 / 100 |"
    )
    print("|---|---:|---|---|---|---:|---:|")
    differ = False
    for name in args.sets.split(","):
        file, fmt = SETS[name]
        common = [str(DATASETS / file), fmt] + (["--limit", str(args.limit)] if args.limit else [])
        common += ["--ignore", args.ignore] if ignore else []
        mine = _run(str(HERE.parent), common + (["--parts", str(args.parts)] if args.parts else []))  # this checkout
        theirs = _run(args.baseline, common)
        same = mine["hash"] == theirs["hash"]
        differ |= not same
        answers = sum(a != b for a, b in zip(mine["each"], theirs["each"], strict=True))  # (this script runs both)
        evidence = [a != b for a, b in zip(mine["evidence"], theirs["evidence"], strict=True)]  # top_k 5, 100, 5, …
        print(
            f"| {name} | {mine['searches']} | {mine['hash']} | {theirs['hash']} | {'yes' if same else '**no**'} "
            f"| {answers} | {sum(evidence[0::2])} / {sum(evidence[1::2])} |"
        )
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
