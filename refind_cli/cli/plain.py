"""Output that does not need rich: JSON for scripts, and the progress report of a one-time re-index (which imports
rich only when there is something to draw). `refind search --json` prints through here alone, so it never imports
rich (~90 ms of a cold process)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no rich markup, no wrapping): what scripts parse. Where stdout cannot write every
    character (:func:`writes_unicode`), every non-ASCII one is a ``\\uXXXX`` escape: the same JSON, never a crash."""
    sys.stdout.write(json.dumps(data, ensure_ascii=not writes_unicode(sys.stdout), indent=2) + "\n")
    sys.stdout.flush()


def print_json_streamed(data: dict[str, Any]) -> None:
    """:func:`print_json` of ``data``, byte for byte, where a value that is an iterator (a session's turns) is written
    an item at a time as it is read: a list of 200,000 turns is never held, nor one string of all of it."""
    ensure_ascii = not writes_unicode(sys.stdout)
    out = sys.stdout
    out.write("{")
    for n, (key, value) in enumerate(data.items()):
        out.write(("," if n else "") + "\n  " + json.dumps(key, ensure_ascii=ensure_ascii) + ": ")
        if not isinstance(value, Iterator):
            out.write(_indented(value, ensure_ascii))
            continue
        empty = True
        for item in value:
            out.write(("[" if empty else ",") + "\n    " + _indented(item, ensure_ascii, "    "))
            empty = False
        out.write("[]" if empty else "\n  ]")
    out.write("\n}\n" if data else "}\n")
    out.flush()


def _indented(value: Any, ensure_ascii: bool, pad: str = "  ") -> str:
    """``value`` as json.dumps(indent=2) writes it, its lines after the first indented by ``pad`` (a line break in a
    JSON string is escaped, so each one in the text starts a line). Dicts of string keys, lists, strings, integers,
    booleans and null are laid out here with json's own string quoting: ~2.6× faster than json.dumps, whose indented
    form runs its pure-Python encoder; anything else is json.dumps's (floats, other keys)."""
    out: list[str] = []
    _encode(value, pad, out, encode_basestring_ascii if ensure_ascii else encode_basestring, ensure_ascii)
    return "".join(out)


def _encode(value: Any, pad: str, out: list[str], quote: Callable[[str], str], ensure_ascii: bool) -> None:
    kind = type(value)
    if kind is str:
        out.append(quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is dict and value and all(type(k) is str for k in value):
        inner = pad + "  "
        lead = "{\n" + inner
        for k, v in value.items():
            out.append(lead + quote(k) + ": ")
            _encode(v, inner, out, quote, ensure_ascii)
            lead = ",\n" + inner
        out.append("\n" + pad + "}")
    elif (kind is list or kind is tuple) and value:
        inner = pad + "  "
        lead = "[\n" + inner
        for v in value:
            out.append(lead)
            _encode(v, inner, out, quote, ensure_ascii)
            lead = ",\n" + inner
        out.append("\n" + pad + "]")
    else:
        out.append(json.dumps(value, ensure_ascii=ensure_ascii, indent=2).replace("\n", "\n" + pad))


def writes_unicode(stream: Any) -> bool:
    """Whether ``stream`` can write every character: its encoding is a UTF. A Latin-1 or cp1252 console, a Windows
    pipe, or ``PYTHONIOENCODING=ascii`` cannot write Chinese text. UTF-7 can, but not as text that reads back: it
    writes "+" as "+-", "\\" as "+AFw-" and "é" as "+AOk", which a JSON reader (UTF-8) takes for those characters."""
    name = _codec(stream)
    return name is not None and name.startswith("utf") and name != "utf-7"


def _codec(stream: Any) -> str | None:
    import codecs

    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name
    except LookupError:
        return None


def escape_what_cannot_be_written() -> None:
    """On a stdout or stderr that cannot write every character, write what it cannot as ``\\u5317``-style escapes
    instead of ending the command with a UnicodeEncodeError (the command's own process only: ``refind`` calls it)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and not writes_unicode(stream):
            if _codec(stream) == "utf-7":  # (ASCII, escapes and all, as written: no "+AFw-" for a backslash)
                reconfigure(encoding="ascii", errors="backslashreplace")
            else:
                reconfigure(errors="backslashreplace")


def index_progress() -> Callable[[int, int], None]:
    """A progress report for a one-time re-index of an upgraded database: a bar on stderr on a terminal, nothing
    elsewhere. The bar (and rich) is made on the first report, so opening a database that needs no indexing —
    every open but the first after an upgrade — imports nothing."""
    bar: Any = None
    task: Any = None
    looked = False  # whether stderr was checked for a terminal (on the first report)

    def report(done: int, total: int) -> None:
        nonlocal bar, task, looked
        if not looked:
            looked = True
            from rich.console import Console

            err = Console(stderr=True)
            if err.is_terminal:
                from rich.progress import Progress

                bar = Progress(console=err, transient=True)
                task = bar.add_task("indexing messages for search", total=None)
        if bar is None:
            return
        bar.start()
        bar.update(task, completed=done, total=total)
        if done >= total:
            bar.stop()

    return report
