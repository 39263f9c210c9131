"""`refind serve`: the Agent Memory Leaderboard endpoint on uvicorn."""

from __future__ import annotations

import math
import os
from typing import Annotated

import typer

from ... import settings
from ...errors import InvalidInput, RefindError
from ..options import (
    DEFAULT_DB,
    DbOption,
    DeadlineOption,
    MaxActionsOption,
    RetentionOption,
    SkipOption,
    a_model,
    an_api_base,
    mode_source,
    refuse_memory_db,
    remember_db,
    retention_source,
    source_name,
)

SERVE_HELP = """\
Serve the Agent Memory Leaderboard Add/Search contract over HTTP.

\b
  refind serve --mode bm25                              # 127.0.0.1:8000, no token
  REFIND_SERVER_TOKEN=s3cret refind serve --host 0.0.0.0 --port 8000 --workers 2

Routes: POST /v1/memories/add, POST /v1/memories/search (aliases POST /add, POST /search),
DELETE /v1/memories?user_id=U[&session_id=S|&request_id=R] (forget) and GET /health (open). With a
token every other route needs Authorization: Bearer <token>, Authorization: Token <token> or X-Api-Key:
<token>. Bound to a non-loopback address the server refuses to start without a token unless --insecure
is given. Without a token only loopback Host/Origin names (add others with --allow-host) and JSON bodies
are accepted. One access-log line per request (method, path, status, duration); never content.
"""


def register(app: typer.Typer) -> None:
    app.command("serve", help=SERVE_HELP)(serve)


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = settings.DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", "-p", help="TCP port.", min=0, max=65535)] = settings.DEFAULT_PORT,
    workers: Annotated[int, typer.Option("--workers", help="Server processes (each with its own threads).", min=1)] = 1,
    mode: Annotated[
        str | None, typer.Option("--mode", envvar=settings.ENV_MODE, help="Search mode: agent or bm25.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            envvar=settings.ENV_MODEL,
            callback=a_model,
            help=f"Agent mode: the litellm model (default {settings.DEFAULT_MODEL}).",
        ),
    ] = None,
    api_base: Annotated[
        str | None,
        typer.Option(
            "--api-base",
            envvar=settings.ENV_API_BASE,
            callback=an_api_base,
            help="Agent mode: base URL of an OpenAI-compatible API.",
        ),
    ] = None,
    max_actions: MaxActionsOption = None,
    deadline: DeadlineOption = None,
    skip: SkipOption = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar=settings.ENV_SERVER_TOKEN,
            show_envvar=True,
            help="Require this token on every route but /health.",
        ),
    ] = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="Allow a non-loopback bind without a token (anyone can read memory).")
    ] = False,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", envvar=settings.ENV_SERVER_MAX_BODY_MB, help="413 above this body size.")
    ] = settings.DEFAULT_MAX_BODY_MB,
    search_threads: Annotated[
        int | None,
        typer.Option(
            "--search-threads",
            envvar=settings.ENV_SERVER_SEARCH_THREADS,
            min=1,
            help="Searches run at once per process, more queue (default: bm25 2 per CPU "
            f"up to 32; agent {settings.DEFAULT_SEARCH_THREADS}).",
        ),
    ] = None,
    expire_interval: Annotated[
        float,
        typer.Option(
            "--expire-interval",
            envvar=settings.ENV_EXPIRE_INTERVAL_S,
            help=f"Seconds between retention sweeps while serving, at least {settings.MIN_EXPIRE_INTERVAL_S:g} (0: off).",
        ),
    ] = settings.DEFAULT_EXPIRE_INTERVAL_S,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="Without a token: also accept this Host/Origin name besides loopback (repeatable; '*' any). "
            f"Or {settings.ENV_SERVER_ALLOW_HOSTS}=a,b.",
        ),
    ] = None,
    max_inflight_mb: Annotated[
        float,
        typer.Option(
            "--max-inflight-mb",
            envvar=settings.ENV_SERVER_MAX_INFLIGHT_MB,
            help="Request bodies held at once per process; 503 (retry) above.",
        ),
    ] = settings.DEFAULT_MAX_INFLIGHT_MB,
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout",
            envvar=settings.ENV_SERVER_HEADER_TIMEOUT_S,
            help="Seconds a connection has to send a request's headers.",
        ),
    ] = settings.DEFAULT_HEADER_TIMEOUT_S,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout",
            envvar=settings.ENV_SERVER_BODY_TIMEOUT_S,
            help="Seconds a request has to send its body after the headers.",
        ),
    ] = settings.DEFAULT_BODY_TIMEOUT_S,
    max_connections: Annotated[
        int | None,
        typer.Option(
            "--max-connections",
            envvar=settings.ENV_SERVER_MAX_CONNECTIONS,
            min=1,
            help="Open connections at once (default 1024, fewer if the open-file limit is low).",
        ),
    ] = None,
    db: DbOption = DEFAULT_DB,
    retention: RetentionOption = None,
) -> None:
    from ...contract import SEARCH_MODES
    from ...server.app import ServerSettings, is_loopback
    from ..render import error_console

    remember_db(db)
    refuse_memory_db(db)
    mode = (mode or os.environ.get(settings.ENV_MODE) or settings.DEFAULT_MODE).strip().lower()
    if mode not in SEARCH_MODES:
        raise InvalidInput(f"{mode_source(ctx)}: must be agent or bm25, got {mode!r}")
    # the planner's budget, read (and checked) in agent mode only: REFIND_MAX_ACTIONS was ignored by the server
    budget = settings.parse_max_actions(max_actions) if mode == "agent" else settings.DEFAULT_MAX_ACTIONS
    deadline_s = settings.parse_agent_deadline(deadline) if mode == "agent" else settings.DEFAULT_AGENT_DEADLINE_S
    agent_skip = settings.parse_agent_skip(skip) if mode == "agent" else None
    if token is not None and not token.strip():
        raise InvalidInput(
            f"--token / {settings.ENV_SERVER_TOKEN} is blank: set a real token, or unset it to serve without one "
            "(loopback only)"
        )
    token = token.strip() if token else None  # what a header can carry: no surrounding whitespace
    for param, flag, variable, value in (
        ("max_body_mb", "--max-body-mb", settings.ENV_SERVER_MAX_BODY_MB, max_body_mb),
        ("max_inflight_mb", "--max-inflight-mb", settings.ENV_SERVER_MAX_INFLIGHT_MB, max_inflight_mb),
        ("header_timeout", "--header-timeout", settings.ENV_SERVER_HEADER_TIMEOUT_S, header_timeout),
        ("body_timeout", "--body-timeout", settings.ENV_SERVER_BODY_TIMEOUT_S, body_timeout),
    ):
        if not 0 < value < math.inf:  # nan and inf too: a traceback, or a limit silently gone
            name = source_name(ctx, param, flag, variable)
            raise InvalidInput(f"{name} must be a finite number above 0, got {value:g}")
    settings.check_expire_interval(
        expire_interval, source_name(ctx, "expire_interval", "--expire-interval", settings.ENV_EXPIRE_INTERVAL_S)
    )
    hosts = list(allow_host or [])
    if not hosts:
        hosts = [h for h in os.environ.get(settings.ENV_SERVER_ALLOW_HOSTS, "").split(",") if h.strip()]
    if not token and not is_loopback(host) and host not in ("0.0.0.0", "::", ""):
        hosts.append(host)  # --insecure on a named address: requests for that address are what it was bound for
    if not token and not is_loopback(host):
        if not insecure:
            raise RefindError(
                f"refusing to serve on {host} without a token: anyone who can reach it could read every user's "
                f"memory. Set --token / {settings.ENV_SERVER_TOKEN}, bind 127.0.0.1, or pass --insecure."
            )
        error_console().print(
            f"[bold red]WARNING: serving on {host} WITHOUT AUTHENTICATION (--insecure): anyone who can reach this "
            "port can read and write every user's memory.[/bold red]"
        )
    cfg = ServerSettings(
        db=db,
        retention_given=retention or "",  # stored (or the stored one read) once the server can start: create_app
        retention_from=retention_source(ctx),
        token=token,
        mode=mode,
        model=model,
        api_base=api_base,
        max_actions=budget,
        deadline_s=deadline_s,
        skip=agent_skip,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        search_threads=search_threads,
        expire_interval_s=expire_interval,
        allow_hosts=tuple(h.strip() for h in hosts),
        max_inflight_bytes=int(max_inflight_mb * 1024 * 1024),
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        max_connections=max_connections,
    )
    from ...server.app import run

    run(cfg, host=host, port=port, workers=workers)
