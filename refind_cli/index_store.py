"""The maintained BM25 index on disk: per-user immutable segments of term frequencies, written with the messages.

A segment holds what never changes for a message once it is stored — its tokens (as term frequencies over the
segment's own vocabulary), its length in tokens, and (since m005) its session, said-at, recorded-at and index in
its Add (:class:`DocMeta`, so turns are laid out without reading the messages) — for a set of one user's messages
(by ``seq``). What does change (document frequencies, the number of documents, the average length: they depend on
which messages a search may see) is computed at query time from these (:mod:`refind_cli.index_cache`), so a new
message never invalidates the index.

Since m006 a segment is stored in two places: its *head* (documents, lengths, vocabulary, ``indptr``, DocMeta) is
its row of ``index_segments``, and its postings are rows of ``index_parts``, one per run of terms whose postings
start in the same block of :data:`PART_POSTINGS` — so a search reads the heads and its query terms' parts
(:class:`LazySegment`), not every posting of the user, as an inverted index reads a term's postings list. A trigger
deletes a segment's parts with it.

* **Add**: ``Store.add_prepared`` writes, inside its transaction, one new segment per user per batch (a replay batch,
  or a single Add; :func:`write_segments`, :func:`mark_indexed`), then :func:`_merge` folds the newest segments together like a binary counter,
  so a user has about log2(messages) segments and each message is rewritten about log2(messages) times in all;
* **forget / expire** call :func:`remove` inside their transaction: every segment holding a removed message is
  rewritten without it (its vocabulary too), so no token of removed text survives (``secure_delete`` zeroes the
  freed pages, the lifecycle's checkpoint cuts the WAL);
* **existing databases**: the migration marks the index as pending; :func:`catch_up` indexes the messages once, in
  chunks (one transaction each, resumable), reporting progress through a callback. ``indexed_through`` in
  ``index_meta`` is the watermark: every message with a lower or equal seq is indexed, no other is. An Add indexes
  its messages only when nothing is pending (otherwise the catch-up will);
* :func:`verify` re-tokenizes every message and compares it with the segments (for ``refind inspect --check``);
  :func:`stats` sizes the index for ``refind inspect``.

Segment ids come from AUTOINCREMENT, so an id is never reused and a process may cache a decoded segment by id for as
long as the database is the same (``index_meta.db_id``, a random id written by the migration).

This module sits below the store: it works on a ``sqlite3.Connection`` and imports only the tokenizer.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from . import tokenize
from .errors import Conflict, CorruptDatabase

if TYPE_CHECKING:
    import numpy as np

DATE_WORDS = "%B %Y"  # how a message's said-at is indexed as words: "June 2023"
CATCH_UP_CHUNK = 20_000  # messages per catch-up transaction
CATCH_UP_CHUNK_BY_DEADLINE = 2_000  # the same inside an agent search's open: a chunk past its deadline is short
MAX_SEGMENTS = 32  # more than this many segments for a user → merge them all
Progress = Callable[[int, int], None]  # (messages indexed so far, messages to index)


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values, as ``np.unique(values)``, but without the masked-array check through which
    numpy 2's ``np.unique`` imports ``numpy.ma`` (~20 ms of a cold process's search)."""
    import numpy as np

    a = np.sort(np.asarray(values).ravel())
    if len(a) < 2:
        return a
    return a[np.concatenate(([True], a[1:] != a[:-1]))]


def message_tokens(content: str, said_at: int | None) -> list[str]:
    """A message's tokens as the default search configuration indexes a one-message turn: its text, then its said-at
    month and year as words (exactly ``search_config.turn_tokenizer``'s output for a "message" turn)."""
    return tokenize.analyze(index_text(content, said_at))


@lru_cache(maxsize=4096)
def date_words(day: int) -> str:
    """The month and year, as words, of every instant of one UTC day (days since the epoch), remembered."""
    return datetime.fromtimestamp(day * 86_400, tz=UTC).strftime(DATE_WORDS)


# ---- the segment format -------------------------------------------------------------------------------------------


NO_DATE = -(2**63)  # DocMeta.said of a message without a said-at
DocInfo = tuple[str, "int | None", int, int]  # a message's session id, said-at, recorded-at and index in its Add


@dataclass(frozen=True)
class DocMeta:
    """What ranking needs of each document of a segment besides its terms, in the segment's document order — so a
    process lays out a user's turns from the segments alone, without reading a row of ``messages``."""

    sessions: list[str]  # the session ids of the segment's documents (no other)
    session: np.ndarray  # int32: each document's session, as an index into sessions
    said: np.ndarray  # int64 said-at (Unix ms; NO_DATE when unknown)
    recorded: np.ndarray  # int64 recorded-at
    idx: np.ndarray  # int32 index inside the Add request

    @classmethod
    def of(cls, info: Sequence[DocInfo]) -> DocMeta:
        import numpy as np

        codes: dict[str, int] = {}
        session = [codes.setdefault(i[0], len(codes)) for i in info]
        return cls(
            list(codes),
            np.asarray(session, dtype=np.int32),
            np.asarray([NO_DATE if i[1] is None else i[1] for i in info], dtype=np.int64),
            np.asarray([i[2] for i in info], dtype=np.int64),
            np.asarray([i[3] for i in info], dtype=np.int32),
        )

    @classmethod
    def concat(cls, metas: Sequence[DocMeta]) -> DocMeta:
        import numpy as np

        codes: dict[str, int] = {}
        session = []
        for m in metas:
            remap = np.asarray([codes.setdefault(name, len(codes)) for name in m.sessions], dtype=np.int32)
            session.append(remap[m.session] if len(m.session) else m.session)
        return cls(
            list(codes),
            np.concatenate(session).astype(np.int32),
            np.concatenate([m.said for m in metas]),
            np.concatenate([m.recorded for m in metas]),
            np.concatenate([m.idx for m in metas]),
        )

    def take(self, which: np.ndarray) -> DocMeta:
        """The documents ``which`` (a mask or positions); sessions no document keeps are dropped (their ids too)."""
        import numpy as np

        session = self.session[which]
        used = distinct(session)
        if len(used) < len(self.sessions):
            new_code = np.full(len(self.sessions), -1, dtype=np.int32)
            new_code[used] = np.arange(len(used), dtype=np.int32)
            return DocMeta(
                [self.sessions[i] for i in used.tolist()],
                new_code[session],
                self.said[which],
                self.recorded[which],
                self.idx[which],
            )
        return DocMeta(self.sessions, session, self.said[which], self.recorded[which], self.idx[which])

    @property
    def nbytes(self) -> int:
        arrays = self.session.nbytes + self.said.nbytes + self.recorded.nbytes + self.idx.nbytes
        return int(arrays + sum(map(len, self.sessions)) + 60 * len(self.sessions))


@dataclass(frozen=True, eq=False)
class _Head:
    """What every segment holds in memory: its documents, their lengths, its vocabulary and where each term's
    postings lie (``indptr``)."""

    seqs: np.ndarray  # int64, ascending: the messages in this segment
    lengths: np.ndarray  # int32: each message's length in tokens
    terms: list[str]  # the segment's vocabulary; term i's postings are positions indptr[i]:indptr[i+1]
    indptr: np.ndarray  # int64, len(terms) + 1

    @property
    def vocab(self) -> dict[str, int]:
        v = self.__dict__.get("_vocab")
        if v is None:
            v = {t: i for i, t in enumerate(self.terms)}
            object.__setattr__(self, "_vocab", v)
        return v

    def _head_nbytes(self) -> int:
        arrays = self.seqs.nbytes + self.lengths.nbytes + self.indptr.nbytes + 8 * int(self.indptr[-1])
        return arrays + sum(map(len, self.terms)) + 120 * len(self.terms)  # a str and its dict entry: ~100 bytes

    def _nbytes_with(self, meta: DocMeta | None) -> int:
        """The head's size and ``meta``'s, summed once (every Add's new state sums its segments', vocabularies
        and all)."""
        size = self.__dict__.get("_nbytes")
        if size is None:
            size = self._head_nbytes() + (meta.nbytes if meta is not None else 0)
            object.__setattr__(self, "_nbytes", size)
        return int(size)


@dataclass(frozen=True, eq=False)
class Segment(_Head):
    """One immutable segment, decoded whole: documents (messages) by ``seq`` and a CSC matrix of term frequencies
    (and, since migration m005, each document's :class:`DocMeta`)."""

    docs: np.ndarray  # int32: local document numbers (positions in seqs)
    tf: np.ndarray  # int32 term frequencies
    meta: DocMeta | None = None  # None: a segment written before m005 (rewritten by its catch-up)

    @property
    def nbytes(self) -> int:
        return self._nbytes_with(self.meta)

    def postings(self, term: str, read: Reader | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        i = self.vocab.get(term)
        if i is None:
            return None
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.docs[a:b], self.tf[a:b]

    def whole(self, read: Reader | None = None) -> Segment:
        return self

    def doc_terms(self) -> list[Counter[str]]:
        """Each document's term counts (for verification)."""
        import numpy as np

        out: list[Counter[str]] = [Counter() for _ in range(len(self.seqs))]
        term_of = np.repeat(np.arange(len(self.terms)), np.diff(self.indptr))
        for t, d, f in zip(term_of.tolist(), self.docs.tolist(), self.tf.tolist(), strict=True):
            out[d][self.terms[t]] = f
        return out


Reader = Callable[[int, Sequence[int]], dict[int, bytes]]  # (segment id, part numbers) → each part's bytes


class IndexChanged(Conflict):
    """What a search read of a user changed under it — a merge, forget or expiry in another process replaced a
    segment or deleted a message since — so what it holds no longer agrees with the database: search again
    (``search.search`` does, once)."""


class SegmentGone(IndexChanged):
    """A part of a segment held in memory is no longer in the database."""

    def __init__(self, seg_id: int) -> None:
        super().__init__(f"the index changed while segment {seg_id} was read: search again")


class PartMismatch(CorruptDatabase):
    """A part's size disagrees with its segment's head (a damaged database): never read as postings."""

    def __init__(self, seg_id: int, part: int) -> None:
        super().__init__(
            f"part {part} of index segment {seg_id} disagrees with the segment's head: `refind inspect --check` "
            "names what else is damaged"
        )
        self.seg_id = seg_id


@dataclass(frozen=True, eq=False)
class LazySegment(_Head):
    """A segment of the current format (m006) as a search reads it: the head (documents, lengths, vocabulary,
    :class:`DocMeta`) from ``index_segments``, and the postings from ``index_parts`` part by part, when a query
    term needs them — so a search in a new process reads the postings of its query's terms, not the whole index.
    Parts read are kept (a segment never changes); ``read`` reads them through the caller's connection."""

    meta: DocMeta | None
    seg_id: int
    part: int  # postings per part: term i's postings are in part indptr[i] // part

    def __post_init__(self) -> None:  # made here, not on first use: threads reading parts share the one dict
        object.__setattr__(self, "_parts", {})
        object.__setattr__(self, "full", None)

    _parts: dict[int, tuple[int, np.ndarray, np.ndarray]] = field(init=False, repr=False)  # part → (its first
    # posting, docs, tf), for the parts read so far
    full: tuple[np.ndarray, np.ndarray] | None = field(init=False, repr=False)  # (docs, tf) once every part is read

    @property
    def nbytes(self) -> int:  # as if every part were read: a state's size does not grow as its parts are read
        return self._nbytes_with(self.meta)

    def _term_part(self) -> np.ndarray:
        tp = self.__dict__.get("_tp")
        if tp is None:
            tp = self.indptr[:-1] // self.part
            object.__setattr__(self, "_tp", tp)
        return tp

    def part_numbers(self, terms: Iterable[str] | None = None) -> list[int]:
        """The parts holding these terms' postings and not read yet (every part: None)."""
        if self.full is not None:
            return []
        tp = self._term_part()
        if terms is None:
            return [int(k) for k in distinct(tp).tolist()]
        vocab = self.vocab
        return sorted({int(tp[i]) for i in (vocab.get(t) for t in terms) if i is not None})

    def need(self, parts: Iterable[int], read: Reader | None) -> None:
        """Read the parts not held yet, in one query."""
        import numpy as np

        held = self._parts
        want = [k for k in parts if k not in held]
        if not want:
            return
        if read is None:
            raise SegmentGone(self.seg_id)
        tp = self._term_part()
        for k, blob in read(self.seg_id, want).items():
            first, after = int(tp.searchsorted(k, side="left")), int(tp.searchsorted(k, side="right"))
            start, end = int(self.indptr[first]), int(self.indptr[after])  # the part's postings, by the head
            if first == after or len(blob) != 8 * (end - start):
                raise PartMismatch(self.seg_id, k)
            n = end - start
            held[k] = (start, np.frombuffer(blob, dtype="<i4", count=n), np.frombuffer(blob, dtype="<i4", offset=4 * n))

    def need_all(self, read: Reader | None) -> None:
        """Read every part not read yet, and hold the postings as two arrays (the parts become views of them)."""
        import numpy as np

        if self.full is not None:
            return
        parts = self.part_numbers()
        self.need(parts, read)
        held = self._parts
        empty = np.zeros(0, dtype=np.int32)
        docs = np.concatenate([held[k][1] for k in parts]) if parts else empty
        tf = np.concatenate([held[k][2] for k in parts]) if parts else empty
        for k in parts:  # (a thread reading a part meanwhile keeps the tuple it took)
            start, d, _ = held[k]
            held[k] = (start, docs[start : start + len(d)], tf[start : start + len(d)])
        object.__setattr__(self, "full", (docs, tf))

    def postings(self, term: str, read: Reader | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        i = self.vocab.get(term)
        if i is None:
            return None
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        full = self.full
        if full is not None:
            return full[0][a:b], full[1][a:b]
        k = int(self._term_part()[i])
        got = self._parts.get(k)
        if got is None:
            self.need([k], read)
            got = self._parts[k]
        start, docs, tf = got
        return docs[a - start : b - start], tf[a - start : b - start]

    def whole(self, read: Reader | None = None) -> Segment:
        """This segment with every part read: a :class:`Segment` (for merges, removals and verification)."""
        self.need_all(read)
        assert self.full is not None
        return Segment(self.seqs, self.lengths, self.terms, self.indptr, *self.full, self.meta)


AnySegment = Segment | LazySegment


def build_segment(docs: Sequence[tuple[int, list[str]]]) -> Segment:
    """A segment of (seq, tokens) documents (any order: sorted by seq here), without the messages' DocMeta."""
    import numpy as np

    order = sorted(range(len(docs)), key=lambda i: docs[i][0])
    docs = [docs[i] for i in order]
    every = [t for _, tokens in docs for t in tokens]
    vocab: dict[str, int] = dict.fromkeys(every, 0)  # the terms in order of first occurrence, then numbered
    for i, term in enumerate(vocab):
        vocab[term] = i
    ids = list(map(vocab.__getitem__, every))
    lengths = np.fromiter((len(d[1]) for d in docs), dtype=np.int64, count=len(docs))
    n = max(len(docs), 1)
    # one key per (term, doc) occurrence; unique keys come out sorted by term, then doc: the CSC order
    keys = np.asarray(ids, dtype=np.int64) * n + np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
    uniq, tf = np.unique(keys, return_counts=True)
    term_ids = uniq // n
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(term_ids, minlength=len(vocab)), out=indptr[1:])
    return Segment(
        np.fromiter((d[0] for d in docs), dtype=np.int64, count=len(docs)),
        lengths.astype(np.int32),
        list(vocab),
        indptr,
        (uniq % n).astype(np.int32),
        tf.astype(np.int32),
        None,
    )


class _Numbering(dict[bytes, int]):
    """ASCII word → its term's number (terms numbered in order of first occurrence, as words are looked up), -1 for
    a stop-word, -2 for the separator after each text; a word is stemmed and numbered on its first lookup."""

    def __init__(self) -> None:
        super().__init__()
        self.terms: dict[str, int] = {}

    def __missing__(self, word: bytes) -> int:
        term = tokenize.ascii_stems[word]
        terms = self.terms
        number = self[word] = -2 if term == tokenize.DOC_END else terms.setdefault(term, len(terms)) if term else -1
        return number


def segment_of_texts(seqs: Sequence[int], texts: Sequence[str], info: Sequence[DocInfo] | None = None) -> Segment:
    """``build_segment`` of documents given as texts (each already holding its date words, as :func:`index_text`
    writes them), ``seqs`` ascending: the same segment, byte for byte. The texts are analysed together
    (:func:`tokenize.analyze_each`) and their tokens numbered in one pass, without a token list per message.
    ``info``: each document's, in the same order as ``seqs``."""
    import numpy as np

    ascending = isinstance(seqs, range) and seqs.step > 0
    if not ascending and any(b <= a for a, b in zip(seqs, seqs[1:], strict=False)):  # sort (build_segment's order)
        order = sorted(range(len(seqs)), key=seqs.__getitem__)
        seqs, texts = [seqs[i] for i in order], [texts[i] for i in order]
        info = None if info is None else [info[i] for i in order]
    words = tokenize.ascii_words(texts)
    if words is not None:  # every text ASCII (the usual case): each distinct word is stemmed and numbered once
        numbering = _Numbering()
        ids = np.fromiter(map(numbering.__getitem__, words), dtype=np.int64, count=len(words))
        terms = list(numbering.terms)
    else:
        flat = tokenize.analyze_each(texts)
        number: dict[str, int] = dict.fromkeys(flat, 0)  # the terms in order of first occurrence, then numbered
        number.pop("", None)  # a stop-word
        number.pop(tokenize.DOC_END, None)
        for i, term in enumerate(number):
            number[term] = i
        terms = list(number)
        number[""], number[tokenize.DOC_END] = -1, -2
        ids = np.fromiter(map(number.__getitem__, flat), dtype=np.int64, count=len(flat))
    end = ids == -2
    doc = np.cumsum(end) - end  # each token's document: how many documents ended before it
    keep = ids >= 0
    ids, doc = ids[keep], doc[keep]
    n = max(len(seqs), 1)
    lengths = np.bincount(doc, minlength=len(seqs))
    # one key per (term, doc) occurrence; unique keys come out sorted by term, then doc: the CSC order
    uniq, tf = np.unique(ids * n + doc, return_counts=True)
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(uniq // n, minlength=len(terms)), out=indptr[1:])
    return Segment(
        np.asarray(seqs, dtype=np.int64),
        lengths.astype(np.int32),
        terms,
        indptr,
        (uniq % n).astype(np.int32),
        tf.astype(np.int32),
        None if info is None else DocMeta.of(info),
    )


def index_text(content: str, said_at: int | None) -> str:
    """The text whose tokens a message is indexed by (what :func:`message_tokens` analyses)."""
    return content if said_at is None else content + "\n" + date_words(said_at // 86_400_000)


def _csc(
    seqs: np.ndarray,
    lengths: np.ndarray,
    terms: list[str],
    term_ids: np.ndarray,
    docs: np.ndarray,
    tf: np.ndarray,
    meta: DocMeta | None,
) -> Segment:
    """A segment from unordered (term id, doc, tf) triples; terms without postings are dropped."""
    import numpy as np

    used = np.zeros(len(terms), dtype=bool)
    used[term_ids] = True
    if not used.all():  # renumber the terms that still have postings
        new_id = np.cumsum(used) - 1
        term_ids = new_id[term_ids]
        terms = [t for t, u in zip(terms, used.tolist(), strict=True) if u]
    order = np.lexsort((docs, term_ids))
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(term_ids, minlength=len(terms)), out=indptr[1:])
    return Segment(seqs, lengths, terms, indptr, docs[order].astype(np.int32), tf[order].astype(np.int32), meta)


def encode(seg: Segment) -> bytes:
    """The whole segment in one blob (format 1: what a small segment's row holds, and what every row held before
    m006)."""
    return _encode(seg, postings=True)


def encode_head(seg: Segment) -> bytes:
    """The segment without its postings (format 2, the row of a segment stored by part): documents, lengths,
    vocabulary, indptr and DocMeta. Its postings go to ``index_parts`` (:func:`encode_parts`)."""
    return _encode(seg, postings=False)


def _encode(seg: Segment, *, postings: bool) -> bytes:
    fields: dict[str, object]
    if postings:
        fields = {"n": [len(seg.seqs), len(seg.terms), len(seg.docs)], "terms": seg.terms}
    else:
        fields = {"v": FORMAT, "n": [len(seg.seqs), len(seg.terms)], "part": PART_POSTINGS, "terms": seg.terms}
    meta = seg.meta
    if meta is not None:
        fields["sessions"] = meta.sessions
    head = json.dumps(fields, ensure_ascii=False).encode()
    parts = [
        len(head).to_bytes(8, "little"),
        head,
        seg.seqs.astype("<i8").tobytes(),
        seg.lengths.astype("<i4").tobytes(),
        seg.indptr.astype("<i8").tobytes(),
    ]
    if postings:
        parts += [seg.docs.astype("<i4").tobytes(), seg.tf.astype("<i4").tobytes()]
    if meta is not None:
        parts += [
            meta.session.astype("<i4").tobytes(),
            meta.said.astype("<i8").tobytes(),
            meta.recorded.astype("<i8").tobytes(),
            meta.idx.astype("<i4").tobytes(),
        ]
    return b"".join(parts)


def decode(blob: bytes) -> Segment:
    """A blob of format 1 (:func:`encode`)."""
    seg = decode_head(0, blob)
    if not isinstance(seg, Segment):
        raise ValueError("a head of format 2 holds no postings: decode_head, then whole()")
    return seg


def decode_head(seg_id: int, blob: bytes) -> AnySegment:
    """A row of ``index_segments``: a segment stored whole (format 1) as a :class:`Segment`; the head of one stored
    by part (format 2) as a :class:`LazySegment`, its postings read on demand."""
    import numpy as np

    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    whole = header.get("v") != FORMAT
    n_docs, n_terms = header["n"][:2]
    layout = [("<i8", n_docs), ("<i4", n_docs), ("<i8", n_terms + 1)]
    if whole:
        layout += [("<i4", header["n"][2])] * 2
    sessions = header.get("sessions")
    if sessions is not None:
        layout += [("<i4", n_docs), ("<i8", n_docs), ("<i8", n_docs), ("<i4", n_docs)]
    arrays = []
    body, at = blob[8 + size :], 0  # the arrays alone: views of the blob would keep its header (the terms again) alive
    for dtype, count in layout:
        arrays.append(np.frombuffer(body, dtype=dtype, count=count, offset=at))
        at += np.dtype(dtype).itemsize * count
    seqs, lengths, indptr = arrays[:3]
    meta = None if sessions is None else DocMeta(sessions, *arrays[5 if whole else 3 :])
    if whole:
        return Segment(seqs, lengths, header["terms"], indptr, arrays[3], arrays[4], meta)
    return LazySegment(seqs, lengths, header["terms"], indptr, meta, seg_id, int(header["part"]))


PART_POSTINGS = 4096  # postings per part (32 KiB): a query term's postings are read a part at a time
FORMAT = 2  # a segment stored by part (m006): its head in its row, its postings in index_parts


def encode_row(seg: Segment) -> tuple[bytes, list[tuple[int, bytes]]]:
    """What stores a segment: the blob of its ``index_segments`` row and its parts. A segment of at most one part's
    postings (the small segments every Add writes and merges) stays whole in its row, format 1: one row to write and
    to read, as before m006; a bigger one is a head and parts."""
    if len(seg.docs) <= PART_POSTINGS:
        return encode(seg), []
    return encode_head(seg), encode_parts(seg)


def write_parts(conn: sqlite3.Connection, seg_id: int, parts: Sequence[tuple[int, bytes]]) -> None:
    conn.executemany(
        "INSERT INTO index_parts (segment_id, part, blob) VALUES (?, ?, ?)", [(seg_id, k, b) for k, b in parts]
    )


def encode_parts(seg: Segment) -> list[tuple[int, bytes]]:
    """The segment's postings in parts: part k holds, for the terms whose postings start in [k·part, (k+1)·part),
    their documents then their term frequencies (int32 each), part = PART_POSTINGS. A term's postings are never split, so a part may be
    bigger than PART_POSTINGS postings (a frequent term) and some numbers have no part."""
    import numpy as np

    starts = seg.indptr[:-1]
    if not len(starts):
        return []
    tp = starts // PART_POSTINGS  # as encode_head records it
    first = np.flatnonzero(np.concatenate(([True], tp[1:] != tp[:-1])))  # each part's first term
    bounds = np.append(starts[first], seg.indptr[-1]).tolist()
    docs, tf = seg.docs.astype("<i4"), seg.tf.astype("<i4")
    return [
        (int(tp[t]), docs[a:b].tobytes() + tf[a:b].tobytes())
        for t, a, b in zip(first.tolist(), bounds, bounds[1:], strict=False)
    ]


def read_parts(conn: sqlite3.Connection, seg_id: int, parts: Sequence[int]) -> dict[int, bytes]:
    """Parts of one segment (a :data:`Reader` once bound to a connection); SegmentGone when one is missing."""
    want = sorted(set(parts))
    found: dict[int, bytes] = {}
    for i in range(0, len(want), 500):
        chunk = want[i : i + 500]
        found.update(
            conn.execute(
                f"SELECT part, blob FROM index_parts WHERE segment_id = ? AND part IN ({','.join('?' * len(chunk))})",
                [seg_id, *chunk],
            ).fetchall()
        )
    if len(found) != len(want):
        raise SegmentGone(seg_id)
    return found


def merge(segments: Sequence[Segment]) -> Segment:
    """One segment holding every document of ``segments`` (whose seqs are disjoint)."""
    import numpy as np

    seqs = np.concatenate([s.seqs for s in segments])
    lengths = np.concatenate([s.lengths for s in segments])
    if len(seqs) and bool((seqs[1:] > seqs[:-1]).all()):
        return _merge_in_order(segments, seqs, lengths)
    return _merge_sorting(segments, seqs, lengths)


def _merge_sorting(segments: Sequence[Segment], seqs: np.ndarray, lengths: np.ndarray) -> Segment:
    """``merge`` of any disjoint segments: documents sorted by seq, postings by (term, document)."""
    import numpy as np

    terms: dict[str, int] = {}
    order = np.argsort(seqs, kind="stable")
    new_doc = np.empty(len(seqs), dtype=np.int64)
    new_doc[order] = np.arange(len(seqs))
    term_ids, docs, tfs = [], [], []
    offset = 0
    for s in segments:
        remap = np.fromiter((terms.setdefault(t, len(terms)) for t in s.terms), dtype=np.int64, count=len(s.terms))
        term_ids.append(np.repeat(remap, np.diff(s.indptr)))
        docs.append(new_doc[s.docs.astype(np.int64) + offset])
        tfs.append(s.tf)
        offset += len(s.seqs)
    return _csc(
        seqs[order],
        lengths[order],
        list(terms),
        np.concatenate(term_ids) if term_ids else np.zeros(0, dtype=np.int64),
        np.concatenate(docs).astype(np.int32) if docs else np.zeros(0, dtype=np.int32),
        np.concatenate(tfs) if tfs else np.zeros(0, dtype=np.int32),
        None if (meta := _concat_meta(segments)) is None else meta.take(order),
    )


def _merge_in_order(segments: Sequence[Segment], seqs: np.ndarray, lengths: np.ndarray) -> Segment:
    """``merge`` of segments that follow each other in seq order (the usual case: each newer than the last), the
    same segment without its sorts: the documents keep their order (one offset per segment), and a stable sort of
    the postings by term keeps each term's documents ascending."""
    import numpy as np

    terms: dict[str, int] = {}
    term_ids, docs = [], []
    offset = 0
    for s in segments:
        remap = np.fromiter((terms.setdefault(t, len(terms)) for t in s.terms), dtype=np.int64, count=len(s.terms))
        term_ids.append(np.repeat(remap, np.diff(s.indptr)))
        docs.append(s.docs.astype(np.int64) + offset)
        offset += len(s.seqs)
    term_of = np.concatenate(term_ids)
    order = np.argsort(term_of, kind="stable")
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(term_of, minlength=len(terms)), out=indptr[1:])
    return Segment(
        seqs,
        lengths.astype(np.int32),
        list(terms),
        indptr,
        np.concatenate(docs)[order].astype(np.int32),
        np.concatenate([s.tf for s in segments])[order].astype(np.int32),
        _concat_meta(segments),
    )


def _concat_meta(segments: Sequence[Segment]) -> DocMeta | None:
    """The segments' DocMeta one after the other (None unless every one has it)."""
    metas = [s.meta for s in segments if s.meta is not None]
    return DocMeta.concat(metas) if metas and len(metas) == len(segments) else None


def without(seg: Segment, drop: Iterable[int]) -> Segment:
    """The segment without the documents whose seq is in ``drop`` (their terms go when no document keeps them)."""
    import numpy as np

    gone = np.isin(seg.seqs, np.fromiter(drop, dtype=np.int64))
    keep_doc = ~gone
    new_doc = np.cumsum(keep_doc) - 1
    term_of = np.repeat(np.arange(len(seg.terms), dtype=np.int64), np.diff(seg.indptr))
    keep = keep_doc[seg.docs]
    return _csc(
        seg.seqs[keep_doc],
        seg.lengths[keep_doc],
        seg.terms,
        term_of[keep],
        new_doc[seg.docs[keep]].astype(np.int32),
        seg.tf[keep],
        seg.meta.take(keep_doc) if seg.meta is not None else None,
    )


# ---- writing (inside the caller's transaction) --------------------------------------------------------------------


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM index_meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)", (key, value))


def watermark(conn: sqlite3.Connection) -> int:
    """Every message with seq ≤ this is indexed; no other is."""
    return int(_meta(conn, "indexed_through") or 0)


def max_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()[0])


def last_seq(conn: sqlite3.Connection, stored: int | None = None) -> int:
    """The highest seq any message of this database was ever given (the next Add's messages go above it). A forgotten
    or expired message's seq is never given again: a process holding a user's index keeps what it read of each
    message by seq (its text, who said it) and takes messages that keep their seqs for the same messages, so a reused
    seq showed a message forgotten by another process in place of the new one. ``last_seq`` is kept from round 13 on;
    the watermark and the stored seqs (``stored``: their highest, when the caller read it) bound it in a database
    from before."""
    return max(max_seq(conn) if stored is None else stored, watermark(conn), int(_meta(conn, "last_seq") or 0))


# the latest writes a file remembers (migration m008; 100,000 rows take 3.5 MB, measured): an index read longer ago
# is read again
WRITE_LOG = 100_000


def mark_written(conn: sqlite3.Connection) -> None:
    """Record a write (inside its transaction): a new random id in the write log, the oldest past WRITE_LOG gone."""
    import secrets

    n = conn.execute("INSERT INTO write_log (id) VALUES (?)", (secrets.randbits(63),)).lastrowid
    if n is not None and n > WRITE_LOG and n % 100 == 0:  # pruned in steps: one DELETE per 100 writes
        conn.execute("DELETE FROM write_log WHERE n <= ?", (n - WRITE_LOG,))


def last_write(conn: sqlite3.Connection) -> int | None:
    """The id of the file's latest write (None: a file from before m008 that no refind has written since)."""
    row = conn.execute("SELECT id FROM write_log ORDER BY n DESC LIMIT 1").fetchone()
    return None if row is None else int(row[0])


def descends(conn: sqlite3.Connection, write: int) -> bool:
    """Whether the file's content descends from ``write``: it is one of its remembered writes."""
    return conn.execute("SELECT 1 FROM write_log WHERE id = ?", (write,)).fetchone() is not None


def mark_assigned(conn: sqlite3.Connection, last: int) -> None:
    """Messages up to seq ``last`` were given seqs (inside the transaction that stored them)."""
    _set_meta(conn, "last_seq", str(last))


def pending(conn: sqlite3.Connection) -> bool:
    """Whether some messages are not indexed yet (or were indexed by another analyzer): :func:`catch_up` then."""
    return stale_analyzer(conn) is not None or watermark(conn) < max_seq(conn)


def db_id(conn: sqlite3.Connection) -> str:
    return _meta(conn, "db_id") or ""


def _write(conn: sqlite3.Connection, user_id: str, seg: Segment) -> int | None:
    """Store the segment (its head and its parts); its id (None for an empty segment, which is not stored)."""
    if not len(seg.seqs):
        return None
    blob, parts = encode_row(seg)
    seg_id = conn.execute(
        "INSERT INTO index_segments (user_id, docs, min_seq, max_seq, blob) VALUES (?, ?, ?, ?, ?)",
        (user_id, len(seg.seqs), int(seg.seqs[0]), int(seg.seqs[-1]), blob),
    ).lastrowid
    assert seg_id is not None
    write_parts(conn, seg_id, parts)
    return seg_id


ROW_COLUMNS = "seq, user_id, content, said_at, session_id, recorded_at, idx"  # what indexing needs of a message
Row = tuple[int, str, str, "int | None", str, int, int]  # a message's ROW_COLUMNS


def _index_rows(conn: sqlite3.Connection, rows: Iterable[Row]) -> set[str]:
    """Write one segment per user for rows of ROW_COLUMNS, in ascending seq. Returns the users touched."""
    segments = segments_of_rows(rows)
    write_segments(conn, segments)
    return set(segments)


def segments_of_rows(rows: Iterable[Row]) -> dict[str, Segment]:
    """One segment per user of rows of ROW_COLUMNS in ascending seq, the users in order of their first row."""
    by_user: dict[str, tuple[list[int], list[str], list[DocInfo]]] = {}
    for seq, user_id, content, said_at, session_id, recorded_at, idx in rows:
        docs = by_user.get(user_id)
        if docs is None:
            docs = by_user[user_id] = ([], [], [])
        docs[0].append(seq)
        docs[1].append(index_text(content, said_at))
        docs[2].append((session_id, said_at, recorded_at, idx))
    return {user_id: segment_of_texts(seqs, texts, info) for user_id, (seqs, texts, info) in by_user.items()}


def segments_ahead(requests: Iterable[tuple[str, str, Sequence[tuple[str, str, int | None]]]]) -> dict[str, Segment]:
    """One segment per user of the messages of (user id, session id, [(role, content, said-at), …]) requests, in
    order: ``segments_of_rows`` of their rows before they are written, with stand-ins for what the write gives them
    (seqs 1, 2, … per user; recorded-at 0), which :func:`placed` replaces. Built a request at a time rather than as
    ``segments_of_rows`` of stand-in rows (the same bytes): a tuple per message cost the reader ~12 % more CPU on
    100k messages (`bench/replay.py`, review of round 4)."""
    import numpy as np

    by_user: dict[str, tuple[list[str], dict[str, int], list[int], list[int], list[int]]] = {}
    words = date_words
    for user_id, session_id, messages in requests:
        docs = by_user.get(user_id)
        if docs is None:
            docs = by_user[user_id] = ([], {}, [], [], [])
        texts, codes, session, said, idx = docs
        texts.extend([text if at is None else f"{text}\n{words(at // 86_400_000)}" for _, text, at in messages])
        session.extend([codes.setdefault(session_id, len(codes))] * len(messages))
        said.extend([NO_DATE if at is None else at for _, _, at in messages])
        idx.extend(range(len(messages)))
    out = {}
    for user_id, (texts, codes, session, said, idx) in by_user.items():
        meta = DocMeta(
            list(codes),
            np.asarray(session, dtype=np.int32),
            np.asarray(said, dtype=np.int64),
            np.zeros(len(said), dtype=np.int64),
            np.asarray(idx, dtype=np.int32),
        )  # DocMeta.of of each message's (session, said-at, 0, index), built a request at a time
        out[user_id] = replace(segment_of_texts(range(1, len(texts) + 1), texts), meta=meta)
    return out


def placed(seg: Segment, seqs: Sequence[int], recorded_at: int) -> Segment:
    """A segment built ahead of its messages' seqs and recorded-at (a replay's reader builds it while the batch
    before is written), given them: byte for byte the segment of the same rows built after they were written."""
    import numpy as np

    meta = seg.meta
    if meta is not None:
        meta = replace(meta, recorded=np.full(len(seqs), recorded_at, dtype=np.int64))
    return replace(seg, seqs=np.asarray(seqs, dtype=np.int64), meta=meta)


def write_segments(conn: sqlite3.Connection, segments: Mapping[str, Segment]) -> None:
    """Write each user's new segment (in the mapping's order: segment ids follow it), merging after each."""
    for user_id, seg in segments.items():
        seg_id = _write(conn, user_id, seg)
        _merge(conn, user_id, {seg_id: seg} if seg_id is not None else {})


def indexing(conn: sqlite3.Connection, since_seq: int) -> bool:
    """Whether an Add transaction that began at max seq ``since_seq`` indexes its messages itself: when the index
    is up to date (otherwise :func:`catch_up` indexes them with the rest)."""
    return watermark(conn) >= since_seq and stale_analyzer(conn) is None


def mark_indexed(conn: sqlite3.Connection, through: int) -> None:
    """Every message up to seq ``through`` is indexed (inside the transaction that indexed them)."""
    _set_meta(conn, "indexed_through", str(through))


def _merge(conn: sqlite3.Connection, user_id: str, held: Mapping[int, Segment]) -> None:
    """Fold the user's newest segments together while the older one is no bigger than twice the newer (a binary
    counter: about log2(n) segments); everything into one past MAX_SEGMENTS."""
    sizes = conn.execute("SELECT id, docs FROM index_segments WHERE user_id = ? ORDER BY id", (user_id,)).fetchall()
    take = 1
    if len(sizes) > MAX_SEGMENTS:
        take = len(sizes)
    else:
        newest = sizes[-1][1] if sizes else 0
        while take < len(sizes) and sizes[-take - 1][1] <= 2 * newest:
            newest += sizes[-take - 1][1]
            take += 1
    if take < 2:
        return
    ids = [i for i, _ in sizes[-take:]]
    segs = [held[i] if i in held else _load(conn, i) for i in ids]  # (the segment just written is not read back)
    conn.executemany("DELETE FROM index_segments WHERE id = ?", [(i,) for i in ids])
    _write(conn, user_id, merge(segs))


def _load(conn: sqlite3.Connection, seg_id: int) -> Segment:
    blob = conn.execute("SELECT blob FROM index_segments WHERE id = ?", (seg_id,)).fetchone()[0]
    return _whole(conn, seg_id, blob)


def _whole(conn: sqlite3.Connection, seg_id: int, blob: bytes) -> Segment:
    """The segment of this ``index_segments`` row with all its postings."""
    return decode_head(seg_id, blob).whole(lambda i, parts: read_parts(conn, i, parts))


def remove(conn: sqlite3.Connection, user_id: str, seqs: Iterable[int]) -> None:
    """Rewrite the user's segments without the messages ``seqs`` (about to be deleted, or just deleted)."""
    drop = sorted(set(seqs))
    if not drop:
        return
    lo, hi = drop[0], drop[-1]
    rows = conn.execute(
        "SELECT id, blob FROM index_segments WHERE user_id = ? AND max_seq >= ? AND min_seq <= ?", (user_id, lo, hi)
    ).fetchall()
    import numpy as np

    wanted = np.asarray(drop, dtype=np.int64)
    for seg_id, blob in rows:
        head = decode_head(seg_id, blob)
        if not np.isin(head.seqs, wanted).any():
            continue
        seg = _whole(conn, seg_id, blob)
        conn.execute("DELETE FROM index_segments WHERE id = ?", (seg_id,))  # its parts too (a trigger, m006)
        _write(conn, user_id, without(seg, drop))


def remove_user(conn: sqlite3.Connection, user_id: str) -> None:
    conn.execute("DELETE FROM index_segments WHERE user_id = ?", (user_id,))


def rebuild_user(conn: sqlite3.Connection, user_id: str) -> int:
    """The user's segments written again from their stored messages up to the watermark, what :func:`verify` finds
    agreeing: for an index that names messages the database no longer holds (an older refind's forget, which did not
    keep the index). Returns how many messages it indexed."""
    remove_user(conn, user_id)
    rows = conn.execute(
        f"SELECT {ROW_COLUMNS} FROM messages WHERE user_id = ? AND seq <= ? ORDER BY seq", (user_id, watermark(conn))
    ).fetchall()
    if rows:
        _index_rows(conn, rows)
    return len(rows)


def catch_up(conn: sqlite3.Connection, progress: Progress | None = None, *, until: float | None = None) -> int:
    """Index every message not indexed yet, CATCH_UP_CHUNK per transaction (resumable). Returns how many. ``until``
    (``time.monotonic()``: an agent search's deadline): no transaction starts past it, and each indexes at most
    CATCH_UP_CHUNK_BY_DEADLINE messages, so the catch-up ends soon after it; a later open indexes the rest."""
    done = 0
    chunk = CATCH_UP_CHUNK if until is None else CATCH_UP_CHUNK_BY_DEADLINE
    while True:
        if until is not None and time.monotonic() >= until:
            return done
        conn.execute("BEGIN IMMEDIATE")
        try:
            if stale_analyzer(conn) is not None:
                conn.execute("DELETE FROM index_segments")  # another analyzer's tokens: index everything again
                _set_meta(conn, "analyzer", str(tokenize.ANALYZER_VERSION))
                _set_meta(conn, "indexed_through", "0")
            mark = watermark(conn)
            total = done + conn.execute("SELECT count(*) FROM messages WHERE seq > ?", (mark,)).fetchone()[0]
            if progress is not None and total and not done:
                progress(0, total)  # indexing starts: a report before its first batch, which may take seconds
            rows = conn.execute(
                f"SELECT {ROW_COLUMNS} FROM messages WHERE seq > ? ORDER BY seq LIMIT ?",
                (mark, chunk),
            ).fetchall()
            if rows:
                _index_rows(conn, rows)
                _set_meta(conn, "indexed_through", str(rows[-1][0]))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        done += len(rows)
        if progress is not None and rows:
            progress(done, total)
        if not rows:
            return done


# ---- reading ------------------------------------------------------------------------------------------------------


def segment_ids(conn: sqlite3.Connection, user_id: str) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM index_segments WHERE user_id = ? ORDER BY id", (user_id,))]


def load_segments(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, AnySegment]:
    """The heads of these segments (their postings are read when a search needs them: :class:`LazySegment`)."""
    out: dict[int, AnySegment] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        marks = ",".join("?" * len(chunk))
        for seg_id, blob in conn.execute(f"SELECT id, blob FROM index_segments WHERE id IN ({marks})", chunk):
            out[seg_id] = decode_head(seg_id, blob)
    return out


def stats(conn: sqlite3.Connection) -> dict[str, object]:
    """The index's size and state, for ``refind inspect``."""
    segs, docs, size = conn.execute(
        "SELECT count(*), coalesce(sum(docs), 0), coalesce(sum(length(blob)), 0) FROM index_segments"
    ).fetchone()
    parts, part_bytes = (
        conn.execute("SELECT count(*), coalesce(sum(length(blob)), 0) FROM index_parts").fetchone()
        if has_table(conn, "index_parts")  # (m006 ran: inspect --check reads without migrating)
        else (0, 0)
    )
    size += part_bytes
    content = conn.execute("SELECT coalesce(sum(length(CAST(content AS BLOB))), 0) FROM messages").fetchone()[0]
    users = conn.execute("SELECT count(DISTINCT user_id) FROM index_segments").fetchone()[0]
    behind = conn.execute("SELECT count(*) FROM messages WHERE seq > ?", (watermark(conn),)).fetchone()[0]
    stale = stale_analyzer(conn) is not None
    return {
        "state": "stale" if stale else "pending" if behind else "ready",
        "segments": segs,
        "parts": parts,
        "users": users,
        "messages": docs,
        "pending_messages": behind,
        "bytes": size,
        "bytes_per_content_byte": round(size / content, 3) if content else None,
    }


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the database has this table (a database from before a migration, read without migrating it)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def stale_analyzer(conn: sqlite3.Connection) -> str | None:
    """The analyzer version the index was built by, when it is not this refind's (an upgrade: every message is
    indexed again on the next open); None when it is."""
    built = _meta(conn, "analyzer")
    return None if built == str(tokenize.ANALYZER_VERSION) else str(built)


def verify(conn: sqlite3.Connection) -> list[str]:
    """Problems where the index disagrees with the messages (empty when it agrees): every indexed message must be
    in exactly one of its user's segments with its exact tokens, and nothing else may be in them."""
    problems: list[str] = []
    if stale_analyzer(conn) is not None:  # not damage: rebuilt on the next open (health.check says so as a note)
        return []
    mark = watermark(conn)
    seen: set[int] = set()  # (the seqs only: the messages' text is read a segment at a time, never the whole file's)
    for seg_id, user_id, n_docs, lo, hi, blob in conn.execute(
        "SELECT id, user_id, docs, min_seq, max_seq, blob FROM index_segments ORDER BY id"
    ):
        try:
            seg = _whole(conn, seg_id, blob)
        except SegmentGone:
            problems.append(f"segment {seg_id}: some of its postings are missing")
            continue
        except PartMismatch:
            problems.append(f"segment {seg_id}: a part of its postings disagrees with its head")
            continue
        if n_docs != len(seg.seqs) or (len(seg.seqs) and (lo != seg.seqs[0] or hi != seg.seqs[-1])):
            problems.append(f"segment {seg_id}: its row disagrees with its contents")
        if seg.meta is None:
            problems.append(f"segment {seg_id}: it lacks its messages' sessions and dates (written before m005)")
        seqs = seg.seqs.tolist()
        expected = _stored(conn, seqs, mark)
        for d, (seq, length, counts) in enumerate(zip(seqs, seg.lengths.tolist(), seg.doc_terms(), strict=True)):
            if seq in seen:
                problems.append(f"segment {seg_id}: message seq {seq} is indexed twice")
                continue
            seen.add(seq)
            want = expected.get(seq)
            if want is None or want[0] != user_id:
                problems.append(f"segment {seg_id}: message seq {seq} is not a stored message of user {user_id!r}")
                continue
            tokens = message_tokens(want[1], want[2])
            if length != len(tokens) or counts != Counter(tokens):
                problems.append(f"segment {seg_id}: message seq {seq}'s tokens differ from its text's")
            if seg.meta is not None and _info(seg.meta, d) != want[3]:
                problems.append(f"segment {seg_id}: message seq {seq}'s session or dates differ from the message's")
    orphans = (
        has_table(conn, "index_parts")
        and conn.execute(
            "SELECT count(*) FROM index_parts WHERE segment_id NOT IN (SELECT id FROM index_segments)"
        ).fetchone()[0]
    )
    if orphans:
        problems.append(f"{orphans} part(s) of postings belong to no segment")
    missing, first = 0, None
    for (seq,) in conn.execute("SELECT seq FROM messages WHERE seq <= ? ORDER BY seq", (mark,)):
        if seq not in seen:
            missing += 1
            first = seq if first is None else first
    if missing:
        problems.append(f"{missing} stored message(s) missing from the index (first seq {first})")
    return problems


def _stored(conn: sqlite3.Connection, seqs: list[int], mark: int) -> dict[int, tuple[str, str, int | None, DocInfo]]:
    """The stored messages (by the watermark) of ``seqs``: user, text, said-at and what the index keeps of them."""
    out: dict[int, tuple[str, str, int | None, DocInfo]] = {}
    for i in range(0, len(seqs), 500):
        chunk = seqs[i : i + 500]
        rows = conn.execute(
            f"SELECT {ROW_COLUMNS} FROM messages WHERE seq <= ? AND seq IN ({', '.join('?' * len(chunk))})",
            [mark, *chunk],
        )
        for seq, user, content, said, session, recorded, idx in rows:
            out[seq] = (user, content, said, (session, said, recorded, idx))
    return out


def _info(meta: DocMeta, d: int) -> DocInfo:
    said = int(meta.said[d])
    return (
        meta.sessions[int(meta.session[d])],
        None if said == NO_DATE else said,
        int(meta.recorded[d]),
        int(meta.idx[d]),
    )
