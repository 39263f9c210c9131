"""Retrieval quality of every SearchConfig variant (and query variant) against plain BM25, in one run per dataset.

    .venv/bin/python bench/quality.py [--datasets ../shared/datasets] [--limit N] [--top-k 100] [--out FILE]
                                      [--only locomo,longmemeval,memdaily,realtalk,longmemeval-rf]

``--only`` also takes ``oracle`` (LongMemEval's oracle split, 470 questions) and the project's chats written blind
(``fixtures/blind/``, BENCHMARKS.md "Chats written blind"): ``blind-chat-en``, ``blind-chat-en2``, ``blind-chat-zh``,
``blind-chat-en3``, ``blind-chat-en4``, ``blind-chat-en5``, ``blind-chat-en6``, ``blind-chat-en7``, ``blind-chat-zh2``,
``blind-chat-zh3``, ``blind-chat-zh4``, ``blind-chat-zh5``, ``blind-chat-zh6``, ``blind-chat-zh7``, ``blind-chat-zh8``,
``blind-chat-zh9``, ``blind-assistant``, ``blind-assistant-zh``, ``blind-assistant-zh2``, and round 24's group chats and
code-switching chat, ``blind-group-en``, ``blind-group-zh``, ``blind-chat-mix`` — choose a default by the worst of them
all.

Each dataset is replayed once (contest-style) into a temporary database; every question is then asked of every
system in turn — the plain BM25 baseline, refind's defaults, one-field-at-a-time changes to SearchConfig, a few
combinations, and query variants (options dropped, instructions appended) — so all numbers of a table come from
the same run. ``longmemeval-rf`` replays LongMemEval role-faithfully (real user/assistant roles), where the paper's
user+assistant turn (``turn_unit=pair``) means something. MemDaily adds the English-only tokenizer baseline.

Prints markdown tables (recall at 2k/8k/32k characters, p50/p95 ms) and writes them to --out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli.evaluate import (
    BUDGETS,
    BaselineBM25,
    EvalSettings,
    evaluate,
    refind_bm25,
    search_config,
)

INSTRUCTIONS = {
    "+ 'Answer in one word.'": "Answer in one word.",
    "+ multiple-choice preamble": (
        "Choose the single correct option from the choices below and reply with its "
        "letter (A, B, C or D) only; do not explain your answer."
    ),
}

# one field at a time from the defaults, then a few combinations (KEY=VALUE as `refind eval --variant` takes them)
GRID: list[tuple[str, ...]] = [
    (),
    ("neighbours=0",),
    ("neighbours=1",),
    ("neighbours=3",),
    ("session_fusion=off",),
    ("rrf_k=20",),
    ("overlap=repeat",),
    ("neighbour_roles=same",),
    ("neighbour_filter=match",),
    ("neighbour_filter=short",),
    ("neighbour_filter=match_or_short",),
    ("defer_chars=none",),
    ("index_labels=off",),
    ("options_in_query=off",),
    ("neighbours=1", "neighbour_max_chars=300"),
    ("session_fusion=off", "neighbours=0"),
]
PAIR_GRID: list[tuple[str, ...]] = [
    ("turn_unit=pair",),
    ("turn_unit=pair", "neighbours=1"),
    ("turn_unit=pair", "neighbour_max_chars=300"),
]


def label(variant: tuple[str, ...]) -> str:
    return "defaults" if not variant else ", ".join(variant)


def with_query(searcher, *, suffix: str = "", keep_options: bool = True):
    """The searcher asked the question with an instruction appended, or without its options."""

    def run(store, *, user_id, query, options=(), top_k):
        return searcher(
            store,
            user_id=user_id,
            query=f"{query} {suffix}" if suffix else query,
            options=options if keep_options else (),
            top_k=top_k,
        )

    return run


def parse_grid(text: str) -> list[tuple[str, ...]]:
    """``"neighbours=1,neighbour_chars=500;overlap=repeat"`` → [("neighbours=1", "neighbour_chars=500"), …]."""
    return [tuple(p.strip() for p in group.split(",") if p.strip()) for group in text.split(";")]


def systems_for(dataset: str, grid: list[tuple[str, ...]] | None = None, extras: bool = True) -> dict:
    systems: dict = {"baseline (plain BM25)": BaselineBM25("analyze")}
    if grid is None:
        grid = GRID + (PAIR_GRID if dataset == "longmemeval-rf" else [])
    for variant in grid:
        systems[label(variant)] = refind_bm25(search_config(tuple(v.split("=", 1) for v in variant)))
    if not extras:
        return systems
    default = refind_bm25(search_config())
    if dataset == "memdaily":
        systems["defaults, options not passed"] = with_query(default, keep_options=False)
        systems["baseline, options not passed"] = with_query(BaselineBM25("analyze"), keep_options=False)
        systems["baseline, English-only tokenizer"] = BaselineBM25("plain")
        systems["baseline, English-only tokenizer, options not passed"] = with_query(
            BaselineBM25("plain"), keep_options=False
        )
    for name, suffix in INSTRUCTIONS.items():
        systems[f"defaults {name}"] = with_query(default, suffix=suffix)
        systems[f"baseline {name}"] = with_query(BaselineBM25("analyze"), suffix=suffix)
    return systems


def table(report: dict) -> list[str]:
    rows = [
        f"### {report['dataset']} — {report['questions']} questions, {report['users']} users, "
        f"{report['messages']:,} messages, top_k {report['settings']['top_k']}"
        + (", role-faithful" if report["settings"]["role_faithful"] else ""),
        "",
        "| system / variant | R@2k | R@8k | R@32k | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in report["systems"].items():
        r = s["recall"]
        rows.append(
            f"| {name} | "
            + " | ".join(f"{r[str(b)]:.3f}" for b in BUDGETS)
            + f" | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} |"
        )
    best = max(
        (n for n in report["systems"] if not n.startswith("baseline") and "+" not in n and "not passed" not in n),
        key=lambda n: _score(report["systems"][n]),
    )
    rows += ["", f"Best SearchConfig variant by R@8k (then R@2k, R@32k): **{best}**.", ""]
    return rows


def worst_sets(reports: list[dict], room: float = 0.95) -> list[str]:
    """Each variant's margin over plain BM25 on its worst set, per budget — the number a default is chosen by. A set
    where plain BM25 already finds more than ``room`` at a budget (MemDaily at 8k and 32k: 0.991) leaves no room for a margin
    there and is left out of that budget's column; ``below`` lists every (set, budget) under plain BM25."""
    worst: dict[str, dict[int, tuple[float, str]]] = {}
    below: dict[str, list[str]] = {}
    for report in reports:
        plain = report["systems"].get("baseline (plain BM25)")
        if plain is None:
            continue
        for name, s in report["systems"].items():
            if name.startswith(("baseline", "defaults ")) or "not passed" in name:
                continue  # (the instruction variants and MemDaily's extras: another question, not another ranking)
            for b in BUDGETS:
                ours, theirs = s["recall"][str(b)], plain["recall"][str(b)]
                margin = 100 * (ours - theirs)
                if margin < 0:
                    below.setdefault(name, []).append(f"{report['dataset']} {b // 1000}k {margin:+.1f}")
                if theirs > room:
                    continue
                held = worst.setdefault(name, {}).get(b)
                if held is None or margin < held[0]:
                    worst[name][b] = (margin, report["dataset"])
    if len(reports) < 2 or not worst:
        return []
    rows = [
        f"### The worst set: each variant's margin over plain BM25, points (sets where plain BM25 finds over {room:.0%}"
        " at a budget left out of it)",
        "",
        "| variant | R@2k | R@8k | R@32k | below plain BM25 |",
        "|---|---|---|---|---|",
    ]
    for name, by_budget in worst.items():
        cells = [f"{by_budget[b][0]:+.1f} ({by_budget[b][1]})" if b in by_budget else "—" for b in BUDGETS]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {'; '.join(below.get(name, [])) or 'none'} |")
    return rows + [""]


def _score(s: dict) -> tuple:
    r = s["recall"]
    return (r["8000"], r["2000"], r["32000"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="../shared/datasets", help="folder holding the three sets")
    ap.add_argument("--limit", type=int, default=None, help="at most N questions per dataset")
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument(
        "--only",
        default="locomo,longmemeval,longmemeval-rf,memdaily,realtalk",
        help="sets, comma-separated: also oracle (LongMemEval's oracle split) and the chats written blind under "
        "fixtures/blind/ (blind-chat-en … blind-chat-en7, blind-chat-zh … blind-chat-zh9, blind-chat-mix, blind-group-en, "
        "blind-group-zh, blind-assistant, blind-assistant-zh, blind-assistant-zh2)",
    )
    ap.add_argument("--out", default=None, help="also write the markdown here")
    ap.add_argument(
        "--grid",
        default=None,
        help="variants instead of the built-in grid: 'K=V,K=V;K=V' (';' between variants, '' = defaults)",
    )
    args = ap.parse_args()
    root = Path(args.datasets)
    paths = {
        "locomo": root / "locomo10.json",
        "longmemeval": root / "longmemeval_s_dev.json.gz",
        "longmemeval-rf": root / "longmemeval_s_dev.json.gz",
        "memdaily": root / "memdaily_dev",
        "realtalk": root / "realtalk_dev",
        "oracle": root / "longmemeval_oracle.json.gz",
    }
    blind = Path(__file__).resolve().parent.parent / "fixtures" / "blind"  # the project's own, written blind (round 19)
    for folder in sorted(p for p in blind.iterdir() if p.is_dir()):  # a REALTALK folder, or one LongMemEval file
        files = list(folder.glob("*.json.gz"))
        paths[f"blind-{folder.name.replace('_', '-')}"] = files[0] if len(files) == 1 else folder
    grid = parse_grid(args.grid) if args.grid is not None else None
    lines = [
        f"Command: `.venv/bin/python bench/quality.py --datasets {args.datasets} --top-k {args.top_k}"
        + (f" --limit {args.limit}" if args.limit else "")
        + f" --only {args.only}"
        + (f" --grid '{args.grid}'" if args.grid is not None else "")
        + "`",
        "",
    ]
    reports = []
    for name in args.only.split(","):
        started = time.perf_counter()
        settings = EvalSettings(top_k=args.top_k, limit=args.limit, role_faithful=name == "longmemeval-rf")
        report = evaluate(paths[name], settings=settings, systems=systems_for(name, grid, extras=grid is None))
        reports.append(report)
        lines += table(report)
        print("\n".join(table(report)), flush=True)
        print(f"({name}: {time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    summary = worst_sets(reports)
    lines += summary
    print("\n".join(summary), flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
