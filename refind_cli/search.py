"""Search one user's memory: evidence blocks from BM25 over turns, with session fusion and neighbouring turns.

Library API (the CLI, the planner, the server and the evaluation all call these):

* :func:`search` — one call: the user's index, then :meth:`UserIndex.search`;
* :func:`user_index` — the per-user index. With one-message turns and the default tokenization (any k1, b) it is
  the index maintained on write (:mod:`refind_cli.index_cache` over :mod:`refind_cli.index_store`): never rebuilt
  on the search path. Other index shapes (``turn_unit="pair"``, no labels, no dates), and a database whose index is
  still being built, get an index built from ONE ``store.user_messages(user_id, as_of=…)`` read, kept in the same
  byte-sized in-process LRU keyed by (database, user, ``users.version``, as_of, retention, index settings);
  :func:`evict` / :func:`clear` drop entries;
* :func:`contract.date_bound` — the date bounds a search accepts (ISO 8601 or Unix ms).

Every variant the evaluation measures is a field of :class:`SearchConfig` (search_config.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from . import aliases, expand, feedback, index_cache, index_store, kinds, proximity, query_dates, variants
from .blocks import Block, render_blocks, within_fill
from .contract import date_bound
from .index import (
    TurnIndex,
    answer_scores,
    bm25_scores,
    build_index,
    doc_freq,
    drop_common,
    eligible,
    flat_and_rarer_scores,
    fuse,
    weighted_scores,
)
from .index_store import IndexChanged
from .search_config import NEIGHBOUR_ROLES as NEIGHBOUR_ROLES  # re-exported: search_config.py holds them
from .search_config import OVERLAP_POLICIES as OVERLAP_POLICIES
from .search_config import SKIP_MODES, _check, turn_tokenizer
from .search_config import SearchConfig as SearchConfig
from .tokenize import analyze
from .turns import Turn, build_turns

if TYPE_CHECKING:
    import numpy as np

    from .store import Store, StoredMessage


class Ranked(NamedTuple):
    """A query's ranking (:meth:`UserIndex.rank`): what :func:`blocks.render_blocks` makes the blocks of."""

    config: SearchConfig  # the search's own (a question about a reply changes what it defers and shows)
    order: np.ndarray  # turn positions, best first: every matching turn (and, with backfill, context for a short list)
    fused: np.ndarray  # their fused scores, in that order
    scores: np.ndarray  # each turn's score for the query before fusion (0: it matches nothing the query asks)
    match: np.ndarray | None  # which turns count as sharing a query word for the neighbour filter (None: scores)
    matched: int  # how many of ``order`` match the query (the rest, if any: backfill)


@dataclass(frozen=True)
class Skip:
    """What a later planner round leaves out: whole sessions (``mode="session"``, session ids) or single turns
    (``mode="turn"``, turn/block ids)."""

    mode: str = "session"
    ids: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        _check("skip mode", self.mode, SKIP_MODES)
        object.__setattr__(self, "ids", frozenset(self.ids))


@functools.cache
def _instruction_pattern() -> re.Pattern[str]:
    verbs = (
        r"answer|choose|select|pick|reply|respond|output|return|give|provide|use|format|write|keep|"
        r"do not|don['\u2019]t|only|please (?:answer|choose|select|reply|respond)|your answer|the answer should|"
        r"think step|explain"
    )
    return re.compile(rf"^\s*(?:{verbs})\b", re.IGNORECASE)


# the words of an instruction to the answerer; a sentence holding any other word says what to find ("Only Yosemite
# hiking." is kept), so a missing word here keeps an instruction's few words in the query, never drops content
_INSTRUCTION_TEXT = """
    a an the in on of to by as with from for and or but not no yes do don't does is be it its it's this that
    these those your you my me i please just only exactly nothing else else's more than less at most least
    answer answers answering reply replies respond response output return give provide use using format formatted
    write keep choose select pick explain explanation think step steps reason reasoning should must
    one two three word words sentence sentences letter letters number numbers digit option options choice choices
    correct right single best final following below above short shortly brief briefly concise concisely plain
    text json list phrase name names true false question questions based memory memories context provided given"""
_INSTRUCTION_WORDS = frozenset(_INSTRUCTION_TEXT.split())


def _instruction(sentence: str) -> bool:
    """Whether a sentence instructs the answerer: it opens like an instruction, and every word of it is one an
    instruction uses (a single letter counts: the options' "A, B, C or D")."""
    if not _instruction_pattern().match(sentence):
        return False
    words = re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?", sentence.lower().replace("\u2019", "'"))
    return all(len(w) == 1 or w in _INSTRUCTION_WORDS for w in words)


# a question about what the other side said ("What did you suggest?", "the third tip you gave me", "your list",
# "Can you remind me…", "our previous conversation"): the one who asks is told something back, in a reply
_RECALLS_A_REPLY = re.compile(
    r"\b(?:did you|you\s+(?:\w+ed|gave|told|said|made|wrote|sent|showed|taught|found|got|came up with|brought up|had)"
    r"|your\s+(?:list|verdict|advice|answer|suggestions?|recommendations?|tips?)|remind me"
    r"|our\s+(?:previous|last|earlier)\s+(?:conversation|chat|discussion))\b",
    re.IGNORECASE,
)


# … in Chinese: "你之前…" / "你上次…", "你推荐的" / "你标成重点的" / "你推荐给我的", "你说", "你让我", "你的建议",
# "帮我排的计划", "提醒我", "我们上次聊过" — not a request made now ("你推荐几家", "你帮我写一下", "你能给我推荐…吗": 能),
# nor a question between two other people, which names them, not 你; a lone 提醒 is anyone's reminder (提醒一下老婆)
_RECALLS_A_REPLY_ZH = re.compile(
    r"你(?:之前|以前|上次|上回|刚才|那次|那天|当时|前面|早先|最早|最开始|一开始|曾经)"
    r"|你(?:帮我|给我|跟我|和我|为我|替我|对我|向我)?"
    r"(?:推荐|建议|提|列|写|排|想|标|介绍|安排|整理|总结|算|翻译|改|发|分享|教|提供|设计|规划|定|选|挑|找|查|回答)"
    r"(?!一下|下|一个|一些|个|几|点|吧|吗)"
    r"|你(?:说|讲|提到|告诉我|让我|叫我|要我)|你的(?:建议|推荐|回答|答案|清单|列表|方案|计划|意见|说法)"
    r"|(?:帮我|给我|为我|替我)(?:列|写|排|做|整理|推荐|规划|安排|定|设计)的"  # (not 开: "医生给我开的药")
    r"|提醒我|我们(?:之前|上次|以前|那次)?(?:聊|说|讨论|谈)(?:过|到|的)"
    # … or a thing only a reply makes, named without 你: "那份攻略里", "最早那版", "给的备选" (round 21: 9 of a second blind
    # set's 13 such questions had none of the forms above). Not a plan, advice or anything given by "给X推荐/开/写的":
    # people's own ("这套房子的装修方案", "医生给我开的药", "江屿给许念写的信": a review found 16 of 17 such questions
    # matched a first version)
    r"|(?:那|这)(?:份|版|套|篇)[^，。？！,?!\s]{0,10}?(?:清单|攻略|书单|行程|大纲|食谱|菜谱|列表|指南)"
    r"|那版(?!本)|给的备选"
)


def recalls_a_reply(question: str) -> bool:
    """Whether ``question`` asks what was said back to the one asking — an assistant's reply, whose text is the answer
    however long (English: of LongMemEval's oracle split, 55 of its 56 single-session-assistant questions match, none
    of the 414 others; Chinese: BENCHMARKS.md, "An assistant's chats in Chinese, written blind")."""
    return _RECALLS_A_REPLY.search(question) is not None or _RECALLS_A_REPLY_ZH.search(question) is not None


def strip_instructions(query: str) -> str:
    """The query without sentences that instruct the answerer rather than describe what to find — "Answer in one
    word.", "Choose the correct option and reply with its letter only." — when some other sentence remains."""
    sentences = re.split(r"(?<=[.!?。！？])\s+|\n+", query.strip())
    kept = [x for x in sentences if x and not _instruction(x)]
    return " ".join(kept) if kept else query


class UserIndex:
    """One user's turns, indexed. Built from one scoped read; searched many times (thread-safe: read-only)."""

    def __init__(self, messages: Sequence[StoredMessage], config: SearchConfig | None = None) -> None:
        """Build from the user's messages (from scratch, with bm25s)."""
        self.config = config or SearchConfig()
        turns = build_turns(messages, self.config.turn_unit)
        self.index: TurnIndex = build_index(
            turns, tokenize=turn_tokenizer(self.config), k1=self.config.k1, b=self.config.b
        )
        self._message_session: dict[str, str] | None = None  # built on first use
        self.read_at: int | None = None  # the file's latest write when a cached copy was read (index_cache.descended)

    @classmethod
    def of(cls, index: TurnIndex, config: SearchConfig) -> UserIndex:
        """Wrap an index built elsewhere (the maintained one)."""
        ui = cls.__new__(cls)
        ui.config, ui.index, ui._message_session, ui.read_at = config, index, None, None
        return ui

    @property
    def maintained(self) -> bool:
        """Whether this is the index maintained on write (not one built from scratch)."""
        return self.index.postings is not None

    @property
    def nbytes(self) -> int:
        """About what this index holds in memory (its arrays, its turns and their text)."""
        idx = self.index
        text = sum(len(m.content) for t in idx.turns for m in t.messages)
        arrays = idx.data.nbytes + idx.indices.nbytes + idx.indptr.nbytes + sum(len(v) + 100 for v in idx.vocab)
        return arrays + text + len(idx.turns) * index_cache.MESSAGE_OVERHEAD

    def __len__(self) -> int:
        return len(self.index)

    @property
    def turns(self) -> Sequence[Turn]:
        return self.index.turns

    def session_of(self, block_or_turn_id: str) -> str | None:
        """The session of a block, turn or message id (None when unknown to this index)."""
        pos = self.index.turn_pos.get(block_or_turn_id)
        if pos is not None:
            return self.index.turns[pos].session_id
        if self._message_session is None:
            self._message_session = {m.id: m.session_id for t in self.turns for m in t.messages}
        return self._message_session.get(block_or_turn_id)

    def search(
        self,
        query: str,
        *,
        top_k: int,
        date_from: str | int | None = None,
        date_to: str | int | None = None,
        skip: Skip | None = None,
        options: Sequence[str] = (),
        config: SearchConfig | None = None,
    ) -> list[Block]:
        """The best ``top_k`` evidence blocks for ``query`` (fewer when fewer turns match; none for no match).

        ``config`` may override the query-time and rendering fields; the index fields must match this index.
        """
        ranked = self.rank(
            query, top_k=top_k, date_from=date_from, date_to=date_to, skip=skip, options=options, config=config
        )
        return [] if ranked is None else self.render(ranked, top_k=top_k)

    def render(self, ranked: Ranked, *, top_k: int) -> list[Block]:
        """The blocks of a ranking (:meth:`rank`): the first ``top_k`` anchors with their neighbours."""
        cfg, idx, order = ranked.config, self.index, ranked.order
        prefetch = getattr(idx.turns, "prefetch", None)  # the maintained index reads the text it will show, at once
        if prefetch is not None:
            prefetch(order[: top_k + 2], max(cfg.neighbours, cfg.neighbours_before or 0))
        blocks = render_blocks(idx, order, ranked.fused, top_k=top_k, cfg=cfg, scores=ranked.scores, match=ranked.match)
        if ranked.matched < order.size and cfg.backfill_chars is not None:
            filled = {idx.turns[int(p)].id for p in order[ranked.matched :]}
            blocks = within_fill(blocks, filled, cfg.backfill_chars)
        return blocks

    def rank(
        self,
        query: str,
        *,
        top_k: int,
        date_from: str | int | None = None,
        date_to: str | int | None = None,
        skip: Skip | None = None,
        options: Sequence[str] = (),
        config: SearchConfig | None = None,
    ) -> Ranked | None:
        """Every turn the blocks of :meth:`search` may anchor on, best first, and what each scored (None for no
        match). ``top_k`` matters only when fewer turns match: the rest of the list is spent on context."""
        cfg = config or self.config
        if cfg.index_key() != self.config.index_key():
            raise ValueError("config changes how the index is built: get another user_index for it")
        lo, hi = date_bound(date_from, end=False), date_bound(date_to, end=True)
        if top_k <= 0:
            return None
        text = strip_instructions(query) if cfg.strip_instructions else query
        if text != query and not analyze(text):
            text = query  # what looked like an instruction held every search word ("Only Al ... Who is it?")
        if cfg.aliases:  # "What does Kate cook?" of a chat labelled "Emi: …", where Emi is called Kate (aliases.py)
            text = aliases.labelled(self.index, text, kin_of=cfg.kin_aliases)
        question = text  # without the options: what kinds.py reads a category from
        changes = not cfg.defer_recalled or cfg.recalled_neighbours is not None
        if changes and recalls_a_reply(question):  # its answer is a reply: a long anchor keeps its place, alone
            if not cfg.defer_recalled:
                cfg = cfg.with_(defer_chars=None)
            if cfg.recalled_neighbours is not None:
                n = cfg.recalled_neighbours
                cfg = cfg.with_(neighbours=n, late_neighbours=min(cfg.late_neighbours, n))
        if cfg.options_in_query and options:
            text = "\n".join([text, *options])
        tokens = analyze(text)
        if not tokens or len(self.index) == 0:
            return None
        idx = self.index
        common: list[str] = []
        if cfg.common_df is not None:
            kept = drop_common(idx, tokens, cfg.common_df)
            kept_set = set(kept)
            common = [t for t in tokens if t not in kept_set] if cfg.common_weight else []
            tokens = kept
        # a speaker's name counts by presence, not turn length; ``rarer``: the other words' scores alone
        scores, rarer = flat_and_rarer_scores(idx, tokens, cfg.flat_df, names_only=cfg.flat_names, lift=cfg.name_lift)
        if common:  # words in most turns (a speaker's name in every label of theirs) still count, but weakly
            scores = scores + bm25_scores(idx, common) * cfg.common_weight
        exact = scores  # (``widened - exact`` below: what the expansions add, for the neighbour filter)
        if cfg.fuzzy:  # robust queries (expand.py): words the user never wrote match their nearest spellings
            expandable = tokens
            if not cfg.fuzzy_categories and cfg.kinds_weight:  # a category word with kinds is left to them
                named = kinds.category_tokens(question, cfg.kinds_senses, cfg.kinds_depth)
                expandable = [t for t in tokens if t not in named]
            extra = expand.fuzzy_scores(idx, expandable, max_expansions=cfg.fuzzy_expansions)
            scores = scores if extra is None else scores + extra
        # a word the user never wrote alone also matches their compounds that end in it, and its Turkish inflections
        extra = expand.form_scores(
            idx,
            tokens,
            tails=(cfg.compound_tails, cfg.compound_tails_weight),
            inflections=(cfg.inflections, cfg.inflections_weight),
        )
        scores = scores if extra is None else scores + extra
        if cfg.variants:  # compounds, clitic prefixes, loanword vowels the user wrote another way (variants.py)
            extra = variants.variant_scores(idx, text, tokens)
            scores = scores if extra is None else scores + extra
        if cfg.lone_units:  # "猫" alone also finds 我的猫叫咪咪, indexed as bigrams (的猫 猫叫)
            inside = expand.lone_unit_scores(idx, tokens, pair_units_df=cfg.pair_units_df)
            scores = scores if inside is None else scores + inside
        if cfg.kinds_weight:  # "What sports …" also matches football and golf, weakly (kinds.py)
            more = kinds.kind_terms(
                expand.vocabulary(idx),
                functools.partial(expand.present, idx),
                len(idx),
                question,
                tokens,
                senses=cfg.kinds_senses,
                depth=cfg.kinds_depth,
                max_df=cfg.kinds_df,
                most=cfg.kinds_max,
            )
            if more:
                scores = scores + bm25_scores(idx, more) * cfg.kinds_weight
        widened = scores
        if cfg.date_boost:  # a question naming a day prefers the matching turns said that day (query_dates.py)
            years = functools.partial(query_dates.said_years, idx) if cfg.yearless_dates else None
            days = query_dates.named_days(text, years)
            dated = query_dates.day_words(days) if days and cfg.date_words_near and cfg.index_dates else ()
            scores = query_dates.date_boost(
                idx,
                scores,
                days,
                boost=cfg.date_boost,
                window_days=cfg.date_window_days,
                words=[t for t in tokens if t in dated],
                day_weight=cfg.cjk_day_weight if days and query_dates.cjk_day(text) else 0.0,
            )
        mask = eligible(
            idx,
            date_from=lo,
            date_to=hi,
            skip_sessions=skip.ids if skip and skip.mode == "session" else (),
            skip_turns=skip.ids if skip and skip.mode == "turn" else (),
        )
        if cfg.rm3_terms:  # pseudo-relevance feedback (feedback.py)
            terms = feedback.rm3_terms(
                idx,
                scores * mask,
                tokens,
                turn_tokenizer(cfg),
                docs=cfg.rm3_docs,
                terms=cfg.rm3_terms,
                weight=cfg.rm3_weight,
            )
            extra = weighted_scores(idx, terms)
            scores = scores if extra is None else scores + extra
        if not mask.all():  # (most searches bound no date and skip nothing: no product to make)
            scores, rarer = scores * mask, rarer * mask
        if cfg.proximity_weight:  # the question's adjacent words near each other in a turn (proximity.py)
            n, share = len(idx), cfg.flat_df  # (a word counted by presence, a speaker's name, pairs with none)
            pairs = proximity.query_pairs(analyze(question), lambda t: share is None or doc_freq(idx, t) <= share * n)
            scores = proximity.proximity_scores(
                idx,
                scores,
                rarer,
                pairs,
                turn_tokenizer(cfg),
                weight=cfg.proximity_weight,
                window=cfg.proximity_window,
                pool=cfg.proximity_pool,
                max_chars=cfg.proximity_max_chars,
            )
        if cfg.answer_weight:  # a question and its answer, said one after the other, lift each other
            scores = answer_scores(idx, scores, rarer, cfg.answer_weight, max_chars=cfg.answer_max_chars)
        order, fused = fuse(
            scores,
            idx.session_ix,
            rrf_k=cfg.rrf_k,
            use_sessions=cfg.session_fusion,
            session_top=cfg.session_top,
            session_weight=cfg.session_weight,
            shared_ranks=cfg.shared_ranks,
        )
        if cfg.session_cap is not None:  # spread the list over more sessions
            order, fused = spread_sessions(order, fused, idx.session_ix, cfg.session_cap)
        matched = int(order.size)
        if cfg.backfill and 0 < order.size < top_k:  # few turns matched: spend the rest of the list on context
            order, fused = expand.backfill(idx, order, fused, mask, top_k)
        match = None  # which turns count as sharing a query word for the neighbour filter
        matching = tokens
        if cfg.neighbour_match_df is not None:
            rare = drop_common(idx, tokens, cfg.neighbour_match_df)
            if len(rare) < len(tokens):  # a speaker's name (in every label of theirs) does not make a neighbour match
                match, matching = bm25_scores(idx, rare) * mask, rare
        if not cfg.date_neighbours and cfg.index_dates and any(map(_date_token, matching)):
            # "… in June 2023": every turn of the anchor's session holds its month and year words; a neighbour must
            # share another query word, or an expansion's (a spelling, a kind, a variant)
            undated = [t for t in matching if not _date_token(t)]
            match = (bm25_scores(idx, undated) + (widened - exact)) * mask
        return Ranked(cfg, order, fused, scores, match, matched)


@functools.cache
def _month_tokens() -> frozenset[str]:
    """The tokens of the month names a turn is indexed with (``index_store.DATE_WORDS`` of a day in each month)."""
    return frozenset(t for month in range(12) for t in analyze(index_store.date_words(month * 31)) if not t.isdigit())


def _date_token(token: str) -> bool:
    """Whether ``token`` is one of the date words indexed with every turn (``index_dates``: a month's name, a year)."""
    return (len(token) == 4 and token.isascii() and token.isdigit()) or token in _month_tokens()


def spread_sessions(
    order: np.ndarray, fused: np.ndarray, session_ix: np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ranked anchors ``order`` with each session's anchors after its first ``cap`` moved behind every other
    session's first ``cap`` (the moved ones keep their order, and so does the rest). Scores travel with their
    anchors; rendering keeps them strictly decreasing."""
    import numpy as np

    if order.size == 0:
        return order, fused
    sess = session_ix[order]
    by_session = np.lexsort((np.arange(order.size), sess))  # each session's anchors, in rank order
    ss = sess[by_session]
    first = np.searchsorted(ss, ss, side="left")
    nth = np.empty(order.size, dtype=np.int64)
    nth[by_session] = np.arange(order.size) - first  # 0 for a session's best anchor, 1 for its second, …
    late = nth >= cap
    keep = np.concatenate([np.flatnonzero(~late), np.flatnonzero(late)])
    return order[keep], fused[keep]


# ---- getting a user's index --------------------------------------------------------------------------------


DEFAULTS = SearchConfig()  # (frozen: one object serves every search that names no configuration)
MAINTAINED = DEFAULTS.with_(k1=1.2, b=0.75).index_key()[:3]  # the index shape maintained on write


def user_index(
    store: Store,
    user_id: str,
    *,
    as_of: int | None = None,
    config: SearchConfig | None = None,
    lazy: bool = False,
) -> UserIndex:
    """The user's index: the maintained one when it has this shape (see the module docstring), else one built from
    the user's rows and cached while the user is unchanged. ``lazy``: see ``index_cache.live_index``."""
    config = config or DEFAULTS
    if config.index_key()[:3] == MAINTAINED:
        live = index_cache.live_index(store, user_id, as_of=as_of, k1=config.k1, b=config.b, lazy=lazy)
        if live is not None:
            return UserIndex.of(live, config)
    with store.reading():  # the version, the file's latest write and the messages: one snapshot
        return _scratch_index(store, user_id, as_of, config)


def _scratch_index(store: Store, user_id: str, as_of: int | None, config: SearchConfig) -> UserIndex:
    version = store.user_version(user_id)
    now = index_store.last_write(store.conn)
    # retention is part of the key: an index built under a shorter window lacks what a longer one shows
    key = ("scratch", index_cache._db_key(store), user_id, version, as_of, config.index_key(), store.retention_days)
    cutoff = store.retention_cutoff()
    entry: UserIndex | None = index_cache.CACHE.get(key)
    if entry is not None and not index_cache.descended(store.conn, entry.read_at, now):  # another file's content
        index_cache.drop(lambda k: k == key)
        entry = None
    if entry is not None:
        oldest = entry.index.min_recorded_at
        if cutoff is not None and oldest is not None and oldest < cutoff:
            entry = None  # something in it has expired since it was built
    if entry is not None:
        return entry if entry.config == config else UserIndex.of(entry.index, config)
    built = UserIndex(store.user_messages(user_id, as_of=as_of), config)
    built.read_at = now
    if len(built) or version:  # older versions of this user go (their text too, when another process emptied them)
        index_cache.drop(lambda k: k[:3] == key[:3] and k[3] < version)
    if len(built):  # an unknown user must not push real users out of the cache
        index_cache.CACHE.put(key, built, built.nbytes)
    return built


def evict(user_id: str) -> None:
    """Drop every in-memory index of ``user_id`` (all databases): forget/expire call this."""
    index_cache.evict(user_id)


def clear() -> None:
    index_cache.clear()


def search(
    store: Store,
    user_id: str,
    query: str,
    *,
    top_k: int,
    date_from: str | int | None = None,
    date_to: str | int | None = None,
    options: Sequence[str] = (),
    as_of: int | None = None,
    config: SearchConfig | None = None,
    skip: Skip | None = None,
) -> list[Block]:
    """One user's best ``top_k`` evidence blocks for ``query``: ``[]`` when nothing matches or the user is unknown.

    An unparsable date raises InvalidInput (checked before anything is read).
    """
    date_bound(date_from, end=False), date_bound(date_to, end=True)
    for attempt in (1, 2, 3):
        with store.reading():  # the version, the segments, their parts and the text shown: one snapshot
            ui = user_index(store, user_id, as_of=as_of, config=config, lazy=True)  # the query terms' postings
            try:
                return ui.search(query, top_k=top_k, date_from=date_from, date_to=date_to, skip=skip, options=options)
            except IndexChanged:  # the state outlived what it read (an analyzer change's re-index): read it again
                index_cache.drop_state(store, user_id)
                if attempt == 3:
                    raise
        if attempt == 2:  # read afresh and still wrong: not a race but an index nobody kept
            _rebuild_index(store, user_id)
    raise AssertionError("unreachable")


def undated_matches(
    store: Store,
    user_id: str,
    query: str,
    *,
    options: Sequence[str] = (),
    as_of: int | None = None,
    config: SearchConfig | None = None,
) -> int:
    """How many of the user's turns without a said-at match ``query``: a date range leaves each of them out (a turn
    said at no known time is in no range). 0 when the index changed under the count (it only explains a no match)."""
    import numpy as np

    with store.reading():
        ui = user_index(store, user_id, as_of=as_of, config=config, lazy=True)
        try:
            ranked = ui.rank(query, top_k=1, options=options)
        except IndexChanged:
            return 0
    if ranked is None:
        return 0
    return int(np.isnan(ui.index.said_at[ranked.order[: ranked.matched]]).sum())


def _rebuild_index(store: Store, user_id: str) -> None:
    """Read twice in fresh snapshots, the user's index still names messages the database does not hold: not a forget
    racing the search (a snapshot cannot see one) but an index a writer did not keep — an older refind (before the
    maintained index) forgetting in a database this one upgraded. Every search of the user failed "search again",
    for good; the user's index is written again from the stored messages, once, and said in the log."""
    import logging

    from .errors import RefindError

    try:
        with store.write():
            indexed = index_store.rebuild_user(store.conn, user_id)
            store.bump_users({user_id: 1})  # (every process's cached view of the user is read again)
    except RefindError as exc:  # a read-only file, a lock held too long: said, with what is wrong
        raise IndexChanged(
            f"the search index of user {user_id!r} names messages the database no longer holds (did an older refind "
            f"write to it?), and it could not be rebuilt: {exc.message}"
        ) from exc
    index_cache.drop_state(store, user_id)
    logging.getLogger("refind").warning(
        "the search index of one user named messages the database no longer holds (an older refind's forget?): "
        "rebuilt from its %d stored messages",
        indexed,
    )
