"""Numbers from flags and REFIND_* variables: nan and inf are refused with one line naming the setting, never a
traceback nor a limit that silently stops applying."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_busy_timeout_that_is_not_a_finite_number_is_one_line(cli, monkeypatch, value) -> None:
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", value)
    result = cli("add", "hello", "--user", "u", "--session", "s")
    assert result.exit_code == 2  # invalid input
    assert f"error: REFIND_BUSY_TIMEOUT: must be a finite number, got '{value}'" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-body-mb", "nan", "--max-body-mb must be a finite number above 0, got nan"),
        ("--max-body-mb", "inf", "--max-body-mb must be a finite number above 0, got inf"),
        ("--max-inflight-mb", "inf", "--max-inflight-mb must be a finite number above 0, got inf"),
        ("--header-timeout", "inf", "--header-timeout must be a finite number above 0, got inf"),
        ("--body-timeout", "inf", "--body-timeout must be a finite number above 0, got inf"),
        (
            "--expire-interval",
            "nan",
            "--expire-interval must be 0 (no sweep) or 10 to 31,536,000 seconds (a year), got nan",
        ),
        (
            "--expire-interval",
            "-1",
            "--expire-interval must be 0 (no sweep) or 10 to 31,536,000 seconds (a year), got -1",
        ),
    ],
)
def test_serve_refuses_a_limit_that_is_not_a_finite_number(cli, tmp_path: Path, flag, value, message) -> None:
    # the database's folder does not exist: without the check the server would fail to open it (exit 1), or crash
    # converting the number — it never starts listening here
    missing = tmp_path / "missing" / "refind.db"
    result = cli("serve", "--mode", "bm25", "--db", str(missing), "--port", "0", flag, value)
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_an_index_cache_size_that_is_not_a_finite_number_says_so(monkeypatch, value) -> None:
    from refind_cli import settings
    from refind_cli.errors import RefindError

    monkeypatch.setenv("REFIND_INDEX_CACHE_MB", value)
    with pytest.raises(RefindError) as refused:
        settings.index_cache_bytes_from_env()
    assert refused.value.message == (
        f"REFIND_INDEX_CACHE_MB: must be a finite number of megabytes (0 or more), got {value!r}"
    )
    monkeypatch.setenv("REFIND_INDEX_CACHE_MB", "-1")
    with pytest.raises(RefindError, match=r"^REFIND_INDEX_CACHE_MB: must be 0 or more, got '-1'$"):
        settings.index_cache_bytes_from_env()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_an_eval_variant_that_is_not_a_finite_number_is_refused(cli, value) -> None:
    from conftest import FIXTURES

    result = cli("eval", str(FIXTURES / "eval" / "locomo_small.json"), "-V", f"k1={value}")
    assert result.exit_code == 2
    assert f"--variant k1={value}: must be a finite number, got '{value}'" in " ".join(result.output.split())
