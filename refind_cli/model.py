"""The language-model seam: ``Complete = Callable[[list[dict]], Reply]``.

The planner only ever calls a ``Complete``. Production builds one with :func:`litellm_complete` (any litellm model
string, optionally a local OpenAI-compatible ``api_base``); tests point that same function at a scripted server on
loopback. litellm is imported here, inside :func:`litellm_complete`, and nowhere else: ``refind --help`` and bm25
mode never pay its ~3 s import.

Policy of every call: temperature 0 (dropped for models that refuse it, such as reasoning models, which only run
at their default), a cap on output tokens (512; 4,096 for reasoning models, whose hidden reasoning counts), an
explicit timeout (litellm's own default is 6,000 s), no hidden retries inside litellm or the OpenAI SDK, and our own
bounded retries with exponential backoff on 429, 5xx, timeouts and dropped connections. Every other provider failure — and a retryable one that outlives the retries —
becomes :class:`~refind_cli.errors.ModelError` carrying the provider's own message.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from . import settings
from .errors import DeadlineReached, Interrupted, InvalidInput, ModelError
from .redact import redact

DEFAULT_TIMEOUT_S = settings.DEFAULT_LLM_TIMEOUT_S
DEFAULT_MAX_TOKENS = 512  # one JSON action is ~50 tokens
REASONING_MAX_TOKENS = 4096  # a reasoning model spends its hidden reasoning from the same cap
DEFAULT_RETRIES = settings.DEFAULT_LLM_RETRIES
DEFAULT_BACKOFF_S = 1.0
MAX_WAIT_S = 30.0  # the longest one backoff (or a provider's Retry-After) may hold a search
PLACEHOLDER_KEY = "refind-no-key"  # sent to a local --api-base server when no key is configured
FIXES = (
    "choose a usable model with --model / REFIND_MODEL (and --api-base / REFIND_API_BASE for a local server), "
    "or search without a model with --mode bm25"
)


@dataclass(frozen=True)
class ToolCall:
    """A native tool call a provider returned instead of (or beside) text; the planner parses it like a reply."""

    name: str
    arguments: str  # the JSON text of its arguments, as the provider sent it


@dataclass(frozen=True)
class Reply:
    """One model answer with what it cost."""

    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None  # USD when the provider's price is known
    latency_ms: float = 0.0  # wall time of the call, retries and backoff included
    attempts: int = 1
    model: str = ""
    tool_calls: tuple[ToolCall, ...] = ()  # native tool calls, when the provider sent any
    # why the provider ended the reply, as it said: "stop", "tool_calls", "length" (cut at the output token limit),
    # "content_filter" (cut by its filter) … ("" when it did not say)
    finish_reason: str = ""
    # the model's refusal (OpenAI's ``message.refusal``: it declined to answer, its content null), as it said it
    refusal: str = ""


Complete = Callable[[list[dict[str, Any]]], Reply]

# When the calls made in this context must end (time.monotonic()): the planner sets it for its run (deadline()).
_DEADLINE: ContextVar[float | None] = ContextVar("refind_model_deadline", default=None)


@contextmanager
def deadline(at: float | None) -> Iterator[None]:
    """Model calls made inside end by ``at`` (``time.monotonic()``): :func:`litellm_complete` bounds each attempt's
    timeout by the time left and starts no attempt (no retry) past it, raising DeadlineReached; a ``complete`` of
    one's own may read :func:`time_left`."""
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def time_left() -> float | None:
    """Seconds left before the current :func:`deadline` (None: none is set)."""
    at = _DEADLINE.get()
    return None if at is None else at - time.monotonic()


# The process is ending (SIGTERM — an MCP client quitting sends it — or Ctrl-C): every agent search in it stops where
# it is and returns what it has, its trace marked interrupted (:func:`interrupt`). Until the last :func:`interruptible` block around the
# work that ended is left (an in-process caller goes on: a test, a program running `refind mcp` or `refind search`
# in-process); outside any such block, one way only.
_INTERRUPTED: list[str] = []  # why, once interrupted
_WAITING: set[threading.Event] = set()  # the model calls being waited on (_within), woken by interrupt()
_STOPPED = threading.Event()  # set by interrupt(): ends a retry's backoff (_pause)
_SCOPES = [0]  # interruptible blocks open (under _SCOPE_LOCK; interrupt() takes no lock: a signal handler calls it)
_SCOPE_LOCK = threading.Lock()


@contextmanager
def interruptible() -> Iterator[None]:
    """The work inside (a `refind mcp` session, a `refind search --mode agent`) may be ended by :func:`interrupt`; when
    the last such block open in the process is left, the interruption is over: later agent searches of the process
    ask the model again. Without it every later search in the process answered 'interrupted' with no model call, and
    each retry's backoff was skipped (round 30 review)."""
    with _SCOPE_LOCK:
        _SCOPES[0] += 1
    try:
        yield
    finally:
        with _SCOPE_LOCK:
            _SCOPES[0] -= 1
            if not _SCOPES[0]:
                _STOPPED.clear()
                _INTERRUPTED.clear()


def interrupt(reason: str) -> None:
    """Stop every agent search of this process: a model call being waited on is abandoned at once (left to finish in
    its thread, its answer unread) and no call or retry starts after it; each planner then stops and returns what it
    has, its trace ending with an ``interrupted`` event saying ``reason``. Safe in a signal handler (no lock: the set's
    copy and each Event's set are single steps under the GIL)."""
    if not _INTERRUPTED:
        _INTERRUPTED.append(reason)
    _STOPPED.set()
    for woken in list(_WAITING):
        woken.set()


def interruption() -> str | None:
    """Why this process's agent searches were stopped (:func:`interrupt`); None while they may run."""
    return _INTERRUPTED[0] if _INTERRUPTED else None


def _pause(seconds: float) -> None:
    """A retry's backoff, ended early by :func:`interrupt`."""
    _STOPPED.wait(seconds)


def litellm_complete(
    model: str,
    api_base: str | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_tokens: int | None = None,
    retries: int = DEFAULT_RETRIES,
    backoff_s: float = DEFAULT_BACKOFF_S,
    sleep: Callable[[float], None] = _pause,
) -> Complete:
    """A ``Complete`` backed by litellm. Fails fast (ModelError) when the model or its credentials are missing, and
    (InvalidInput) on an api base that is not an http(s) URL."""
    if not model or not model.strip():
        raise ModelError(f"no model configured: {FIXES}")
    if api_base:
        _check_api_base(api_base)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    api_key = _check_model(litellm, model, api_base)
    if max_tokens is None:
        max_tokens = REASONING_MAX_TOKENS if _reasoning(litellm, model) else DEFAULT_MAX_TOKENS
    transient = (litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError)

    def retryable(exc: Exception) -> bool:
        status = getattr(exc, "status_code", None) or 0
        return isinstance(exc, transient) or status in (408, 429) or status >= 500

    def call(messages: list[dict[str, Any]], timeout: float) -> Any:
        # litellm's pydantic models warn on stderr of a malformed answer, which the error below names. Scoped to the
        # call (Python 3.11's catch_warnings is process-wide while entered: calls in other threads may leave this one
        # filter in place, and nothing else)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Pydantic serializer warnings", UserWarning)
            return litellm.completion(
                model=model,
                messages=messages,
                api_base=api_base or None,
                api_key=api_key,
                temperature=0,
                max_tokens=max_tokens,
                timeout=timeout,
                num_retries=0,
                max_retries=0,
                drop_params=True,  # reasoning models (gpt-5, o-series) take no temperature but their default
            )

    def complete(messages: list[dict[str, Any]]) -> Reply:
        started = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            if (why := interruption()) is not None:
                raise Interrupted(f"model {model}: the search was interrupted ({why}) before the call could start")
            left = time_left()
            if left is not None and left <= 0:
                raise DeadlineReached(f"model {model}: the search's deadline passed before the call could start")
            timeout = timeout_s if left is None else min(timeout_s, left)  # a call never outlives the deadline
            try:
                # httpx's timeout bounds each read: a deadline bounds the whole answer too (_within)
                response = call(messages, timeout) if left is None else _within(left, partial(call, messages, timeout))
                break
            except _Overran:
                if (why := interruption()) is not None:
                    raise Interrupted(
                        f"model {model}: the search was interrupted ({why}) before the provider's answer was in "
                        f"(attempt {attempt})"
                    ) from None
                raise DeadlineReached(
                    f"model {model}: the search's deadline passed before the provider's answer was in (attempt "
                    f"{attempt})"
                ) from None
            except Exception as exc:
                if isinstance(exc, litellm.AuthenticationError):
                    raise ModelError(
                        f"model {model}: the provider refused the credentials: {_describe(exc, api_key)}; "
                        f"set the provider's API key, or {FIXES}"
                    ) from None
                if _malformed(exc):  # litellm calls it an HTTP 500; retrying the same answer cannot help
                    raise ModelError(
                        f"model {model}: the provider's answer is malformed: it came with a success status (HTTP 2xx), "
                        f"but litellm could not read it ({_describe(exc, api_key).removeprefix('InternalServerError: ')})"
                    ) from None
                if not retryable(exc):  # a bad request, an unknown model, … : retrying cannot help
                    raise ModelError(f"model {model}: {_describe(exc, api_key)}") from None
                asked = _retry_after(exc)  # the provider's own wait (0: none asked)
                wait = min(MAX_WAIT_S, max(backoff_s * 2 ** (attempt - 1), asked))
                left = time_left()
                # no retry starts past the deadline; an attempt the deadline cut short (it timed out sooner than the
                # model's own timeout) failed because of it — but a provider that answered an error every time, retries
                # spent, is a model error whatever the deadline (was: any deadline under the timeout said "deadline")
                cut_short = timeout < timeout_s and isinstance(exc, litellm.Timeout)
                # (a wait asked past the time left counts, also where the cap would have retried sooner: the provider
                # refuses a retry before the time it asked)
                deadline = left is not None and (left <= wait or asked > left) and (cut_short or attempt <= retries)
                if deadline or attempt > retries:
                    said = _unreachable(exc, api_base) or _describe(exc, api_key)
                    attempts = f"{attempt} attempt{'s' if attempt != 1 else ''}"
                    if deadline:  # (the provider's own wait named where it alone ends past the deadline)
                        asked_past = asked if left is not None and 0 < left < asked < math.inf else None
                        why = (
                            "the search's deadline passed"
                            if left is not None and left <= 0
                            else f"the provider asked to wait {asked:g} s (Retry-After), past the search's deadline, "
                            f"{left:.1f} s away"
                            if asked_past is not None
                            else f"a retry in {wait:g} s would start past the search's deadline, {left:.1f} s away"
                        )
                        raise DeadlineReached(
                            f"model {model}: {said} ({why}; {attempts})",
                            gave_up=None if cut_short else f"model {model}: {said} (gave up after {attempts}: {why})",
                            retry_after=asked_past,
                        ) from None
                    raise ModelError(f"model {model}: {said} (gave up after {attempts})") from None
                if asked > MAX_WAIT_S:  # a retry at the cap would be refused again: said now, not after 30 s
                    said = _unreachable(exc, api_base) or _describe(exc, api_key)
                    raise ModelError(
                        f"model {model}: {said} (gave up after {attempt} attempt{'s' if attempt != 1 else ''}: the "
                        f"provider asked to retry after {asked:g} s, past refind's {MAX_WAIT_S:g} s cap on a wait — "
                        "retry the search later)"
                    ) from None
                sleep(wait)
        usage = getattr(response, "usage", None)
        choices = getattr(response, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        if message is None:  # an IndexError escaped the planner: a traceback, a 500
            raise ModelError(f"model {model}: the provider's answer holds no message (no choices); {FIXES}")
        return Reply(
            content=message.content or "",
            prompt_tokens=_count(getattr(usage, "prompt_tokens", 0)),
            completion_tokens=_count(getattr(usage, "completion_tokens", 0)),
            cost=_cost(litellm, response),
            latency_ms=(time.perf_counter() - started) * 1000,
            attempts=attempt,
            model=model,
            tool_calls=_tool_calls(message),
            finish_reason=_finish_reason(choices[0]),
            refusal=_refusal(message),
        )

    return complete


class _Overran(Exception):
    """The call was still running when its time was up (:func:`_within`)."""


_LEFT_RUNNING: list[threading.Thread] = []  # calls _within stopped waiting for: their threads, while they run
_LEFT_LOCK = threading.Lock()


def calls_left_running() -> bool:
    """Whether a model call the deadline cut short is still running in its thread (:func:`_within`). Such a thread
    may be anywhere in litellm — inside Python's import system on litellm's first call, which imports lazily — when
    the process ends: see ``cli.root.main``, which then ends the process without the interpreter's shutdown."""
    with _LEFT_LOCK:
        _LEFT_RUNNING[:] = [t for t in _LEFT_RUNNING if t.is_alive()]
        return bool(_LEFT_RUNNING)


EXIT_WAIT_S = 10.0  # a process's exit waits at most this long in all for the calls the deadline cut short


@atexit.register
def _wait_at_exit() -> None:
    """Before the interpreter's shutdown stops the daemon threads, let the model calls the deadline cut short finish
    (at most :data:`EXIT_WAIT_S` in all): a process using refind's Python API would otherwise end as the CLI did
    before ``cli.root.main`` ended it at once — a call stopped inside the import system keeps the import lock for
    ever, and a finalizer that imports waits on it. Atexit functions run while daemon threads still do."""
    until = time.monotonic() + EXIT_WAIT_S
    with _LEFT_LOCK:
        threads = list(_LEFT_RUNNING)
    for thread in threads:
        thread.join(max(0.0, until - time.monotonic()))


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``, waited on for at most ``seconds`` (else _Overran; the call is left to finish in its daemon thread,
    its answer unread). The timeout litellm passes to httpx bounds each read, not the whole answer: a provider that
    sends its answer a few bytes at a time outlived the deadline by as long as it kept sending."""
    woken = threading.Event()  # the call ended, or the process is interrupted (interrupt)
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # raised again in the caller's thread
            outcome.append((False, exc))
        finally:
            woken.set()

    thread = threading.Thread(target=run, name="refind-model-call", daemon=True)
    _WAITING.add(woken)  # (before the check: an interrupt() after it wakes this wait)
    try:
        if _INTERRUPTED:
            woken.set()
        else:
            thread.start()
            woken.wait(seconds)
    finally:
        _WAITING.discard(woken)
    if not outcome:
        if thread.is_alive():
            with _LEFT_LOCK:
                _LEFT_RUNNING[:] = [t for t in _LEFT_RUNNING if t.is_alive()] + [thread]
        raise _Overran
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def blank_model(given_as: str, value: str) -> InvalidInput:
    """A model name that names nothing (empty, or spaces alone), refused naming where it was given: it was read as
    "not given" and the default model (a paid provider's) was asked instead, or refused as "no model configured"
    (round 29). An empty REFIND_MODEL counts as unset, as every REFIND_* variable does."""
    instead = "unset it for" if given_as == settings.ENV_MODEL else f"leave it out for {settings.ENV_MODEL} or"
    return InvalidInput(
        f"{given_as}: {value!r} names no model; give a litellm model string, or {instead} the default "
        f"({settings.DEFAULT_MODEL})"
    )


def chosen_model(model: str | None, *, given_as: str = "model") -> str:
    """The model to ask: ``model`` as given, else REFIND_MODEL (an empty one is unset), else the default; a blank one
    given (``given_as``) or set is refused (:func:`blank_model`)."""
    if model is not None:
        if not model.strip():
            raise blank_model(given_as, model)
        return model
    variable = os.environ.get(settings.ENV_MODEL) or None
    if variable is not None and not variable.strip():
        raise blank_model(settings.ENV_MODEL, variable)
    return variable or settings.DEFAULT_MODEL


def blank_api_base(given_as: str, value: str) -> InvalidInput:
    """An api base that names no server (empty, or spaces alone), refused naming where it was given: ``--api-base
    "$BASE"`` with BASE unset was read as "not given", and the model's provider was asked at its own address — the
    user's memory sent to a cloud provider (its key in the environment) instead of the local server (round 29)."""
    instead = "unset it for" if given_as == settings.ENV_API_BASE else f"leave it out for {settings.ENV_API_BASE} or"
    return InvalidInput(
        f"{given_as}: {value!r} names no server; give its URL (such as http://127.0.0.1:11434/v1), or {instead} the "
        "provider's own address"
    )


def chosen_api_base(api_base: str | None, *, given_as: str = "api_base") -> str | None:
    """The api base to use: ``api_base`` as given (a blank one refused, :func:`blank_api_base`), else REFIND_API_BASE
    (an empty one is unset; its shape is checked by :func:`litellm_complete`), else None (the provider's own)."""
    if api_base is not None:
        if not api_base.strip():
            raise blank_api_base(given_as, api_base)
        return api_base
    return os.environ.get(settings.ENV_API_BASE) or None


def from_env(model: str | None = None, api_base: str | None = None) -> tuple[Complete, str]:
    """The litellm ``Complete`` configured by flags, else REFIND_MODEL / REFIND_API_BASE / REFIND_LLM_*."""
    name = chosen_model(model)
    base = chosen_api_base(api_base)
    timeout = settings.positive_number(
        settings.ENV_LLM_TIMEOUT,
        os.environ.get(settings.ENV_LLM_TIMEOUT),
        settings.DEFAULT_LLM_TIMEOUT_S,
        maximum=settings.MAX_LLM_TIMEOUT_S,
    )
    retries = settings.positive_number(
        settings.ENV_LLM_RETRIES,
        os.environ.get(settings.ENV_LLM_RETRIES),
        settings.DEFAULT_LLM_RETRIES,
        integer=True,
        allow_zero=True,
        maximum=settings.MAX_LLM_RETRIES,
    )
    return litellm_complete(name, base, timeout_s=timeout, retries=int(retries)), name


def _check_model(litellm: Any, model: str, api_base: str | None) -> str | None:
    """Resolve the provider and credentials up front; return the api_key to pass (None = the provider's own)."""
    try:
        provider = litellm.get_llm_provider(model, api_base=api_base)[1]
    except Exception as exc:  # litellm raises BadRequestError "LLM Provider NOT provided"
        raise ModelError(f"model {model!r} is not a model litellm can route ({_describe(exc)}); {FIXES}") from None
    try:
        missing = list(litellm.validate_environment(model).get("missing_keys") or [])
    except Exception:  # validation is advisory: the provider will say what is wrong
        missing = []
    key = f"{str(provider).upper()}_API_KEY"  # litellm counts OPENAI_API_KEY="" as set: it is not
    if key in os.environ and not os.environ[key].strip() and key not in missing:
        missing.append(key)
    if api_base:
        # A custom base gets REFIND_API_KEY (or a placeholder), never the provider's own key: a mistyped or hostile
        # --api-base must not receive OPENAI_API_KEY.
        return (os.environ.get(settings.ENV_API_KEY) or "").strip() or PLACEHOLDER_KEY
    if missing:
        raise ModelError(
            f"model {model} needs {', '.join(missing)} in the environment, which is not set (or empty); "
            f"set it, or {FIXES}"
        )
    return None


def _check_api_base(api_base: str) -> None:
    """An api base must be an http(s) URL: litellm retried anything else as a connection error and reported an
    'HTTP 500' after seconds of backoff (a base without its scheme, ``localhost:11434/v1``, is the usual slip). A
    value of the wrong shape is the flag's fault, not the model's: InvalidInput (exit code 2), no model was asked."""
    try:
        parts = urlsplit(api_base.strip())
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unclosed IPv6 bracket
        usable = False
    if not usable:
        raise InvalidInput(
            f"api base {redact(repr(api_base))} is not an http:// or https:// URL: give --api-base / REFIND_API_BASE the "
            "server's URL, such as http://127.0.0.1:11434/v1, or search without a model with --mode bm25"
        )


def _reasoning(litellm: Any, model: str) -> bool:
    try:
        return bool(litellm.supports_reasoning(model))
    except Exception:
        return False


def _retry_after(exc: BaseException, now: Callable[[], float] = time.time) -> float:
    """Seconds a provider asked us to wait, else 0: its ``retry-after-ms`` (OpenAI's, milliseconds), else its
    ``Retry-After`` — seconds, or an HTTP date (RFC 9110), counted from ``now`` and rounded up to a whole second (the
    date's own precision); a date already past, or a value neither reads as, is 0."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        millis = float(headers.get("retry-after-ms") or "nan")
    except (TypeError, ValueError):
        millis = math.nan
    if math.isfinite(millis):
        return max(0.0, millis / 1000)
    said = str(headers.get("retry-after") or "").strip()
    try:
        seconds = float(said or 0)
    except ValueError:
        seconds = _http_date_in(said, now())
    return max(0.0, seconds) if math.isfinite(seconds) else 0.0


def _http_date_in(said: str, now: float) -> float:
    """Seconds from ``now`` to an HTTP date ("Wed, 21 Oct 2015 07:28:00 GMT"), rounded up; 0 if it is none."""
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(said)
    except (TypeError, ValueError, IndexError):
        return 0.0
    if when.tzinfo is None:  # RFC 9110's dates are GMT; one without a zone is read so too
        from datetime import UTC

        when = when.replace(tzinfo=UTC)
    return float(math.ceil(when.timestamp() - now))


def _malformed(exc: BaseException) -> bool:
    """litellm's "HTTP 500" for an answer it could not read: the provider answered with a success status (the HTTP
    client raises for any other, and that error is in the chain), but not in the shape of a chat completion."""
    import httpx  # (litellm's HTTP client: loaded with it)

    answered = (httpx.HTTPStatusError, httpx.TransportError)  # a status the provider sent; no answer at all
    return getattr(exc, "status_code", None) == 500 and not any(isinstance(e, answered) for e in _chain(exc))


def _unreachable(exc: BaseException, api_base: str | None) -> str | None:
    """What to say of a call no server answered (refused, no route, no such host) — litellm calls it an HTTP 500
    ("InternalServerError: OpenAIException - Connection error."), which reads as the server's own fault; None when a
    server answered, or the call timed out."""
    import socket

    import httpx

    # (not any ConnectionError: a reset or a broken pipe is a server that answered, then failed mid-reply)
    if not any(isinstance(e, (httpx.ConnectError, ConnectionRefusedError, socket.gaierror)) for e in _chain(exc)):
        return None
    if not api_base:
        return "could not connect to the provider (is this machine online, and is the provider's address reachable?)"
    return (
        f"could not connect to {redact(api_base)}: nothing answered there (is the server running, and is the address "
        "right?)"
    )


def _sent_status(exc: BaseException) -> int | None:
    """The HTTP status the provider answered with, when it answered one (litellm's ``status_code`` is also set where
    none came: 500 for a malformed answer or a refused connection, 408 for our own timeout)."""
    import httpx

    return next((e.response.status_code for e in _chain(exc) if isinstance(e, httpx.HTTPStatusError)), None)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or while handling, outermost first."""
    out: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and all(link is not e for e in out):
        out.append(link)
        link = link.__cause__ or link.__context__
    return out


def _describe(exc: BaseException, api_key: str | None = None) -> str:
    """The provider's message without litellm's boilerplate prefix, and without any key (a provider may echo the
    request, key included: redact.py), led by the HTTP status the provider answered with."""
    text = str(getattr(exc, "message", "") or exc).strip()
    text = text.splitlines()[0].strip() if text else type(exc).__name__
    text = text.partition(" Traceback (most recent call last)")[0]  # litellm appends one to some messages
    if text.startswith("litellm."):
        head, _, rest = text.partition(": ")
        text = rest or head
    status = _sent_status(exc)
    text = redact(text, api_key)
    return f"HTTP {status}: {text}" if status else text


def _tool_calls(message: Any) -> tuple[ToolCall, ...]:
    """The native tool calls of a litellm message (OpenAI's shape: ``tool_calls[i].function.name/.arguments``)."""
    calls = []
    for call in getattr(message, "tool_calls", None) or ():
        function = getattr(call, "function", None)
        arguments = getattr(function, "arguments", None)
        if arguments is not None and not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments, ensure_ascii=False)
            except (RecursionError, TypeError, ValueError):
                arguments = "<arguments that are not JSON>"
        calls.append(ToolCall(name=str(getattr(function, "name", None) or ""), arguments=arguments or ""))
    return tuple(calls)


def _refusal(message: Any) -> str:
    """OpenAI's ``message.refusal`` (the model declined), which litellm's Message carries as sent (1.110); "" when
    none, or when it is not text."""
    refusal = getattr(message, "refusal", None)
    return refusal if isinstance(refusal, str) else ""


def _finish_reason(choice: Any) -> str:
    """Why the provider ended its reply (a choice's ``finish_reason``), as short text; "" when it did not say."""
    reason = getattr(choice, "finish_reason", None)
    return reason[:40] if isinstance(reason, str) else ""


MAX_COUNT = 2**53  # a token count past this is no count (SQLite refused 10**30 as an INTEGER when the trace was saved)


def _count(value: Any) -> int:
    """A token count as the provider reported it; 0 (unknown) when it is not a whole number from 0 to MAX_COUNT."""
    try:
        count = int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0
    return count if 0 <= count <= MAX_COUNT else 0


def _cost(litellm: Any, response: Any) -> float | None:
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    if cost is None:
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:
            return None
    try:
        value = float(cost) if cost is not None else None
    except (TypeError, ValueError):
        return None
    return value if value is not None and 0 <= value < math.inf else None  # NaN is no JSON: unknown instead
