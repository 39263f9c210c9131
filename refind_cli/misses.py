"""Why a labelled message was not found within a budget: what ``refind eval --misses`` writes and tallies.

A search (bm25 mode) misses a labelled message within B characters for one of these reasons, checked in this order:

* ``past the budget`` — the list holds it, but not wholly within its first B characters (where it starts, in which
  block, as that block's anchor or as a neighbour);
* ``not stored`` — no message of the user holds the labelled text (a label naming a message the set's replay never
  stored, or one expired since);
* ``no shared word`` — the turn holding it matches nothing the question asks: no word, nor a spelling, a kind or a
  variant of one (BM25 cannot find it; only a search by meaning could);
* ``deferred`` — ranked among the anchors the list reached, but longer than ``defer_chars``: it went behind the
  shorter ones, and the list had its ``top_k`` blocks first;
* ``ranked below the list`` — it matches, ranked R of the M turns that do; the list's blocks reached rank L;
* ``left out`` — ranked within the list's reach and shown in no block (a rule of the list, not its length).

Each missed message weighs ``1 / len(evidence)`` of its question, as in recall, so a set's tally per reason divided by
its questions is the recall that reason costs: the reasons sum to ``1 − R@B``. With the plain BM25 baseline of the
same run, each miss also says where plain BM25 ranked that message and whether it found it within B — a message both
miss is a harder one than a message refind alone misses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .blocks import defers, turn_chars
from .settings import EVAL_JOIN as JOIN

if TYPE_CHECKING:
    from .blocks import Block
    from .index import TurnIndex
    from .search import Ranked
    from .search_config import SearchConfig
    from .store import Store

REASONS = ("past the budget", "not stored", "no shared word", "deferred", "ranked below the list", "left out")


@dataclass(frozen=True)
class Miss:
    """One labelled message a search did not return within ``budget`` characters, and why."""

    user_id: str
    question: str
    category: str
    evidence: str  # the labelled message's text
    budget: int
    reason: str  # one of REASONS
    detail: str  # the reason in a sentence, with its numbers
    weight: float  # 1 / the question's labelled messages
    offset: int | None = None  # where the list holds it (characters into the joined contents)
    rank: int | None = None  # its turn's place among the ranked anchors (1: the best)
    matching: int = 0  # how many turns matched the question
    reached: int | None = None  # the rank of the last anchor the list showed
    plain_rank: int | None = None  # its place in plain BM25's ranking (None: unranked, or no baseline)
    plain_found: bool | None = None  # whether plain BM25 returned it within the budget (None: no baseline)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class Explainer:
    """Explains the misses of one system's searches; keeps the last user's map from a message's text to its turn."""

    def __init__(self, config: SearchConfig, top_k: int) -> None:
        self.config, self.top_k = config, top_k
        self._turn_of: tuple[Any, dict[str, int]] | None = None

    def explain(
        self,
        store: Store,
        *,
        user_id: str,
        question: str,
        category: str,
        evidence: Sequence[str],
        query: str,
        options: Sequence[str] = (),
        budget: int,
        plain: tuple[str, Callable[[str], int | None]] | None = None,
        returned: str | None = None,
    ) -> list[Miss]:
        """The misses of ``query``'s search within ``budget``: the search made again (its ranking, then its blocks)
        and each labelled text it left out explained. ``plain``: the baseline's joined contents and its rank of a
        text; ``returned``: the joined contents the search gave when it was scored — nothing missed there, it is not
        made again."""
        if returned is not None and all(e in returned[:budget] for e in evidence):
            return []
        from . import search

        with store.reading():  # the index, the ranking and the text shown: one snapshot
            ui = search.user_index(store, user_id, config=self.config, lazy=True)
            ranked = ui.rank(query, top_k=self.top_k, options=options, config=self.config)
            blocks = [] if ranked is None else ui.render(ranked, top_k=self.top_k)
            text = JOIN.join(b.content for b in blocks)
            missing = [e for e in evidence if e not in text[:budget]]
            if not missing:
                return []
            turn_of = self._turns(user_id, ui.index)
            shown = _Shown(ui.index, ranked, blocks, text, self.top_k)
            out = []
            for e in missing:
                reason, detail, facts = shown.why(_holder(ui.index, turn_of, e), e, budget)
                if plain is not None:
                    facts["plain_rank"] = plain[1](e)
                    facts["plain_found"] = e in plain[0][:budget]
                out.append(Miss(user_id, question, category, e, budget, reason, detail, 1 / len(evidence), **facts))
        return out

    def _turns(self, user_id: str, index: TurnIndex) -> dict[str, int]:
        key = (user_id, id(index), len(index))
        if self._turn_of is None or self._turn_of[0] != key:
            turn_of: dict[str, int] = {}
            for pos, turn in enumerate(index.turns):
                for m in turn.messages:
                    turn_of.setdefault(m.content, pos)
            self._turn_of = (key, turn_of)
        return self._turn_of[1]


def _holder(index: TurnIndex, turn_of: dict[str, int], text: str) -> int | None:
    """The turn holding a labelled text: the first whose message is exactly it, else the first whose message holds it
    (a label may quote part of a message, which recall counts as found wherever the list holds that part)."""
    pos = turn_of.get(text)
    if pos is not None:
        return pos
    return next((i for i, turn in enumerate(index.turns) if any(text in m.content for m in turn.messages)), None)


class _Shown:
    """One search's list as the reasons read it: its ranking, its blocks and their joined text."""

    def __init__(self, idx: TurnIndex, ranked: Ranked | None, blocks: Sequence[Block], text: str, top_k: int) -> None:
        self.idx, self.ranked, self.blocks, self.text, self.top_k = idx, ranked, blocks, text, top_k
        self.ranks: dict[int, int] = {} if ranked is None else {p: i for i, p in enumerate(ranked.order.tolist())}
        self.matching = 0 if ranked is None else int((ranked.scores > 0).sum())
        anchors = (idx.turn_pos.get(b.id) for b in blocks)
        places = [self.ranks[p] for p in anchors if p is not None and p in self.ranks]
        self.reached = max(places) if places else None  # the place of the last anchor shown (0: the first)

    def why(self, pos: int | None, evidence: str, budget: int) -> tuple[str, str, dict[str, Any]]:
        """The reason a labelled text is missed, its sentence, and the numbers a :class:`Miss` carries."""
        rank = None if pos is None else self.ranks.get(pos)  # (a turn no query word matched is ranked only as context)
        facts: dict[str, Any] = {
            "rank": None if rank is None else rank + 1,
            "matching": self.matching,
            "reached": None if self.reached is None else self.reached + 1,
        }
        offset = self.text.find(evidence)
        if offset >= 0:
            return "past the budget", self._where(offset, pos, budget, evidence), {**facts, "offset": offset}
        if pos is None:
            return "not stored", "no stored message of the user holds this text", facts
        if self.ranked is None or not self.ranked.scores[pos] > 0:
            return (
                "no shared word",
                "its turn matches no word of the question (nor a spelling, a kind or a variant of one)",
                facts,
            )
        if rank is None:  # (matching, yet not ranked: a date bound or a skipped session left it out)
            return "left out", "its turn matches the question but is not among the ranked ones", facts
        if self.reached is None or rank > self.reached:
            return (
                "ranked below the list",
                f"ranked {rank + 1:,} of {self.matching:,} matching turns; the list's {_blocks(len(self.blocks))} "
                f"reached rank {(self.reached or 0) + 1:,}",
                facts,
            )
        turn, cfg = self.idx.turns[pos], self.ranked.config
        if defers(turn, cfg):
            return (
                "deferred",
                f"a long turn ({turn_chars(turn):,} characters, over defer_chars {cfg.defer_chars:,}) ranked "
                f"{rank + 1:,}: it went behind the shorter anchors, and the list had its {_blocks(self.top_k)} first",
                facts,
            )
        if cfg.lead_chars or cfg.interleave_chars:  # (off by default) their blocks' anchors, plain BM25's best,
            # may rank far below where the list's own anchors stop: the reach counts them
            return (
                "left out",
                f"ranked {rank + 1:,}, within the reach of the list's blocks — a lead or interleaved block's anchor "
                "among them — yet shown in no block",
                facts,
            )
        return "left out", f"ranked {rank + 1:,}, within the list's reach, yet shown in no block", facts

    def _where(self, offset: int, pos: int | None, budget: int, evidence: str) -> str:
        """Where the list holds a text that starts at ``offset``: which block, as its anchor or a neighbour."""
        blocks = self.blocks
        where, end = 0, len(blocks[0].content)
        while end <= offset:  # (the block it starts in: each ends where the next one's separator begins)
            where += 1
            end += len(JOIN) + len(blocks[where].content)
        role = "its anchor" if pos is not None and self.idx.turns[pos].id == blocks[where].id else "a neighbour"
        end = offset + len(evidence)
        at = f"at character {offset:,}" if offset >= budget else f"from character {offset:,} to {end:,}"
        return f"returned {at} (block {where + 1}, {role}), past {budget:,}"


def _blocks(n: int) -> str:
    return f"{n} block" if n == 1 else f"{n} blocks"


def tally(misses: Sequence[Miss], questions: int) -> dict[str, dict[str, float | int | None]]:
    """Per reason (in :data:`REASONS` order, those that occur): the recall it costs (its misses' weights over
    ``questions``), its labelled messages, and how many of them plain BM25 found within the budget (None when no
    baseline ran)."""
    out: dict[str, dict[str, float | int | None]] = {}
    for reason in REASONS:
        mine = [m for m in misses if m.reason == reason]
        if mine:
            ran = [m for m in mine if m.plain_found is not None]
            out[reason] = {
                "recall": round(sum(m.weight for m in mine) / max(questions, 1), 4),
                "messages": len(mine),
                "plain_found": sum(1 for m in ran if m.plain_found) if ran else None,
            }
    return out
