"""Numbers from flags and REFIND_* variables: nan and inf are refused with one line naming the setting, never a
traceback nor a limit that silently stops applying."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_busy_timeout_that_is_not_a_finite_number_is_one_line(cli, monkeypatch, value) -> None:
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", value)
    result = cli("add", "hello", "--user", "u", "--session", "s")
    assert result.exit_code == 1
    assert f"error: REFIND_BUSY_TIMEOUT: must be a finite number, got '{value}'" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-body-mb", "nan", "--max-body-mb must be a finite number above 0, got nan"),
        ("--max-body-mb", "inf", "--max-body-mb must be a finite number above 0, got inf"),
        ("--max-inflight-mb", "inf", "--max-inflight-mb must be a finite number above 0, got inf"),
        ("--header-timeout", "inf", "--header-timeout must be a finite number above 0, got inf"),
        ("--body-timeout", "inf", "--body-timeout must be a finite number above 0, got inf"),
        ("--expire-interval", "nan", "--expire-interval must be 0 (no sweep) or a finite number of seconds, got nan"),
        ("--expire-interval", "-1", "--expire-interval must be 0 (no sweep) or a finite number of seconds, got -1"),
    ],
)
def test_serve_refuses_a_limit_that_is_not_a_finite_number(cli, tmp_path: Path, flag, value, message) -> None:
    # the database's folder does not exist: without the check the server would fail to open it (exit 1), or crash
    # converting the number — it never starts listening here
    missing = tmp_path / "missing" / "refind.db"
    result = cli("serve", "--mode", "bm25", "--db", str(missing), "--port", "0", flag, value)
    assert result.exit_code == 2, result.output
    assert message in result.output
