"""Is every language searchable? Natural questions in 22 languages and scripts, each asked of one user's messages,
each after one message: found first (PASS), second or third (WEAK), or not in the first three (FAIL).

    .venv/bin/python bench/languages.py [--cases fixtures/languages.json] [--baseline ../other] [--failures]

The cases (``fixtures/languages.json``, written for refind by a review of the analyzer): per language, a user's
messages — each its own session, so a block is one message — and questions a person or a planner would type, each
naming the message it asks about and what it probes ("accent dropped", "Traditional query, Simplified message",
"1-char noun glued to 的"…). Questions of kind ``norm`` are what an analyzer can be expected to handle; ``bm25`` ones
need synonyms, translation or transliteration, which BM25 cannot do (counted apart). Two more sets in that format:
``fixtures/languages_more.json`` (a second reviewer's; mended against since) and ``fixtures/languages_blind.json``
(127 + 20 questions in 16 languages, written without reading the analyzer, the other sets or any result).

Searches run with backfill off, as the planner sees them (a question matching nothing finds nothing). With
``--baseline`` the same cases are asked of another checkout in a worker process (``python -P``, that checkout on
PYTHONPATH), in the same run, and the table shows both; ``--failures`` lists every question that is not a PASS here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def results(cases_path: Path) -> list[dict[str, object]]:
    """Every question's rank (None: not in the list) in this process's refind."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from refind_cli.api import Memory
    from refind_cli.search import search
    from refind_cli.search_config import SearchConfig

    cases = json.loads(cases_path.read_text(encoding="utf-8"))
    config = SearchConfig().with_(backfill=False)
    out: list[dict[str, object]] = []
    with (
        tempfile.TemporaryDirectory(prefix="refind-languages-") as tmp,
        Memory(str(Path(tmp) / "db.sqlite"), retention_days=None) as memory,
    ):
        day = 86_400_000
        for case in cases:
            for i, text in enumerate(case["messages"]):
                memory.add(text, user=case["user"], session=f"s{i}", at=1_700_000_000_000 + i * day)
        store = memory._store
        for case in cases:
            for q in case["queries"]:
                target = case["messages"][q["target"]]
                blocks = search(store, case["user"], q["query"], top_k=10, config=config)
                rank = next((r for r, b in enumerate(blocks, 1) if target in b.content), None)
                out.append({"language": case["language"], **q, "rank": rank})
    return out


def verdict(rank: object) -> str:
    return "PASS" if rank == 1 else "WEAK" if isinstance(rank, int) and rank <= 3 else "FAIL"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=Path, default=HERE.parent / "fixtures" / "languages.json")
    parser.add_argument("--baseline", type=Path, help="another checkout of refind, asked the same in the same run")
    parser.add_argument("--failures", action="store_true", help="list every question that is not a PASS here")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a worker's answer
    args = parser.parse_args()
    if args.json:
        print(json.dumps(results(args.cases)))
        return 0
    runs = {"this": results(args.cases)}
    if args.baseline:
        env = {**os.environ, "PYTHONPATH": str(args.baseline.resolve())}
        done = subprocess.run(
            [sys.executable, "-P", __file__, "--json", "--cases", str(args.cases.resolve())],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=args.baseline,
        )
        runs = {"baseline": json.loads(done.stdout), **runs}
    names = list(runs)
    print("| language | questions | " + " | ".join(f"{n}: pass / weak / fail" for n in names) + " |")
    print("|---|---:|" + "---|" * len(names))
    languages = list(dict.fromkeys(str(r["language"]) for r in runs["this"]))
    for kind in ("norm", "bm25"):
        for language in [*languages, "all"] if kind == "norm" else ["all"]:
            cells = []
            for n in names:
                rows = [r for r in runs[n] if r["kind"] == kind and language in ("all", r["language"])]
                counts = [sum(verdict(r["rank"]) == v for r in rows) for v in ("PASS", "WEAK", "FAIL")]
                cells.append(" / ".join(map(str, counts)))
            if not rows:
                continue
            label = f"**all ({kind})**" if language == "all" else language
            print(f"| {label} | {len(rows)} | " + " | ".join(cells) + " |")
    if args.failures:
        print()
        for r in runs["this"]:
            if verdict(r["rank"]) != "PASS":
                print(f"{verdict(r['rank'])} {r['language']}: {r['query']!r} ({r['probes']}), rank {r['rank'] or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
