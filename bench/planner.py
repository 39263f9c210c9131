"""The planner's own cost: overhead per action excluding model time, and LLM calls / tokens per query.

    .venv/bin/python bench/planner.py [--turns 10000] [--queries 30]

Builds one synthetic user of ``--turns`` turns (bench/synth.py, seeded) in a temporary database and measures, in
the same run:

* baseline  — one ``UserIndex.search`` of 5 hits with the index warm (what a planner search must at least cost);
* overhead  — ``agent_search`` driven by an in-process scripted model that answers instantly (search, take_note,
  search, take_note): (wall time − time inside the model) / actions, with the trace stored in ``searches`` as in
  production; the first (cold: index loaded or built) query is reported apart;
* http      — the same script served by an OpenAI-compatible server on loopback and reached through litellm:
  LLM calls, prompt/completion tokens (the server counts ~4 characters per token) and prompt characters per query,
  and litellm's per-call time on loopback.

Prints a Markdown report (paste it under "## Planner" in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import synth  # noqa: E402

from refind_cli import search as S  # noqa: E402
from refind_cli.model import Reply  # noqa: E402
from refind_cli.planner import agent_search  # noqa: E402
from refind_cli.store import Store  # noqa: E402


def script(query: str) -> list[str]:
    words = query.split()
    return [
        json.dumps({"thought": "broad first", "action": "search_chatrecord", "keywords": query}),
        json.dumps({"thought": "these help", "action": "take_note", "results": [1, 2]}),
        json.dumps({"thought": "narrower", "action": "search_chatrecord", "keywords": " ".join(words[:2])}),
        json.dumps({"thought": "keep", "action": "take_note", "results": [1]}),
    ]


def instant(replies: list[str]):
    it = iter(replies)

    def complete(messages: list[dict]) -> Reply:
        t = time.perf_counter()
        content = next(it)
        return Reply(
            content,
            sum(len(m["content"]) for m in messages) // 4,
            len(content) // 4,
            latency_ms=(time.perf_counter() - t) * 1000,
            model="instant",
        )

    return complete


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--http-queries", type=int, default=10)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db", retention_days=None)
        store.add_many(synth.requests("u", args.turns, seed=1))
        queries = synth.queries(args.queries + 1, seed=1)

        # cold: the first agent search loads/builds the user's index
        t = time.perf_counter()
        first = agent_search(store, "u", queries[0], top_k=100, model=instant(script(queries[0])))
        cold_ms = (time.perf_counter() - t) * 1000

        index = S.user_index(store, "u")
        base = []
        for q in queries[1:]:
            t = time.perf_counter()
            index.search(q, top_k=5)
            base.append((time.perf_counter() - t) * 1000)

        per_action, totals, unstored = [], [], []
        for q in queries[1:]:
            t = time.perf_counter()
            r = agent_search(store, "u", q, top_k=100, model=instant(script(q)))
            wall = (time.perf_counter() - t) * 1000
            totals.append(wall)
            per_action.append((wall - r.stats.model_ms) / r.stats.actions)
            t = time.perf_counter()
            r = agent_search(store, "u", q, top_k=100, model=instant(script(q)), record=False)
            unstored.append(((time.perf_counter() - t) * 1000 - r.stats.model_ms) / r.stats.actions)
        assert first.stats.actions == 4

        from llm_server import ScriptedLLM, start

        from refind_cli.model import litellm_complete

        llm = ScriptedLLM()
        server = start(llm)
        complete = litellm_complete("openai/scripted", llm.url, timeout_s=30)
        calls, prompt, completion, chars, call_ms, evidence = [], [], [], [], [], []
        for q in queries[1 : 1 + args.http_queries]:
            llm.requests.clear()
            llm.play(*script(q))
            r = agent_search(store, "u", q, top_k=100, model=complete, model_name="openai/scripted")
            calls.append(r.stats.llm_calls)
            prompt.append(r.stats.prompt_tokens)
            completion.append(r.stats.completion_tokens)
            chars.append(sum(len(m["content"]) for body in llm.requests for m in body["messages"]))
            call_ms.append(r.stats.model_ms / r.stats.llm_calls)
            evidence.append(len(r.blocks))
        server.shutdown()
        store.close()

    med = statistics.median
    p95 = lambda xs: sorted(xs)[max(0, int(len(xs) * 0.95 + 0.5) - 1)]  # noqa: E731
    print(f"### {args.turns:,} turns, one user, {args.queries} queries (4 actions each: search, note, search, note)\n")
    print("| measure | median | p95 |")
    print("|---|---:|---:|")
    print(f"| baseline: one warm `UserIndex.search`, 5 hits | {med(base):.2f} ms | {p95(base):.2f} ms |")
    print(f"| planner overhead per action, model time excluded | {med(per_action):.2f} ms | {p95(per_action):.2f} ms |")
    print(f"| … the same without storing the trace | {med(unstored):.2f} ms | {p95(unstored):.2f} ms |")
    print(f"| planner overhead per action ÷ baseline search | {med(per_action) / med(base):.2f}× | |")
    print(
        f"| whole agent search with an instant model (4 actions, trace stored) | {med(totals):.1f} ms | "
        f"{p95(totals):.1f} ms |"
    )
    print(f"| first (cold) agent search, index loaded or built | {cold_ms:.0f} ms | |")
    print()
    print(f"Against the scripted OpenAI-compatible server on loopback through litellm ({len(calls)} queries):\n")
    print("| per query | median |")
    print("|---|---:|")
    print(f"| LLM calls | {med(calls):.0f} |")
    print(f"| prompt tokens (server: ~4 chars/token) | {med(prompt):,.0f} |")
    print(f"| completion tokens | {med(completion):,.0f} |")
    print(f"| prompt characters sent | {med(chars):,.0f} |")
    print(f"| evidence blocks returned (top_k 100) | {med(evidence):.0f} |")
    print(f"| litellm + HTTP time per call on loopback | {med(call_ms):.1f} ms |")


if __name__ == "__main__":
    main()
