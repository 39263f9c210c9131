"""A bad value of a flag or a REFIND_* variable is invalid input — exit code 2 with its one line, as README's "Other
exit codes" says — wherever it is read: the retention, the model's and the database's settings, eval's options."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import FIXTURES
from helpers import T0, add

pytestmark = pytest.mark.usefixtures("no_model_env")

LOCOMO = str(FIXTURES / "eval" / "locomo_small.json")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("expire", "--days", "0"), "--days: '0' days is below the minimum of 1 day (use 'off' to keep everything)"),
        (("expire", "--days", "abc"), "--days: 'abc' is not a number of days (or 'off')"),
        (("expire", "--days", "0.5"), "--days: '0.5' days is below the minimum of 1 day"),
        (
            ("add", "hi", "--user", "u", "--session", "s", "--retention-days", "0"),
            "--retention-days: '0' days is below the minimum of 1 day",
        ),
        (("eval", LOCOMO, "--mode", "xyz"), "unknown mode 'xyz'; use one of agent, bm25"),
        (("eval", LOCOMO, "--format", "nope"), "unknown format 'nope'; use one of locomo, longmemeval, memdaily"),
        (("eval", LOCOMO, "--variant", "bogus=1"), "--variant bogus: SearchConfig has no such field"),
        (("eval", LOCOMO, "--variant", "k1"), "--variant 'k1': expected KEY=VALUE"),
        (("eval", LOCOMO, "--variant", "k1=lots"), "--variant k1=lots: expected a float"),
        (("eval", LOCOMO, "--baseline-tokenizer", "nope"), "unknown tokenizer 'nope'; use one of"),
    ],
)
def test_a_bad_flag_value_is_invalid_input(cli, store, args, message) -> None:
    add(store, "u", "s", ("user", "I went hiking at Mount Rainier", T0))
    r = cli(*args)
    assert r.exit_code == 2, r.output
    assert f"error: {message}" in " ".join(r.output.split())


@pytest.mark.parametrize(
    ("variable", "value", "args", "message"),
    [
        ("REFIND_LLM_RETRIES", "21", ("--mode", "agent"), "REFIND_LLM_RETRIES: must be at most 20, got '21'"),
        ("REFIND_LLM_TIMEOUT", "86401", ("--mode", "agent"), "REFIND_LLM_TIMEOUT: must be at most 86,400, got '86401'"),
        ("REFIND_BUSY_TIMEOUT", "abc", ("--mode", "bm25"), "REFIND_BUSY_TIMEOUT: 'abc' is not a number"),
        (
            "REFIND_RETENTION_DAYS",
            "0",
            ("--mode", "bm25"),
            "REFIND_RETENTION_DAYS: '0' days is below the minimum of 1 day (use 'off' to keep everything)",
        ),
    ],
)
def test_a_bad_variable_is_invalid_input(cli, store, monkeypatch, variable, value, args, message) -> None:
    add(store, "u", "s", ("user", "I went hiking at Mount Rainier", T0))
    monkeypatch.setenv(variable, value)
    r = cli("search", "hiking", "--user", "u", "--model", "openai/scripted", "--api-base", "http://127.0.0.1:9", *args)
    assert r.exit_code == 2, r.output
    assert r.output == f"error: {message}\n"


def test_an_index_cache_size_that_is_not_a_number_is_invalid_input(db_path, store) -> None:
    # read once per process, when the index cache is first imported: a fresh process, as a user runs it
    add(store, "u", "s", ("user", "I went hiking at Mount Rainier", T0))
    env = {**os.environ, "REFIND_INDEX_CACHE_MB": "abc", "REFIND_DB": str(db_path)}
    r = subprocess.run(
        [sys.executable, "-m", "refind_cli", "search", "hiking", "--user", "u", "--mode", "bm25"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr == "error: REFIND_INDEX_CACHE_MB: 'abc' is not a number of megabytes\n"


@pytest.mark.parametrize("base", ["ftp://x", "localhost:11434/v1"])
def test_an_api_base_that_is_not_an_http_url_is_invalid_input_not_a_model_failure(cli, store, base) -> None:
    # a check of the flag's shape, before any model is asked: exit 2 (a model failure, 5, is a provider's answer or
    # a model that cannot be used)
    add(store, "u", "s", ("user", "I went hiking at Mount Rainier", T0))
    r = cli("search", "hiking", "--user", "u", "--mode", "agent", "--model", "openai/scripted", "--api-base", base)
    assert r.exit_code == 2, r.output
    assert f"error: api base {base!r} is not an http:// or https:// URL" in " ".join(r.output.split())


def test_an_option_of_one_value_given_twice_is_refused_not_read_as_the_last(cli, store):
    # a probe of round 18: `refind forget --user alice --user bob --yes` forgot bob (click keeps the last value);
    # `add x --user alice --user bob` stored under bob. The server refuses a repeated parameter the same way.
    add(store, "alice", "s", ("user", "alice's note", T0))
    add(store, "bob", "s", ("user", "bob's note", T0))
    for args in (
        ("forget", "--user", "alice", "--user", "bob", "--yes"),
        ("forget", "--user=alice", "-u", "bob", "--yes"),
        ("add", "another", "--user", "alice", "--user", "bob", "--session", "s"),
    ):
        r = cli(*args)
        assert r.exit_code == 2, r.output
        assert "--user given 2 times; give it once (the last one would win)" in " ".join(r.output.split())
    assert [len(store.user_messages(u)) for u in ("alice", "bob")] == [1, 1]  # nothing forgotten, nothing stored
    # an option that takes several values, and flags said twice, are as ever
    r = cli("search", "note", "--user", "bob", "--mode", "bm25", "--option", "a", "--option", "b", "--json", "--json")
    assert r.exit_code == 0, r.output
