"""The planner's reply → one :class:`Action`: the one place that reads what the model said.

Three forms are accepted, tried in this order; the action records which one it was parsed from (``form``), and the
trace shows it:

``json``       the protocol of ``prompts/planner.md``: one JSON object naming an ``action`` (code fences, prose
               around it and a leading ``<think>`` block are tolerated);
``react``      the paper's ReAct text, what the original ReFind parsed (small local models answer this way often)::

                   Thought: …
                   Action: search_chatrecord
                   Action Input: {"keywords": "hiking", "date_from": "2023/05/01"}

               (an ``Observation:`` the model writes itself, and anything after it, is ignored; the input may also
               be bare words for a search or bare numbers for a note);
``tool_call``  a tool call: the provider's native ``tool_calls`` (:attr:`~refind_cli.model.Reply.tool_calls`), or
               one written as JSON text (``{"name": "take_note", "arguments": {"results": [1]}}``, also inside
               ``{"function": …}``, ``{"tool_calls": […]}`` or a ``<tool_call>`` tag).

Every form goes through one normaliser: action and field names match whatever their case and separators, with a
few aliases the paper's re-implementations use (``ACTION_ALIASES``, ``FIELD_ALIASES``: ``query`` → ``keywords``,
``indices`` → ``results``, ``start_date`` → ``date_from``, …). Fields no action takes are ignored and listed (a
user id is not something the planner can set). A reply that cannot be carried out raises :class:`ReplyError`
saying what is wrong; the planner sends that back as a correction. Hostile shapes are malformed replies too, never
a crash: JSON nested deeper than the interpreter can decode (a ``RecursionError`` inside ``json``); and only the
first ``MAX_OBJECTS`` ``{`` of a reply are tried as the start of an object (each try may read to the end of the
text, so a reply of endless braces costs ``MAX_OBJECTS`` decodes, not one per brace).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .contract import LONE_SURROGATE
from .model import ToolCall

ACTIONS = ("search_chatrecord", "take_note", "finish_search")
ACTION_FIELDS = {
    "search_chatrecord": {"keywords", "date_from", "date_to"},
    "take_note": {"results"},
    "finish_search": set(),
}
FORMS = ("json", "react", "tool_call")
MAX_OBJECTS = 100  # candidate "{" positions decoded per reply; a real reply has a handful
MAX_DIGITS = 18  # digits of a result number at most: a longer run of digits names no result (and int() may refuse it)

# Keys are names lowercased with everything but letters removed ("Search-ChatRecord" → "searchchatrecord").
ACTION_ALIASES = {
    "searchchatrecord": "search_chatrecord",
    "searchchatrecords": "search_chatrecord",
    "search": "search_chatrecord",
    "takenote": "take_note",
    "takenotes": "take_note",
    "note": "take_note",
    "finishsearch": "finish_search",
    "finish": "finish_search",
}
FIELD_ALIASES = {
    "thought": "thought",
    "thoughts": "thought",
    "reasoning": "thought",
    "keywords": "keywords",
    "keyword": "keywords",
    "query": "keywords",
    "searchquery": "keywords",
    "terms": "keywords",
    "datefrom": "date_from",
    "fromdate": "date_from",
    "startdate": "date_from",
    "datestart": "date_from",
    "dateto": "date_to",
    "todate": "date_to",
    "enddate": "date_to",
    "dateend": "date_to",
    "results": "results",
    "result": "results",
    "resultnumbers": "results",
    "numbers": "results",
    "indices": "results",
    "index": "results",
    "ids": "results",
    "resultids": "results",
}


class ReplyError(Exception):
    """The planner's reply cannot be carried out; the message goes back to it as a correction."""

    def __init__(self, message: str, *, form: str | None = None) -> None:
        super().__init__(message)
        self.form = form  # the form the reply was recognised as (None: none of them)


@dataclass(frozen=True)
class Action:
    name: str
    thought: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()  # fields the planner sent that no action takes (user ids, …): never used
    form: str = "json"  # which form of reply it was parsed from: json | react | tool_call
    more: int = 0  # further actions the reply held after this one: never carried out (one action per reply)


def parse_reply(text: str, tool_calls: Sequence[ToolCall] = ()) -> Action:
    """A reply (its text, and the tool calls the provider returned with it) → an Action; ReplyError when it cannot
    be carried out, saying what is wrong."""
    body = _THINK.sub("", text or "")
    if tool_calls:
        return _native_call(tool_calls, body)
    objects, error, more = _objects(body)
    for obj in objects:
        if "action" in obj:
            return replace(_action(obj.get("action"), _inputs(obj), form="json"), more=more)
    react = _react(body)
    if react is not None:
        return react
    for obj in objects:
        call = _written_call(obj)
        if call is not None:
            name, arguments = call
            return _action(name, _arguments(name, arguments), form="tool_call")
    if objects:
        return _action(None, objects[0], form="json")
    if error is not None:
        raise ReplyError(
            f"the reply is not valid JSON ({error.msg} at character {error.pos + 1}); reply with "
            "exactly one JSON object"
        )
    raise ReplyError(
        "the reply holds no JSON object; reply with exactly one JSON object such as "
        '{"thought": "…", "action": "finish_search"}'
    )


# ---- JSON ------------------------------------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)  # local reasoning models (qwen, deepseek) think aloud
_DECODER = json.JSONDecoder()
_TOO_DEEP = "the reply nests JSON too deeply to read; reply with one flat JSON object"


def _decode(text: str, start: int, form: str | None) -> Any:
    """The JSON value starting at ``start`` (trailing text ignored). JSONDecodeError when invalid; ReplyError when
    nested past what the decoder can recurse into (``json`` raises RecursionError there, which must never escape)."""
    return _decode_at(text, start, form)[0]


def _decode_at(text: str, start: int, form: str | None) -> tuple[Any, int]:
    """:func:`_decode`, and where the value ends."""
    try:
        value, end = _DECODER.raw_decode(text, start)
        return unicode(value), end
    except RecursionError:
        raise ReplyError(_TOO_DEEP, form=form) from None
    except ValueError as exc:  # an integer past Python's limit on digits (int_max_str_digits): invalid JSON here
        if isinstance(exc, json.JSONDecodeError):
            raise
        raise json.JSONDecodeError(_LONG_NUMBER, text, start) from None


_LONG_NUMBER = "a number too long to read"


def unicode(value: Any) -> Any:
    """``value`` with each unpaired UTF-16 surrogate in its text as U+FFFD. JSON may escape one ("\\ud800"), which
    decodes to a string that is not Unicode: neither the trace (UTF-8 in SQLite) nor the next request could hold it."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [unicode(v) for v in value]
    if isinstance(value, dict):
        return {unicode(k): unicode(v) for k, v in value.items()}
    return value


def _objects(body: str) -> tuple[list[dict[str, Any]], json.JSONDecodeError | None, int]:
    """Every JSON object that starts at a "{" of the reply (nested ones too), in order, up to the first naming an
    action; the first decode error (its position counted from the start of the object it was in); and how many
    objects naming an action follow that one (a model sending several actions in one reply, a JSON array of them)."""
    found: list[dict[str, Any]] = []
    error: json.JSONDecodeError | None = None
    more = 0
    acted = False  # an object naming an action was found: the reply's; the rest are only counted
    start = body.find("{")
    tried = 0
    while start >= 0:
        tried += 1
        if tried > MAX_OBJECTS:  # each attempt may read to the end of the text: bounded, never quadratic
            break
        try:
            value, end = _decode_at(body, start, None)
        except json.JSONDecodeError as exc:
            if error is None and not acted:
                error = json.JSONDecodeError(exc.msg, exc.doc, exc.pos - start)
        except ReplyError:
            if not acted:
                raise
            break
        else:
            if isinstance(value, dict) and "action" in value:
                if acted:
                    more += 1
                else:
                    found.append(value)
                    acted = True
                start = body.find("{", end)  # (what it holds is its own: not another action)
                continue
            if isinstance(value, dict) and not acted:
                found.append(value)
        start = body.find("{", start + 1)
    return found, error, more


def _key(name: str) -> str:
    return re.sub(r"[^a-z]", "", name.lower())


def _show(value: Any) -> str:
    """A value the planner sent, for a correction: JSON, cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (RecursionError, TypeError, ValueError):
        text = type(value).__name__
    return text if len(text) <= 80 else text[:79] + "…"


def _action(raw_name: Any, fields: dict[str, Any], *, form: str) -> Action:
    """The one normaliser every form ends in: the action's name, its fields (aliases resolved), validated."""
    name = ACTION_ALIASES.get(_key(raw_name)) if isinstance(raw_name, str) else None
    if name is None:
        label = '"action"' if form == "json" else "the action" if form == "react" else "the tool"
        raise ReplyError(f"{label} must be one of {', '.join(ACTIONS)}; got {_show(raw_name)}", form=form)
    allowed = ACTION_FIELDS[name] | {"thought"}
    taken = {k: v for k, v in fields.items() if k in allowed}
    ignored = []
    for k, v in fields.items():
        if k in allowed or k == "action":
            continue
        canonical = FIELD_ALIASES.get(_key(k))
        if canonical in allowed and canonical not in taken:
            taken[canonical] = v
        else:
            ignored.append(k)
    thought = taken.get("thought")
    return Action(
        name=name,
        thought=thought.strip() if isinstance(thought, str) else "",
        args=_args(name, taken, form),
        ignored=tuple(sorted(ignored)),
        form=form,
    )


def _args(name: str, fields: dict[str, Any], form: str) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if name == "search_chatrecord":
        kw = fields.get("keywords")
        if isinstance(kw, list) and all(isinstance(k, str) for k in kw):
            kw = " ".join(kw)
        if not isinstance(kw, str) or not kw.strip():
            raise ReplyError('search_chatrecord needs "keywords": a non-empty string of search words', form=form)
        args["keywords"] = kw.strip()
        for key in ("date_from", "date_to"):
            value = fields.get(key)
            if value is None or (isinstance(value, str) and not value.strip()):
                continue
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)  # a JSON number is read as its digits are in a string (contract.parse_when)
            if not isinstance(value, str):
                raise ReplyError(
                    f'"{key}" must be a date such as "2023/05/08" (a string) or Unix ms (a whole number), got '
                    f"{_show(value)}",
                    form=form,
                )
            args[key] = value.strip()
    elif name == "take_note":
        raw = fields.get("results")
        if isinstance(raw, (int, str)) and not isinstance(raw, bool):
            raw = [raw]
        numbers = []
        for item in raw if isinstance(raw, list) else [None]:
            if isinstance(item, str) and item.strip().isascii() and item.strip().isdigit():  # "²" is a digit too
                item = int(item.strip()) if len(item.strip()) <= MAX_DIGITS else item
            if isinstance(item, bool) or not isinstance(item, int):
                raise ReplyError(
                    'take_note needs "results": a list of result numbers of the last search, e.g. [1, 3]', form=form
                )
            numbers.append(item)
        if not numbers:
            raise ReplyError('take_note needs at least one result number in "results"', form=form)
        args["results"] = numbers
    return args


_NESTED = ("actioninput", "arguments", "args", "parameters", "input")  # {"action": …, "action_input": {…}} (LangChain)


def _inputs(obj: dict[str, Any]) -> dict[str, Any]:
    """A JSON reply's fields, with those nested under ``action_input`` (or ``arguments``, …) lifted beside the
    action; a field given at the top level wins. A string there is the action's one argument, as in ReAct."""
    key = next((k for k in obj if _key(k) in _NESTED and k not in ("action", "thought")), None)
    if key is None:
        return obj
    nested = obj[key]
    if isinstance(nested, str):
        nested = _react_input(
            ACTION_ALIASES.get(_key(obj["action"])) if isinstance(obj["action"], str) else None, nested
        )
    if not isinstance(nested, dict):
        return obj
    merged = {k: v for k, v in obj.items() if k != key}
    for k, v in nested.items():
        merged.setdefault(k, v)
    return merged


# ---- ReAct text ------------------------------------------------------------------------------------------------

_MARK = r"^[ \t>*_#-]*{label}[ \t*_]*:[ \t*_]*"  # "Action:", "**Action:**", "> Action:" at the start of a line
_ACTION_LINE = re.compile(_MARK.format(label="action") + r"(?P<rest>.*)$", re.I | re.M)
_INPUT_LINE = re.compile(_MARK.format(label=r"action[ \t_]*input"), re.I | re.M)
_THOUGHT_LINE = re.compile(_MARK.format(label="thought"), re.I | re.M)
_OBSERVATION = re.compile(_MARK.format(label="observation"), re.I | re.M)
_NEXT_STEP = re.compile(_MARK.format(label=r"(?:thought|action|observation|final[ \t]*answer)"), re.I | re.M)
_NAME = re.compile(r"[`'\"]*(?P<name>[A-Za-z][\w\-]*)[`'\"]*")
_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")


def _react(body: str) -> Action | None:
    """``Thought:`` / ``Action:`` / ``Action Input:`` lines → an Action; None when the reply has no ``Action:`` line.

    The first ``Action:`` counts; an ``Observation:`` (the model playing the tool) ends the reply."""
    seen = _OBSERVATION.search(body)
    if seen is not None:
        body = body[: seen.start()]
    line = _ACTION_LINE.search(body)
    if line is None:
        return None
    rest = line.group("rest").strip()
    named = _NAME.match(rest)
    raw_name = named.group("name").strip() if named else rest
    thought_at = _THOUGHT_LINE.search(body, 0, line.start())
    thought = body[thought_at.end() : line.start()].strip() if thought_at else ""
    given = _INPUT_LINE.search(body, line.end())
    if given is not None:
        after = _NEXT_STEP.search(body, given.end())
        text = body[given.end() : after.start() if after else len(body)]
    else:  # "Action: take_note [1, 3]", "Action: search_chatrecord(hiking)"
        text = rest[named.end() :] if named else ""
        text = text.strip().removeprefix("(").removesuffix(")")
    name = ACTION_ALIASES.get(_key(raw_name))
    fields = _react_input(name, _FENCE.sub("", text.strip()).strip())
    if thought or "thought" not in fields:
        fields["thought"] = thought
    more = len(_ACTION_LINE.findall(body, line.end()))  # further "Action:" lines: a reply of several steps
    return replace(_action(raw_name, fields, form="react"), more=more)


def _react_input(name: str | None, text: str) -> dict[str, Any]:
    """What ``Action Input:`` gave: a JSON object's fields; a list or bare text as the action's one argument."""
    value: Any = text
    if text[:1] in ("{", "[", '"'):
        try:
            value = _decode(text, 0, "react")
        except json.JSONDecodeError as exc:
            if text[0] == "{":
                raise ReplyError(
                    f"the Action Input is not valid JSON ({exc.msg} at character {exc.pos + 1})", form="react"
                ) from None
    if isinstance(value, dict):
        return dict(value)
    if name == "search_chatrecord":
        return {"keywords": value.strip("'\"` ") if isinstance(value, str) else value}
    if name == "take_note":
        if isinstance(value, str):
            numbers = [int(n) for n in re.findall(r"\d+", value) if len(n) <= MAX_DIGITS]
            return {"results": numbers or value}
        return {"results": value}
    return {}  # finish_search takes nothing; an unknown action is refused by its name


# ---- tool calls ------------------------------------------------------------------------------------------------


def _native_call(calls: Sequence[ToolCall], body: str) -> Action:
    if len(calls) > 1:
        names = ", ".join(c.name or "?" for c in calls)
        raise ReplyError(f"send one action per reply; got {len(calls)} tool calls ({names})", form="tool_call")
    (call,) = calls
    fields = _arguments(call.name, call.arguments)
    if "thought" not in fields and body.strip():
        fields["thought"] = body.strip()  # the text the model sent beside its call says why
    return _action(call.name, fields, form="tool_call")


def _written_call(obj: dict[str, Any]) -> tuple[Any, Any] | None:
    """(name, arguments) when a JSON object is a tool call written out as text, else None."""
    calls = obj.get("tool_calls")
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        if len(calls) > 1:
            raise ReplyError(f"send one action per reply; got {len(calls)} tool calls", form="tool_call")
        obj = calls[0]
    function = obj.get("function")
    if isinstance(function, dict):
        obj = function
    if not isinstance(obj.get("name"), str):
        return None
    for key in ("arguments", "parameters", "args", "input"):
        if key in obj:
            return obj["name"], obj[key]
    return None


def _arguments(name: Any, arguments: Any) -> dict[str, Any]:
    """A tool call's arguments (an object, or the JSON text of one) → its fields."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        text = arguments.strip()
        try:
            arguments = _decode(text, 0, "tool_call")
        except json.JSONDecodeError as exc:
            raise ReplyError(
                f"the arguments of tool call {_show(name)} are not valid JSON ({exc.msg} at character {exc.pos + 1})",
                form="tool_call",
            ) from None
    if not isinstance(arguments, dict):
        raise ReplyError(f"the arguments of tool call {_show(name)} must be a JSON object", form="tool_call")
    return dict(arguments)
