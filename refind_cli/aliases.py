"""Another name of a speaker: the name a question gives someone whose messages are labelled otherwise.

"What dishes did Kate learn in her cooking class?" asked of a chat whose lines read "Emi: …" — Emi's friend writes
"Hey Kate!" and "Thank you, Kate", and Emi once "I'm Kate". The label (``Emi``) is in every line of hers and counts
by presence (``index.flat_and_rarer_scores``); the other name is in her friend's lines, so asking it ranks the wrong
speaker's turns first. People address the one they talk to by name: a word the user's turns use to *call* someone
(after a greeting, set off by a comma at the end of a sentence, or opening a message alone: ``_calls``) whose calls
all answer, or are answered by, one speaker is that speaker's other name, and the question is searched as if it
named their label. Nicknames are read the same way ("Mel" for Melanie, "Deb" for Deborah: every such word in the
shared sets' 15 conversations named the other speaker). A word the calls do not tie to one speaker, a word of a
label, and a speaker's own frequent word are left alone; nothing changes for a question that names no one so.
Chinese has no capitals: a Chinese-named speaker's nicknames are the forms Chinese speakers make of a name
(:func:`han_names`), and a kinship word is the one the others call so ("妈，我到了": :func:`kin_label`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from .expand import HAN
from .index import doc_freq, holders
from .tokenize import analyze

if TYPE_CHECKING:
    import numpy as np

    from .index import TurnIndex

SAMPLE = 64  # turns holding a word read at most (the first ones: calls come early in a chat and stay)
MIN_CALLS = 3  # calls needed to take a word for a speaker's other name
SHARE = 0.8  # … of which at least this share must tie it to one speaker
OWN_SHARE = 0.1  # … who says it in one turn, or at most this share of those holding it (seldom their own name)
MAX_SHARE = 0.25  # a word in more of the user's turns is no name used to call someone
_WORD = re.compile(r"\b[A-Z][a-z]{1,19}\b")  # a capitalised word of the question: a candidate name
_GREETING = (
    "hey|hi|hello|yo|thanks|thank you|thx|ty|bye|night|good night|morning|good morning|congrats|congratulations|"
    "sorry|oh|omg|wow|love you|miss you"
)
_LABEL = r"(?:[^\s:][^:\n]{0,39}:\s+)?"  # a message's "Name: " label, when it has one


@lru_cache(maxsize=1024)
def _calls(word: str) -> re.Pattern[str]:
    """How a turn calls someone ``word``: after a greeting ("Hey Kate", "thank you, Kate", "ty kat"), set off by a
    comma before the end of a sentence ("That is true, Kate!"), or as a message's first word set off by punctuation
    ("kat!!! are you alive", "Kate, look") or its only one ("KATE", "kate..."), as people text. A message that opens
    with a name and goes on ("Kate went home") talks about her."""
    w = re.escape(word)
    return re.compile(
        rf"\b(?:{_GREETING})\s*,?\s+{w}\b|,\s*{w}\s*(?:[!?.]|$)|^{_LABEL}\W*{w}\s*(?:[,!?.…]|$)",
        re.IGNORECASE,
    )


def labelled(index: TurnIndex, question: str, *, kin_of: bool = True) -> str:
    """``question`` with each name it gives a speaker other than their label replaced by the label ("Kate" → "Emi");
    the question itself when it gives none. ``kin_of``: a Chinese kinship word a speaker is called by too
    (:func:`kin_label`)."""
    out = question
    for word in dict.fromkeys(_named(question)):
        tokens = analyze(word)
        if len(tokens) != 1:
            continue
        label = alias(index, tokens[0], word)
        if label is not None:
            out = re.sub(rf"\b{re.escape(word)}\b", _as_text(label), out)
    if HAN.search(question):
        for nickname, (label, unwritten) in han_names(index).items():
            if nickname in out and _han_alias(index, nickname, label, unwritten):
                out = out.replace(nickname, label)
        for kin in KIN if kin_of else ():
            asked = [form for form in kin if len(form) > 1 and form in out]
            if asked:
                label = kin_label(index, kin)
                if label is not None:
                    out = re.sub("|".join(asked), _as_text(label), out)  # (longest first, as KIN lists them)
    return out


_HAN_LABEL = re.compile(f"{HAN.pattern}{{2,3}}")  # a Chinese name: a surname and a given name of one or two
# how Chinese speakers call one another (s: the surname, g: the given name's last character): 小/老/阿 + surname,
# taken for a name unwritten (陈静: 小陈 老陈 阿陈); the rest only when someone else writes them, being words too or
# less sure — 阿 + g, g doubled (静静, also "quietly"), g + 子 / 仔 / 哥 / 姐, surname + 哥 / 姐 / 女士 / 先生
_UNWRITTEN_FORMS = ("小{s}", "老{s}", "阿{s}")
_WRITTEN_FORMS = ("阿{g}", "{g}{g}", "{g}子", "{g}仔", "{g}哥", "{g}姐", "{s}哥", "{s}姐", "{s}女士", "{s}先生")
LABELS_READ = 64  # turns whose speaker is read to learn the labels (spread over the user's turns)


def han_names(index: TurnIndex) -> dict[str, tuple[str, bool]]:
    """The nicknames of the user's Chinese-named speakers (their labels read from turns spread over the index), each
    to its label and whether it is taken unwritten (made of the surname); a form two labels share is nobody's. Once
    per index (``index.han_names``)."""
    if index.han_names is None:
        import numpy as np

        n = len(index)
        positions = np.unique(np.linspace(0, n - 1, min(n, LABELS_READ)).astype(np.intp)) if n else np.zeros(0, np.intp)
        labels = {label for _, label in index.speakers(positions) if label and _HAN_LABEL.fullmatch(label)}
        forms: dict[str, tuple[str, bool]] = {}
        shared: set[str] = set()
        for label in sorted(labels):
            for form in (*_UNWRITTEN_FORMS, *_WRITTEN_FORMS):
                nickname = form.format(s=label[0], g=label[-1])
                if nickname in label:
                    continue
                if forms.setdefault(nickname, (label, form in _UNWRITTEN_FORMS))[0] != label:
                    shared.add(nickname)
        index.han_names = {k: v for k, v in forms.items() if k not in shared}
    return index.han_names


def _han_alias(index: TurnIndex, nickname: str, label: str, unwritten: bool) -> bool:
    """Whether ``nickname`` may stand for ``label`` here: not a word the speaker says herself (小时, "an hour", is
    no nickname of 时雨 when she writes it), and, unless ``unwritten``, one someone else writes (天天, "every day",
    is no nickname of 李天 that nobody calls him); read from the first :data:`SAMPLE` turns holding it (each of its
    bigrams), memoised."""
    memo = index.alias_memo
    if nickname not in memo:
        import numpy as np

        held = [holders(index, token) for token in analyze(nickname)]
        positions = functools.reduce(np.intersect1d, held)[:SAMPLE] if held else np.zeros(0, np.intp)
        own = sum(1 for _, said in index.speakers(positions) if said == label)
        used = unwritten or len(positions) > own
        memo[nickname] = label if used and own <= max(1, OWN_SHARE * len(positions)) else None
    return memo[nickname] == label


def _as_text(label: str) -> str:
    """``label`` as ``re.sub``'s replacement, taken as written: a backslash in a speaker's label ("a\\1") is no
    group reference."""
    return label.replace("\\", "\\\\")


# kinship words Chinese speakers call one another by, each group one relation, longest form first: a question names
# a relation by a form of two characters or more (妈妈 — a lone 妈 or 姐 is part of many words: 陈姐), a chat calls it
# by any ("妈，我到了")
KIN = (
    ("妈妈", "老妈", "妈咪", "母亲", "妈"),
    ("爸爸", "老爸", "父亲", "爸"),
    ("儿子", "儿砸"),
    ("女儿", "闺女"),
    ("老公",),
    ("老婆", "媳妇"),
    ("哥哥", "老哥", "哥"),
    ("姐姐", "老姐", "姐"),
    ("弟弟", "老弟"),
    ("妹妹", "老妹"),
    ("爷爷",),
    ("奶奶",),
    ("外公", "姥爷"),
    ("外婆", "姥姥"),
)


def kin_label(index: TurnIndex, kin: tuple[str, ...]) -> str | None:
    """The label of the speaker the user's turns call by a form of the relation ``kin`` (one of :data:`KIN`), None
    when they call no one so: a message opening with the form set off by punctuation or a space, or alone
    ("妈，我到了", "妈 香肠到了", "老妈！", "儿子"), at least :data:`MIN_CALLS` times, :data:`SHARE` of them to one
    speaker (who says the turns next to each), who makes at most :data:`OWN_SHARE` of the calls. Read from the first
    :data:`SAMPLE` turns holding a form, memoised (``index.alias_memo``)."""
    memo = index.alias_memo
    key = "\0kin:" + kin[0]
    if key not in memo:
        memo[key] = _kin_label(index, kin)
    return memo[key]


def _kin_label(index: TurnIndex, kin: tuple[str, ...]) -> str | None:
    import numpy as np

    held = [holders(index, tokens[0]) for form in kin if len(tokens := analyze(form)) == 1]
    positions = functools.reduce(np.union1d, held)[:SAMPLE] if held else np.zeros(0, np.intp)
    if len(positions) < MIN_CALLS:
        return None
    calls = re.compile(rf"^{_LABEL}\W*(?:{'|'.join(kin)})(?:\s*[，,！!。.？?~～…、]|\s|$)")
    at = _calling(index, positions, calls)
    if len(at) < MIN_CALLS:
        return None
    voices = [label for _, label in index.speakers(np.asarray(at, dtype=np.intp))]
    callers = Counter(voices)
    called: Counter[str] = Counter()
    for caller in callers:
        if caller is not None:
            mine = [pos for pos, said in zip(at, voices, strict=True) if said == caller]
            called.update(other for other in _addressees(index, mine, caller) if other is not None)
    label = _most_called(called)
    if label is None or callers[label] > OWN_SHARE * len(at):
        return None
    return label


def _named(question: str) -> Iterator[str]:
    """The question's capitalised words inside a sentence, not opening one: a name there ("for Kat's niece"), where
    an opening "Yes" or "Wow" may be any word (the turns also "call" the interjections a speaker opens messages with:
    "Yup!", "Absolutely.")."""
    for m in _WORD.finditer(question):
        before = question[: m.start()].rstrip(" \t\"'“‘(")
        if before and before[-1] not in ".!?:;\n":
            yield m.group()


def alias(index: TurnIndex, token: str, word: str) -> str | None:
    """:func:`alias_of`, once per index and word (``index.alias_memo``)."""
    memo = index.alias_memo
    if word not in memo:
        memo[word] = alias_of(index, token, word)
    return memo[word]


def alias_of(index: TurnIndex, token: str, word: str) -> str | None:
    """The label of the speaker the user's turns call ``word`` (its token ``token``), None when they call no one so:
    reads who said each of the first :data:`SAMPLE` turns holding it, and who said the turns next to each call."""
    held = doc_freq(index, token)
    if held < MIN_CALLS or held > MAX_SHARE * max(len(index), 1) or index.is_name(token):
        return None
    positions = holders(index, token)[:SAMPLE]
    voices = index.speakers(positions)
    said_by: Counter[str | None] = Counter(label for _, label in voices)
    (caller, says), *_ = said_by.most_common(1)
    if caller is None or says < SHARE * len(positions):  # a word both speakers say alike ("Italian"): read no text
        return None
    at = _calling(index, positions[[label == caller for _, label in voices]], _calls(word))
    if len(at) < MIN_CALLS:
        return None
    label = _most_called(Counter(other for other in _addressees(index, at, caller) if other is not None))
    if label is None or said_by[label] > max(1, OWN_SHARE * len(positions)):
        return None
    return None if token in analyze(label) else label


def _calling(index: TurnIndex, positions: np.ndarray, calls: re.Pattern[str]) -> list[int]:
    """The turns among ``positions`` with a message ``calls`` matches — a call to someone (their text read in one
    query where the index can)."""
    prefetch = getattr(index.turns, "prefetch", None)  # (the maintained index reads their text in one query)
    if prefetch is not None:
        prefetch(positions, 0)
    return [pos for pos in positions.tolist() if any(calls.search(m.content) for m in index.turns[pos].messages)]


def _most_called(called: Counter[str]) -> str | None:
    """The speaker at least :data:`SHARE` of the calls go to, when :data:`MIN_CALLS` or more do; else None."""
    total = sum(called.values())
    if total < MIN_CALLS:
        return None
    (label, times), *_ = called.most_common(1)
    return label if times >= SHARE * total else None


def _addressees(index: TurnIndex, calls: list[int], caller: str) -> list[str | None]:
    """Who each turn at ``calls`` (said by ``caller``) talks to: the one other speaker of the turns next to it in its
    session, None when there is none or there are two (who said those turns is read in one go)."""
    import numpy as np

    near = []
    for pos in calls:
        session = index.session_ix[pos]
        start, end = int(index.session_start[session]), int(index.session_end[session])
        near.append([p for p in (pos - 1, pos + 1) if start <= p < end])
    flat = sorted({p for pair in near for p in pair})
    said = dict(zip(flat, (label for _, label in index.speakers(np.asarray(flat, dtype=np.intp))), strict=True))
    out: list[str | None] = []
    for pair in near:
        others = {said[p] for p in pair} - {None, caller}
        out.append(others.pop() if len(others) == 1 else None)
    return out
