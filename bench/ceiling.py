"""Where the evidence sits: refind's ranking against plain BM25's, per question, and what no lexical ranking reaches.

    .venv/bin/python bench/ceiling.py [--dataset ../shared/datasets/realtalk_dev] [--limit N] [--variant K=V ...]
                                      [--budget 8000] [--misses FILE]

Replays the set (contest-style, as ``refind eval`` does), asks every question of refind (its defaults, or with
``--variant`` overrides) and of plain BM25 in the same run, and records for every labelled message the character
offset at which its text ends in each system's joined contents (absent when not returned). Prints:

* R@2k / 8k / 32k of both, and of two oracles: **per question the better of the two lists** (what a perfect
  per-question choice between refind and plain BM25 would reach) and **per message either list** (an upper bound
  for any merge of the two lists that keeps each within the budget);
* for the labelled messages that **both** miss within the budget: whether the message shares a word with the
  question other than a speaker's name (the ``Name: `` label puts a speaker's name in every turn of theirs) —
  "content word", only a date word (the month and year indexed with every turn), only a speaker's name, or
  **nothing at all** (lexically unreachable: no ranking by the question's words can prefer it to any other turn;
  only a neighbour of a matching turn or luck shows it);
* the same per question (a question counts as unreachable when every message it misses shares nothing).

``--misses FILE`` writes every missed message with its question, category, offsets and shared words (JSON lines).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import datasets
from refind_cli.evaluate import (
    BUDGETS,
    JOIN,
    BaselineBM25,
    parse_variants,
    refind_bm25,
    replay_sample,
    search_config,
    warm_up,
)
from refind_cli.index_store import DATE_WORDS
from refind_cli.search_config import speaker_label
from refind_cli.store import Store, StoredMessage
from refind_cli.tokenize import analyze


def offsets(contents: list[str], evidence: tuple[str, ...]) -> list[int | None]:
    """Where each evidence text ends in the joined contents (None when it is not there)."""
    text = JOIN.join(contents)
    out: list[int | None] = []
    for e in evidence:
        at = text.find(e)
        out.append(None if at < 0 else at + len(e))
    return out


def recall(rows: list[list[int | None]], budget: int) -> float:
    return statistics.fmean(sum(1 for o in r if o is not None and o <= budget) / len(r) for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="../shared/datasets/realtalk_dev")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument("--budget", type=int, default=8000)
    ap.add_argument("--variant", action="append", default=[], help="a SearchConfig override K=V for refind")
    ap.add_argument("--misses", default=None, help="write the messages both systems miss here (JSON lines)")
    args = ap.parse_args()

    warm_up()
    refind = refind_bm25(search_config(parse_variants(args.variant)))
    plain = BaselineBM25("analyze")
    ours: list[list[int | None]] = []
    theirs: list[list[int | None]] = []
    misses: list[dict[str, object]] = []
    match_counts: list[list[int]] = []
    left = args.limit
    with tempfile.TemporaryDirectory(prefix="refind-ceiling-") as tmp:
        store = Store(Path(tmp) / "c.db", retention_days=None)
        for sample in datasets.load(args.dataset):
            if left is not None and left <= 0:
                break
            replay_sample(store, sample)
            messages = store.user_messages(sample.user_id)
            names = {t for m in messages if (h := speaker_label(m.content)) for t in analyze(h)}
            said = {m.content: m.said_at for m in messages}
            where = {m.content: i for i, m in enumerate(messages)}
            words_of = [set(analyze(m.content)) - names for m in messages]
            for q in sample.questions[:left]:
                a = refind(store, user_id=q.user_id, query=q.text, options=q.options, top_k=args.top_k)
                b = plain(store, user_id=q.user_id, query=q.text, options=q.options, top_k=args.top_k)
                oa, ob = offsets(a.contents, q.evidence), offsets(b.contents, q.evidence)
                ours.append(oa)
                theirs.append(ob)
                asked = set(analyze(q.text))
                matching = [i for i, w in enumerate(words_of) if w & (asked - names)]
                match_counts.append(matching)
                for e, x, y in zip(q.evidence, oa, ob):
                    if (x is not None and x <= args.budget) or (y is not None and y <= args.budget):
                        continue
                    words = set(analyze(e))
                    at = said.get(e)
                    dates = (
                        set(analyze(datetime.fromtimestamp(at / 1000, tz=UTC).strftime(DATE_WORDS))) if at else set()
                    )
                    shared = asked & words
                    content = shared - names
                    kind = (
                        "content word"
                        if content
                        else "date word only"
                        if asked & dates - names
                        else "speaker name only"
                        if shared
                        else "nothing"
                    )
                    misses.append(
                        {
                            "question": q.id,
                            "text": q.text,
                            "category": q.category,
                            "evidence": e,
                            "refind_end": x,
                            "plain_end": y,
                            "shared": sorted(shared),
                            "kind": kind,
                            "labelled": len(q.evidence),
                            "turns_to_a_match": _distance(messages, matching, where.get(e)),
                        }
                    )
            if left is not None:
                left -= len(sample.questions)
        store.close()

    print(f"{args.dataset}: {len(ours)} questions, {sum(map(len, ours))} labelled messages, top_k {args.top_k}")
    print()
    print("| system | " + " | ".join(f"R@{b // 1000}k" for b in BUDGETS) + " |")
    print("|---|" + "---|" * len(BUDGETS))
    best = [
        max(x, y, key=lambda r: sum(1 for o in r if o is not None and o <= args.budget)) for x, y in zip(ours, theirs)
    ]
    either = [
        [min((o for o in (x, y) if o is not None), default=None) for x, y in zip(r, s)] for r, s in zip(ours, theirs)
    ]
    for name, rows in (
        ("refind", ours),
        ("plain BM25", theirs),
        (f"oracle: per question the better list (at {args.budget // 1000}k)", best),
        ("oracle: per message either list", either),
    ):
        print(f"| {name} | " + " | ".join(f"{recall(rows, b):.3f}" for b in BUDGETS) + " |")
    better = Counter(
        "refind" if f(x) > f(y) else "plain" if f(y) > f(x) else "tie"
        for x, y in zip(ours, theirs)
        for f in [lambda r: sum(1 for o in r if o is not None and o <= args.budget)]
    )
    print()
    print(
        f"Per question at {args.budget // 1000}k: refind finds more {better['refind']}, plain more {better['plain']}, "
        f"the same {better['tie']}."
    )
    where = Counter()
    for r, s in zip(ours, theirs):
        for x, y in zip(r, s):
            where[_bucket(x, args.budget), _bucket(y, args.budget)] += 1
    print()
    print("Labelled messages by where each system has them (rows refind, columns plain BM25):")
    print()
    kinds = [f"≤ {args.budget // 1000}k", f"> {args.budget // 1000}k", "not returned"]
    print("| refind \\ plain | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for k in kinds:
        print(f"| {k} | " + " | ".join(str(where[k, j]) for j in kinds) + " |")
    total = sum(map(len, ours))
    print()
    print(
        f"Missed by both within {args.budget // 1000}k: {len(misses)} of {total} labelled messages, sharing with the question:"
    )
    print()
    by_kind = Counter(str(m["kind"]) for m in misses)
    for k in ("content word", "date word only", "speaker name only", "nothing"):
        print(f"- {k}: {by_kind[k]} ({by_kind[k] / max(len(misses), 1):.0%})")
    by_cat: dict[str, Counter[str]] = defaultdict(Counter)
    for m in misses:
        by_cat[str(m["category"])][str(m["kind"])] += 1
    for c, n in sorted(by_cat.items()):
        print(f"  - {c}: " + ", ".join(f"{k} {v}" for k, v in n.most_common()))
    weak = [m for m in misses if m["kind"] != "content word"]
    near = Counter(_band(m["turns_to_a_match"]) for m in weak)
    print()
    print(
        f"Of the {len(weak)} that share no content word, turns to the nearest message of the same session that does: "
        + ", ".join(f"{k} {near[k]}" for k in ("≤ 2", "3-5", "6-10", "> 10", "no such message in the session"))
        + f" (a question's words other than names match {statistics.fmean(map(len, match_counts)):.0f} messages on "
        "average)."
    )
    unreachable = _unreachable_share(len(ours), misses, args.budget)
    print()
    print(unreachable)
    if args.misses:
        with open(args.misses, "w", encoding="utf-8") as fh:
            for m in misses:
                fh.write(json.dumps(m, ensure_ascii=False) + "\n")


def _distance(messages: list[StoredMessage], matching: list[int], at: int | None) -> int | None:
    """Messages between ``at`` and the nearest of ``matching`` in the same session (None: none there)."""
    if at is None:
        return None
    session = messages[at].session_id
    return min((abs(i - at) for i in matching if messages[i].session_id == session), default=None)


def _band(d: object) -> str:
    if not isinstance(d, int):
        return "no such message in the session"
    return "≤ 2" if d <= 2 else "3-5" if d <= 5 else "6-10" if d <= 10 else "> 10"


def _bucket(o: int | None, budget: int) -> str:
    if o is None:
        return "not returned"
    return f"≤ {budget // 1000}k" if o <= budget else f"> {budget // 1000}k"


def _unreachable_share(questions: int, misses: list[dict[str, object]], budget: int) -> str:
    """How many questions miss only messages that no ranking by their words prefers, and the most a lexical ranking
    could reach: every labelled message found but those sharing nothing (or at most a name or a date word) with the
    question — counted, like recall, per question."""
    by_q: dict[str, list[str]] = defaultdict(list)
    labelled: dict[str, int] = {}
    for m in misses:
        by_q[str(m["question"])].append(str(m["kind"]))
        labelled[str(m["question"])] = int(str(m["labelled"]))

    def ceiling(kinds: set[str]) -> float:
        return 1 - sum(sum(1 for k in v if k in kinds) / labelled[q] for q, v in by_q.items()) / questions

    weak = {"nothing", "speaker name only", "date word only"}
    return (
        f"Questions with a miss of both within {budget // 1000}k: {len(by_q)} of {questions}; of them every missed "
        f"message shares nothing: {sum(1 for v in by_q.values() if set(v) == {'nothing'})}; at most a speaker's name "
        f"or a date word: {sum(1 for v in by_q.values() if set(v) <= weak)}.\n\n"
        f"Lexical ceiling at {budget // 1000}k — every labelled message found but those that share nothing with the "
        f"question: {ceiling({'nothing'}):.3f}; but those that share at most a name or a date word: "
        f"{ceiling(weak):.3f}."
    )


if __name__ == "__main__":
    main()
