"""SIGTERM (timeout, systemd, docker stop) while `refind export --output` or `refind backup` writes: the hidden
partial file beside the target — a copy of a user's messages, or of the whole database — is removed, as on Ctrl-C,
and the exit status is 143. Python's default for SIGTERM ended the process at once and left it, out of any forget's
reach (a probe). The signal is sent by the process to itself at a fixed point of the write, so the test is exact."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import add

from refind_cli.store import Store

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

# refind's own entry point, with one hook: the process sends itself SIGTERM at the Nth call of module.function
RUN = textwrap.dedent(
    """
    import os, signal, sys
    from refind_cli import {module} as target
    real, calls = target.{function}, []
    def hooked(*args, **kwargs):
        calls.append(1)
        if len(calls) == {nth}:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)
    target.{function} = hooked
    from refind_cli.cli.root import main
    sys.argv = ["refind", *sys.argv[1:]]
    main()
    """
)


def _run(tmp_path: Path, hook: str, nth: int, *args: str) -> subprocess.CompletedProcess[str]:
    module, function = hook.split(".")
    script = RUN.format(module=module, function=function, nth=nth)
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=ENV, timeout=60, cwd=tmp_path
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "m.db"
    with Store(path) as store:
        for i in range(3):
            add(store, "solo", f"s{i}", ("user", f"my PIN is 40{i}1", 1_700_000_000_000 + i))
    return path


def test_sigterm_during_an_export_removes_its_partial_file(tmp_path: Path, db: Path) -> None:
    out = tmp_path / "ex"
    out.mkdir()
    # the first request's line written into the hidden file, the second being made: SIGTERM
    args = ("export", "--user", "solo", "--output", str(out / "o.jsonl"), "--db", str(db))
    done = _run(tmp_path, "lifecycle.request_line", 2, *args)
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert done.stderr == "stopped by SIGTERM; the file it was writing was removed\n"
    assert list(out.iterdir()) == []
    assert _run(tmp_path, "lifecycle.request_line", 0, *args).returncode == 0  # (the hook alone changes nothing)
    assert [p.name for p in out.iterdir()] == ["o.jsonl"] and "PIN is 4021" in (out / "o.jsonl").read_text()


def test_sigterm_during_a_backup_removes_its_whole_hidden_copy(tmp_path: Path, db: Path) -> None:
    out = tmp_path / "bk"
    out.mkdir()
    # the copy made and checked, about to be given its name: SIGTERM
    args = ("backup", str(out / "b.db"), "--db", str(db))
    done = _run(tmp_path, "health.publish", 1, *args)
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert done.stderr == "stopped by SIGTERM; the file it was writing was removed\n"
    assert list(out.iterdir()) == []
    assert _run(tmp_path, "health.publish", 0, *args).returncode == 0
    assert [p.name for p in out.iterdir()] == ["b.db"]
