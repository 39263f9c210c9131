"""The `refind` command line: the app, its commands (one module each under ``commands/``), error handling and the
entry point, which builds only the command it runs."""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import os
import sqlite3
import sys
from typing import Any

import typer
from typer._click.exceptions import NoSuchOption  # (typer's own click: its usage errors are of these classes)
from typer.core import TyperGroup

from ..errors import InvalidInput, RefindError, StorageError
from ..signals import Terminated
from .options import ARGS, CURRENT_DB
from .plain import escape_what_cannot_be_written

HELP = """\
refind — agent memory over raw chat logs, stored verbatim in SQLite and searched with BM25.

Replay a conversation, then search it:

\b
  refind add --file fixtures/conversations.jsonl
  refind search "where was the Lisbon hotel" --user alice --mode bm25

A replay file is JSONL; each line is either an Add request in the contest's shape

\b
  {"request_id": "r1", "user_id": "alice", "session_id": "s1",
   "messages": [{"role": "user", "content": "Alice: hi", "timestamp": 1700000000000}]}

or a single message (consecutive lines of one user and session are grouped into requests):

\b
  {"user_id": "alice", "session_id": "s1", "role": "user", "content": "hi", "timestamp": 1700000000000}
"""


class RefindGroup(TyperGroup):
    """Turns a RefindError from any command into one red line on stderr and the error's exit code; a ``sqlite3``
    error that escaped a command (disk full, locked, read-only, damaged) is first named by ``store.storage_error``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[ARGS] = list(args)  # what the command line held, for the error line of a surrogate (invoke)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            _refuse_repeats(ctx, name, command, rest)
        return name, command, rest

    def invoke(self, ctx: Any) -> Any:  # typer bundles its own click, whose Context type is private
        CURRENT_DB.set(None)
        try:
            try:
                return super().invoke(ctx)
            except OSError as exc:  # the output could not be written (a full disk, /dev/full): said, not a traceback
                if exc.errno == errno.EPIPE and _reader_left():
                    _drop_stdout()
                    raise typer.Exit(READER_LEFT) from None
                if exc.errno not in WRITE_FAULTS:
                    raise
                _drop_stdout()
                raise StorageError(
                    f"cannot write the output: {exc.strerror or exc}; what was written before it may be incomplete"
                ) from None
        except (RefindError, sqlite3.Error, UnicodeEncodeError) as exc:
            from rich.markup import escape

            from .render import error_console, printable

            if isinstance(exc, UnicodeEncodeError):
                if "surrogates not allowed" not in exc.reason:
                    raise
                exc = _not_unicode(exc, ctx.meta.get(ARGS, []))
            elif not isinstance(exc, RefindError):
                from ..store import storage_error

                exc = storage_error(exc, CURRENT_DB.get())
            message = escape(printable(exc.message))  # an id or a value it quotes must not drive the terminal
            error_console().print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
            if exc.search_id is not None:  # a failed agent search is stored: its trace says what happened
                error_console().print(
                    f"agent search {exc.search_id} failed — `refind inspect search {exc.search_id}` shows its trace",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
            raise typer.Exit(exc.exit_code) from None
        except NoSuchOption as exc:
            _dash_hint(exc)
            raise
        except Terminated:  # (signals.py: a file being written was removed, as on Ctrl-C; click said "Aborted!", 1)
            print("stopped by SIGTERM; the file it was writing was removed", file=sys.stderr)
            raise typer.Exit(143) from None


def _dash_hint(exc: NoSuchOption) -> None:
    """Name the way out of an "option" that is the start of a command's text: `refind search "-5 degrees"` and
    `refind add "-1 for that" …` read it as an option (click's "No such option: -5", nothing more); after ``--``
    it is the text. Only where no option is close to it (``--usr`` keeps click's "Possible options: --user")."""
    command = getattr(exc.ctx, "command", None)
    texts = [p for p in getattr(command, "params", []) if p.param_type_name == "argument"]
    long = exc.option_name[:2] == "--" and exc.option_name[2:3].isalpha()
    if exc.possibilities or len(texts) != 1 or long or exc.ctx is None:
        return
    name = (texts[0].metavar or texts[0].name or "text").upper()
    words: list[str] = []
    ctx = exc.ctx
    while ctx.parent is not None:  # the command's words below the program's own name (whatever runs it)
        words.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    exc.message += (
        f" (if it begins the {name}, put the {name} after '--', which ends the options: "
        f"refind {' '.join(words)} [OPTIONS] -- '{exc.option_name}…')"
    )


def _refuse_repeats(ctx: Any, name: str | None, command: Any, args: list[str]) -> None:
    """A usage error (exit 2) for an option of one value given twice: click keeps the last, so `refind forget --user
    alice --user bob --yes` forgot bob (the server refuses a repeated parameter the same way). Read by the command's
    own parser in a throwaway context (of typer's own click, as ``ctx`` is); a line it cannot read is left to the
    real parse to refuse."""
    from collections import Counter

    sub = type(ctx)(command, parent=ctx, info_name=name, resilient_parsing=True)
    try:
        _, _, order = command.make_parser(sub).parse_args(args=list(args))
    except Exception:  # (click's usage errors: the real parse says them)
        return
    once = Counter(
        p
        for p in order
        if p.param_type_name == "option" and not (p.multiple or getattr(p, "count", False) or p.is_flag or p.nargs != 1)
    )
    for option, times in once.items():
        if times > 1:
            sub.fail(f"{option.opts[0]} given {times} times; give it once (the last one would win)")


WRITE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})  # a write the device refused

# The exit status of a command whose reader closed its end early (`refind export --user alice | head -1`): the 141
# (128 + SIGPIPE) a shell reports for cat, grep or git there, with nothing said. `set -o pipefail` treats it as it
# treats theirs; 0 would tell a script that an export whose reader died was whole, and 1 (what click and Python's
# own handling give) is refind's "any other error".
READER_LEFT = 141


def _reader_left() -> bool:
    """Whether standard output is a pipe or socket whose reader has closed it: an EPIPE from anything else (a
    replay's reader, a model's connection) is not this. Where poll() is missing (Windows) the EPIPE is trusted."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # (CliRunner's stdout has no file descriptor)
        return False
    if not hasattr(select, "poll"):
        return True
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))


def _flushed() -> bool:
    """Flush standard output (what a command left buffered is written at exit); False, with stdout dropped, when its
    reader has left — else the interpreter's own flush at exit says "Exception ignored … BrokenPipeError", exit 120."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
        return False
    except (OSError, ValueError):  # (another fault was said by the command; a closed stdout has nothing to flush)
        pass
    return True


def _drop_stdout() -> None:
    """Point standard output at the null device: what is still buffered for it would fail again at exit ("Exception
    ignored … OSError" after the error line)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _not_unicode(exc: UnicodeEncodeError, args: list[str]) -> RefindError:
    """The error line for text holding a lone surrogate, which cannot be encoded (SQLite, a terminal, a file). Python
    hands argv bytes (and a variable's) that are not UTF-8 over as lone surrogates: blamed on the argument or the
    REFIND_* variable that holds one; anything else — a stored value, a file name, a provider's text — is said to be
    what it is, not the user's arguments."""
    bad = exc.object[exc.start : exc.end]
    if any(_has_surrogate(arg) for arg in args):
        return InvalidInput(
            f"an argument holds bytes that are not UTF-8 text ({bad!a}); ids and text are stored and looked up as "
            "Unicode: pass them in UTF-8"
        )
    named = sorted(name for name, value in os.environ.items() if name.startswith("REFIND_") and _has_surrogate(value))
    if named:
        return InvalidInput(f"{', '.join(named)} holds bytes that are not UTF-8 text ({bad!a}): set it in UTF-8")
    around = exc.object[max(0, exc.start - 40) : exc.end + 40]
    return RefindError(
        f"text that is not Unicode could not be written: it holds an unpaired UTF-16 surrogate ({bad!a}, in "
        f"{around!a}); it came from stored data, a file or a model's reply, not from the arguments"
    )


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def _new_app() -> typer.Typer:
    new = typer.Typer(
        cls=RefindGroup,
        help=HELP,
        no_args_is_help=True,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    new.callback()(_root)
    return new


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"refind {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", help="Print refind's version and exit.", is_eager=True, callback=_print_version
    ),
) -> None:
    """refind's top level: only --version lives here."""


# The module under commands/ that registers each top-level command. A process running one of them builds an app
# holding only that module's commands: typer builds every registered command's parameters before it runs one, and
# the other modules' imports (rich among them) are ~40-90 ms of a cold `refind search` (BENCHMARKS.md, "Index on
# write"). `inspect` is left out: traces.py registers into its app, which the full app does once.
ONE_COMMAND = {
    "add": "add",
    "search": "search",
    "eval": "evaluate",
    "serve": "serve",
    "mcp": "mcp",
    "expire": "lifecycle",
    "forget": "lifecycle",
    "export": "lifecycle",
    "backup": "backup",
    "restore": "restore",
}


def command_app(name: str) -> typer.Typer:
    """An app with the commands of ``name``'s module alone (``name`` a key of ``ONE_COMMAND``)."""
    module = importlib.import_module(f"{__package__}.commands.{ONE_COMMAND[name]}")
    one = _new_app()
    module.register(one)
    return one


@functools.cache
def full_app() -> typer.Typer:
    """The app with every command (built once, on first use: ``refind --help``, the tests, ``refind inspect``)."""
    from .commands import add, backup, evaluate, inspect, lifecycle, mcp, restore, search, serve, traces

    full = _new_app()
    traces.register(inspect.inspect_app)  # here, not in inspect.py: traces.py imports inspect's helpers
    for module in (add, search, evaluate, serve, mcp, lifecycle, inspect, backup, restore):
        module.register(full)
    return full


def main() -> None:
    """Console entry point (``refind`` and ``python -m refind_cli``): the one command named builds alone."""
    # Nothing refind does calls BLAS, but numpy's OpenBLAS starts a thread per core that spins while it loads: ~140 ms
    # of CPU in every process, and wall time when the cores are busy (BENCHMARKS.md, "Index on write"). A value set
    # by the user is kept; the Python API, which runs in someone else's process, leaves it alone.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    escape_what_cannot_be_written()  # a Latin-1 console shown Chinese text: escapes, not a traceback
    if any(name.startswith("REFIND_") for name in os.environ):
        from ..settings import misspelt_variables

        for warning in misspelt_variables(os.environ):
            print(f"warning: {warning}", file=sys.stderr)
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in ("mcp", "serve"):  # (servers: the MCP SDK claims stdout itself; serve logs to stderr)
        _buffer_unbuffered_stdout()
    code: str | int | None = 0
    try:
        (command_app(name) if name in ONE_COMMAND else full_app())()
    except SystemExit as exc:  # (click ends every command so, in standalone mode)
        code = exc.code
    if not _flushed():
        code = READER_LEFT
    _end_now_if_a_model_call_runs(code)
    sys.exit(code)


def _buffer_unbuffered_stdout() -> None:
    """Under ``PYTHONUNBUFFERED`` (``python -u``, many Docker images) stdout's text layer writes straight to the file
    and drops what a partial write leaves: when a pipe's reader closed mid-write the rest was lost unsaid and the
    command exited 0. A buffered layer that writes every line at once (line buffering) writes all or raises."""
    import io

    raw = getattr(sys.stdout, "buffer", None)
    if not isinstance(sys.stdout, io.TextIOWrapper) or not isinstance(raw, io.FileIO):
        return
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=sys.stdout.encoding,
        errors=sys.stdout.errors,
        line_buffering=True,
        write_through=True,
    )


def _end_now_if_a_model_call_runs(code: object) -> None:
    """End the process now, its output flushed, when a model call the deadline cut short still runs in its daemon
    thread (``model.calls_left_running``). The interpreter's shutdown stops such a thread wherever it is: inside the
    import system (litellm imports lazily on its first call) it keeps Python's import lock for ever, and a finalizer
    that imports at shutdown (litellm's AsyncHTTPHandler.__del__) then waits on it for ever — an agent search printed
    its answer and never exited (a probe: 14 minutes; 3 of 213 searches under load with --deadline 5 to 12 s)."""
    model = sys.modules.get("refind_cli.model")  # (only a process that used a model: bm25 never imports it)
    if model is None or not model.calls_left_running():
        return
    if isinstance(code, str):  # sys.exit("message"): said on stderr, exit status 1, as the interpreter would
        print(code, file=sys.stderr)
    status = code if isinstance(code, int) else 0 if code is None else 1
    logging = sys.modules.get("logging")  # (imports nothing here: the thread left running may hold the import lock)
    if logging is not None:
        with contextlib.suppress(Exception):
            logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)
