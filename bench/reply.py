"""What reading one planner reply costs (refind_cli/reply.py), per form, and for hostile replies.

    .venv/bin/python bench/reply.py [--repeat 200]

Baseline, in the same run: ``json.loads`` of the plain JSON reply (the least any parser must do). Each row is the
median over ``--repeat`` parses (hostile rows over a few); the ratio is against the baseline. The hostile rows are
the ones that matter: a reply nesting JSON 200,000 deep (a RecursionError inside ``json`` before the fix), and a
1 MB reply of unclosed objects (each ``{`` decoded to the end of the text before the fix: quadratic).

Prints a Markdown table (paste it under "## Planner" in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from refind_cli.model import ToolCall
from refind_cli.reply import ReplyError, parse_reply

JSON_REPLY = '{"thought": "broad first", "action": "search_chatrecord", "keywords": "hiking Mount Rainier"}'
DEEP = 200_000
CASES: list[tuple[str, str, tuple[ToolCall, ...], int]] = [
    ("json: the protocol", JSON_REPLY, (), 0),
    ("json: in prose and a code fence", f"Sure, here it is:\n```json\n{JSON_REPLY}\n```\nGood luck!", (), 0),
    (
        "react: the paper's format",
        'Thought: broad first\nAction: search_chatrecord\nAction Input: {"keywords": "hiking Mount Rainier"}',
        (),
        0,
    ),
    ("tool_call: native", "", (ToolCall("search_chatrecord", '{"keywords": "hiking Mount Rainier"}'),), 0),
    ("tool_call: written as JSON", '{"name": "search_chatrecord", "arguments": {"keywords": "hiking"}}', (), 0),
    (f"hostile: JSON nested {DEEP:,} deep", '{"action": ' + "[" * DEEP, (), 1),
    ("hostile: 1 MB of unclosed objects", '{"a": 1, ' * 100_000, (), 1),
]


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    base = median_ms(lambda: json.loads(JSON_REPLY), args.repeat)
    print("| reply | parsed as | median | ÷ json.loads baseline |")
    print("|---|---|---:|---:|")
    print(f"| baseline: `json.loads` of the JSON reply | — | {base:.4f} ms | 1× |")
    for name, text, calls, hostile in CASES:

        def parse(text: str = text, calls: tuple[ToolCall, ...] = calls) -> str:
            try:
                return parse_reply(text, calls).form
            except ReplyError as exc:
                return f"correction: {exc}"[:60]

        outcome = parse()
        ms = median_ms(parse, 5 if hostile else args.repeat)
        print(f"| {name} | {outcome} | {ms:.4f} ms | {ms / base:,.0f}× |")


if __name__ == "__main__":
    main()
