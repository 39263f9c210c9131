"""The analyzer's speed, and proof that its fast paths change no token: `tokenize.analyze` against
`tokenize.reference_analyze` (the module's steps one by one, no caches) over real texts, in the same run.

    .venv/bin/python bench/analyzer.py --locomo ../shared/datasets/locomo10.json \
        --memdaily ../shared/datasets/memdaily_dev [--longmemeval ../shared/datasets/longmemeval_s_dev.json.gz] \
        [--realtalk ../shared/datasets/realtalk_dev]

Every text (each turn as `speaker: text`, each question and answer; MemDaily messages, questions and choices;
LongMemEval haystack contents and questions; REALTALK messages and questions, the set with the most emoji) is analysed by both, plain and with a said-at date appended as the index
does; any difference fails the run. Times are µs per text, best of 3 passes (the first pass of `analyze` fills its
caches: reported separately).

A synthetic Thai set (`thai_texts`: 2,000 messages of clauses drawn from a fixed vocabulary, words unspaced as Thai
writes them, clauses spaced) is always added: no shared set holds a script written without spaces.

`--baseline ../main` (a checkout of another version) adds a second table: that version's `analyze` against this one's,
warm and with its word caches emptied first (cold), on the ASCII texts and the non-ASCII texts apart (ASCII text takes
its own fast path), with how many texts the two analyse differently.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import tokenize
from refind_cli.index_store import message_tokens


def locomo_texts(path: Path) -> list[str]:
    texts: list[str] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for value in sample["conversation"].values():
            if isinstance(value, list):
                texts += [f"{turn.get('speaker', '')}: {turn.get('text', '')}" for turn in value]
        for qa in sample["qa"]:
            texts += [qa["question"], str(qa.get("answer", ""))]
    return texts


def memdaily_texts(folder: Path) -> list[str]:
    texts: list[str] = []
    for path in sorted(folder.glob("*.json")):
        for timeline in json.loads(path.read_text(encoding="utf-8")):
            texts += [m["message"] for m in timeline["message_list"]]
            for q in timeline["question_list"]:
                texts += [q["question"], str(q.get("answer", "")), json.dumps(q.get("choices"), ensure_ascii=False)]
    return texts


def longmemeval_texts(path: Path) -> list[str]:
    texts: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        questions = json.load(f)
    for q in questions:
        texts.append(q["question"])
        texts += [m["content"] for session in q["haystack_sessions"] for m in session]
    return texts


def realtalk_texts(folder: Path) -> list[str]:
    from refind_cli import datasets

    texts: list[str] = []
    for sample in datasets.load(folder, "realtalk"):
        texts += [m.content for r in sample.requests for m in r.messages]
        texts += [q.text for q in sample.questions]
    return texts


# Everyday Thai words (I, like, eat, rice, fried, today, rain, fall, heavy, very, tomorrow, will, go, work, …).
THAI_WORDS = (  # noqa: SIM905
    "ฉัน ชอบ กิน ข้าว ผัด วันนี้ ฝน ตก หนัก มาก พรุ่งนี้ จะ ไป ทำงาน บ้าน เพื่อน ร้าน อาหาร อร่อย ที่ ตลาด กรุงเทพ "
    "เชียงใหม่ ทะเล ภูเขา เดินทาง รถไฟ เครื่องบิน โรงแรม แม่ พ่อ น้องสาว หมา แมว เรียน ภาษา อังกฤษ หนังสือ ดู หนัง "
    "เมื่อวาน สัปดาห์ หน้า เดือน ปี ใหม่ ซื้อ เสื้อ สวย ราคา แพง ถูก กาแฟ น้ำ ชา เย็น ร้อน"
).split()


def thai_texts(n: int = 2000, seed: int = 0) -> list[str]:
    """``n`` messages of 1–4 clauses of 3–8 Thai words each: no space inside a clause, one between clauses."""
    import random

    rng = random.Random(seed)
    return [
        " ".join("".join(rng.choices(THAI_WORDS, k=rng.randint(3, 8))) for _ in range(rng.randint(1, 4)))
        for _ in range(n)
    ]


def before(text: str) -> list[str]:
    """The reference steps with the per-word stem cache (close to, and a little slower than, main before this)."""
    return tokenize.reference_analyze(text, stem=tokenize._stem)


def best(fn: Callable[[str], list[str]], texts: list[str], passes: int = 3) -> float:
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        for text in texts:
            fn(text)
        times.append(time.perf_counter() - start)
    return min(times) / len(texts) * 1e6


def load_baseline(checkout: Path) -> Any:
    """Another checkout's tokenize module, imported as ``baseline_refind_cli.tokenize``: its package under another name,
    so that its own imports (``.folding`` since analyzer 7) are that checkout's."""
    package = checkout / "refind_cli"
    spec = importlib.util.spec_from_file_location(
        "baseline_refind_cli", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    if spec is None or spec.loader is None or not (package / "tokenize.py").is_file():
        raise SystemExit(f"no refind_cli/tokenize.py in {checkout}")
    sys.modules["baseline_refind_cli"] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return importlib.import_module("baseline_refind_cli.tokenize")


def compare(sets: dict[str, list[str]], baseline: Any) -> None:
    """The baseline's analyze against this one's, warm, best of 3 passes each (interleaved), per kind of text."""
    print()
    print(
        "| texts | kind | count | baseline µs/text | this µs/text | this ÷ baseline | cold: baseline | this | ÷ |"
        " texts analysed differently |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, texts in sets.items():
        for kind, part in (
            ("ASCII", [t for t in texts if t.isascii()]),
            ("non-ASCII", [t for t in texts if not t.isascii()]),
        ):
            if not part:
                continue
            differ = sum(baseline.analyze(t) != tokenize.analyze(t) for t in part)  # (also warms both caches)
            theirs, ours, theirs_cold, ours_cold = [], [], [], []
            for _ in range(3):
                theirs.append(best(baseline.analyze, part, passes=1))
                ours.append(best(tokenize.analyze, part, passes=1))
            for _ in range(3):  # every word new to the caches (a text's words are often new: Thai's unspaced runs)
                for module, times in ((baseline, theirs_cold), (tokenize, ours_cold)):
                    for cache in (module._ASCII_CACHE, module._WORD_CACHE, module._STEM_CACHE):
                        cache.clear()
                    times.append(best(module.analyze, part, passes=1))
            print(
                f"| {name} | {kind} | {len(part):,} | {min(theirs):.2f} | {min(ours):.2f} | "
                f"{min(ours) / min(theirs):.2f} | {min(theirs_cold):.2f} | {min(ours_cold):.2f} | "
                f"{min(ours_cold) / min(theirs_cold):.2f} | {differ:,} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--memdaily", type=Path, required=True)
    parser.add_argument("--longmemeval", type=Path)
    parser.add_argument("--realtalk", type=Path)
    parser.add_argument("--baseline", type=Path, help="a checkout of another version: its analyze() timed too")
    args = parser.parse_args()
    sets = {"locomo": locomo_texts(args.locomo), "memdaily": memdaily_texts(args.memdaily)}
    if args.longmemeval:
        sets["longmemeval_s"] = longmemeval_texts(args.longmemeval)
    if args.realtalk:
        sets["realtalk"] = realtalk_texts(args.realtalk)
    sets["thai (synthetic)"] = thai_texts()
    print(
        "| texts | count | reference µs/text | reference + stem cache | analyze, caches cold | analyze, warm |"
        " warm ÷ ref. + cache | tokens |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, texts in sets.items():
        for cache in (tokenize._ASCII_CACHE, tokenize._WORD_CACHE, tokenize._STEM_CACHE):
            cache.clear()
        start = time.perf_counter()
        fast = [tokenize.analyze(t) for t in texts]
        cold = (time.perf_counter() - start) / len(texts) * 1e6
        slow = [tokenize.reference_analyze(t) for t in texts]
        dated = [t + "\nJune 2023" for t in texts]
        same = fast == slow and [tokenize.analyze(t) for t in dated] == [tokenize.reference_analyze(t) for t in dated]
        same = same and all(
            message_tokens(t, 1_686_000_000_000) == tokenize.reference_analyze(d)
            for t, d in zip(texts, dated, strict=True)
        )
        if not same:
            raise SystemExit(f"{name}: analyze() differs from reference_analyze()")
        ref, old, warm = best(tokenize.reference_analyze, texts), best(before, texts), best(tokenize.analyze, texts)
        n_tokens = sum(map(len, fast))
        print(
            f"| {name} | {len(texts):,} | {ref:.1f} | {old:.1f} | {cold:.1f} | {warm:.1f} | {warm / old:.2f} | "
            f"identical ({n_tokens:,}) |"
        )
    if args.baseline:
        compare(sets, load_baseline(args.baseline))


if __name__ == "__main__":
    main()
