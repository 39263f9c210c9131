"""Retrieval quality: replay a labelled set into a temporary database, ask every question, score evidence recall.

**The metric.** A search returns contents in order; they are joined with :data:`JOIN` (a blank line) into the text a
reader model would see. A labelled message counts as *found within budget B* when its stored content lies entirely
within the first B characters of that text. Recall@B of a question = found / labelled; a dataset's recall is the
**mean over questions** (each question weighs the same, however many messages it labels). Budgets: 2,000 / 8,000 /
32,000 characters. Latency is the wall time of the searcher call (p50/p95 over questions) against the user's
ready index: the first question of each user is asked once, untimed, before it is timed, so that every system's
per-user index build (measured by the scale benchmark instead) stays out of the numbers.

**The systems**, asked the same questions in the same run against the same database:

* ``refind`` — :func:`refind_cli.retrieval.retrieve`, the very call behind ``refind search`` (BM25 with
  ``--mode bm25``, the LLM planner with ``--mode agent``);
* ``baseline`` — plain BM25 (bm25s, k1 = 1.2, b = 0.75): one document per message, the same tokenizer, no session
  fusion, no neighbours, the top_k messages rendered one per line as refind renders a message.

A searcher is any callable ``(store, *, user_id, query, options, top_k) -> Hits``; adding one is a small change.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import tempfile
import time
import typing
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import datasets
from .contract import SEARCH_MODES, SearchRequest
from .datasets import Question, Sample, Skipped
from .errors import InvalidInput, RefindError
from .retrieval import Planner, retrieve
from .settings import EVAL_BUDGETS as BUDGETS
from .settings import EVAL_JOIN as JOIN
from .settings import EVAL_TOP_K as DEFAULT_TOP_K
from .store import Store, StoredMessage

if TYPE_CHECKING:
    from .misses import Explainer, Miss
    from .search_config import SearchConfig

TOKENIZERS = ("analyze", "plain")  # refind's analyzer (CJK bigrams, Snowball) / the English-only word splitter


@dataclass(frozen=True)
class Hits:
    """What one search returned, in order, and what it cost."""

    contents: list[str]
    llm_calls: int = 0
    tokens: int = 0


Searcher = Callable[..., Hits]  # (store, *, user_id, query, options, top_k) -> Hits


@dataclass(frozen=True)
class EvalSettings:
    top_k: int = DEFAULT_TOP_K
    limit: int | None = None  # at most this many questions (whole samples are replayed)
    mode: str = "bm25"
    role_faithful: bool = False
    options: bool = True  # pass a question's multiple-choice options (MemDaily's choices) to the search
    query_suffix: str = ""  # appended to every question, e.g. an instruction ("Answer in one word.")
    tokenizer: str = "analyze"  # the baseline's tokenizer (plain = the English-only splitter); refind's is its own
    variants: tuple[tuple[str, str], ...] = ()  # SearchConfig overrides, KEY=VALUE as given
    baseline: bool = True
    warm_up: bool = True  # ask each user's first question once untimed (never in agent mode: it costs LLM calls)
    misses_at: int | None = None  # explain refind's misses within this many characters (misses.py; bm25 mode)

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["variants"] = dict(self.variants)
        return d


# ---- the metric ------------------------------------------------------------------------------------------------


def found_within(contents: Sequence[str], evidence: Sequence[str], budgets: Sequence[int] = BUDGETS) -> list[int]:
    """For each budget, how many evidence texts lie entirely within the first B characters of the joined contents."""
    text = JOIN.join(contents)
    return [sum(1 for e in evidence if e in text[:b]) for b in budgets]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n*q/100), at least 1
    return float(ordered[int(rank) - 1])


@dataclass
class Tally:
    """Per-question results of one system."""

    recalls: list[list[float]] = field(default_factory=list)  # per question, one recall per budget
    ms: list[float] = field(default_factory=list)
    llm_calls: int = 0
    tokens: int = 0
    by_category: dict[str, list[list[float]]] = field(default_factory=lambda: defaultdict(list))

    def record(self, question: Question, hits: Hits, ms: float) -> None:
        found = found_within(hits.contents, question.evidence)
        recall = [f / len(question.evidence) for f in found]
        self.recalls.append(recall)
        self.by_category[question.category].append(recall)
        self.ms.append(ms)
        self.llm_calls += hits.llm_calls
        self.tokens += hits.tokens

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "questions": len(self.recalls),
            "recall": _mean_recall(self.recalls),
            "p50_ms": round(percentile(self.ms, 50), 2),
            "p95_ms": round(percentile(self.ms, 95), 2),
            "by_category": {
                cat: {"questions": len(rows), "recall": _mean_recall(rows)}
                for cat, rows in sorted(self.by_category.items())
            },
        }
        if self.llm_calls or self.tokens:
            out["llm_calls"] = self.llm_calls
            out["tokens"] = self.tokens
        return out


def _mean_recall(rows: list[list[float]]) -> dict[str, float]:
    if not rows:
        return {str(b): 0.0 for b in BUDGETS}
    return {str(b): round(statistics.fmean(r[i] for r in rows), 4) for i, b in enumerate(BUDGETS)}


# ---- the searchers ---------------------------------------------------------------------------------------------


def render_message(message: StoredMessage) -> str:
    """One message exactly as refind renders it in an evidence block: ``[YYYY-MM-DD HH:MM] role: content``."""
    from .blocks import render_line

    return render_line(message.said_at, message.role, message.content)


def _tokenizer(name: str) -> Callable[[str], list[str]]:
    from . import tokenize

    if name not in TOKENIZERS:
        raise InvalidInput(f"unknown tokenizer {name!r}; use one of {', '.join(TOKENIZERS)}")
    return tokenize.analyze if name == "analyze" else tokenize.plain_tokenize


def query_text(query: str, options: Sequence[str]) -> str:
    """The baseline's query: the question with its options appended (one line each)."""
    return "\n".join([query, *options]) if options else query


class BaselineBM25:
    """Plain BM25 over one user's messages: one document per message, no fusion, no neighbours.

    The index is built from the same scoped read as refind's (``Store.user_messages``) and kept per user until the
    user's version changes, so its latency, like refind's, is a query against a ready index.
    """

    def __init__(self, tokenizer: str = "analyze", *, k1: float = 1.2, b: float = 0.75) -> None:
        self.tokenize = _tokenizer(tokenizer)
        self.k1, self.b = k1, b
        self._cache: dict[str, tuple[int, Any, list[StoredMessage]]] = {}

    def _index(self, store: Store, user_id: str) -> tuple[Any, list[StoredMessage]]:
        version = store.user_version(user_id)
        cached = self._cache.get(user_id)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        import bm25s

        messages = store.user_messages(user_id)
        retriever = None
        corpus = [self.tokenize(m.content) for m in messages]
        if any(corpus):  # (bm25s fails on a corpus without one token: a user of stop-words alone matches nothing)
            retriever = bm25s.BM25(k1=self.k1, b=self.b)
            retriever.index(corpus, show_progress=False)
        self._cache = {user_id: (version, retriever, messages)}  # one user at a time is all an eval needs
        return retriever, messages

    def __call__(
        self, store: Store, *, user_id: str, query: str, options: Sequence[str] = (), top_k: int = DEFAULT_TOP_K
    ) -> Hits:
        import numpy as np

        messages, scores = self._scores(store, user_id, query, options)
        if scores is None:
            return Hits([])
        k = min(top_k, len(messages))
        top = np.arange(len(messages))
        if k < len(messages):  # the k best, ties at the cut in arrival order too (argpartition picks any of them)
            cut = scores[np.argpartition(-scores, k - 1)[k - 1]]
            above = np.flatnonzero(scores > cut)
            top = np.concatenate([above, np.flatnonzero(scores == cut)[: k - len(above)]])
        # highest score first; ties in arrival order
        ranked = sorted((i for i in top.tolist() if scores[i] > 0), key=lambda i: (-scores[i], i))
        return Hits([render_message(messages[i]) for i in ranked])

    def rank(self, store: Store, *, user_id: str, query: str, options: Sequence[str] = (), content: str) -> int | None:
        """Where the first message holding exactly ``content`` ranks for the query (1: first, as :meth:`__call__`
        orders them); None when it matches nothing or no message holds it."""
        messages, scores = self._scores(store, user_id, query, options)
        at = next((i for i, m in enumerate(messages) if m.content == content), None)
        if scores is None or at is None or not scores[at] > 0:
            return None
        above = (scores > scores[at]).sum() + (scores[:at] == scores[at]).sum()  # better, and as good but earlier
        return int(above) + 1

    def _scores(
        self, store: Store, user_id: str, query: str, options: Sequence[str]
    ) -> tuple[list[StoredMessage], Any]:
        """The user's messages and each one's score for the query (None when no query word is in any of them)."""
        retriever, messages = self._index(store, user_id)
        tokens = self.tokenize(query_text(query, options))
        if retriever is None or not tokens:
            return messages, None
        vocab = retriever.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        return messages, (retriever.get_scores_from_ids(ids) if ids else None)


def search_config(variants: Sequence[tuple[str, str]] = ()) -> SearchConfig:
    """refind's SearchConfig with KEY=VALUE overrides, each value parsed to the field's type (``--tokenizer`` is the
    baseline's alone: refind's analyzer is not a setting)."""
    from .search_config import SearchConfig

    config = SearchConfig()
    names = {f.name: f for f in dataclasses.fields(config)}
    changes: dict[str, Any] = {}
    for key, raw in variants:
        if key not in names:
            raise InvalidInput(f"--variant {key}: SearchConfig has no such field; known: {', '.join(sorted(names))}")
        changes[key] = parse_value(raw, getattr(config, key), _field_type(SearchConfig, key), key)
    return dataclasses.replace(config, **changes) if changes else config


def _field_type(cls: type, name: str) -> Any:
    try:
        return typing.get_type_hints(cls).get(name)
    except Exception:  # annotations that cannot be resolved: fall back to the default's type
        return None


TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


def parse_value(raw: str, default: Any, hint: Any, key: str) -> Any:
    """Parse a --variant value like the field it sets: bool, int, float, str, tuple or None ('none')."""
    text = raw.strip()
    if text.lower() == "none" and (default is None or type(None) in typing.get_args(hint)):
        return None
    kinds = [a for a in typing.get_args(hint) if a is not type(None)] or ([hint] if hint else [])
    kind = type(default) if default is not None else (kinds[0] if kinds else None)
    kind = typing.get_origin(kind) or kind
    try:
        if kind is bool:
            if text.lower() in TRUE_WORDS:
                return True
            if text.lower() in FALSE_WORDS:
                return False
            raise ValueError(text)
        if kind is int:
            return int(text)
        if kind is float:
            number = float(text)
            if not math.isfinite(number):  # nan compares false with everything: a weight or cut-off that never bites
                raise InvalidInput(f"--variant {key}={raw}: must be a finite number, got {text!r}")
            return number
        if kind in (tuple, list):
            return tuple(p.strip() for p in text.split(",") if p.strip())
    except ValueError:
        raise InvalidInput(f"--variant {key}={raw}: expected a {getattr(kind, '__name__', kind)}") from None
    return text


def parse_variants(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"--variant {item!r}: expected KEY=VALUE")
        out.append((key.strip(), value))
    return tuple(out)


def refind_searcher(mode: str, config: Any = None, planner: Planner | None = None) -> Searcher:
    """The searcher behind ``refind search --mode MODE``: the same request and the same ``retrieve`` call; counts
    the planner's LLM calls and tokens in agent mode."""

    def run(store: Store, *, user_id: str, query: str, options: Sequence[str] = (), top_k: int = DEFAULT_TOP_K) -> Hits:
        found = retrieve(
            store, SearchRequest(query, user_id, top_k, tuple(options), mode=mode), planner=planner, config=config
        )
        agent = found.agent
        return Hits(
            [b.content for b in found.blocks],
            llm_calls=agent.llm_calls if agent else 0,
            tokens=agent.tokens if agent else 0,
        )

    return run


def refind_bm25(config: Any) -> Searcher:
    """The searcher behind ``refind search --mode bm25``."""
    return refind_searcher("bm25", config)


def refind_agent(config: Any, **planner_kwargs: Any) -> Searcher:
    """The searcher behind ``refind search --mode agent`` (the LLM planner); ``planner_kwargs`` are
    :class:`~refind_cli.retrieval.Planner` fields (model, model_name, max_actions, deadline_s, skip, record)."""
    return refind_searcher("agent", config, Planner(**planner_kwargs))


def systems_for(
    settings: EvalSettings, *, model_from: Callable[[], tuple[Any, str]] | None = None, **planner_kwargs: Any
) -> dict[str, Searcher]:
    """The systems a run asks: refind in ``settings.mode`` and the baseline. Every setting is checked first; then,
    in agent mode, ``model_from`` (``model.from_env`` with the flags) gives the planner its model and name — so a
    model that cannot answer is refused after the settings and before anything is replayed."""
    if settings.mode not in SEARCH_MODES:
        raise InvalidInput(f"unknown mode {settings.mode!r}; use one of {', '.join(SEARCH_MODES)}")
    _check_misses(settings)
    config = search_config(settings.variants)
    if settings.mode == "agent" and model_from is not None:
        planner_kwargs["model"], planner_kwargs["model_name"] = model_from()
    main = refind_agent(config, **planner_kwargs) if settings.mode == "agent" else refind_bm25(config)
    systems = {"refind": main}
    if settings.baseline:
        systems["baseline"] = BaselineBM25(settings.tokenizer)
    return systems


# ---- the run ---------------------------------------------------------------------------------------------------

Progress = Callable[[int, int], None]


def take(samples: list[Sample], limit: int | None) -> list[Sample]:
    """The first ``limit`` questions, with the samples they need (a sample is replayed whole)."""
    if limit is None:
        return samples
    out, left = [], limit
    for sample in samples:
        if left <= 0:
            break
        if sample.questions:
            out.append(dataclasses.replace(sample, questions=sample.questions[:left]))
            left -= len(out[-1].questions)
    return out


def evaluate(
    path: str | Path,
    *,
    fmt: str | None = None,
    settings: EvalSettings = EvalSettings(),
    systems: dict[str, Searcher] | None = None,
    on_progress: Progress | None = None,
    on_miss: Callable[[Miss], None] | None = None,
) -> dict[str, Any]:
    """Replay PATH into a temporary database (deleted afterwards), ask every question of every system, score.

    With ``settings.misses_at``, each labelled message refind (the search ``settings`` make: ``systems_for``'s)
    misses within that budget is explained (misses.py), passed to ``on_miss``, and tallied by reason in the report's
    ``misses`` — ``systems`` of one's own are scored, but the search explained is still that of ``settings``."""
    _check_misses(settings)
    detected = fmt is None
    fmt = fmt or datasets.detect_format(path)
    skipped = Skipped()
    samples = take(
        list(datasets.load(path, fmt, role_faithful=settings.role_faithful, skipped=skipped, detected=detected)),
        settings.limit,
    )
    total = sum(len(s.questions) for s in samples)
    if not total:  # (a recall of 0.000 over no question read as a measurement)
        left = "; ".join(f"{n:,} {reason}" for reason, n in skipped.as_dict().items()) or "the set holds none"
        raise InvalidInput(
            f"{path}: no question to score, read as {datasets.NAMES[fmt]} ({left}): nothing to measure; "
            "is this the labelled set, and of this format? (--format)"
        )
    systems = systems if systems is not None else systems_for(settings)
    warm_up()
    warm = settings.warm_up and settings.mode == "bm25"
    tallies = {name: Tally() for name in systems}
    explainer, missed = _explainer(settings), []
    baseline = systems.get("baseline")
    messages = done = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="refind-eval-") as tmp:
        store = Store(Path(tmp) / "eval.db", retention_days=None)
        try:
            for sample in samples:
                messages += replay_sample(store, sample)
                for i, question in enumerate(sample.questions):
                    query = question.text + (" " + settings.query_suffix if settings.query_suffix else "")
                    options = question.options if settings.options else ()
                    contents: dict[str, list[str]] = {}
                    for name, searcher in systems.items():
                        if i == 0 and warm:  # untimed: builds the user's index, so latency is that of a ready index
                            searcher(
                                store, user_id=question.user_id, query=query, options=options, top_k=settings.top_k
                            )
                        t0 = time.perf_counter()
                        hits = searcher(
                            store, user_id=question.user_id, query=query, options=options, top_k=settings.top_k
                        )
                        tallies[name].record(question, hits, (time.perf_counter() - t0) * 1000)
                        contents[name] = hits.contents
                    if explainer is not None:
                        plain = None
                        if isinstance(baseline, BaselineBM25):
                            plain = (
                                JOIN.join(contents["baseline"]),
                                _plain_rank(baseline, store, question, query, options),
                            )
                        for miss in explainer.explain(
                            store,
                            user_id=question.user_id,
                            question=question.text,
                            category=question.category,
                            evidence=question.evidence,
                            query=query,
                            options=options,
                            budget=settings.misses_at or 0,
                            plain=plain,
                            returned=JOIN.join(contents["refind"]) if "refind" in contents else None,
                        ):
                            missed.append(miss)
                            if on_miss is not None:
                                on_miss(miss)
                    done += 1
                    if on_progress:
                        on_progress(done, total)
        finally:
            store.close()
    return {
        "dataset": Path(path).name,
        "format": fmt,
        "users": len(samples),
        "messages": messages,
        "questions": total,
        "skipped": skipped.as_dict(),
        "settings": settings.as_dict(),
        "budgets": list(BUDGETS),
        "join": JOIN,
        "seconds": round(time.perf_counter() - started, 1),
        "systems": {name: tally.summary() for name, tally in tallies.items()},
        **({} if explainer is None else {"misses": _misses_report(settings, missed, total)}),
    }


def _check_misses(settings: EvalSettings) -> None:
    """Refuse misses asked of a search that is not a ranking (agent mode), or of a budget below one character."""
    if settings.misses_at is not None and settings.mode != "bm25":
        raise InvalidInput(
            "--misses explains bm25 mode's ranking; agent mode's evidence is what its planner kept (read its trace: "
            "refind inspect searches)"
        )
    if settings.misses_at is not None and settings.misses_at < 1:
        raise InvalidInput(f"--misses-at must be 1 or more characters, got {settings.misses_at}")


def _explainer(settings: EvalSettings) -> Explainer | None:
    """What explains refind's misses, when asked for (``settings.misses_at``)."""
    if settings.misses_at is None:
        return None
    from .misses import Explainer

    return Explainer(search_config(settings.variants), settings.top_k)


def _plain_rank(
    baseline: BaselineBM25, store: Store, question: Question, query: str, options: Sequence[str]
) -> Callable[[str], int | None]:
    """Plain BM25's rank of a labelled text for this question."""
    return lambda text: baseline.rank(store, user_id=question.user_id, query=query, options=options, content=text)


def _misses_report(settings: EvalSettings, missed: list[Miss], questions: int) -> dict[str, Any]:
    from .misses import tally

    return {"system": "refind", "budget": settings.misses_at, "by_reason": tally(missed, questions)}


def warm_up() -> None:
    """Load what the first search would otherwise load inside its timing (bm25s, numpy, the stemmer)."""
    import bm25s  # noqa: F401

    from .tokenize import analyze, plain_tokenize

    analyze("warming up the stemmer")
    plain_tokenize("warming up")


def replay_sample(store: Store, sample: Sample) -> int:
    """Store a sample's Adds; any refusal is an error (the loaders build valid requests)."""
    try:
        outcomes = store.add_many(sample.requests)
    except UnicodeEncodeError as exc:  # the CLI read it as an argument's bytes ("pass them in UTF-8")
        bad = exc.object[exc.start : exc.end]
        if bad in sample.user_id:  # MemDaily's and REALTALK's user ids are file names: bytes that are not UTF-8
            raise InvalidInput(
                f"replaying user {sample.user_id!a}: the user id, the name of a file of the set or an id in it, is "
                f"not Unicode text (it holds {bad!a}); rename the file or fix the id"
            ) from None
        raise InvalidInput(
            f"replaying user {sample.user_id}: the set holds text that is not Unicode (an unpaired UTF-16 surrogate, "
            f"{bad!a}, escaped in its JSON); fix the file"
        ) from None
    for outcome in outcomes:
        if isinstance(outcome, RefindError):
            raise RefindError(f"replaying user {sample.user_id}: {outcome.message}")
    return sum(len(r.messages) for r in sample.requests)
