"""Kinds of what a question asks about: "What sports does Kevin like?" also matches football, golf and tennis.

A category question shares no word with the turns that answer it ("I play football professionally", "a fantastic
day for golf"): only the speaker's name, which half the chat has. WordNet lists football and golf among the kinds
(hyponyms) of sport, Miami among the instances of city and lasagna among the dishes, so these words are added to
the query with a small weight (``SearchConfig.kinds_weight``) — query expansion by a thesaurus, still BM25.

Which words are expanded (:func:`category_words`): up to three words right after "what" or "which", skipping
"kind(s) / type(s) / sort(s) of", ending at the first function word ("What **physical activity** did Kevin do?",
"Which **cities** have both …", "What kind of **pasta** …"); a phrase also ends at the end of its sentence. Only
this phrase, because it names the category the answer belongs to; expanding every noun of a question costs
LongMemEval 3.7 points at 2k (BENCHMARKS.md).

What a word expands to (:func:`kind_tokens`): its noun base form (WordNet's irregular plurals, then its suffix rules,
the plural before the word itself), the synsets of its ``senses`` most frequent senses, every synset below them by
hyponym or instance links (down to ``depth`` levels), nearest first, and their lemmas analyzed as the index analyzes
text (the nearest :data:`MAX_CANDIDATES` tokens). :func:`kind_terms` keeps, per word, the nearest ``most`` of those
the user wrote that are not query words already and are found in at most ``max_df`` of the user's turns (a kind
found everywhere says nothing).

The table (``data/kinds/``, loaded once per process on the first question that has a category phrase) is
derived from the noun files of WordNet 3.0 by :func:`build` (``python -m refind_cli.kinds WORDNET_DIR``, WORDNET_DIR
holding data.noun, index.noun and noun.exc, e.g. Debian's wordnet-base /usr/share/wordnet). It holds each synset's
lemmas analyzed too, by the analyzer of its build: a process reads a word's kinds as tokens instead of stemming
thousands of lemmas (~50 ms for "events" the first time). After an analyzer change (``tokenize.ANALYZER_VERSION``)
the lemmas are analyzed when asked, as before, until the table is built again — or, when the change shows in no
lemma's tokens, stamped with the new version (``python -m refind_cli.kinds --restamp``, which checks every synset).
WordNet 3.0 Copyright 2006 by Princeton University; its license is in ``data/WORDNET-LICENSE``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from . import tokenize
from .tokenize import analyze

if TYPE_CHECKING:
    import numpy as np

TABLE = Path(__file__).resolve().parent / "data" / "kinds"  # one .npy file per array of :class:`Table`
MAX_SENSES = 3  # senses of a word the table keeps (most frequent first)
MIN_DF_LIMIT = 3  # a kind in up to this many turns is kept however few turns the user has (2% of 150)
WH = frozenset({"what", "which"})
KIND_OF = frozenset({"kind", "kinds", "type", "types", "sort", "sorts", "of"})
FUNCTION_WORDS = frozenset(  # end a category phrase ("what" / "which" + up to three words)
    "what which who whom whose when where why how does did do done is are was were be been being the a an of to in "  # noqa: SIM905
    "on for with from by at as and or but not no yes it its this that these those there here he she they them his "
    "her their our your my me we you i thing things some any many much one ones have has had can could will would "
    "shall should may might must".split()
)
MAX_WORDS = 16  # category words a query expands at most (a question has a few; 100,000 characters of "what x" not)
MAX_CANDIDATES = 4096  # a word's nearest kinds looked for in the user's vocabulary (0.3% of words have more)
MAX_KINDS = 64  # kinds a category word adds at most: the nearest that the user wrote (BENCHMARKS.md, fifth pass)
_SUFFIXES = (
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
    ("s", ""),
)
_WORD = re.compile(
    r"[^\W\d_]+(?:'[^\W\d_]+)*|[?.!;\n]"
)  # words (letters, any script), and the marks that end a sentence
_ENDS = frozenset("?.!;\n")


def category_words(text: str) -> list[str]:
    """The words of ``text`` that may name the category of its answer: up to three after each "what" / "which"
    (normalised and case-folded as the analyzer does; "kind(s) / type(s) / sort(s) of" skipped), ending at the first
    function word or at the end of the sentence; at most :data:`MAX_WORDS`. Words of any script are read whole
    ("cafés" is one word, not "caf" + "s")."""
    words = _WORD.findall(tokenize.normalise(text.replace("\u2019", "'")))
    out: dict[str, None] = {}  # (in order, each once)
    for i, w in enumerate(words):
        if len(out) >= MAX_WORDS:
            break
        if w not in WH:
            continue
        taken = 0
        for v in words[i + 1 : i + 6]:  # "kind(s) of" skipped, then up to three words: never more than five
            if v in KIND_OF and not taken:
                continue
            if v in FUNCTION_WORDS or v in _ENDS or taken == 3:
                break
            out[v] = None
            taken += 1
    return list(out)[:MAX_WORDS]


@dataclass(frozen=True)
class Table:
    """WordNet's noun hierarchy, as arrays: synsets are numbered 0…n-1."""

    heads: np.ndarray  # bytes, sorted: one-word noun lemmas (lower case) whose first senses have kinds
    head_ptr: np.ndarray  # int32 [len(heads) + 1]: each head's senses are senses[head_ptr[i]:head_ptr[i + 1]]
    senses: np.ndarray  # int32 synset numbers, most frequent sense first
    exc_from: np.ndarray  # bytes, sorted: irregular plurals (WordNet's noun.exc) …
    exc_to: np.ndarray  # … and their base forms
    hypo_ptr: np.ndarray  # int32 [n + 1]: synset i's kinds are hypo[hypo_ptr[i]:hypo_ptr[i + 1]]
    hypo: np.ndarray  # int32 synset numbers (hyponyms and instances)
    lemma_ptr: np.ndarray  # int64 [n + 1]: synset i's lemmas are lemma_text[lemma_ptr[i]:lemma_ptr[i + 1]]
    lemma_text: bytes  # UTF-8; a synset's lemmas (lower case, "_" as a space), joined by "\t"
    token_ptr: np.ndarray  # int64 [n + 1]: synset i's tokens are token_text[token_ptr[i]:token_ptr[i + 1]]
    token_text: bytes  # UTF-8; a synset's lemmas as the analyzer of version ``analyzer`` gave them (see _tokens)
    analyzer: np.ndarray  # int32 [1]: that version (another analyzer: the lemmas are analyzed when asked)

    def _find(self, keys: np.ndarray, word: str) -> int | None:
        import numpy as np

        key = word.encode()
        i = int(np.searchsorted(keys, key))
        return i if i < len(keys) and keys[i] == key else None

    def base(self, word: str) -> str | None:
        """The head form of a noun (``cities`` → ``city``, ``children`` → ``child``, ``colors`` → ``color`` though
        "colors" is a head too: a question names a category in the plural); None when not a head."""
        i = self._find(self.exc_from, word)
        if i is not None and self._find(self.heads, self.exc_to[i].decode()) is not None:
            return str(self.exc_to[i].decode())
        for suffix, repl in _SUFFIXES:  # WordNet's own rules for nouns (morphy)
            if word.endswith(suffix) and self._find(self.heads, word[: -len(suffix)] + repl) is not None:
                return word[: -len(suffix)] + repl
        return word if self._find(self.heads, word) is not None else None

    def below(self, word: str, *, senses: int, depth: int | None) -> np.ndarray:
        """The synsets below the first ``senses`` senses of ``word`` (a head form) by hyponym or instance links, down
        to ``depth`` levels, nearest first (breadth first, each once)."""
        import numpy as np

        i = self._find(self.heads, word)
        if i is None:
            return np.zeros(0, dtype=np.int64)
        start = int(self.head_ptr[i])
        frontier = np.asarray(self.senses[start : min(int(self.head_ptr[i + 1]), start + senses)], dtype=np.int64)
        seen = np.zeros(len(self.hypo_ptr) - 1, dtype=bool)
        seen[frontier] = True
        ptr = np.asarray(self.hypo_ptr, dtype=np.int64)
        found: list[np.ndarray] = []
        level = 0
        while frontier.size and (depth is None or level < depth):
            lo, hi = ptr[frontier], ptr[frontier + 1]
            sizes = hi - lo
            flat = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))  # each child's slot
            below = np.asarray(self.hypo[flat], dtype=np.int64)
            below = below[~seen[below]]
            below = below[np.sort(np.unique(below, return_index=True)[1])]  # first occurrence, in order
            seen[below] = True
            found.append(below)
            frontier = below
            level += 1
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def kinds(self, word: str, *, senses: int, depth: int | None) -> list[str]:
        """The lemmas of every synset below the first ``senses`` senses of ``word`` (a head form), nearest first."""
        return list(_texts(self.lemma_ptr, self.lemma_text, self.below(word, senses=senses, depth=depth)))

    def kind_tokens(self, word: str, *, senses: int, depth: int | None, most: int) -> list[str]:
        """The analyzed tokens of :meth:`kinds` (each once, nearest first, at most ``most``): read from the table
        when the analyzer that made them is this one, else analyzed now (the stemming costs ~50 ms for a broad word
        such as "events": the table spares a process that)."""
        synsets = self.below(word, senses=senses, depth=depth)
        if int(self.analyzer[0]) != tokenize.ANALYZER_VERSION:
            tokens: Iterable[str] = _tokens(list(_texts(self.lemma_ptr, self.lemma_text, synsets)))
        else:
            tokens = _texts(self.token_ptr, self.token_text, synsets)
        out: dict[str, None] = {}
        for token in tokens:
            out[token] = None
            if len(out) == most:
                break
        return list(out)


def _texts(ptr: np.ndarray, text: bytes, synsets: np.ndarray) -> Iterator[str]:
    """The "\t"-joined entries of these synsets in ``text``, in order (lazily: a reader may stop early)."""
    import numpy as np

    at = np.asarray(ptr)
    for lo, hi in zip(at[synsets].tolist(), at[synsets + 1].tolist(), strict=True):
        if hi > lo:
            yield from text[lo:hi].decode().split("\t")


def _tokens(lemmas: Sequence[str]) -> list[str]:
    """Lemmas as the index analyzes text, without short tokens and numbers (what a kind may add to a query)."""
    return [token for token in analyze("\n".join(lemmas)) if len(token) > 2 and not token.isdigit()]


@lru_cache(maxsize=1)
def table() -> Table:
    """The shipped table (read once per process)."""
    return read(TABLE)


def read(path: Path) -> Table:
    """A table written by :func:`write` (.npy files, memory-mapped: ~6 ms in a new process, where one .npz took ~20 ms,
    most of it importing zipfile and inflating)."""
    import numpy as np

    arrays = {f.name: np.load(path / f"{f.name}.npy", mmap_mode="r", allow_pickle=False) for f in fields(Table)}
    lemmas, tokens = arrays.pop("lemma_text"), arrays.pop("token_text")
    return Table(lemma_text=lemmas.tobytes(), token_text=tokens.tobytes(), **arrays)


def write(arrays: Mapping[str, np.ndarray], path: Path) -> None:
    import numpy as np

    path.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        np.save(path / f"{name}.npy", array, allow_pickle=False)


@lru_cache(maxsize=256)
def kind_tokens(word: str, senses: int, depth: int | None) -> Mapping[str, int]:
    """The analyzed tokens of the kinds of ``word`` (any inflection of a noun head; none for other words), each with
    its place, nearest kind first: at most :data:`MAX_CANDIDATES`, so that a process keeps at most 256 × 4,096 of
    them however broad the words it is asked ("entity" has 57,877)."""
    t = table()
    head = t.base(word)
    if head is None:
        return {}
    found = t.kind_tokens(head, senses=senses, depth=depth, most=MAX_CANDIDATES)
    return {token: place for place, token in enumerate(found)}


def category_tokens(text: str, senses: int, depth: int | None) -> set[str]:
    """The tokens of ``text``'s category words that have kinds: the words the kinds stage reads, which a search
    leaves out of fuzzy matching ("sports" is no misspelling of "spots": ``SearchConfig.fuzzy_categories``)."""
    return {t for word in category_words(text) if kind_tokens(word, senses, depth) for t in tokenize.analyze(word)}


def kind_terms(
    vocab: Mapping[str, int],
    present: Callable[[Mapping[str, int], Hashable], Collection[str]],
    turns: int,
    text: str,
    query_tokens: Sequence[str],
    *,
    senses: int = 1,
    depth: int | None = None,
    max_df: float = 0.02,
    most: int = MAX_KINDS,
) -> list[str]:
    """The tokens that the kinds of ``text``'s category words add to the query (sorted): for each word, its
    nearest ``most`` kinds that the user wrote — ``present(kinds, key)`` tells which the user's turns may hold (one set
    intersection however many kinds; ``key`` names the kinds, so that it may keep what it found), ``vocab`` how many
    of the ``turns`` hold each — each in at most ``max_df`` of the turns (or :data:`MIN_DF_LIMIT`, for a user with few
    turns) and not a query word already."""
    asked = set(query_tokens)
    limit = max(max_df * turns, MIN_DF_LIMIT)
    out: set[str] = set()
    for word in category_words(text):
        places = kind_tokens(word, senses, depth)
        kept = 0
        for token in sorted(present(places, ("kinds", word, senses, depth)) if places else (), key=places.__getitem__):
            if kept == most:
                break
            n = vocab.get(token)
            if n is None or n > limit or token in asked or token in out:
                continue
            out.add(token)
            kept += 1
    return sorted(out)


# ---- building the table from WordNet's files ----------------------------------------------------------------------


def build(wordnet: Path) -> dict[str, np.ndarray]:
    """The table's arrays from WordNet's data.noun, index.noun and noun.exc in the directory ``wordnet``."""
    import numpy as np

    number: dict[str, int] = {}
    lemmas: list[list[str]] = []
    children: list[list[str]] = []
    for line in _lines(wordnet / "data.noun"):
        head = line.split(" | ", 1)[0].split()
        offset, count = head[0], int(head[3], 16)
        number[offset] = len(lemmas)
        lemmas.append(list(dict.fromkeys(_lemma(head[4 + 2 * k]) for k in range(count))))
        p = 4 + 2 * count
        links = int(head[p])
        kids = []
        for k in range(links):
            symbol, target, pos = head[p + 1 + 4 * k : p + 4 + 4 * k]
            if symbol in ("~", "~i") and pos == "n":
                kids.append(target)
        children.append(kids)
    hypo_ptr = np.zeros(len(lemmas) + 1, dtype=np.int32)
    hypo: list[int] = []
    for i, kids in enumerate(children):
        hypo.extend(number[k] for k in kids)
        hypo_ptr[i + 1] = len(hypo)
    heads: list[tuple[bytes, list[int]]] = []
    for line in _lines(wordnet / "index.noun"):
        fields = line.split()
        word = fields[0]
        if "_" in word or not word.isascii():
            continue
        pointers = int(fields[3])
        synsets = [number[o] for o in fields[4 + pointers + 2 :]][:MAX_SENSES]
        if any(hypo_ptr[s + 1] > hypo_ptr[s] for s in synsets):
            heads.append((word.lower().encode(), synsets))
    heads.sort()
    head_ptr = np.zeros(len(heads) + 1, dtype=np.int32)
    senses: list[int] = []
    for i, (_, synsets) in enumerate(heads):
        senses.extend(synsets)
        head_ptr[i + 1] = len(senses)
    exceptions = sorted(
        (f[0].encode(), f[1].encode()) for f in (line.split() for line in _lines(wordnet / "noun.exc")) if len(f) >= 2
    )
    encoded = [("\t".join(names)).encode() for names in lemmas]
    lemma_ptr = np.zeros(len(encoded) + 1, dtype=np.int64)
    lemma_ptr[1:] = np.cumsum([len(e) for e in encoded])
    analyzed = [("\t".join(_tokens(names))).encode() for names in lemmas]
    token_ptr = np.zeros(len(analyzed) + 1, dtype=np.int64)
    token_ptr[1:] = np.cumsum([len(e) for e in analyzed])
    return {
        "heads": np.array([h for h, _ in heads], dtype=bytes),
        "head_ptr": head_ptr,
        "senses": np.array(senses, dtype=np.int32),
        "exc_from": np.array([a for a, _ in exceptions], dtype=bytes),
        "exc_to": np.array([b for _, b in exceptions], dtype=bytes),
        "hypo_ptr": hypo_ptr,
        "hypo": np.array(hypo, dtype=np.int32),
        "lemma_ptr": lemma_ptr,
        "lemma_text": np.frombuffer(b"".join(encoded), dtype=np.uint8),
        "token_ptr": token_ptr,
        "token_text": np.frombuffer(b"".join(analyzed), dtype=np.uint8),
        "analyzer": np.array([tokenize.ANALYZER_VERSION], dtype=np.int32),
    }


def _lines(path: Path) -> Iterable[str]:
    """A WordNet file's records (its license header lines start with two spaces)."""
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line.strip() and not line.startswith("  "):
                yield line.rstrip("\n")


def _lemma(raw: str) -> str:
    """A data.noun lemma as text: lower case, "_" as a space, without an adjective marker such as "(p)"."""
    return re.sub(r"\([a-z]+\)$", "", raw).replace("_", " ").lower()


def stale_synsets(t: Table) -> int:
    """How many synsets' tokens in ``t`` differ from what this analyzer makes of their lemmas (0: the table's tokens
    are this analyzer's, whatever version it was stamped with)."""
    import numpy as np

    lemma_ptr, token_ptr = np.asarray(t.lemma_ptr).tolist(), np.asarray(t.token_ptr).tolist()
    stale = 0
    for i in range(len(lemma_ptr) - 1):
        lemmas = t.lemma_text[lemma_ptr[i] : lemma_ptr[i + 1]].decode()
        tokens = "\t".join(_tokens(lemmas.split("\t"))) if lemmas else ""
        stale += tokens.encode() != t.token_text[token_ptr[i] : token_ptr[i + 1]]
    return stale


def restamp(path: Path) -> int:
    """Stamp the table at ``path`` with this analyzer's version when its tokens are this analyzer's (an analyzer change
    that no lemma shows: a new step for numbers or another script), so it is used without WordNet at hand; returns
    how many synsets differ (then nothing is written, and the table must be built again)."""
    import numpy as np

    stale = stale_synsets(read(path))
    if not stale:
        np.save(path / "analyzer.npy", np.array([tokenize.ANALYZER_VERSION], dtype=np.int32), allow_pickle=False)
    return stale


def main(argv: Sequence[str]) -> int:
    """``python -m refind_cli.kinds WORDNET_DIR [OUT_DIR]``: write the table (default: the shipped one);
    ``python -m refind_cli.kinds --restamp [DIR]``: see :func:`restamp`."""
    if argv and argv[0] == "--restamp":
        at = Path(argv[1]) if len(argv) > 1 else TABLE
        stale = restamp(at)
        print(
            f"{at}: {stale:,} synsets' tokens differ: build it again"
            if stale
            else f"{at}: analyzer {tokenize.ANALYZER_VERSION}"
        )
        return 1 if stale else 0
    out = Path(argv[1]) if len(argv) > 1 else TABLE
    write(build(Path(argv[0])), out)
    print(f"{out}: {sum(f.stat().st_size for f in out.iterdir()):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
