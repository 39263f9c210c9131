"""`refind mcp`: serve one user's memory to an agent over the Model Context Protocol (stdio)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from ... import settings
from ...errors import InvalidInput, RefindError
from ..options import (
    ApiBaseOption,
    DbOption,
    DeadlineOption,
    MaxActionsOption,
    ModelOption,
    RetentionOption,
    SkipOption,
    refuse_memory_db,
)

MCP_HELP = """\
Serve one user's memory to an agent over the Model Context Protocol (stdio), for Claude Desktop, Cursor, VS Code
or any MCP client.

  refind mcp --user alice --db memory.db

Tools: remember (one message), remember_exchange (a user message and the reply), search_memory (evidence blocks;
bm25, or the LLM planner with --mode agent), recent_sessions, and forget_session with --allow-forget. The user is
fixed here (--user or REFIND_USER) and is never a tool argument: no tool call can reach another user's memory.
"""


def register(app: typer.Typer) -> None:
    app.command("mcp", help=MCP_HELP)(mcp)


def mcp(
    user: Annotated[
        str | None,
        typer.Option(
            "--user", "-u", envvar=settings.ENV_USER, help="The one user this server reads and writes (required)."
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session", "-s", help="Session of remembered turns that name none (default: mcp-<launch time>)."
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="search_memory: bm25, or agent (the LLM planner). Default: agent with --model."),
    ] = None,
    allow_forget: Annotated[
        bool, typer.Option("--allow-forget", help="Also offer forget_session (deletes a session for good).")
    ] = False,
    db: DbOption = Path(settings.DEFAULT_DB),
    retention: RetentionOption = None,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
    max_actions: MaxActionsOption = None,
    deadline: DeadlineOption = None,
    skip: SkipOption = None,
) -> None:
    from ...mcp_start import starting

    # from the launch: a SIGTERM is noted until the wire takes it — agent mode imports litellm (seconds) first — and
    # what the client sent before it is then answered and stored, exit 143 (it ended the process, nothing stored)
    with starting():
        if user is None or not user.strip():
            raise InvalidInput(f"--user: required (or set {settings.ENV_USER}): the one user this server serves")
        from ...contract import SEARCH_MODES, check_id, empty_text

        check_id("--user", user)  # at launch: every remember would be refused, naming an argument no tool has
        if session is not None:
            if not session.strip():
                raise empty_text("--session", session, " (leave it out for mcp-<launch time>)")
            check_id("--session", session)

        mode = (mode or ("agent" if model else "bm25")).strip().lower()
        if mode not in SEARCH_MODES:
            raise InvalidInput(f"--mode: must be agent or bm25, got {mode!r}")
        complete, model_name, budget = None, None, settings.DEFAULT_MAX_ACTIONS
        deadline_s, agent_skip = settings.DEFAULT_AGENT_DEADLINE_S, None
        if mode == "agent":  # resolve the model and its credentials now: fail at launch, not on the first search
            from ...model import from_env

            budget = settings.parse_max_actions(max_actions)
            deadline_s = settings.parse_agent_deadline(deadline)
            agent_skip = settings.parse_agent_skip(skip)
            complete, model_name = from_env(model, api_base)
        from datetime import UTC, datetime
        from importlib.util import find_spec

        if find_spec("mcp") is None or find_spec("mcp_types") is None:  # a dependency, but an install may predate it
            raise RefindError("refind mcp needs the mcp package: pip install 'mcp>=2,<3'")
        from ...api import Memory
        from ...mcp_start import McpSettings, serve

        cfg = McpSettings(
            user=user,
            session=session or datetime.now(UTC).strftime("mcp-%Y%m%dT%H%M%SZ"),
            mode=mode,
            model=complete,
            model_name=model_name,
            max_actions=budget,
            deadline_s=deadline_s,
            skip=agent_skip,
            allow_forget=allow_forget,
        )
        refuse_memory_db(db)  # remember would answer "stored" for what the next launch no longer has
        from ...retention import given
        from ...signals import Terminated

        try:
            with Memory(os.fspath(db), retention_days=given(retention), writer="refind mcp") as memory:

                def start(on_running: Callable[[], None]) -> Callable[[], None]:
                    from ...mcp_server import runner  # the SDK: imported while the first requests are answered

                    return runner(memory, cfg, on_running)

                serve(cfg, start)
        except Terminated:  # SIGTERM ended the input: what was in flight is answered (and stored); nothing to say
            raise typer.Exit(143) from None
