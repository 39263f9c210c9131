"""Agent mode's model settings with bad values: one line naming the setting, before any model call, never seconds
of retries reported as a provider's error."""

from __future__ import annotations

import pytest
from helpers import T0, add

from refind_cli import search as S


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    S.clear()
    for var in ("REFIND_MODEL", "REFIND_API_BASE", "REFIND_MODE", "REFIND_MAX_ACTIONS", "REFIND_LLM_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("REFIND_LLM_RETRIES", raising=False)
    yield
    S.clear()


def agent(cli, base):
    return cli(
        "search", "hiking", "--user", "alice", "--mode", "agent", "--model", "openai/scripted", "--api-base", base
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        # a socket's deadline past the platform's time_t: every call failed, retried as an 'HTTP 500'
        ("REFIND_LLM_TIMEOUT", "1e300", "REFIND_LLM_TIMEOUT: must be at most 86,400, got '1e300'"),
        # unbounded retries kept a search on a failing provider for as long as it failed
        (
            "REFIND_LLM_RETRIES",
            "99999999999999999999",
            "REFIND_LLM_RETRIES: must be at most 20, got '99999999999999999999'",
        ),
    ],
)
def test_a_model_setting_past_its_limit_is_one_line(cli, store, llm_server, monkeypatch, variable, value, message):
    add(store, "alice", "hike", ("user", "I went hiking at Mount Rainier", T0))
    monkeypatch.setenv(variable, value)
    llm_server.default = '{"action": "finish_search"}'  # a provider that answers: only the setting can be refused
    r = agent(cli, llm_server.url)
    assert r.exit_code == 1 and r.output == f"error: {message}\n"
    assert llm_server.requests == []


@pytest.mark.parametrize("base", ["localhost:11434/v1", "file:///etc/passwd", "http://[::1", "http://"])
def test_an_api_base_that_is_not_an_http_url_is_refused_before_any_call(cli, store, base):
    add(store, "alice", "hike", ("user", "I went hiking at Mount Rainier", T0))
    r = agent(cli, base)
    assert r.exit_code == 5, r.output
    flat = " ".join(r.output.split())
    assert f"api base {base!r} is not an http:// or https:// URL" in flat and "--mode bm25" in flat
