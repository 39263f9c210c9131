"""Upper bounds for ranking ideas before building them: each probe asks what the idea could add at best.

    .venv/bin/python bench/probes.py [--dataset ../shared/datasets/realtalk_dev] [--probe speakers,split,cooccur]

Every probe replays the set (contest-style), asks refind's defaults (``search()``, top_k 100) and scores recall at
2k / 8k / 32k characters exactly as ``refind eval`` does. The speaker labels of a chat are the ``Name: `` heads of
its messages.

* ``speakers`` — a **nickname oracle**: for the questions that name no speaker label ("Kate" for the speaker
  labelled "Emi"), the labels of the speakers who said the evidence are appended to the question. What perfect
  nickname resolution could add.
* ``split`` — **per-entity sub-queries**: a question naming two or more speakers is asked once per speaker, each
  time without the other names, and the lists are interleaved rank by rank (a block already taken is skipped).
* ``cooccur`` — **co-occurrence expansion, offline**: for each question with a message missed within 8k by both
  refind and plain BM25 (``bench/ceiling.py --misses``), the 10 words that co-occur most with the question's
  words within sessions (lift × log count, names and words in over half the sessions left out); how often one of
  them is in a missed message at all — the most such an expansion could reach.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import datasets
from refind_cli.datasets import Sample
from refind_cli.evaluate import BUDGETS, found_within, replay_sample, warm_up
from refind_cli.search import search
from refind_cli.search_config import speaker_label
from refind_cli.store import Store
from refind_cli.tokenize import analyze


def labels_of(sample: Sample) -> set[str]:
    return {h for r in sample.requests for m in r.messages if (h := speaker_label(m.content)) is not None}


def recall(contents: list[str], evidence: tuple[str, ...]) -> list[float]:
    return [f / len(evidence) for f in found_within(contents, evidence)]


def mean(rows: list[list[float]]) -> str:
    return " / ".join(f"{statistics.fmean(r[i] for r in rows):.3f}" for i in range(len(BUDGETS))) if rows else "-"


def probe_search(dataset: str, probes: set[str]) -> None:
    rows: dict[str, list[list[float]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="refind-probes-") as tmp:
        store = Store(Path(tmp) / "p.db", retention_days=None)
        for sample in datasets.load(dataset):
            replay_sample(store, sample)
            labels = labels_of(sample)
            label_tokens = {t for x in labels for t in analyze(x)}
            for q in sample.questions:
                base = [b.content for b in search(store, q.user_id, q.text, top_k=100)]
                base_r = recall(base, q.evidence)
                rows["defaults, all questions"].append(base_r)
                named = label_tokens & set(analyze(q.text))
                if "speakers" in probes:
                    if named:
                        rows["nickname oracle, all questions"].append(base_r)
                    else:
                        said_by = sorted({h for e in q.evidence if (h := speaker_label(e)) is not None})
                        text = q.text + " " + " ".join(said_by)
                        alt = [b.content for b in search(store, q.user_id, text, top_k=100)]
                        rows["defaults, questions naming no speaker"].append(base_r)
                        rows["nickname oracle, questions naming no speaker"].append(recall(alt, q.evidence))
                        rows["nickname oracle, all questions"].append(recall(alt, q.evidence))
                if "split" in probes and len(named) >= 2:
                    rows["defaults, questions naming 2+ speakers"].append(base_r)
                    rows["per-entity split, questions naming 2+ speakers"].append(
                        recall(_split(store, q.user_id, q.text, label_tokens), q.evidence)
                    )
        store.close()
    for name, r in rows.items():
        print(f"| {name} | {len(r)} | {mean(r)} |")


def _split(store: Store, user_id: str, text: str, label_tokens: set[str]) -> list[str]:
    words = re.findall(r"[\w']+", text)
    names = [w for w in words if set(analyze(w)) & label_tokens]
    lists = []
    for name in dict.fromkeys(names):
        sub = text
        for other in names:
            if analyze(other) != analyze(name):
                sub = re.sub(rf"\b{re.escape(other)}\b", " ", sub)
        lists.append(search(store, user_id, sub, top_k=100))
    seen: set[str] = set()
    merged: list[str] = []
    for i in range(100):
        for blocks in lists:
            if i < len(blocks) and blocks[i].id not in seen:
                seen.add(blocks[i].id)
                merged.append(blocks[i].content)
    return merged


def probe_cooccur(dataset: str, misses_file: str) -> None:
    misses = [json.loads(line) for line in Path(misses_file).read_text(encoding="utf-8").splitlines()]
    by_q: dict[str, list[dict[str, object]]] = defaultdict(list)
    for m in misses:
        by_q[str(m["question"])].append(m)
    hit = asked = 0
    hits: Counter[str] = Counter()
    for sample in datasets.load(dataset):
        sessions: dict[str, set[str]] = defaultdict(set)
        for r in sample.requests:
            for msg in r.messages:
                sessions[r.session_id].update(analyze(msg.content))
        names = {t for x in labels_of(sample) for t in analyze(x)}
        n = len(sessions)
        df = Counter(t for words in sessions.values() for t in words)
        for q in sample.questions:
            if q.id not in by_q:
                continue
            score: Counter[str] = Counter()
            for w in {t for t in analyze(q.text) if t not in names and t in df}:
                holding = [words for words in sessions.values() if w in words]
                if len(holding) > n / 2:
                    continue
                for t, c in Counter(t for words in holding for t in words).items():
                    if t not in names and t != w and c >= 2:
                        score[t] += (c / len(holding)) / (df[t] / n) * math.log(1 + c)
            top = {t for t, _ in score.most_common(10)}
            missed = {t for m in by_q[q.id] for t in analyze(str(m["evidence"]))} - names
            asked += 1
            if top & missed:
                hit += 1
                hits.update(top & missed)
    print(f"Questions with a message both systems miss within 8k: {asked}; with one of the 10 expansion words in a")
    print(f"missed message: {hit}. The words that hit most: {', '.join(f'{w} {c}' for w, c in hits.most_common(12))}.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="../shared/datasets/realtalk_dev")
    ap.add_argument("--probe", default="speakers,split,cooccur")
    ap.add_argument("--misses", default=None, help="bench/ceiling.py --misses output (the cooccur probe needs it)")
    args = ap.parse_args()
    probes = set(args.probe.split(","))
    warm_up()
    if probes & {"speakers", "split"}:
        print("| questions | n | R@2k / 8k / 32k |")
        print("|---|---|---|")
        probe_search(args.dataset, probes)
    if "cooccur" in probes:
        if not args.misses:
            raise SystemExit("the cooccur probe needs --misses FILE (from bench/ceiling.py --misses FILE)")
        probe_cooccur(args.dataset, args.misses)


if __name__ == "__main__":
    main()
