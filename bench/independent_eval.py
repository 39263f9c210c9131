"""`refind eval` checked by an independent scorer, question by question (round 31).

    .venv/bin/python bench/independent_eval.py [--datasets ../shared/datasets] [--only locomo,realtalk] [--limit N]

Written from the datasets' README and issue 10's metric alone, without `refind_cli/evaluate.py`, `datasets.py` or
`misses.py`: this script reads each shared set itself, replays it through the public Python API
(``Memory.add_many``: one user per sample, one Add per session split at 20 messages, every role ``user`` with the
speaker in the content, times in UTC), asks every question through ``Memory.search`` (top_k 100, MemDaily's
choices as options), and scores R@2k / 8k / 32k from the returned contents and the set's own labels. Its plain BM25
is its own too (one document per message, refind's analyzer, k1 1.2, b 0.75, Lucene's idf, a query word said twice
counted twice, ties in arrival order). It then runs ``refind eval``'s ``evaluate()`` on the same set, records what
each system returned for each question, and prints how many questions agree at all three budgets, naming each one
that does not. Exit code 1 when any question differs.

It also scores refind by the message itself (``by id``: the block whose ``message_ids`` hold the labelled message;
a copy of its text said elsewhere does not count): the set's recall where the documented text match credits
another message that holds the labelled text.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUDGETS = (2000, 8000, 32000)
SETS = {
    "locomo": "locomo10.json",
    "longmemeval": "longmemeval_s_dev.json.gz",
    "memdaily": "memdaily_dev",
    "realtalk": "realtalk_dev",
}


@dataclass
class Msg:
    key: str  # the set's own id of the message, unique within its user
    content: str
    ts: int | None


@dataclass
class Question:
    user: str
    text: str
    evidence: list[str]  # keys
    options: list[str] = field(default_factory=list)


@dataclass
class LoadedSet:
    users: dict[str, list[tuple[str, list[Msg]]]]  # user -> sessions (id, messages) in order
    questions: list[Question]


def _ms(dt: datetime) -> int:
    return int(dt.replace(tzinfo=UTC).timestamp() * 1000)


def _dia(dia_id: str) -> str:
    """'D30:05' is D30:5; 'D13:4.' (an id ending a sentence) is D13:4."""
    m = re.fullmatch(r"D(\d+):(\d+)\.?", dia_id.strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else dia_id


def _dia_evidence(qa: dict[str, Any], keys: set[str]) -> list[str]:
    ids = [_dia(p) for e in qa.get("evidence", []) for p in re.split(r"[;,\s]+", e) if p.rstrip(".")]
    return [k for k in dict.fromkeys(ids) if k in keys]


def _dialogue(conv: dict[str, Any], speaker: str, text: str, when: Callable[[int, dict[str, Any]], int | None]):
    sessions, keys, n = [], set(), 1
    while f"session_{n}" in conv:
        msgs = [
            Msg(_dia(t["dia_id"]), f"{t[speaker]}: {t[text]}", when(n, t))
            for t in conv[f"session_{n}"]
            if (t.get(text) or "").strip()
        ]
        keys |= {m.key for m in msgs}
        sessions.append((f"session_{n}", msgs))
        n += 1
    return sessions, keys


def load_locomo(path: Path) -> LoadedSet:
    out = LoadedSet({}, [])
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]

        def when(n: int, _t: dict[str, Any], conv: dict[str, Any] = conv) -> int | None:
            date = conv.get(f"session_{n}_date_time")
            return _ms(datetime.strptime(date, "%I:%M %p on %d %B, %Y")) if date else None

        user = sample["sample_id"]
        out.users[user], keys = _dialogue(conv, "speaker", "text", when)
        for qa in sample["qa"]:
            if qa.get("category") in (1, 2, 3, 4) and (ev := _dia_evidence(qa, keys)):
                out.questions.append(Question(user, qa["question"], ev))
    return out


def load_realtalk(path: Path) -> LoadedSet:
    out = LoadedSet({}, [])
    for file in sorted(path.glob("*.json")) if path.is_dir() else [path]:
        chat = json.loads(file.read_text())

        def when(_n: int, t: dict[str, Any]) -> int | None:
            return _ms(datetime.strptime(t["date_time"], "%d.%m.%Y, %H:%M:%S"))

        user = file.name.split(".")[0]
        out.users[user], keys = _dialogue(chat, "speaker", "clean_text", when)
        for qa in chat["qa"]:
            if qa.get("category") in (1, 2, 3) and (ev := _dia_evidence(qa, keys)):
                out.questions.append(Question(user, qa["question"], ev))
    return out


def load_longmemeval(path: Path) -> LoadedSet:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as fh:
        items = json.load(fh)
    out = LoadedSet({}, [])
    for q in items:
        if q["question_id"].endswith("_abs"):
            continue
        user, sessions, evidence = q["question_id"], [], []
        for si, (date, turns) in enumerate(zip(q["haystack_dates"], q["haystack_sessions"], strict=True)):
            ts = _ms(datetime.strptime(re.sub(r"\s*\(\w+\)\s*", " ", date), "%Y/%m/%d %H:%M"))
            kept = [(ti, t) for ti, t in enumerate(turns) if t["content"].strip()]
            msgs = [Msg(f"{si}:{ti}", f"{t['role']}: {t['content']}", ts) for ti, t in kept]
            evidence += [f"{si}:{ti}" for ti, t in kept if t.get("has_answer")]
            sessions.append((f"s{si}", msgs))
        out.users[user] = sessions
        if evidence:
            out.questions.append(Question(user, q["question"], evidence))
    return out


def load_memdaily(path: Path) -> LoadedSet:
    out = LoadedSet({}, [])
    for file in sorted(path.glob("*.json")) if path.is_dir() else [path]:
        timelines = json.loads(file.read_text())
        for g in range(0, len(timelines), 20):
            user, sessions = f"{file.stem}#{g // 20}", []
            for tl in timelines[g : g + 20]:
                kept = [m for m in tl["message_list"] if m["message"].strip()]
                msgs = [Msg(f"{tl['tid']}:{m['mid']}", m["message"], _memdaily_time(m["time"])) for m in kept]
                sessions.append((f"t{tl['tid']}", msgs))
                mids = {m["mid"] for m in kept}
                for q in tl["question_list"]:
                    choices = q.get("choices")
                    options = list(choices.values()) if isinstance(choices, dict) else [choices] if choices else []
                    evidence = [f"{tl['tid']}:{x}" for x in q["target_step_id"] if x in mids]
                    if evidence:
                        out.questions.append(Question(user, q["question"], evidence, options))
            out.users[user] = sessions
    return out


def _memdaily_time(text: str) -> int:
    m = re.match(r"(\d{4})年(\d{2})月(\d{2})日\s*\S*\s*(\d{1,2}):(\d{2})", text)
    if m is None:
        raise SystemExit(f"a MemDaily time this scorer does not read: {text!r}")
    year, month, day, hour, minute = map(int, m.groups())
    return _ms(datetime(year, month, day, hour, minute))


LOADERS: dict[str, Callable[[Path], LoadedSet]] = {
    "locomo": load_locomo,
    "longmemeval": load_longmemeval,
    "memdaily": load_memdaily,
    "realtalk": load_realtalk,
}


class PlainBM25:
    """One document per message; BM25 with Lucene's idf, written here (not bm25s)."""

    def __init__(self, msgs: list[Msg], analyze: Callable[[str], list[str]], k1: float = 1.2, b: float = 0.75):
        self.msgs, self.analyze, self.k1, self.b = msgs, analyze, k1, b
        self.docs = [Counter(analyze(m.content)) for m in msgs]
        self.lens = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lens) / max(1, len(self.lens))
        df: Counter[str] = Counter(t for d in self.docs for t in d)
        self.idf = {t: math.log(1 + (len(msgs) - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(self.docs):
            for t in d:
                self.postings[t].append(i)

    def search(self, query: str, k: int) -> list[Msg]:
        scores: dict[int, float] = defaultdict(float)
        for t, said in Counter(self.analyze(query)).items():
            for i in self.postings.get(t, ()):
                tf = self.docs[i][t]
                norm = self.k1 * (1 - self.b + self.b * self.lens[i] / self.avg)
                scores[i] += said * self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
        return [self.msgs[i] for i in sorted(scores, key=lambda i: (-scores[i], i))[:k]]


def render(m: Msg) -> str:
    stamp = f"[{datetime.fromtimestamp(m.ts / 1000, UTC):%Y-%m-%d %H:%M}] " if m.ts is not None else ""
    return f"{stamp}user: {m.content}"


def recall(contents: Sequence[str], texts: Sequence[str]) -> list[float]:
    """A text is found within B when its first occurrence in the contents joined by a blank line ends by B."""
    joined = "\n\n".join(contents)
    ends = [joined.find(t) + len(t) if t in joined else math.inf for t in texts]
    return [sum(e <= b for e in ends) / len(texts) for b in BUDGETS]


def recall_by_id(hits: Sequence[Any], evidence: Sequence[tuple[str, str]]) -> list[float]:
    """Found within B by the message itself: where the block that shows it (``message_ids``) shows its text."""
    ends = []
    for text, mid in evidence:
        off, end = 0, math.inf
        for h in hits:
            if mid in h.message_ids:
                p = h.content.find(text)
                end = off + p + len(text) if p >= 0 else math.inf
                break
            off += len(h.content) + 2
        ends.append(end)
    return [sum(e <= b for e in ends) / len(evidence) for b in BUDGETS]


def independent(path: Path, fmt: str, limit: int | None) -> list[dict[str, Any]]:
    from refind_cli import Memory
    from refind_cli.store import Store
    from refind_cli.tokenize import analyze

    loaded = LOADERS[fmt](path)
    questions = loaded.questions[:limit] if limit else loaded.questions
    users = {q.user: loaded.users[q.user] for q in questions}
    requests = [
        {
            "request_id": f"{sid}-{c // 20}",
            "user_id": user,
            "session_id": sid,
            "messages": [{"role": "user", "content": m.content, "timestamp": m.ts} for m in msgs[c : c + 20]],
        }
        for user, sessions in users.items()
        for sid, msgs in sessions
        for c in range(0, len(msgs), 20)
    ]
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="refind-independent-") as tmp,
        Memory(Path(tmp) / "m.db", retention_days=None) as memory,
    ):
        for i in range(0, len(requests), 500):
            for outcome in memory.add_many(requests[i : i + 500]):
                if not hasattr(outcome, "status"):
                    raise SystemExit(f"replaying {path}: {outcome}")
        reader = Store(Path(tmp) / "m.db", retention_days=None)
        message_id: dict[tuple[str, str], str] = {}
        for user, sessions in users.items():
            stored = {(m.request_id, m.idx): m.id for m in reader.user_messages(user)}
            for sid, msgs in sessions:
                for j, m in enumerate(msgs):
                    message_id[(user, m.key)] = stored[(f"{sid}-{j // 20}", j % 20)]
        reader.close()
        plain: dict[str, PlainBM25] = {}
        for q in questions:
            msgs = [m for _, ms in users[q.user] for m in ms]
            if q.user not in plain:
                plain[q.user] = PlainBM25(msgs, analyze)
            text_of = {m.key: m.content for m in msgs}
            texts = [text_of[k] for k in q.evidence]
            hits = memory.search(q.text, user=q.user, top_k=100, options=q.options or None)
            found = plain[q.user].search("\n".join([q.text, *q.options]), 100)
            rows.append(
                {
                    "question": q.text,
                    "refind": recall([h.content for h in hits], texts),
                    "baseline": recall([render(m) for m in found], texts),
                    "refind by id": recall_by_id(hits, [(text_of[k], message_id[(q.user, k)]) for k in q.evidence]),
                }
            )
    return rows


def refind_eval(path: Path, fmt: str, limit: int | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``refind eval``'s own numbers per question: its systems wrapped to keep what each question got back."""
    from refind_cli import datasets
    from refind_cli.evaluate import (
        BaselineBM25,
        EvalSettings,
        evaluate,
        found_within,
        refind_bm25,
        search_config,
        take,
    )

    got: dict[str, list[list[str]]] = {"refind": [], "baseline": []}

    def keep(name: str, searcher: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            hits = searcher(*args, **kwargs)
            got[name].append(hits.contents)
            return hits

        return run

    systems = {"refind": keep("refind", refind_bm25(search_config())), "baseline": keep("baseline", BaselineBM25())}
    report = evaluate(path, fmt=fmt, settings=EvalSettings(limit=limit, warm_up=False), systems=systems)
    questions = [q for s in take(list(datasets.load(path, fmt)), limit) for q in s.questions]
    rows = [
        {
            "question": q.text,
            **{n: [f / len(q.evidence) for f in found_within(got[n][i], q.evidence)] for n in got},
        }
        for i, q in enumerate(questions)
    ]
    return rows, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=Path, default=Path("../shared/datasets"))
    ap.add_argument("--only", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    ap.add_argument("--limit", type=int, help="the first N questions of each set")
    args = ap.parse_args()
    differ = 0
    for fmt in args.only.split(","):
        path = args.datasets / SETS[fmt]
        mine = independent(path, fmt, args.limit)
        theirs, report = refind_eval(path, fmt, args.limit)
        print(f"## {fmt}: {len(mine)} questions here, {len(theirs)} in refind eval")
        if [r["question"] for r in mine] != [r["question"] for r in theirs]:
            differ += 1
            print("   the two read different questions from the set")
            continue
        for name in ("refind", "baseline"):
            apart = [(m, t) for m, t in zip(mine, theirs, strict=True) if m[name] != t[name]]
            differ += len(apart)
            means = [sum(r[name][i] for r in mine) / len(mine) for i in range(3)]
            print(
                f"   {name}: {len(mine) - len(apart)} of {len(mine)} agree; here "
                + " / ".join(f"{x:.4f}" for x in means)
            )
            for m, t in apart:
                print(f"      {m['question'][:70]!r}: here {m[name]}, refind eval {t[name]}")
        by_id = [sum(r["refind by id"][i] for r in mine) / len(mine) for i in range(3)]
        print("   refind by id (a copy of the text elsewhere not counted): " + " / ".join(f"{x:.4f}" for x in by_id))
        print("   refind eval: " + json.dumps({n: s["recall"] for n, s in report["systems"].items()}))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
