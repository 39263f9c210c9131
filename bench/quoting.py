"""What finding the stored planner traces that quote expired messages costs: one pass over each trace
(``trace.Quotes``, the default) against a test of each message's needles in turn (the code before round 27), in the
same run.

    .venv/bin/python bench/quoting.py [--messages 16000] [--traces 400] [--trace-chars 13000] [--repeat 3]
    .venv/bin/python bench/quoting.py --crossover   # where one pass begins to pay: Quotes._FEW


One user with ``--messages`` messages recorded 40 days ago (retention 30 days), each opening with its speaker's name
as a chat's do ("Caroline: …"), and ``--traces`` stored planner traces of about ``--trace-chars`` characters each:
hits of other messages of the same speakers, quoting none of the expired ones (the planner's searches of a busy
user). Times
``refind expire --dry-run``'s plan (``lifecycle.expire(dry_run=True)``: the same search for quoting traces a real
expire runs inside the write lock, without deleting) and ``refind inspect searches`` (``trace.recent``: its
retention check looks for the expired, unswept messages in every trace it shows), each setting in turn.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refind_cli import lifecycle, trace
from refind_cli.contract import AddRequest, Message
from refind_cli.store import DAY_MS, Store

T0 = 1_700_000_000_000
SPEAKERS = ["Caroline: ", "Melanie: "]


def said(rng: random.Random, i: int) -> str:
    """A message as a chat's lines read: its speaker's name, then 15 words of 5,000 (its number keeps it unique)."""
    return rng.choice(SPEAKERS) + " ".join(f"w{rng.randrange(5000)}" for _ in range(15)) + f" {i}"


def build(path: Path, messages: int, traces: int, trace_chars: int) -> list[int]:
    """The database; returns the clock (a one-item list) the store reads, set 40 days after the messages."""
    now = [T0]
    rng = random.Random(1)
    with Store(path, clock=lambda: now[0], retention_days=None) as store:
        for r in range(0, messages, 1000):
            msgs = tuple(Message("user", said(rng, i), T0 + i) for i in range(r, min(r + 1000, messages)))
            store.add(AddRequest(f"b{r}", "alice", "s", msgs))
        now[0] = T0 + 40 * DAY_MS
        hits: list[dict[str, object]] = []
        while sum(len(str(h["content"])) + 20 for h in hits) < trace_chars:
            hits.append({"n": len(hits) + 1, "content": said(rng, 10**9 + len(hits))})
        events = [trace.Event("search", 1, 1.0, {"hits": hits})]
        for i in range(traces):
            run = trace.StoredSearch(f"t{i:05d}", "alice", now[0], "q", "agent", "m", 1.0, 1, 0, 0, None, [], events)
            assert trace.save(store, run)
    return now


def crossover(trace_chars: int) -> None:
    """ms per trace of ``trace_chars`` quoting nothing, each needle in turn against one pass, by number of needles."""
    rng = random.Random(1)
    texts = []
    for _ in range(100):
        hits = [{"n": k, "content": said(rng, 10**9 + k)} for k in range(trace_chars // 130)]
        texts.append(json.dumps([{"kind": "search", "data": {"hits": hits}}], ensure_ascii=False))
    print("| messages | needles | each needle in turn (ms a trace) | one pass (ms a trace) |")
    print("|---|---|---|---|")
    default = trace.Quotes._FEW
    for n in (16, 64, 128, 256, 512, 1024, 4096):
        msgs = [(f"{rng.getrandbits(96):024x}", said(rng, i)) for i in range(n)]
        quotes = trace.Quotes(msgs)
        ms = []
        for few in (10**12, 0):
            trace.Quotes._FEW = few
            t = time.perf_counter()
            for x in texts:
                quotes.found_in(x)
            ms.append((time.perf_counter() - t) / len(texts) * 1000)
        print(f"| {n} | {len(quotes._long)} | {ms[0]:.2f} | {ms[1]:.2f} |")
    trace.Quotes._FEW = default


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=16_000)
    ap.add_argument("--traces", type=int, default=400)
    ap.add_argument("--trace-chars", type=int, default=13_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--crossover", action="store_true", help="time Quotes.found_in alone per number of messages")
    args = ap.parse_args()
    if args.crossover:
        crossover(args.trace_chars)
        return
    settings = {"each needle in turn (before)": 10**12, "one pass (default)": trace.Quotes._FEW}
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "q.db"
        now = build(path, args.messages, args.traces, args.trace_chars)
        print(f"{args.messages:,} expired messages, {args.traces} traces of {args.trace_chars:,} characters")
        with Store(path, clock=lambda: now[0], retention_days=30) as store:
            for _ in range(args.repeat):
                for name, few in settings.items():
                    trace.Quotes._FEW = few
                    t = time.perf_counter()
                    planned = lifecycle.expire(store, dry_run=True)
                    times.setdefault((name, "expire --dry-run"), []).append(time.perf_counter() - t)
                    assert planned.messages == args.messages and planned.searches == 0
                    t = time.perf_counter()
                    shown = trace.recent(store, user_id="alice", limit=args.traces)
                    times.setdefault((name, "inspect searches"), []).append(time.perf_counter() - t)
                    assert len(shown) == args.traces
    print("| setting | expire --dry-run (s) | inspect searches (s) |")
    print("|---|---|---|")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name in settings:
        print(f"| {name} | {med[name, 'expire --dry-run']:.2f} | {med[name, 'inspect searches']:.2f} |")
    before, after = settings
    for what in ("expire --dry-run", "inspect searches"):
        print(f"{what}: one pass / before = {med[after, what] / med[before, what]:.3f}")
    print(json.dumps({f"{k[0]} / {k[1]}": round(v, 3) for k, v in med.items()}))


if __name__ == "__main__":
    main()
