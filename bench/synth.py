"""A seeded generator of synthetic chat histories for the scale benchmarks.

Each user gets sessions of 20 messages alternating "Name: …" user lines and assistant replies, words drawn from a
Zipf-like vocabulary (so BM25 sees realistic document frequencies), one session per day.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from refind_cli.contract import AddRequest, Message

T0 = 1_672_531_200_000  # 2023-01-01 UTC
DAY = 86_400_000
SESSION_LEN = 20


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


def _weights(n: int) -> list[float]:
    return [1.0 / (r + 1) ** 1.05 for r in range(n)]


def requests(user_id: str, turns: int, *, seed: int = 0, vocab_size: int = 6000) -> Iterator[AddRequest]:
    """``turns`` messages for ``user_id``, as Add requests of one session (20 messages) each."""
    rng = random.Random(f"{seed}:{user_id}")
    vocab = vocabulary(random.Random(seed), vocab_size)
    weights = _weights(len(vocab))
    names = ["Caroline", "Melanie", "Jon", "Gina"]
    done = 0
    session = 0
    while done < turns:
        n = min(SESSION_LEN, turns - done)
        msgs = []
        for i in range(n):
            words = rng.choices(vocab, weights, k=rng.randint(8, 40))
            role = "user" if i % 2 == 0 else "assistant"
            text = " ".join(words)
            if role == "user":
                text = f"{names[session % len(names)]}: {text}"
            msgs.append(Message(role, text, T0 + session * DAY + i * 60_000))
        yield AddRequest(f"r{session}", user_id, f"s{session}", tuple(msgs))
        done += n
        session += 1


def queries(n: int, *, seed: int = 0, vocab_size: int = 6000) -> list[str]:
    """Queries of 3–6 words from the mid-frequency part of the vocabulary (rare words find few turns)."""
    rng = random.Random(f"q{seed}")
    vocab = vocabulary(random.Random(seed), vocab_size)
    return [" ".join(rng.choices(vocab[20:2000], k=rng.randint(3, 6))) for _ in range(n)]


def misspell(query: str, rng: random.Random) -> str:
    """The query with its longest word misspelt (its tail reversed, or an "x" added): a word the vocabulary lacks."""
    words = query.split()
    i = max(range(len(words)), key=lambda j: len(words[j]))
    w = words[i]
    k = rng.randrange(1, len(w))
    words[i] = w[:k] + w[k:][::-1] if len(w) > 3 else w + "x"
    return " ".join(words)


def fill(store, user_id: str, turns: int, *, seed: int = 0, batch: int = 500) -> None:
    _store_in_batches(store, requests(user_id, turns, seed=seed), batch)


def _store_in_batches(store, reqs, batch: int) -> None:
    pending: list[AddRequest] = []
    for req in reqs:
        pending.append(req)
        if len(pending) >= batch:
            store.add_many(pending)
            pending = []
    if pending:
        store.add_many(pending)


def fill_interleaved(store, users: dict[str, int], *, seed: int = 0, batch: int = 500) -> None:
    """Several users' histories with their Adds interleaved in time (each user's Adds spread evenly over the whole
    fill, as a shared server receives them), so each user's rows are scattered through the file."""
    import heapq

    def timed(user: str, turns: int):
        count = -(-turns // SESSION_LEN)
        for i, req in enumerate(requests(user, turns, seed=seed)):
            yield ((i + 0.5) / count, user, req)

    merged = heapq.merge(*(timed(u, n) for u, n in users.items()))
    _store_in_batches(store, (req for _, _, req in merged), batch)
