"""How much ordinary chat text a configured "secret" would blank in traces: redact.py replaces every occurrence of
an environment value of a ``*_KEY`` / ``*_TOKEN`` / ``*SECRET*`` variable, as a substring, in every stored trace
(which quotes the chat: hits, evidence, the prompt).

    .venv/bin/python bench/redaction_collisions.py [--datasets ../shared/datasets]

For the messages of the shared sets it prints, per length of a word (a run of letters, digits, '-' and '_'), how
common the most common such word is (the share of messages that hold it, which a value equal to it would blank),
and the same for values a person might choose as a token or a local server's key. A generated key (16 or more
random characters) is in no chat; a word of 8–15 characters chosen by a person is in many.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import datasets

SETS = ("locomo10.json", "longmemeval_s_dev.json.gz", "realtalk_dev", "memdaily_dev")
CHOSEN = (
    "password",
    "password1",
    "changeme",
    "letmein123",
    "development",
    "something",
    "localhost",
    "mysecretpassword",
    "correcthorsebatterystaple",
)
WORD = re.compile(r"[A-Za-z0-9_\-]+")
BUCKETS = ((8, 11), (12, 15), (16, 1000))


def messages(root: Path) -> list[str]:
    seen: set[str] = set()
    for name in SETS:
        path = root / name
        if not path.exists():
            print(f"(missing: {path})", file=sys.stderr)
            continue
        for sample in datasets.load(path):
            for request in sample.requests:
                seen.update(m.content for m in request.messages)
    return sorted(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="../shared/datasets")
    args = ap.parse_args()
    texts = messages(Path(args.datasets))
    n = len(texts)
    print(f"{n:,} distinct messages of {', '.join(SETS)}")
    df: Counter[str] = Counter()
    for text in texts:
        df.update(set(WORD.findall(text)))
    for low, high in BUCKETS:
        words = [(count, word) for word, count in df.items() if low <= len(word) <= high]
        words.sort(reverse=True)
        common = sum(1 for count, _ in words if count / n >= 0.001)
        top = ", ".join(f"{w} {c / n:.2%}" for c, w in words[:5])
        span = f"{low}–{high}" if high < 1000 else f"{low}+"
        print(
            f"words of {span} characters: {len(words):,} distinct, {common:,} in ≥0.1% of messages; most common: {top}"
        )
    for value in CHOSEN:
        hits = sum(1 for text in texts if value in text)
        print(f"a secret {value!r} ({len(value)} characters) would blank text in {hits:,} messages ({hits / n:.3%})")


if __name__ == "__main__":
    main()
