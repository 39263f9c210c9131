"""Shared test fixtures: a real SQLite file per test, the CLI through Typer's CliRunner, and a guard that fails any
test trying to reach a network address outside loopback (so no test can reach the internet or a real LLM provider)."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.pop("REFIND_DB", None)
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

_real_connect = socket.socket.connect
_real_getaddrinfo = socket.getaddrinfo


def _is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return True  # AF_UNIX paths and the like
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class NetworkRefused(RuntimeError):
    pass


def _guarded_connect(self: socket.socket, address: object) -> None:
    host = address[0] if isinstance(address, tuple) else address
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(host):
        raise NetworkRefused(f"test tried to reach {address!r}: tests may only use loopback")
    return _real_connect(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
    if host is not None and not _is_loopback(host if isinstance(host, str) else host.decode()):
        raise NetworkRefused(f"test tried to resolve {host!r}: tests may only use loopback")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)


@pytest.fixture(autouse=True)
def fresh_search_cache():
    """Every test starts and ends with an empty in-process search cache, so no test sees another's indexes."""
    from refind_cli import search

    search.clear()
    yield
    search.clear()


MODEL_SETTINGS = (
    "REFIND_MODEL",
    "REFIND_API_BASE",
    "REFIND_MODE",
    "REFIND_MAX_ACTIONS",
    "REFIND_LLM_TIMEOUT",
    "REFIND_LLM_RETRIES",
    "REFIND_AGENT_DEADLINE",
)


@pytest.fixture
def no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """None of the model settings the machine running the tests may have: a test sets what it uses."""
    for var in MODEL_SETTINGS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "refind.db"


@pytest.fixture
def store(db_path: Path):
    from refind_cli.store import Store

    s = Store(db_path, retention_days=None)
    yield s
    s.close()


@pytest.fixture
def runner():
    from typer.testing import CliRunner

    return CliRunner()


@pytest.fixture
def cli(runner, db_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run `refind ARGS…` against this test's database; returns the click Result."""
    from refind_cli.cli import app

    monkeypatch.setenv("REFIND_DB", str(db_path))

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input, catch_exceptions=False)

    return invoke


LOOPBACK_URL = "http://127.0.0.1:8000"  # the server refuses foreign Host names when no token is set


@pytest.fixture
def make_client(db_path: Path):
    """make(**ServerSettings overrides, base_url=…) → a TestClient of the real app on this test's database (bm25,
    no retention, no sweep), entered now and closed at the end of the test."""
    from fastapi.testclient import TestClient

    from refind_cli.server import ServerSettings, create_app

    clients = []

    def make(base_url: str = LOOPBACK_URL, **overrides):
        cfg = ServerSettings(
            **{"db": db_path, "retention_days": None, "mode": "bm25", "expire_interval_s": 0, **overrides}
        )
        client = TestClient(create_app(cfg), raise_server_exceptions=False, base_url=base_url)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def llm_server():
    """A scripted OpenAI-compatible server on loopback (see tests/llm_server.py); litellm reaches it over HTTP."""
    from llm_server import ScriptedLLM, start

    llm = ScriptedLLM()
    server = start(llm)
    yield llm
    server.shutdown()
    server.server_close()
