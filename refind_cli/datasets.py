"""Labelled evaluation sets → Add requests and questions with their evidence, one sample (one user) at a time.

Four formats (described in ``shared/datasets/README.md``, the originals are downloaded by each user):

* **LoCoMo** — one user per conversation; questions of categories 1–4 with turn-level ``evidence`` dia_ids.
* **LongMemEval** — one user per question (its haystack); evidence = the turns marked ``has_answer``.
* **MemDaily** — every :data:`MEMDAILY_GROUP` consecutive timelines of a file make one user, one session per timeline;
  evidence = the messages named by ``target_step_id``; ``choices`` become the search's ``options``.
* **REALTALK** — one user per chat file (a folder holds several); like LoCoMo, but each message carries its own
  ``date_time`` (``"29.12.2023, 22:42:04"``, day first) and the text is ``clean_text``; evidence ids that name no
  message of the release (images left out of it) are dropped and counted.

Replay is **contest-style** by default, as the platform sends conversations: every message has role ``user`` and
carries its speaker as a label in the content (``"Caroline: …"``, ``"assistant: …"``), one Add per session split
at :data:`SESSION_CHUNK` messages, timestamps in Unix ms from the session's date (read as UTC). ``role_faithful``
keeps LongMemEval's real ``user``/``assistant`` roles and unlabelled content instead.

Evidence is identified by the stored content of the labelled message: the metric looks for that text.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .contract import AddRequest, Message, long_number
from .errors import InvalidInput, RefindError

FORMATS = ("locomo", "longmemeval", "memdaily", "realtalk")
NAMES = {"locomo": "LoCoMo", "longmemeval": "LongMemEval", "memdaily": "MemDaily", "realtalk": "REALTALK"}
SESSION_CHUNK = 20
MEMDAILY_GROUP = 20
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # 5 (adversarial) unscored
REALTALK_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain"}


@dataclass(frozen=True)
class Question:
    id: str
    user_id: str
    text: str
    category: str
    evidence: tuple[str, ...]  # stored contents of the labelled messages (distinct, in conversation order)
    options: tuple[str, ...] = ()

    def __post_init__(self) -> None:  # a TypeError here is the loader's "… is this a … file?"
        for name in ("text", "category"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"question {self.id}: its {name} must be a string, got {type(value).__name__}")


@dataclass(frozen=True)
class Sample:
    """One user's conversation, as Add requests, and the questions asked of it."""

    user_id: str
    requests: tuple[AddRequest, ...]
    questions: tuple[Question, ...]


@dataclass
class Skipped:
    """What a loader left out, by reason (counted, never silent)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, reason: str, n: int = 1) -> None:
        self.counts[reason] += n

    def as_dict(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))


# ---- format detection and file reading -------------------------------------------------------------------------


def detect_format(path: str | Path) -> str:
    """The format of PATH from its shape: a folder holds MemDaily or REALTALK files (told apart by its first file),
    a file of timelines is MemDaily, LoCoMo samples carry ``conversation``, LongMemEval questions carry
    ``haystack_sessions``, a REALTALK chat is one object with ``name``, ``qa`` and ``session_N`` lists."""
    p = Path(path)
    if not p.exists():
        raise InvalidInput(f"{p}: no such file or folder")
    if p.is_dir():
        files = _memdaily_files(p)
        if not files:
            raise InvalidInput(f"{p}: a folder must hold MemDaily or REALTALK *.json files; none found")
        return "realtalk" if _is_realtalk(_read_json(files[0])) else "memdaily"
    data = _read_json(p)
    if _is_realtalk(data):
        return "realtalk"
    first = data[0] if isinstance(data, list) and data else None
    if isinstance(first, dict):
        if "conversation" in first and "qa" in first:
            return "locomo"
        if "haystack_sessions" in first:
            return "longmemeval"
        if "message_list" in first and "question_list" in first:
            return "memdaily"
    raise InvalidInput(
        f"{p}: cannot tell its format (expected a list of LoCoMo samples, LongMemEval questions or MemDaily "
        "timelines, or a REALTALK chat); pass --format"
    )


def load(
    path: str | Path,
    fmt: str | None = None,
    *,
    role_faithful: bool = False,
    skipped: Skipped | None = None,
    detected: bool = False,
) -> Iterator[Sample]:
    """Samples of the set at PATH, one at a time. ``skipped`` (if given) counts what was left out and why. A set
    that is missing, not JSON, or not of the format it is read as raises InvalidInput naming where (``detected``:
    ``fmt`` is what :func:`detect_format` said, not what the user asked for; the refusal says which)."""
    given = fmt is not None and not detected
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    skipped = skipped if skipped is not None else Skipped()
    p = Path(path)
    samples: Iterator[Sample]
    if fmt == "locomo":
        samples = _locomo(_expect_list(_read_json(p), p), skipped)
    elif fmt == "longmemeval":
        samples = _longmemeval(_expect_list(_read_json(p), p), role_faithful, skipped)
    elif fmt == "realtalk":
        samples = _realtalk(p, skipped)
    else:
        samples = _memdaily(p, skipped)
    return _checked(samples, p, fmt, given=given)


# what reading a set of the wrong shape raises (ValueError: int() of an id, or a number past the digit limit)
_SHAPE_ERRORS = (KeyError, TypeError, AttributeError, IndexError, ValueError)


class _Misshapen(Exception):
    """A shape error and where in the set it was met: the parts of a path such as ``[3]``, ``.qa[7]``."""

    def __init__(self, where: list[str], exc: Exception) -> None:
        super().__init__(where, exc)
        self.where, self.exc = where, exc


@contextmanager
def _at(part: str) -> Iterator[None]:
    """Reading inside is at PART of the set (nested: the parts join into a path): a shape error names where it was."""
    try:
        yield
    except _Misshapen as inner:
        inner.where.insert(0, part)
        raise
    except _SHAPE_ERRORS as exc:
        raise _Misshapen([part], exc) from exc


def _checked(samples: Iterator[Sample], path: Path, fmt: str, *, given: bool) -> Iterator[Sample]:
    """A file that is not of the format it was read as fails with a message naming where and what it lacks, in
    words (no Python exception names), and asking whether it is of that format."""
    hint = _given_hint(path, fmt) if given else "its shape says so; --format reads it as another"
    try:
        yield from samples
    except _Misshapen as bad:
        raise InvalidInput(
            f"{path}: {_wrong(_place(bad.where), bad.exc)}: is this a {NAMES[fmt]} file? ({hint})"
        ) from (bad.exc)
    except _SHAPE_ERRORS as exc:
        raise InvalidInput(f"{path}: {_wrong('the set', exc)}: is this a {NAMES[fmt]} file? ({hint})") from exc


def _given_hint(path: Path, fmt: str) -> str:
    """Why a set that failed was read as ``fmt``: the user's ``--format``, and which format its shape says, if one
    (the bare flag once read as advice to pass the very flag that had just failed)."""
    said = f"read as one because of --format {fmt}"
    try:
        shape = detect_format(path)
    except RefindError:
        return said
    if shape == fmt:
        return said
    return f"{said}; its shape says {NAMES[shape]}: pass --format {shape}, or leave --format out"


def _place(where: list[str]) -> str:
    """Where in a set, in words: ``["[0]", ".qa[3]"]`` is "item 0's qa[3]"; a folder's file leads ("x.json item 3")."""
    parts = list(where)
    head = [parts.pop(0)] if parts and not parts[0].startswith(("[", ".")) else []
    if parts and parts[0].startswith("["):
        head.append(f"item {parts.pop(0)[1:-1]}")
    tail = "".join(parts).lstrip(".")
    if head and tail:
        return f"{' '.join(head)}'s {tail}"
    return " ".join(head) or tail or "the set"


def _wrong(place: str, exc: Exception) -> str:
    """What is wrong at ``place``, in words."""
    if isinstance(exc, KeyError) and exc.args:
        return f"{place} has no {exc.args[0]}"
    if isinstance(exc, AttributeError):
        held = getattr(exc, "obj", ...)
        return f"{place} is {_json_kind(held)}, not an object" if held is not ... else f"{place} is not an object"
    if isinstance(exc, IndexError):
        return f"{place} has fewer entries than expected"
    if _digits(exc):
        return f"{place} holds {long_number()}"
    return f"{place}: {exc}"  # (refind's own TypeErrors and ValueErrors say what is wrong in words)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def _digits(exc: Exception) -> bool:
    """Whether ``exc`` is Python's refusal of an integer past its digit limit (its advice to raise it unsaid)."""
    return isinstance(exc, ValueError) and "digits" in str(exc) and "int" in str(exc)


def _read_json(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except (FileNotFoundError, IsADirectoryError):  # (a --format given skips detect_format, which says so first)
        raise InvalidInput(f"{path}: {'a folder, not a file' if path.is_dir() else 'no such file or folder'}") from None
    except OSError as exc:  # the file could not be read (a permission, a damaged .gz): not the set's shape
        raise RefindError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    except EOFError:  # a .gz cut short (click took it for Ctrl-D: "Aborted!", naming nothing)
        raise RefindError(f"{path}: cannot read it: the .gz file ends before its compressed data does") from None
    except zlib.error as exc:  # a .gz whose compressed data is damaged (a traceback)
        raise RefindError(f"{path}: cannot read it: the .gz file's compressed data is damaged ({exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot read it as JSON: {exc}") from exc
    except RecursionError:  # json recurses once per level of nesting
        raise InvalidInput(f"{path}: cannot read it as JSON: it nests deeper than Python's JSON reader goes") from None
    except ValueError as exc:  # an integer past Python's digit limit (a plain ValueError, not a JSONDecodeError)
        raise InvalidInput(f"{path}: cannot read it as JSON: {long_number() if _digits(exc) else exc}") from None


def _is_realtalk(data: Any) -> bool:
    return isinstance(data, dict) and "qa" in data and any(_SESSION_KEY.fullmatch(k) for k in data)


def _expect_list(data: Any, path: Path) -> list[Any]:
    if not isinstance(data, list):
        raise InvalidInput(f"{path}: expected a JSON list at the top level")
    return data


def chunked_requests(user_id: str, session_id: str, request_prefix: str, messages: list[Message]) -> list[AddRequest]:
    """One Add per session, split every :data:`SESSION_CHUNK` messages, as the contest sends them."""
    return [
        AddRequest(
            request_id=f"{request_prefix}:chunk-{i // SESSION_CHUNK}",
            user_id=user_id,
            session_id=session_id,
            messages=tuple(messages[i : i + SESSION_CHUNK]),
        )
        for i in range(0, len(messages), SESSION_CHUNK)
    ]


def _utc_ms(dt: datetime) -> int:
    return int(dt.replace(tzinfo=UTC).timestamp() * 1000)


def _parse_time(value: Any, fmt: str, skipped: Skipped, what: str) -> int | None:
    """``value`` read by ``fmt`` as UTC ms; None when there is none (a message may lack a said-at) — or when it is
    there but no date of the set's format, which is counted as ``what`` (its messages kept, said-at unknown)."""
    if value is None or not str(value).strip():
        return None
    try:
        return _utc_ms(datetime.strptime(str(value).strip(), fmt))
    except ValueError:
        skipped.add(f"{what} that is no date (its messages kept without a said-at)")
        return None


# ---- LoCoMo -----------------------------------------------------------------------------------------------------

_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D(\d+):(\d+)")
LOCOMO_TIME = "%I:%M %p on %d %B, %Y"


def split_evidence(entry: str) -> list[str]:
    """LoCoMo evidence entries sometimes pack several dia_ids: ``"D8:6; D9:17"``, ``"D9:1 D4:4"``; REALTALK's end one
    with a full stop: ``"D13:4. D14:4"``, ``"D20:6."`` (the id before it names its message)."""
    return [part.rstrip(".") for part in re.split(r"[;,\s]+", entry) if part.rstrip(".")]


def _dia_key(dia_id: str) -> tuple[int, int] | None:
    m = _DIA_ID.fullmatch(dia_id.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None  # "D30:05" and "D30:5" name the same turn


def _locomo(data: list[Any], skipped: Skipped) -> Iterator[Sample]:
    for i, item in enumerate(data):
        with _at(f"[{i}]"):
            sample = load_locomo_sample(item, skipped)
        yield sample


def load_locomo_sample(sample: dict[str, Any], skipped: Skipped) -> Sample:
    user_id = str(sample["sample_id"])
    conv = sample["conversation"]
    sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION_KEY.fullmatch(key)))
    requests: list[AddRequest] = []
    content_of: dict[tuple[int, int], str] = {}
    order: dict[tuple[int, int], int] = {}
    for _number, key in sessions:
        turns = conv[key]
        # (a session of another shape was left out, its turns with it, unsaid — a probe)
        if not isinstance(turns, list):
            with _at(f".conversation.{key}"):
                raise TypeError(f"a session is a list of turns, got {type(turns).__name__}")
        if not turns:
            continue
        ts = _parse_time(conv.get(f"{key}_date_time"), LOCOMO_TIME, skipped, "locomo session date")
        messages = []
        for j, turn in enumerate(turns):
            with _at(f".conversation.{key}[{j}]"):
                content = f"{turn['speaker']}: {turn['text']}"
                messages.append(Message(role="user", content=content, timestamp=ts))
                k = _dia_key(turn["dia_id"])
            if k is not None:
                content_of[k] = content
                order[k] = len(order)
        requests += chunked_requests(user_id, key, f"{user_id}:{key}", messages)
    questions = _dialogue_questions(user_id, sample.get("qa", []), "locomo", content_of, order, skipped)
    return Sample(user_id, tuple(requests), tuple(questions))


# a LoCoMo-shaped set's scored categories, and what its skipped counts say: an unscored category, an evidence id that
# names no message, a question without evidence
_DIALOGUES = {
    "locomo": (
        LOCOMO_CATEGORIES,
        "locomo category {} (not scored)",
        "locomo evidence id that names no turn (dropped)",
        "locomo question without evidence",
    ),
    "realtalk": (
        REALTALK_CATEGORIES,
        "realtalk category {} (not scored)",
        "realtalk evidence id that names no message (dropped)",
        "realtalk question without resolvable evidence",
    ),
}


def _dialogue_questions(
    user_id: str,
    qas: list[dict[str, Any]],
    fmt: str,
    content_of: dict[tuple[int, int], str],
    order: dict[tuple[int, int], int],
    skipped: Skipped,
) -> list[Question]:
    """A LoCoMo-shaped ``qa`` list (LoCoMo's, REALTALK's: ``fmt``): the questions of scored categories with their
    evidence."""
    categories, unscored, dropped, empty = _DIALOGUES[fmt]
    questions = []
    for i, qa in enumerate(qas):
        with _at(f".qa[{i}]"):
            category = qa.get("category")
            if category is not None and (isinstance(category, bool) or not isinstance(category, int)):
                # ("1" is not 1: every question was left out as of an unscored category "1", exit 0 — a probe)
                raise TypeError(f"a question's category is a whole number, got {json.dumps(category)[:40]}")
            if category not in categories:
                skipped.add(unscored.format(category))
                continue
            evidence = _evidence(qa, content_of, order, skipped, dropped=dropped, empty=empty)
            if not evidence:
                continue
            questions.append(
                Question(
                    id=f"{user_id}:q{i}",
                    user_id=user_id,
                    text=qa["question"],
                    category=f"{category} {categories[category]}",
                    evidence=evidence,
                )
            )
    return questions


def _distinct(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _ids(value: Any) -> list[Any]:
    """A question's evidence ids: a list of them, or one id given alone (a string was read letter by letter: "m1"
    became "m" and "1", and "1" another message's id)."""
    if value is None or value == "":
        return []
    return [value] if isinstance(value, (str, int)) else list(value)


def _evidence(
    qa: dict[str, Any],
    content_of: dict[tuple[int, int], str],
    order: dict[tuple[int, int], int],
    skipped: Skipped,
    *,
    dropped: str,
    empty: str,
) -> tuple[str, ...]:
    """A LoCoMo-shaped question's evidence ("D3:7" ids, some packed as "D8:6; D9:17") as the texts of its turns, in
    conversation order; ids naming no turn are dropped (and counted), and no evidence at all is counted too."""
    keys: list[tuple[int, int]] = []
    for entry in _ids(qa.get("evidence")):
        for part in split_evidence(str(entry)):
            k = _dia_key(part)
            if k is None or k not in content_of:
                skipped.add(dropped)
            elif k not in keys:
                keys.append(k)
    if not keys:
        skipped.add(empty)
    return _distinct(content_of[k] for k in sorted(keys, key=order.__getitem__))


# ---- LongMemEval -----------------------------------------------------------------------------------------------

LONGMEMEVAL_TIME = "%Y/%m/%d (%a) %H:%M"


def _longmemeval(data: list[Any], role_faithful: bool, skipped: Skipped) -> Iterator[Sample]:
    for i, item in enumerate(data):
        with _at(f"[{i}]"):
            sample = load_longmemeval_question(item, role_faithful, skipped)
        if sample is not None:
            yield sample


def load_longmemeval_question(item: dict[str, Any], role_faithful: bool, skipped: Skipped) -> Sample | None:
    qid = str(item["question_id"])
    if qid.endswith("_abs"):
        skipped.add("longmemeval abstention question")
        return None
    user_id = qid
    requests: list[AddRequest] = []
    evidence: list[str] = []
    dates = item.get("haystack_dates") or []
    for pos, (sid, turns) in enumerate(zip(item["haystack_session_ids"], item["haystack_sessions"])):
        ts = (
            _parse_time(dates[pos], LONGMEMEVAL_TIME, skipped, "longmemeval haystack date")
            if pos < len(dates)
            else None
        )
        messages = []
        for j, turn in enumerate(turns):
            with _at(f".haystack_sessions[{pos}][{j}]"):
                if not str(turn.get("content", "")).strip():
                    skipped.add("longmemeval message without text")  # the contract refuses empty content
                    continue
                if not isinstance(turn["content"], str) or not isinstance(turn["role"], str):
                    # (as --role-faithful: 123 raised TypeError inside the index, a null role "ids collide"; without
                    # it, "user: 123" and "None: …" were stored as if written)
                    raise TypeError("a turn's role and content are strings")
                if role_faithful:
                    role, content = turn["role"], turn["content"]
                else:
                    role, content = "user", f"{turn['role']}: {turn['content']}"
                messages.append(Message(role=role, content=content, timestamp=ts))
                marked = turn.get("has_answer", False)
                if marked is not None and not isinstance(marked, bool):
                    # ("false" is true to Python: every turn became evidence and recall silently wrong — a probe)
                    raise TypeError(f"a turn's has_answer is true or false, got {json.dumps(marked)[:40]}")
                if marked:
                    evidence.append(content)
        # a haystack can name the same session id twice: the position keeps request ids apart
        requests += chunked_requests(user_id, str(sid), f"{user_id}:{pos}:{sid}", messages)
    if not evidence:
        skipped.add("longmemeval question without has_answer turns")
        return None
    question = Question(
        id=qid,
        user_id=user_id,
        text=item["question"],
        category=item.get("question_type") or "?",  # null as missing
        evidence=_distinct(evidence),
    )
    return Sample(user_id, tuple(requests), (question,))


# ---- MemDaily --------------------------------------------------------------------------------------------------

_MEMDAILY_TIME = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日\D*?(\d{1,2}):(\d{2})")


def parse_memdaily_time(value: Any) -> int | None:
    m = _MEMDAILY_TIME.search(str(value or ""))
    if not m:
        return None
    y, mo, d, h, mi = map(int, m.groups())
    try:
        return _utc_ms(datetime(y, mo, d, h, mi))
    except ValueError:
        return None


def memdaily_options(choices: Any) -> tuple[str, ...]:
    """``choices`` is usually ``{"A": …, "B": …}``, sometimes a single string."""
    if isinstance(choices, dict):
        return tuple(str(v) for _, v in sorted(choices.items()) if str(v).strip())
    if isinstance(choices, list):
        return tuple(str(v) for v in choices if str(v).strip())
    if isinstance(choices, str) and choices.strip():
        return (choices,)
    return ()


def _memdaily_files(folder: Path) -> list[Path]:
    """A folder's set files, in order; two of one name before its first dot ("x.json", "x.json.gz") would be one
    user, replayed twice (a conflict naming no file): refused, naming both."""
    files = sorted(p for p in folder.iterdir() if p.suffix == ".json" or p.name.endswith(".json.gz"))
    seen: dict[str, Path] = {}
    for file in files:
        stem = file.name.split(".")[0]
        if stem in seen:
            raise InvalidInput(f"{folder}: {seen[stem].name} and {file.name} would be one user ({stem!r}); keep one")
        seen[stem] = file
    return files


def _in_folder(path: Path, file: Path) -> AbstractContextManager[None]:
    """A folder's file names where in it a fault lies; a file given itself is named once, by the error."""
    return _at(file.name) if path.is_dir() else nullcontext()


def _memdaily(path: Path, skipped: Skipped) -> Iterator[Sample]:
    files = _memdaily_files(path) if path.is_dir() else [path]
    for file in files:
        timelines = _expect_list(_read_json(file), file)
        stem = file.name.split(".")[0]
        for start in range(0, len(timelines), MEMDAILY_GROUP):
            with _in_folder(path, file):
                sample = load_memdaily_group(
                    f"{stem}:{start // MEMDAILY_GROUP}", timelines[start : start + MEMDAILY_GROUP], skipped, start
                )
            yield sample


def load_memdaily_group(user_id: str, timelines: list[dict[str, Any]], skipped: Skipped, first: int = 0) -> Sample:
    """Timelines ``first``, ``first + 1``, … of a MemDaily file as one user (``first`` places them in the file)."""
    requests: list[AddRequest] = []
    questions: list[Question] = []
    for t, timeline in enumerate(timelines, start=first):
        with _at(f"[{t}]"):
            tid = timeline["tid"]
            content_of = {}
            messages = []
            for j, msg in enumerate(timeline.get("message_list", [])):
                with _at(f".message_list[{j}]"):
                    text = str(msg.get("message", ""))
                    if not text.strip():
                        skipped.add("memdaily message without text")
                        continue
                    content_of[msg["mid"]] = text
                    said_at = parse_memdaily_time(msg.get("time"))
                    if said_at is None and str(msg.get("time") or "").strip():
                        skipped.add("memdaily time that is no date (its messages kept without a said-at)")
                    messages.append(Message(role="user", content=text, timestamp=said_at))
            requests += chunked_requests(user_id, f"t{tid}", f"{user_id}:t{tid}", messages)
            for n, q in enumerate(timeline.get("question_list", [])):
                with _at(f".question_list[{n}]"):
                    targets = _ids(q.get("target_step_id"))
                    evidence = _distinct(content_of[m] for m in targets if m in content_of)
                    if not evidence:
                        skipped.add("memdaily question without resolvable target_step_id")
                        continue
                    questions.append(
                        Question(
                            id=f"{user_id}:t{tid}:q{q.get('qid')}",
                            user_id=user_id,
                            text=q["question"],
                            category=user_id.split(":", maxsplit=1)[0],
                            evidence=evidence,
                            options=memdaily_options(q.get("choices")),
                        )
                    )
    return Sample(user_id, tuple(requests), tuple(questions))


# ---- REALTALK --------------------------------------------------------------------------------------------------

REALTALK_TIME = "%d.%m.%Y, %H:%M:%S"


def _realtalk(path: Path, skipped: Skipped) -> Iterator[Sample]:
    for file in _memdaily_files(path) if path.is_dir() else [path]:
        data = _read_json(file)
        if not isinstance(data, dict):
            raise InvalidInput(f"{file}: expected one REALTALK chat (a JSON object) per file")
        with _in_folder(path, file):
            sample = load_realtalk_chat(file.name.split(".")[0], data, skipped)
        yield sample


def load_realtalk_chat(user_id: str, chat: dict[str, Any], skipped: Skipped) -> Sample:
    """One chat → one user: one Add per session (split at :data:`SESSION_CHUNK`), every message role ``user`` with
    content ``"Speaker: text"`` and its own said-at; questions of categories 1–3 with their resolvable evidence."""
    sessions = sorted((int(m.group(1)), key) for key in chat if (m := _SESSION_KEY.fullmatch(key)))
    requests: list[AddRequest] = []
    content_of: dict[tuple[int, int], str] = {}
    order: dict[tuple[int, int], int] = {}
    for _number, key in sessions:
        turns = chat[key]
        if not isinstance(turns, list):  # (left out, its messages with it, unsaid — a probe)
            with _at(f".{key}"):
                raise TypeError(f"a session is a list of messages, got {type(turns).__name__}")
        messages = []
        for j, turn in enumerate(turns):
            with _at(f".{key}[{j}]"):
                text = str(turn.get("clean_text") or "")
                if not text.strip():
                    skipped.add("realtalk message without text")
                    continue
                content = f"{turn['speaker']}: {text}"
                said_at = _parse_time(turn.get("date_time"), REALTALK_TIME, skipped, "realtalk date_time")
                messages.append(Message(role="user", content=content, timestamp=said_at))
                k = _dia_key(str(turn.get("dia_id", "")))
            if k is not None:
                content_of[k] = content
                order[k] = len(order)
        if messages:
            requests += chunked_requests(user_id, key, f"{user_id}:{key}", messages)
    questions = _dialogue_questions(user_id, chat.get("qa", []), "realtalk", content_of, order, skipped)
    return Sample(user_id, tuple(requests), tuple(questions))
