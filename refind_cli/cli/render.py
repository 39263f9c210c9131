"""Rich renderings of refind's results. The only module (with cli/commands) that knows about rich."""

from __future__ import annotations

import errno
import os
import re
import sys
from datetime import UTC
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .plain import print_json as print_json  # the commands print JSON through render too
from .plain import print_json_streamed as print_json_streamed

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from ..blocks import Block
    from ..retrieval import NoMatch


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader of stdout closed it (`refind inspect | head`): raised to the CLI's one handler (root.py: exit
        141, nothing said) rather than rich's own exit 1."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def console() -> Console:
    return _Console(highlight=False, soft_wrap=False)


def error_console() -> Console:
    return Console(stderr=True, highlight=False)


# C0 and C1 controls but tab and line feed; a carriage return not before a line feed (a terminal would return to the
# line's start and write over it; rich drops it); the bidirectional embeddings, overrides and isolates, which reorder
# what follows them on screen ("Trojan Source"); the line and paragraph separators
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]|\r(?!\n)")


def printable(text: str) -> str:
    """Stored text made safe for a terminal: control characters (ESC above all) shown as ``\\x1b``, a lone carriage
    return as ``\\x0d``, and the characters that reorder text on screen (U+202E …) as ``\\u202e``, so a message
    cannot recolour, retitle, rewrite or disguise what the reader's terminal shows. Joiners and marks that spell words
    (Persian's zero-width non-joiner, an emoji's joiner) are kept. (``--json`` output is escaped by JSON itself.)"""
    return _CONTROL.sub(_escaped, text)


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _id(text: str | None) -> Text:
    """An id (user, session, request) as stored — the server's callers choose them — safe for a terminal."""
    return Text(plain_id(text or ""))


def _facts(title: str | Text, *, numbers: bool) -> Table:
    """A two-column table of named facts under a title (values right-aligned when they are counts)."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right" if numbers else "left")
    return table


def replay_summary(summary: dict[str, Any]) -> Table:
    table = _facts(Text(f"Replayed {summary['source']}"), numbers=True)
    table.add_row("lines read", f"{summary['lines']:,}")
    table.add_row("requests added", f"{summary['requests_added']:,}")
    table.add_row("messages added", f"{summary['messages_added']:,}")
    table.add_row("identical replays skipped", f"{summary['duplicates']:,}")
    if summary.get("grown"):  # groups of message lines that grew since a replay: their new messages were added
        table.add_row("grown groups (new messages added)", f"{summary['grown']:,}")
    table.add_row("conflicts", _bad(summary["conflicts"]))
    table.add_row("forgotten (refused)", _bad(summary.get("forgotten", 0)))
    table.add_row("invalid lines", _bad(summary["invalid_lines"]))
    if summary.get("normalized"):
        # each a warning above: Unix seconds read ×1000, or a string of digits read as the number it spells
        table.add_row("values read leniently", f"[yellow]{summary['normalized']:,}[/yellow]")
    return table


def check_report(report: dict[str, Any]) -> Table:
    """`refind inspect --check`: the integrity check's lines and every disagreement of derived data."""
    verdict = "[green]ok[/green]" if report["ok"] else "[red]problems found[/red]"
    table = _facts(Text.from_markup(f"Check of {escape(report['db'])}: {verdict}"), numbers=False)
    for line in report["integrity"][:50]:
        table.add_row("integrity", Text(line))
    for line in report["derived"][:50]:
        table.add_row("derived data", Text(line))
    if not report["derived"] and report["integrity"] == ["ok"]:
        table.add_row("derived data", "agrees with the messages")
    for line in report.get("notes", []):
        table.add_row("note", Text(line))
    return table


def _why(nothing: NoMatch | None, user: str) -> str:
    """Why a search found nothing, as the end of its "no match" line ("" when unknown)."""
    if nothing is None:
        return ""
    if nothing.reason == "none":
        return (
            f": user {printable(user)!r} has no stored message (a user id is matched exactly, case and all; "
            "`refind inspect users` lists them)"
        )
    if nothing.reason == "hidden":
        return (
            f": user {printable(user)!r} has no message this search may see (each was stored after --as-of, or "
            "is older than the retention window)"
        )
    if nothing.reason == "no_words":
        return ": it has no word a search matches (words as common as 'the' or 'of' are not searched)"
    n = nothing.undated
    return (
        f": {n:,} turn{'s' if n != 1 else ''} matching it {'have' if n != 1 else 'has'} no said-at, and "
        "--date-from/--date-to leave out every turn without one"
    )


def _bad(n: int) -> str:
    return f"[red]{n:,}[/red]" if n else "0"


def print_blocks(blocks: Sequence[Block], *, query: str, user: str = "", nothing: NoMatch | None = None) -> None:
    """Evidence blocks as panels: rank, score, session, dates; the anchor turn's lines highlighted. ``nothing``: why
    there is no match, when it is known (:func:`refind_cli.retrieval.no_match`), which is said."""
    from rich.panel import Panel
    from rich.text import Text

    out = console()
    if not blocks:
        out.print(f"no match for {query!r}{_why(nothing, user)}", markup=False)
        return
    chars = sum(len(block.content) for block in blocks)
    if chars > TABLE_MAX_CHARS:
        _plain_blocks(blocks, chars)
        return
    for rank, block in enumerate(blocks, 1):
        body = Text()
        start, end = block.anchor_lines
        for i, line in enumerate(block.content.split("\n")):
            body.append(printable(line) + "\n", style="bold yellow" if start <= i < end else "")
        # the block's dates and id inside the panel, where a narrow terminal wraps them: a panel's subtitle is cut at
        # its width, and an id cut short finds nothing in `refind inspect turn`
        said = f"said {_minute(block.said_at)} · " if block.said_at is not None else ""
        body.append(f"{said}recorded {block.created_at} · id {plain_id(block.id)}", style="dim")
        # Text, not str: ids are the caller's opaque strings, never rich markup ("[/b]" must not crash)
        title = Text(f"#{rank}  score {block.score:.4f}  session {plain_id(block.session_id)}")
        out.print(Panel(body, title=title, title_align="left"))


def _plain_blocks(blocks: Sequence[Block], chars: int) -> None:
    """Evidence blocks past :data:`TABLE_MAX_CHARS` characters as plain text (rich wraps a panel's text ~1 s a MB: a
    pasted log of 5 MB took ~5 s to show): a rule per block with its rank, score and session, its lines — the
    anchor's marked "> ", the others indented by two spaces — and its dates and id."""
    out = sys.stdout
    out.write(
        f"{len(blocks):,} result(s), {chars:,} characters, as plain text (over {TABLE_MAX_CHARS:,} characters; "
        "--json gives the exact text)\n\n"
    )
    for rank, block in enumerate(blocks, 1):
        start, end = block.anchor_lines
        lines = [f"── #{rank}  score {block.score:.4f}  session {plain_id(block.session_id)} ──"]
        for i, line in enumerate(block.content.split("\n")):
            lines.append(("> " if start <= i < end else "  ") + printable(line))
        said = f"said {_minute(block.said_at)} · " if block.said_at is not None else ""
        lines.append(f"{said}recorded {block.created_at} · id {plain_id(block.id)}")
        out.write("\n".join(lines) + "\n\n")
    out.flush()


def _minute(ms: int) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


# ---- lifecycle and inspect ---------------------------------------------------------------------------------------


def when(ms: int | None) -> str:
    """Unix ms as a short UTC time for tables ('—' when unknown)."""
    if ms is None:
        return "—"
    from datetime import datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _span(r: dict[str, Any], *, full: bool = False) -> str:
    """A time range: in full, or compact for table columns (days only when it spans several days)."""
    lo, hi = r["min"], r["max"]
    if lo is None or lo == hi:
        return when(lo)
    a, b = when(lo), when(hi)
    if full:
        return f"{a} … {b}"
    if a[:10] == b[:10]:
        return f"{a[:16]}–{b[11:16]}Z"
    return f"{a[:10]} … {b[:10]}"


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{n:,} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} GiB"


def _retention(days: float | None) -> str:
    return "off (keeps everything)" if days is None else f"{days:g} days"


def _stored_policy(stored: dict[str, Any] | None) -> str:
    if stored is None:
        return "none stored (add, serve, mcp and Memory store one given them: --retention-days, REFIND_RETENTION_DAYS)"
    return f"{_retention(stored['days'])}, {_set_by(stored)}"


def _set_by(stored: dict[str, Any]) -> str:
    return f"set by {escape(stored['set_by'])} at {when(stored['set_at'])}"


def retention_policy(policy: dict[str, Any]) -> str:
    """Which retention window applied, and where it came from (the flag, the database's stored policy, the default)."""
    stored = policy["stored"]
    source = {
        "given": "given (--days / --retention-days / REFIND_RETENTION_DAYS)",
        "stored": f"the database's stored policy, {_set_by(stored)}" if stored else "",
        "default": "the default: the database stores no policy",
    }[policy["source"]]
    line = f"retention window {_retention(policy['retention_days'])}: {source}"
    if policy["source"] == "given" and stored is not None:
        line += f"; the stored policy is {_retention(stored['days'])}"
    if policy["shorter_than_stored"]:
        line += (
            f"\n[yellow]note: {_retention(policy['retention_days'])} is shorter than the stored policy of "
            f"{_retention(stored['days'])}: this run expires what the policy keeps[/yellow]"
        )
    return line


def expire_result(data: dict[str, Any]) -> Any:
    body = _expire_body(data, data.get("policy"))
    if data.get("policy") is None:
        return body
    from rich.console import Group

    return Group(retention_policy(data["policy"]), body)


def _expire_body(data: dict[str, Any], policy: dict[str, Any] | None = None) -> Any:
    if data["retention_days"] is None:
        whence = {"given": " (given for this run)", "stored": " (the database's stored policy)"}
        return "retention is off: nothing expires" + whence.get(policy["source"] if policy else "", "")
    verb = "would expire" if data["dry_run"] else "expired"
    title = (
        f"{verb} {data['messages']:,} message(s) recorded before {when(data['cutoff'])} "
        f"(retention {_retention(data['retention_days'])})"
    )
    if not data["users"]:
        return f"nothing to expire: no message recorded before {when(data['cutoff'])}"
    table = Table(title=title, title_justify="left")
    table.add_column("user")
    for col in ("messages", "requests", "searches"):
        table.add_column(col, justify="right")
    for user, c in data["users"].items():
        table.add_row(_id(user), f"{c['messages']:,}", f"{c['requests']:,}", f"{c['searches']:,}")
    return table


def forget_result(data: dict[str, Any]) -> Table:
    scope = {
        "user": f"user {data['user_id']}",
        "session": f"session {data['session_id']} of user {data['user_id']}",
        "request": f"request {data['request_id']} of user {data['user_id']}",
    }[data["scope"]]
    table = _facts(f"forgot {escape(plain_id(scope))}", numbers=True)
    table.add_row("messages removed", f"{data['messages']:,}")
    table.add_row("requests removed", f"{data['requests']:,}")
    table.add_row("stored searches removed", f"{data['searches']:,}")
    table.add_row("tombstone", f"{data['tombstone_id']} at {when(data['at'])}")
    table.add_row("files scrubbed", "yes" if data["checkpointed"] else "[red]WAL busy: not yet truncated[/red]")
    return table


def overview(data: dict[str, Any]) -> Table:
    table = _facts(f"refind database {escape(data['db'])}", numbers=False)
    table.add_row("size", f"{_size(data['size_bytes'])} (+ {_size(data['wal_bytes'])} WAL)")
    table.add_row("schema version", f"{data['schema_version']} ({', '.join(data['migrations'])})")
    for key in ("users", "sessions", "requests", "messages"):
        table.add_row(key, f"{data[key]:,}")
    table.add_row("said at", _span(data["said_at"], full=True))
    table.add_row("recorded at", _span(data["recorded_at"], full=True))
    table.add_row("retention", _retention(data["retention_days"]))
    table.add_row("stored retention policy", _stored_policy(data["retention_stored"]))
    if data["retention_cutoff"] is not None:
        table.add_row("visible from", when(data["retention_cutoff"]))
    table.add_row("expired, awaiting sweep", f"{data['awaiting_expiry']:,}")
    for key in ("searches", "tombstones", "events"):
        table.add_row(f"stored {key}" if key == "searches" else key, f"{data[key]:,}")
    index = data.get("index")
    if index:
        ratio = index["bytes_per_content_byte"]
        table.add_row(
            "search index",
            f"{index['state']}: {index['messages']:,} messages in {index['segments']:,} segment(s) "
            f"({index['parts']:,} part(s) of postings), "
            f"{_size(index['bytes'])}"
            + (f" ({ratio:.2f}× the text)" if ratio is not None else "")
            + (f", {index['pending_messages']:,} not indexed yet" if index["pending_messages"] else ""),
        )
    return table


def users_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(rows):,} user(s)", title_justify="left")
    table.add_column("user")
    for col in ("sessions", "requests", "messages"):
        table.add_column(col, justify="right")
    table.add_column("said at", no_wrap=True)
    table.add_column("recorded at", no_wrap=True)
    for r in rows:
        table.add_row(
            _id(r["user_id"]),
            f"{r['sessions']:,}",
            f"{r['requests']:,}",
            f"{r['messages']:,}",
            _span(r["said_at"]),
            _span(r["recorded_at"]),
        )
    return table


def user_sessions(data: dict[str, Any]) -> Table:
    table = Table(
        title=f"user {escape(plain_id(data['user_id']))}: {len(data['sessions']):,} session(s), {data['messages']:,} "
        f"message(s), {data['tombstones']} tombstone(s)",
        title_justify="left",
    )
    table.add_column("session")
    table.add_column("requests", justify="right")
    table.add_column("messages", justify="right")
    table.add_column("said at", no_wrap=True)
    table.add_column("recorded at", no_wrap=True)
    for s in data["sessions"]:
        table.add_row(
            _id(s["session_id"]),
            f"{s['requests']:,}",
            f"{s['messages']:,}",
            _span(s["said_at"]),
            _span(s["recorded_at"]),
        )
    return table


def _turn_rows(table: Table, turns: list[dict[str, Any]], style: str = "") -> None:
    for t in turns:
        for i, m in enumerate(t["messages"]):
            table.add_row(
                t["id"] if i == 0 else "", m["role"], when(m["said_at"]), Text(printable(m["content"])), style=style
            )


def _turn_table(title: str | None, *, widths: tuple[int, int] | None = None) -> Table:
    """The transcript's table; with ``widths`` (the role's and the content's columns), every column of a fixed
    width."""
    fixed = widths is not None
    role_width, content_width = widths if widths is not None else (None, None)
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("turn id", no_wrap=True, width=_ID_WIDTH if fixed else None)
    table.add_column("role", width=role_width, overflow="fold" if fixed else "ellipsis")
    table.add_column("said at", no_wrap=True, width=_WHEN_WIDTH if fixed else None)
    table.add_column("content", overflow="fold", width=content_width)
    return table


# A transcript holding more characters than this is printed as plain text unless the caller asks for the table:
# rich draws a table line by line, ~5 µs a character at 80 columns, so a session of ~2 MB took ~10 s as a table and
# its plain form, the same messages whole, ~0.3 s (bench/inspect_session.py). The largest session of the shared
# datasets holds ~43,000 characters (LongMemEval-S): a table.
TABLE_MAX_CHARS = 100_000
TABLE_MAX_MESSAGES = 1_000  # … or more messages than this: each row costs ~0.8 ms whatever its length (20,000 rows of
# four characters took 15 s). The most in one session of the shared datasets is 82 (LongMemEval-S): a table.
_LINE_BREAKS = re.compile(r"[\n\r\t]")


_EDGE_SPACES = re.compile(r"^\s+|\s+$")


def plain_id(text: str) -> str:
    """An id on a plain-text line: every control character escaped, line breaks and tabs too (an id never spans
    lines, so a stored "\r" or "\n" cannot draw a line of its own), and white space at either end ("alice " and
    "alice" are two users, which a table showed alike)."""
    shown = _LINE_BREAKS.sub(lambda m: f"\\x{ord(m.group()):02x}", printable(text))
    return _EDGE_SPACES.sub(lambda m: re.sub(r"\s", _escaped, m.group()), shown)


def _plain_content(text: str) -> str:
    """A message on plain-text lines: control characters escaped, a "\r" not part of a "\r\n" too (a terminal
    would return to the start of the line and overwrite it), further lines indented by two spaces."""
    text = printable(text).replace("\r\n", "\n").replace("\r", "\\x0d")
    return text.replace("\n", "\n  ")


def transcript_chars(turns: Sequence[dict[str, Any]]) -> int:
    """The characters of the turns' messages (what decides between the table and plain text)."""
    return sum(len(m["content"]) for t in turns for m in t["messages"])


def plain_turns(turns: Iterable[dict[str, Any]], *, marked: str | None = None) -> Iterator[str]:
    """The turns as plain text, a chunk per turn: a rule naming the turn id (and "the turn" for ``marked``), then
    each message as ``[said at] role: content`` — every message whole, control characters shown as ``\\x..`` as
    in the tables, a message's further lines indented by two spaces so that none reads as the start of another."""
    for t in turns:
        lines = [f"── turn {plain_id(t['id'])}{' (the turn)' if t['id'] == marked else ''} ──"]
        for m in t["messages"]:
            lines.append(f"[{when(m['said_at'])}] {plain_id(m['role'])}: {_plain_content(m['content'])}")
        yield "\n".join(lines) + "\n\n"


def _print_transcript(
    title: str,
    turns: Iterable[dict[str, Any]],
    drawn: Callable[[], Table],
    *,
    table: bool | None,
    size: tuple[int, int],
    marked: str = "",
) -> None:
    """``drawn()`` up to :data:`TABLE_MAX_CHARS` characters and :data:`TABLE_MAX_MESSAGES` messages (``size``) or when
    ``table`` is True; else the title and :func:`plain_turns`, written as they are made (``turns`` may be read as
    they are written)."""
    over = _over_limits(*size)
    if table or (table is None and not over):
        console().print(drawn())
        return
    why = "--plain" if table is False else f"over {over}; --table draws the table anyway"
    chars = size[1]
    out = sys.stdout
    out.write(f"{plain_id(title)}, {chars:,} characters, as plain text ({why})\n\n")
    for chunk in plain_turns(turns, marked=marked or None):
        out.write(chunk)
    out.flush()


def print_session(data: dict[str, Any], *, table: bool | None = None, size: tuple[int, int] | None = None) -> None:
    """A session's transcript: :func:`session_transcript`, or plain text past the table's limits, or (``table``
    True past them, and more than a page) :func:`print_paged_transcript`. ``data["turns"]`` may be an iterator
    (review.session_turns, read as it is printed) when ``size`` gives its (turns, characters): a turn is a message
    there."""
    if size is None:
        size = (sum(len(t["messages"]) for t in data["turns"]), transcript_chars(data["turns"]))
    title = _session_title(data, size[0])
    if table and _over_limits(*size) and (size[0] > PAGE_MESSAGES or size[1] > PAGE_CHARS):
        print_paged_transcript(title, data["turns"], size=size)
        return
    _print_transcript(
        title, data["turns"], lambda: session_transcript({**data, "turns": list(data["turns"])}), table=table, size=size
    )


def _over_limits(messages: int, chars: int) -> str:
    """What the transcript is over, as a title says it ("" when it is drawn as a table by default)."""
    if chars > TABLE_MAX_CHARS:
        return f"{TABLE_MAX_CHARS:,} characters"
    return f"{TABLE_MAX_MESSAGES:,} messages" if messages > TABLE_MAX_MESSAGES else ""


# A transcript past the table's limits that the caller asked to see as a table is drawn as tables of at most this many
# messages (or characters), one after another, as the session is read: rich measured every cell of the whole
# transcript before drawing its first line, so a session of 50,000 short messages printed nothing for 36 s and peaked
# at 332 MiB (bench/inspect_session.py; round 29 noted 26 s, 430 MB). A page's columns have fixed widths — those a
# long transcript gets at that console width — so the pages line up, and nothing is measured.
PAGE_MESSAGES = 500
PAGE_CHARS = TABLE_MAX_CHARS
_ID_WIDTH, _ROLE_WIDTH, _WHEN_WIDTH = 24, 9, 20  # a message id; "assistant"; "2023-06-01 08:00:00Z"
_FRAME = 5 + 4 * 2  # a table's five vertical lines and its cells' padding


def _page_widths(width: int) -> tuple[int, int]:
    """A page's role and content columns at a console ``width``: the id and the time keep theirs, as a whole table's
    do (``inspect turn ID`` takes the id), and the role and the content share what is left — the content 8 at least,
    then the role as wide as "assistant", else both narrower. (Fixed widths past the console's were cut evenly by
    rich, ids and times too: "004787eabe5d41b408c…", "2023-06-01 08:0…" at 60 columns.)"""
    left = max(2, width - _ID_WIDTH - _WHEN_WIDTH - _FRAME)
    role = max(1, min(_ROLE_WIDTH, left - 8))
    return role, max(1, left - role)


def print_paged_transcript(title: str, turns: Iterable[dict[str, Any]], *, size: tuple[int, int]) -> None:
    """``turns`` as tables of up to :data:`PAGE_MESSAGES` messages or :data:`PAGE_CHARS` characters, each printed as
    soon as it is full (``turns`` may be read as they are printed), under one line naming the session and its size."""
    out = console()
    widths = _page_widths(out.width)
    chars = size[1]
    heading = (
        f"{title}, {chars:,} characters, as tables of up to {PAGE_MESSAGES:,} messages (over {_over_limits(*size)})"
    )
    out.print(Text(heading), soft_wrap=True)  # one line, as the plain text's (ids in it escaped: plain_id)
    page, rows, page_chars = None, 0, 0
    for t in turns:
        if page is None:
            page = _turn_table(None, widths=widths)
        _turn_rows(page, [t])
        rows += len(t["messages"])
        page_chars += sum(len(m["content"]) for m in t["messages"])
        if rows >= PAGE_MESSAGES or page_chars >= PAGE_CHARS:
            out.print(page)
            page, rows, page_chars = None, 0, 0
    if page is not None:
        out.print(page)


def print_turn(data: dict[str, Any], *, table: bool | None = None) -> None:
    """A turn with its neighbours: :func:`turn_view`, or plain text past the table's limits."""
    turns = [*data["before"], data["turn"], *data["after"]]
    size = (sum(len(t["messages"]) for t in turns), transcript_chars(turns))
    _print_transcript(
        _turn_title(data), turns, lambda: turn_view(data), table=table, size=size, marked=data["turn"]["id"]
    )


def _session_title(data: dict[str, Any], turns: int | None = None) -> str:
    turns = len(data["turns"]) if turns is None else turns
    return f"session {plain_id(data['session_id'])} of user {plain_id(data['user_id'])}: {turns:,} turn(s)"


def _turn_title(data: dict[str, Any]) -> str:
    return (
        f"turn {data['position'] + 1} of {data['of']} in session {plain_id(data['session_id'])} "
        f"of user {plain_id(data['user_id'])}"
    )


def session_transcript(data: dict[str, Any]) -> Table:
    table = _turn_table(escape(_session_title(data)))
    _turn_rows(table, data["turns"])
    return table


def turn_view(data: dict[str, Any]) -> Table:
    table = _turn_table(escape(_turn_title(data)))
    _turn_rows(table, data["before"], "dim")
    _turn_rows(table, [data["turn"]], "bold")
    _turn_rows(table, data["after"], "dim")
    return table


# A listing (users, a user's sessions, events, tombstones) of more rows than this is printed as tab-separated lines
# unless the caller asks for the table: rich measures every cell of every row before drawing, ~0.3–0.5 ms a row, so
# 10,000 users took ~4 s, a user's 50,000 sessions ~14 s and 50,000 events (--limit 0) ~27 s, where the lines take
# a fraction of a second (bench/slow_paths.py).
TABLE_MAX_ROWS = 1_000


def print_listing(table: Table, *, drawn: bool | None = None) -> None:
    """``table`` drawn up to :data:`TABLE_MAX_ROWS` rows or when ``drawn`` is True; else its title, then its header
    and rows as tab-separated lines (cells as the table shows them: ids with control characters, tabs and line
    breaks escaped, so a line is a row and a tab a column), written as they are made."""
    rows = table.row_count
    if drawn or (drawn is None and rows <= TABLE_MAX_ROWS):
        console().print(table)
        return
    why = "--plain" if drawn is False else f"over {TABLE_MAX_ROWS:,} rows; --table draws the table anyway"
    out = sys.stdout
    out.write(f"{_cell(table.title or '')}, as tab-separated lines ({why})\n")
    out.write("\t".join(str(column.header) for column in table.columns) + "\n")
    cells = [list(column.cells) for column in table.columns]
    for i in range(rows):
        out.write("\t".join(_cell(column[i]) for column in cells) + "\n")
    out.flush()


def _cell(cell: Any) -> str:
    """A cell's text as the table shows it (a string is rich markup there: ids come as Text, already escaped)."""
    if isinstance(cell, Text):
        text = cell.plain
    else:
        text = str(cell)
        text = Text.from_markup(text).plain if "[" in text else text
    return _LINE_BREAKS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def events_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(rows):,} event(s), newest first", title_justify="left")
    for col in ("id", "at", "kind", "user", "session", "request", "rows", "detail"):
        table.add_column(
            col, justify="right" if col in ("id", "rows") else "left", no_wrap=col == "at", overflow="fold"
        )
    for e in rows:
        detail = e["detail"]
        if isinstance(detail, dict):
            detail = ", ".join(f"{k}={v}" for k, v in detail.items())
        table.add_row(
            str(e["id"]),
            when(e["at"]),
            e["kind"],
            _id(e["user_id"]),
            _id(e["session_id"]),
            _id(e["request_id"]),
            f"{e['rows']:,}",
            _id(str(detail or "")),
        )
    return table


def tombstones_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(rows):,} tombstone(s), newest first", title_justify="left")
    for col in ("id", "at", "scope", "user", "session", "request", "messages"):
        table.add_column(
            col, justify="right" if col in ("id", "messages") else "left", no_wrap=col == "at", overflow="fold"
        )
    for t in rows:
        table.add_row(
            str(t["id"]),
            when(t["at"]),
            t["scope"],
            _id(t["user_id"]),
            _id(t["session_id"]),
            _id(t["request_id"]),
            f"{t['rows']:,}",
        )
    return table


def _since(data: dict[str, Any]) -> str:
    """What a restore undoes, as its question and its result say it."""
    since = data.get("since_backup")
    if not data["same_database"]:
        return "; the backup is of another database"
    if not data.get("descends_from_backup", True):
        return (
            "; the database does not continue from the backup (another backup was restored since it was taken, or it "
            "is over 100,000 writes old): what it undoes is not counted"
        )
    if not since:
        return ""
    words = {"add": "add(s)", "forget": "forget(s)", "expire": "expire sweep(s)", "restore": "restore(s)"}
    done = ", ".join(f"{since[k]:,} {w}" for k, w in words.items() if since.get(k))
    return f"; undoes what was done since it was taken: {done}" if done else ""


def restore_question(data: dict[str, Any]) -> str:
    """``refind restore``'s confirmation question."""
    live = data["live"]
    now = (
        f"({live['messages']:,} messages)"
        if live is not None
        else "(damaged: it cannot be opened)"
        if data["damaged"]
        else "(none there: it is created)"
    )
    return (
        f"Replace everything in {data['db']} {now} with backup {data['backup']} ({data['messages']:,} messages, "
        f"{data['requests']:,} requests) — it brings back what the backup held, messages forgotten or expired since "
        f"included{_since(data)}?"
    )


def restore_result(data: dict[str, Any]) -> str:
    live = data["live"]
    before = (
        f" (it held {live['messages']:,} messages, {live['tombstones']:,} tombstones)"
        if live is not None
        else " (it was damaged)"
        if data["damaged"]
        else ""
    )
    return (
        f"restored {data['backup']} into {data['db']}{before}: {data['requests']:,} requests, "
        f"{data['messages']:,} messages, {data['tombstones']:,} tombstones — what the backup held, messages forgotten "
        f"or expired since it was taken included{_since(data)}"
        + ("" if data["checkpointed"] else "; the WAL was busy (a reader): emptied by the next write's checkpoint")
    )
