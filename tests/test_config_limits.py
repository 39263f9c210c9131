"""Settings at their edges (a probe of round 24): a busy timeout past SQLite's 32-bit limit, a new database reached
through a dangling symlink, `--db` naming a directory or nothing, errors naming the flag or variable a value came
from, and a retention sweep interval too short to be of use."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from refind_cli import settings
from refind_cli.errors import InvalidInput
from refind_cli.store import Store

ADD = ("add", "hello", "--user", "u", "--session", "s")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


# ---- REFIND_BUSY_TIMEOUT ------------------------------------------------------------------------------------------


def test_a_busy_timeout_past_sqlites_limit_is_refused_not_read_as_no_wait(cli, db_path, monkeypatch) -> None:
    # 2,147,484 s is 2^31 ms and more: PRAGMA busy_timeout read 0 and connect() a negative wait, so a write that met a
    # lock failed in 0.15 s (exit 8, "REFIND_BUSY_TIMEOUT waits longer")
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "2147484")
    r = cli(*ADD)
    assert r.exit_code == 2, r.output
    assert r.output == (
        "error: REFIND_BUSY_TIMEOUT: must be at most 2,147,483 (SQLite's limit, 2^31 - 1 milliseconds: about 24.8 "
        "days), got '2147484'\n"
    )
    assert not db_path.exists()


def test_the_longest_busy_timeout_is_the_wait_sqlite_keeps(db_path, monkeypatch) -> None:
    monkeypatch.setenv("REFIND_BUSY_TIMEOUT", "2147483")
    with Store(db_path, retention_days=None) as store:
        assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2_147_483_000


# ---- --db: a dangling symlink, a directory, an empty value ------------------------------------------------------------


def test_a_new_database_through_a_dangling_symlink_is_created_private(cli, tmp_path, umask_022) -> None:
    # O_EXCL took the dangling link for an existing file, and SQLite created its target with the umask's 0644
    target = tmp_path / "elsewhere" / "target.db"
    target.parent.mkdir()
    link = tmp_path / "link.db"
    link.symlink_to(target)
    r = cli(*ADD, "--db", str(link))
    assert r.exit_code == 0, r.output
    assert _mode(target) == 0o600
    assert link.is_symlink()  # the link kept, pointing at the database


def test_the_wal_and_shm_beside_a_symlinked_new_database_are_private(tmp_path, umask_022) -> None:
    target = tmp_path / "target.db"
    link = tmp_path / "link.db"
    link.symlink_to(target)
    with Store(link, retention_days=None) as store:
        store.conn.execute("INSERT INTO settings (id, retention_days, set_by, set_at) VALUES (1, NULL, 't', 0)")
        assert [_mode(p) for p in (target, Path(f"{target}-wal"), Path(f"{target}-shm"))] == [0o600] * 3


def test_a_dangling_symlink_into_a_missing_folder_names_the_folder(cli, tmp_path) -> None:
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "missing" / "t.db")
    r = cli(*ADD, "--db", str(link))
    assert r.exit_code == 1, r.output
    assert " ".join(r.output.split()) == (
        f"error: cannot open database {link}: folder {tmp_path / 'missing'} does not exist ({link} is a symbolic "
        f"link to {tmp_path / 'missing' / 't.db'})"
    )


@pytest.mark.parametrize("args", [ADD, ("search", "hello", "--user", "u", "--mode", "bm25"), ("inspect",)])
def test_a_directory_as_the_database_is_invalid_input_saying_so(cli, tmp_path, args) -> None:
    # "cannot be opened (unable to open database file)", exit 7: the code of a full disk or a disk error
    folder = tmp_path / "somedir"
    folder.mkdir()
    r = cli(*args, "--db", str(folder))
    assert r.exit_code == 2, r.output
    assert " ".join(r.output.split()) == (
        f"error: cannot open database {folder}: it is a directory, not a database file; give a file's path, e.g. "
        f"{folder / 'refind.db'}"
    )
    assert os.listdir(folder) == []


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_db_on_the_command_line_is_refused(cli, tmp_path, monkeypatch, value) -> None:
    monkeypatch.chdir(tmp_path)  # "" was the current folder: "cannot open database ."
    r = cli(*ADD, "--db", value)
    assert r.exit_code == 2, r.output
    assert (
        r.output
        == "error: --db: an empty value is not a database file; leave the flag out for REFIND_DB, else refind.db\n"
    )
    assert os.listdir(tmp_path) == []


def test_an_empty_refind_db_variable_counts_as_unset(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REFIND_DB", "")
    r = cli(*ADD)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "refind.db").is_file()


# ---- errors name the flag or variable a value came from --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "name"),
    [
        (ADD, {"REFIND_RETENTION_DAYS": "abc"}, "REFIND_RETENTION_DAYS"),
        ((*ADD, "--retention-days", "abc"), {}, "--retention-days"),
        (("expire", "--days", "abc"), {}, "--days"),
        (("expire", "--days=abc"), {}, "--days"),
        (("expire", "--retention-days", "abc"), {}, "--retention-days"),
        (("expire",), {"REFIND_RETENTION_DAYS": "abc"}, "REFIND_RETENTION_DAYS"),
    ],
)
def test_a_bad_retention_names_where_it_came_from(cli, store, monkeypatch, args, env, name) -> None:
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    r = cli(*args)
    assert r.exit_code == 2, r.output
    assert r.output == f"error: {name}: 'abc' is not a number of days (or 'off')\n"


@pytest.mark.parametrize(
    ("flag", "variable"),
    [
        ("--max-body-mb", "REFIND_SERVER_MAX_BODY_MB"),
        ("--max-inflight-mb", "REFIND_SERVER_MAX_INFLIGHT_MB"),
        ("--header-timeout", "REFIND_SERVER_HEADER_TIMEOUT_S"),
        ("--body-timeout", "REFIND_SERVER_BODY_TIMEOUT_S"),
    ],
)
def test_a_bad_server_limit_names_the_variable_it_came_from(cli, tmp_path, monkeypatch, flag, variable) -> None:
    missing = tmp_path / "missing" / "refind.db"  # never starts listening here
    serve = ("serve", "--mode", "bm25", "--db", str(missing), "--port", "0")
    monkeypatch.setenv(variable, "-1")
    r = cli(*serve)
    assert r.exit_code == 2, r.output
    assert r.output == f"error: {variable} must be a finite number above 0, got -1\n"
    r = cli(*serve, flag, "-2")  # the flag wins over the variable, and is named
    assert r.output == f"error: {flag} must be a finite number above 0, got -2\n"


# ---- the server's retention sweep interval ---------------------------------------------------------------------------

INTERVAL = "must be 0 (no sweep) or 10 to 31,536,000 seconds (a year), got"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {"REFIND_EXPIRE_INTERVAL_S": "0.0001"}, f"REFIND_EXPIRE_INTERVAL_S {INTERVAL} 0.0001"),
        (("--expire-interval", "9.5"), {}, f"--expire-interval {INTERVAL} 9.5"),
        (("--expire-interval", "1e10"), {}, f"--expire-interval {INTERVAL} 1e+10"),  # past threading.TIMEOUT_MAX
    ],
)
def test_a_sweep_interval_out_of_its_range_is_refused(cli, tmp_path, monkeypatch, args, env, message) -> None:
    # REFIND_EXPIRE_INTERVAL_S=0.0001 was accepted, and the server spent two thirds of a core sweeping
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    missing = tmp_path / "missing" / "refind.db"
    r = cli("serve", "--mode", "bm25", "--db", str(missing), "--port", "0", *args)
    assert r.exit_code == 2, r.output
    assert r.output == f"error: {message}\n"


def test_the_sweep_intervals_range_is_inclusive() -> None:
    for value in (0.0, 10.0, 365 * 86_400.0):
        assert settings.check_expire_interval(value, "--expire-interval") == value
    with pytest.raises(InvalidInput):
        settings.check_expire_interval(365 * 86_400.0 + 1, "--expire-interval")


# ---- a misspelt REFIND_* variable ------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def _refind(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")}
    return subprocess.run(
        [sys.executable, "-m", "refind_cli", *args], env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def test_a_misspelt_variable_is_named_with_the_setting_it_is_close_to() -> None:
    # REFIND_RETENTIONDAYS=5 was silently ignored: 30 days applied
    r = _refind({"REFIND_RETENTIONDAYS": "5", "REFIND_SOMETHING_ELSE": "1"}, "--version")
    assert r.returncode == 0, r.stderr
    assert r.stderr == (
        "warning: REFIND_RETENTIONDAYS is not a refind setting and is ignored; did you mean REFIND_RETENTION_DAYS?\n"
        "warning: REFIND_SOMETHING_ELSE is not a refind setting and is ignored\n"
    )


MEANT = [  # a variable set by mistake, and the setting its warning names
    # a probe of round 24: REFIND_X was told "did you mean REFIND_DB?" (the REFIND_ they share made them close)
    ("REFIND_X", None),
    # … and REFIND_TOKEN, surely the server's token, was told nothing at all
    ("REFIND_TOKEN", "REFIND_SERVER_TOKEN"),
    ("REFIND_DB_PATH", "REFIND_DB"),
    ("REFIND_RETENTION", "REFIND_RETENTION_DAYS"),
    ("REFIND_LLM_TIMOUT", "REFIND_LLM_TIMEOUT"),
    ("REFIND_MODLE", "REFIND_MODE or REFIND_MODEL"),
    ("REFIND_TIMEOUT", None),  # four settings hold the word: none is named
    ("REFIND_PORT", None),
    ("REFIND_db", "REFIND_DB"),  # a probe of round 25: a setting in lower case was told nothing close
    ("REFIND_Mode", "REFIND_MODE"),
]


@pytest.mark.parametrize(("name", "meant"), MEANT)
def test_a_misspelt_variable_is_told_the_setting_it_was_likely_meant_for(name, meant) -> None:
    hint = f"; did you mean {meant}?" if meant else ""
    assert settings.misspelt_variables({name: "1"}) == [f"{name} is not a refind setting and is ignored{hint}"]


def test_no_variable_refind_or_its_tests_and_benchmarks_read_is_warned_about() -> None:
    used = set()
    for folder in ("refind_cli", "tests", "bench"):
        for source in (ROOT / folder).rglob("*.py"):
            used |= set(re.findall(r'"(REFIND_[A-Z][A-Z0-9_]*[A-Z0-9])"', source.read_text(encoding="utf-8")))
    used -= {"REFIND_RETENTIONDAYS", "REFIND_SOMETHING_ELSE", *(name for name, _ in MEANT)}  # this file's own
    assert "REFIND_BUSY_TIMEOUT" in used and "REFIND_DATASETS" in used
    assert settings.misspelt_variables(dict.fromkeys(used, "1")) == []
    r = _refind(dict.fromkeys(sorted(used), ""), "--version")  # (empty: each reads as unset)
    assert (r.returncode, r.stderr) == (0, "")


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_databases_wal_shm_or_journal_path_is_refused_as_a_database(cli, tmp_path, suffix) -> None:
    # a probe of round 28: `--db memory.db-wal` (or Memory("memory.db-wal")) made a database there, which the next
    # open of memory.db deleted as its stale WAL, with everything stored in it
    main = tmp_path / "memory.db"
    assert cli(*ADD, "--db", str(main)).exit_code == 0
    side = tmp_path / f"memory.db{suffix}"
    said = (
        f"cannot open database {side}: it is the {suffix[1:]} file SQLite keeps beside the database {main}, and "
        f"opening that database rewrites or deletes it (what was stored there would be lost); give {main} itself, or "
        "a path of its own"
    )
    r = cli(*ADD, "--db", str(side))
    assert r.exit_code == 2, r.output
    assert " ".join(r.output.split()) == f"error: {said}"
    from refind_cli import Memory

    with pytest.raises(InvalidInput, match=f"^{re.escape(said)}$"):
        Memory(side)
    assert not side.exists()
    link = tmp_path / "elsewhere.db"
    link.symlink_to(side)  # (a link to such a path is refused too)
    with pytest.raises(InvalidInput, match="SQLite keeps beside the database"):
        Memory(link)
    assert not side.exists()
    no_neighbour = tmp_path / "notes-wal"  # a name that only ends so: no database beside it
    with Memory(no_neighbour) as memory:
        memory.add("kept", user="u", session="s")


def test_a_fifo_or_a_device_as_the_database_is_invalid_input_saying_so(cli, tmp_path) -> None:
    # a probe of round 28: "the disk failed a read or write (disk I/O error)", exit 7 — the words of a failing disk
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    r = cli(*ADD, "--db", str(fifo))
    assert r.exit_code == 2, r.output
    assert " ".join(r.output.split()) == (
        f"error: cannot open database {fifo}: it is a named pipe (FIFO), not a database file; give a file's path"
    )
    from refind_cli import Memory

    with pytest.raises(InvalidInput, match=r"^cannot open database /dev/null: it is a device, not a database file"):
        Memory("/dev/null")
