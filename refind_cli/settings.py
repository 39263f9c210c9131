"""Every setting of refind in one place: defaults, the REFIND_* environment variables, and how they parse.

The CLI's shared options (``refind_cli/cli/options.py``) and the server read these; domain modules take plain values.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from .errors import InvalidInput

DEFAULT_DB = "refind.db"
DEFAULT_RETENTION_DAYS = 30.0

ENV_DB = "REFIND_DB"
ENV_RETENTION_DAYS = "REFIND_RETENTION_DAYS"
ENV_USER = "REFIND_USER"  # `refind mcp --user`: the one user an MCP server serves
ENV_MCP_CACHE = "REFIND_MCP_CACHE"  # `refind mcp`: directory of the SDK's recorded first answers, or off

# Search (retrieval)
DEFAULT_MODE = "agent"
ENV_MODE = "REFIND_MODE"  # `refind search --mode`: agent | bm25
DEFAULT_INDEX_CACHE_MB = 512
ENV_INDEX_CACHE_MB = "REFIND_INDEX_CACHE_MB"  # megabytes of per-user indexes (and their text) a process keeps

# Agent mode (planner)
DEFAULT_MODEL = "openai/gpt-4o-mini"
ENV_MODEL = "REFIND_MODEL"  # any litellm model string
ENV_API_BASE = "REFIND_API_BASE"  # an OpenAI-compatible server (ollama, vLLM, llama.cpp)
ENV_API_KEY = "REFIND_API_KEY"  # the key sent to --api-base (never the provider's own variable)
DEFAULT_MAX_ACTIONS = 4
MAX_MAX_ACTIONS = 50
ENV_MAX_ACTIONS = "REFIND_MAX_ACTIONS"  # the planner's action budget (read in agent mode only)
DEFAULT_HITS_PER_SEARCH = 5  # hits the planner is shown per search (PAPER.md)
DEFAULT_LLM_TIMEOUT_S = 60.0
ENV_LLM_TIMEOUT = "REFIND_LLM_TIMEOUT"  # seconds per model call attempt
DEFAULT_LLM_RETRIES = 3
MAX_LLM_TIMEOUT_S = 86_400.0  # a day: past this a socket's deadline leaves the platform's time_t
MAX_LLM_RETRIES = 20  # each waits at most model.MAX_WAIT_S: a search gives up within minutes, not days
ENV_LLM_RETRIES = "REFIND_LLM_RETRIES"  # retries on 429 / 5xx / timeouts, exponential backoff from 1 s
# One agent search's overall limit: past it the planner stops and returns what it has (each model call's timeout and
# retries are bounded by the time left). 120 s: a contest's search request must answer, while four to eight replies of
# a hosted model take 5-30 s; a day at most, as a model call's timeout.
DEFAULT_AGENT_DEADLINE_S = 120.0
MAX_AGENT_DEADLINE_S = 86_400.0
ENV_AGENT_DEADLINE = "REFIND_AGENT_DEADLINE"  # seconds one agent search may take in all
# What a later search of the planner skips of what earlier ones showed: every session shown (the paper's design; a
# search whose every hit is in one shows the turns not shown before instead) or only the turns shown
SKIP_MODES = ("session", "turn")
ENV_AGENT_SKIP = "REFIND_AGENT_SKIP"

OFF_WORDS = frozenset({"off", "none", "never"})
MAX_RETENTION_DAYS = 1_000_000  # ~2,700 years


def parse_retention(value: str | float | None, name: str = "retention") -> float | None:
    """Retention in days (default 30). ``off`` turns it off explicitly; values below 1 are refused (InvalidInput: a
    flag's or variable's value, as every setting parsed here, named ``name``: the flag or variable it came from)."""
    if value is None or value == "":
        return DEFAULT_RETENTION_DAYS
    if isinstance(value, str) and value.strip().lower() in OFF_WORDS:
        return None
    try:
        if isinstance(value, bool):  # float(True) is 1: one day, where a flag was meant
            raise TypeError
        days = float(value)
        if days != days:  # NaN: no number at all, neither below nor above a limit
            raise ValueError
    except (TypeError, ValueError):
        raise InvalidInput(f"{name}: {value!r} is not a number of days (or 'off')") from None
    if not days >= 1:
        raise InvalidInput(f"{name}: {value!r} days is below the minimum of 1 day (use 'off' to keep everything)")
    if not days <= MAX_RETENTION_DAYS:  # also inf: the cutoff must stay a SQLite integer
        raise InvalidInput(
            f"{name}: {value!r} days is above the maximum of {MAX_RETENTION_DAYS:,} days (use 'off' to keep everything)"
        )
    return days


def parse_max_actions(value: str | None) -> int:
    """The planner's action budget from --max-actions / REFIND_MAX_ACTIONS (default 4), read only where a planner
    runs: a bad value must not stop a bm25 search, which has no planner."""
    if value is None or not value.strip():
        return DEFAULT_MAX_ACTIONS
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_MAX_ACTIONS:
        raise InvalidInput(
            f"--max-actions / {ENV_MAX_ACTIONS}: {value!r} is not a whole number from 1 to {MAX_MAX_ACTIONS}"
        )
    return number


def parse_agent_deadline(value: str | float | None) -> float:
    """The seconds one agent search may take in all, from --deadline / REFIND_AGENT_DEADLINE (default 120), read only
    where a planner runs (as --max-actions is)."""
    if isinstance(value, str) and not value.strip():
        value = None
    return positive_number(
        f"--deadline / {ENV_AGENT_DEADLINE}", value, DEFAULT_AGENT_DEADLINE_S, maximum=MAX_AGENT_DEADLINE_S
    )


def parse_agent_skip(value: str | None) -> str | None:
    """What the planner's later searches skip, from --skip / REFIND_AGENT_SKIP: session or turn (None when not
    given: the search's configuration decides, session by default), read only where a planner runs."""
    if value is None or not value.strip():
        return None
    skip = value.strip().lower()
    if skip not in SKIP_MODES:
        raise InvalidInput(f"--skip / {ENV_AGENT_SKIP}: must be session or turn, got {value!r}")
    return skip


def mcp_cache_dir() -> Path | None:
    """Where `refind mcp` keeps the SDK's recorded answers to a client's first requests (``REFIND_MCP_CACHE``;
    default ``$XDG_CACHE_HOME/refind``, else ``~/.cache/refind``); None when it is ``off``."""
    value = os.environ.get(ENV_MCP_CACHE, "").strip()
    if value.lower() in OFF_WORDS:
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    try:
        return (Path(base) if base else Path.home() / ".cache") / "refind"
    except RuntimeError:  # no home directory
        return None


def retention_from_env() -> float | None:
    return parse_retention(os.environ.get(ENV_RETENTION_DAYS))


def positive_number(
    name: str,
    value: str | float | int | None,
    default: float,
    *,
    integer: bool = False,
    allow_zero: bool = False,
    maximum: float | None = None,
    why: str = "",
) -> float:
    """A positive (or, with ``allow_zero``, non-negative) number from a flag or variable, at most ``maximum`` when
    given (``why``: what sets that limit, said with it); ``default`` when unset. A bad value is InvalidInput (exit
    code 2), naming the setting."""
    if value is None or value == "":
        return default
    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name}: {value!r} is not a{'n integer' if integer else ' number'}") from None
    if not number < math.inf:  # nan and inf: PRAGMA busy_timeout and a model call's timeout need a number
        raise InvalidInput(f"{name}: must be a finite number, got {value!r}")
    if number < 0 or (number == 0 and not allow_zero):
        raise InvalidInput(f"{name}: must be {'0 or more' if allow_zero else 'positive'}, got {value!r}")
    if maximum is not None and number > maximum:
        raise InvalidInput(f"{name}: must be at most {maximum:,.15g}{why}, got {value!r}")
    return number


DEFAULT_BUSY_TIMEOUT_S = 30.0
ENV_BUSY_TIMEOUT = "REFIND_BUSY_TIMEOUT"  # seconds a write waits for another process's write lock
# SQLite takes a busy timeout as a 32-bit count of milliseconds: past 2^31 - 1 ms PRAGMA busy_timeout reads 0 and
# Python's connect() a negative wait — no waiting at all, a write that meets a lock failing at once (found by a probe).
MAX_BUSY_TIMEOUT_S = (2**31 - 1) // 1000  # 2,147,483 s, about 24.8 days


def busy_timeout_s() -> float:
    """How long a write waits for another process holding the database's write lock (REFIND_BUSY_TIMEOUT)."""
    return positive_number(
        ENV_BUSY_TIMEOUT,
        os.environ.get(ENV_BUSY_TIMEOUT),
        DEFAULT_BUSY_TIMEOUT_S,
        allow_zero=True,
        maximum=MAX_BUSY_TIMEOUT_S,
        why=" (SQLite's limit, 2^31 - 1 milliseconds: about 24.8 days)",
    )


# What a wait for another process's lock is given inside an agent search even when its deadline is nearer or past:
# the open (the search must read something to answer) and the trace's write (BENCHMARKS.md, "An agent search past
# its deadline under another process's lock").
MIN_LOCK_WAIT_S = 1.0


def lock_wait_s(until: float | None, busy: float | None = None) -> float:
    """Seconds a wait for another process's lock may take: the busy timeout (``busy``, else REFIND_BUSY_TIMEOUT) and,
    inside an agent search whose deadline is ``until`` (``time.monotonic()``), no longer than it leaves — but at least
    :data:`MIN_LOCK_WAIT_S` (never more than the busy timeout)."""
    busy = busy_timeout_s() if busy is None else busy
    if until is None:
        return busy
    return min(busy, max(MIN_LOCK_WAIT_S, until - time.monotonic()))


def index_cache_bytes_from_env() -> int:
    """How many bytes of per-user search indexes (segments and the turns' text) one process keeps in memory
    (REFIND_INDEX_CACHE_MB, default 512; 0 = none)."""
    raw = os.environ.get(ENV_INDEX_CACHE_MB, "")
    if not raw.strip():
        return DEFAULT_INDEX_CACHE_MB * 1_000_000
    try:
        size = float(raw)
    except ValueError:
        raise InvalidInput(f"{ENV_INDEX_CACHE_MB}: {raw!r} is not a number of megabytes") from None
    if not math.isfinite(size):
        raise InvalidInput(f"{ENV_INDEX_CACHE_MB}: must be a finite number of megabytes (0 or more), got {raw!r}")
    if size < 0:
        raise InvalidInput(f"{ENV_INDEX_CACHE_MB}: must be 0 or more, got {raw!r}")
    return int(size * 1_000_000)


# ---- `refind serve` ----------------------------------------------------------------------------------------------

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_BODY_MB = 32.0
DEFAULT_SEARCH_THREADS = 256  # agent mode; bm25 mode runs 2 per CPU (server.auto_search_threads)
DEFAULT_EXPIRE_INTERVAL_S = 3600.0
DEFAULT_MAX_INFLIGHT_MB = 256.0  # request bodies held at once per process (503 above: the platform retries)
DEFAULT_HEADER_TIMEOUT_S = 10.0  # a connection must send a request's headers within this (slowloris)
DEFAULT_BODY_TIMEOUT_S = 120.0  # … and its body within this after the headers (32 MiB at ~270 KiB/s)

ENV_SERVER_TOKEN = "REFIND_SERVER_TOKEN"
ENV_SERVER_MAX_BODY_MB = "REFIND_SERVER_MAX_BODY_MB"
ENV_SERVER_SEARCH_THREADS = "REFIND_SERVER_SEARCH_THREADS"
ENV_EXPIRE_INTERVAL_S = "REFIND_EXPIRE_INTERVAL_S"
ENV_SERVER_ALLOW_HOSTS = "REFIND_SERVER_ALLOW_HOSTS"  # comma-separated, like repeated --allow-host
ENV_SERVER_MAX_INFLIGHT_MB = "REFIND_SERVER_MAX_INFLIGHT_MB"
ENV_SERVER_HEADER_TIMEOUT_S = "REFIND_SERVER_HEADER_TIMEOUT_S"
ENV_SERVER_BODY_TIMEOUT_S = "REFIND_SERVER_BODY_TIMEOUT_S"
ENV_SERVER_MAX_CONNECTIONS = "REFIND_SERVER_MAX_CONNECTIONS"
# A sweep more often than this does nothing the read-time filter does not (retention is whole days at least), and
# REFIND_EXPIRE_INTERVAL_S=0.0001 kept a core two-thirds busy sweeping (found by a probe); past a year the sweep
# thread's wait overflows (threading.TIMEOUT_MAX) and it would end.
MIN_EXPIRE_INTERVAL_S = 10.0
MAX_EXPIRE_INTERVAL_S = 365 * 86_400.0


def check_expire_interval(value: float, name: str) -> float:
    """The server's seconds between retention sweeps (--expire-interval / REFIND_EXPIRE_INTERVAL_S, named ``name``):
    0 (no sweep), or from MIN_EXPIRE_INTERVAL_S to MAX_EXPIRE_INTERVAL_S."""
    if not (value == 0 or MIN_EXPIRE_INTERVAL_S <= value <= MAX_EXPIRE_INTERVAL_S):  # nan too
        raise InvalidInput(
            f"{name} must be 0 (no sweep) or {MIN_EXPIRE_INTERVAL_S:g} to {MAX_EXPIRE_INTERVAL_S:,.15g} seconds (a "
            f"year), got {value:g}"
        )
    return value


ENV_DATASETS = "REFIND_DATASETS"  # bench/: the folder of the shared datasets


def misspelt_variables(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """A warning for each REFIND_* variable set that refind does not read (``REFIND_RETENTIONDAYS``: silently ignored
    until then), naming the setting it was likely meant for when one is (:func:`meant_for`). The internal
    ``REFIND__*`` ones (``serve --workers`` hands its settings on in them) are left alone."""
    known = {value for name, value in globals().items() if name.startswith("ENV_") and isinstance(value, str)}
    warnings = []
    for name in sorted(environ):
        if not name.startswith("REFIND_") or name.startswith("REFIND__") or name in known or not name.isascii():
            continue
        meant = meant_for(name, known)
        hint = f"; did you mean {' or '.join(meant)}?" if meant else ""
        warnings.append(f"{name} is not a refind setting and is ignored{hint}")
    return warnings


def meant_for(name: str, known: set[str]) -> list[str]:
    """The settings ``name`` (REFIND_…) was likely meant for, compared without the ``REFIND_`` they share (which made
    REFIND_X "close" to REFIND_DB): those whose words hold all of its words, or whose words it holds all of
    (REFIND_TOKEN → REFIND_SERVER_TOKEN, REFIND_DB_PATH → REFIND_DB) — none when more than three do (REFIND_TIMEOUT)
    — else the closest misspellings (difflib, a stricter cutoff for a short name: REFIND_MODLE → REFIND_MODE or
    REFIND_MODEL); none when nothing is close."""
    import difflib

    given = name.removeprefix("REFIND_").upper()  # (REFIND_db: variable names are case-sensitive, settings upper case)
    suffixes = {k.removeprefix("REFIND_"): k for k in known}
    words = given.split("_")
    held = [
        full
        for suffix, full in sorted(suffixes.items())
        if min(len(given), len(suffix)) >= 2 and (_runs(words, suffix.split("_")) or _runs(suffix.split("_"), words))
    ]
    if held:
        return held if len(held) <= 3 else []
    close = difflib.get_close_matches(given, suffixes, n=2, cutoff=0.8 if len(given) < 6 else 0.75)
    return [suffixes[c] for c in close]


def _runs(part: list[str], whole: list[str]) -> bool:
    """Whether ``part`` appears in ``whole`` as consecutive words."""
    n = len(part)
    return any(whole[i : i + n] == part for i in range(len(whole) - n + 1))


# ---- `refind eval` -----------------------------------------------------------------------------------------------

EVAL_BUDGETS = (2_000, 8_000, 32_000)  # characters of returned content inside which evidence counts as found
EVAL_TOP_K = 100  # what the contest's formal runs send
EVAL_JOIN = "\n\n"  # what a reader joins a search's contents with: budgets count characters of the joined text
