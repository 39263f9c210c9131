"""`refind inspect session` and `inspect turn` read what they print, not the session whole: `--json` is written a
turn at a time (byte for byte what json.dumps of the whole transcript printed), and a turn's neighbours are the only
rows read. Peak memory is measured in a fresh process (wait4's ru_maxrss), as bench/slow_paths.py does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from refind_cli.contract import parse_add
from refind_cli.search_config import SearchConfig
from refind_cli.store import Store
from refind_cli.turns import build_turns

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_685_606_400_000


def _whole(db_path: Path, user: str, session: str) -> dict:
    """The transcript as the code before streaming laid it out: build_turns over the user's messages, then the
    session's turns."""
    with Store(db_path, retention_days=None) as s:
        turns = build_turns(s.user_messages(user), SearchConfig().turn_unit)
    return {
        "user_id": user,
        "session_id": session,
        "turns": [
            {
                "id": t.id,
                "session_id": t.session_id,
                "said_at": t.said_at,
                "recorded_at": t.recorded_at,
                "messages": [
                    {
                        "id": m.id,
                        "seq": m.seq,
                        "request_id": m.request_id,
                        "idx": m.idx,
                        "role": m.role,
                        "content": m.content,
                        "said_at": m.said_at,
                        "recorded_at": m.recorded_at,
                    }
                    for m in t.messages
                ],
            }
            for t in turns
            if t.session_id == session
        ],
    }


@pytest.fixture
def mixed(store) -> None:
    """A session in arrival order that is not its said-at order: undated messages (first, and after dated ones), an
    earlier said-at arriving later, a NUL, non-ASCII and control characters; another session between its Adds."""
    adds = [
        ("r1", "s", [("user", "undated opening", None), ("assistant", "b\x00c 北京 é", T0 + 5_000)]),
        ("r2", "other", [("user", "elsewhere", T0)]),
        ("r3", "s", [("user", "late but said first", T0 + 1_000), ("assistant", "undated after", None)]),
        ("r4", "s", [("user", "tab\tand\nline \x1b[31m", T0 + 5_000), ("user", "same said-at", T0 + 5_000)]),
    ]
    for rid, sid, messages in adds:
        store.add(
            parse_add(
                {
                    "request_id": rid,
                    "user_id": "alice",
                    "session_id": sid,
                    "messages": [
                        {"role": r, "content": c, **({"timestamp": t} if t is not None else {})} for r, c, t in messages
                    ],
                }
            )
        )


def test_the_streamed_json_is_byte_for_byte_what_json_dumps_of_the_whole_session_printed(cli, db_path, mixed) -> None:
    assert SearchConfig().turn_unit == "message"  # review reads a turn as one message: the index's default unit
    expected = _whole(db_path, "alice", "s")
    assert [t["messages"][0]["content"] for t in expected["turns"]][:2] == ["undated opening", "late but said first"]
    out = cli("inspect", "session", "alice", "s", "--json").stdout_bytes
    assert out == (json.dumps(expected, ensure_ascii=False, indent=2) + "\n").encode()


def test_a_turn_s_neighbours_are_those_of_the_whole_session(cli, db_path, mixed) -> None:
    turns = _whole(db_path, "alice", "s")["turns"]
    for at, t in enumerate(turns):
        for n in (0, 1, 2, 10):
            shown = json.loads(cli("inspect", "turn", t["id"], "--neighbours", str(n), "--json").output)
            assert shown == {
                "user_id": "alice",
                "session_id": "s",
                "turn": t,
                "position": at,
                "of": len(turns),
                "before": turns[max(0, at - n) : at],
                "after": turns[at + 1 : at + 1 + n],
            }


def test_a_session_with_nothing_visible_is_said_so_and_prints_nothing(cli, mixed) -> None:
    result = cli("inspect", "session", "alice", "nope", "--json")
    assert result.exit_code == 4 and result.stdout == ""
    assert "no visible messages in session 'nope' of user 'alice'" in result.stderr


MESSAGES = 3_000
CHARS = 10_000  # 30 MB of text in one session


@pytest.fixture(scope="module")
def big_session(tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("big") / "big.db"
    with Store(db, retention_days=None) as s:
        for r in range(0, MESSAGES, 100):
            messages = [
                {"role": "user", "content": f"{i:06d}" + "x" * (CHARS - 6), "timestamp": T0 + i}
                for i in range(r, r + 100)
            ]
            s.add(parse_add({"request_id": f"r{r}", "user_id": "u", "session_id": "big", "messages": messages}))
        s.add(parse_add({"request_id": "small", "user_id": "u", "session_id": "small", "messages": messages[:1]}))
        (middle,) = s.conn.execute("SELECT id FROM messages ORDER BY seq LIMIT 1 OFFSET ?", (MESSAGES // 2,)).fetchone()
    return db, middle


# The child's own peak (VmHWM, reset at exec), read as it exits: wait4's ru_maxrss counts what the child held before
# its exec, a fork of this test process that holds the big session's Adds.
_MEASURED = """
import atexit, re, runpy, sys
report = sys.argv.pop(1)
def peak():
    with open("/proc/self/status") as status, open(report, "w") as out:
        out.write(re.search(r"VmHWM:\\s*(\\d+)", status.read())[1])
atexit.register(peak)
runpy.run_module("refind_cli", run_name="__main__")
"""


linux = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory read from /proc")


def _peak_mib(tmp_path: Path, *args: str) -> float:
    """Peak RSS in MiB of `refind ARGS` in a fresh process, its stdout into a file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")} | {"PYTHONPATH": str(ROOT)}
    peak = tmp_path / "peak"
    with (tmp_path / "out").open("wb") as out:
        subprocess.run([sys.executable, "-c", _MEASURED, str(peak), *args], env=env, stdout=out, check=True)
    return int(peak.read_text()) / 1024


@linux
def test_a_big_session_s_json_is_written_as_it_is_read(big_session, tmp_path) -> None:
    db, _ = big_session
    small = _peak_mib(tmp_path, "inspect", "session", "u", "small", "--json", "--db", str(db))
    big = _peak_mib(tmp_path, "inspect", "session", "u", "big", "--json", "--db", str(db))
    assert (tmp_path / "out").stat().st_size > MESSAGES * CHARS
    assert big - small < 10, (small, big)  # the whole session laid out, then one string of its JSON: ~+100 MiB


@linux
def test_a_big_session_s_plain_text_is_written_as_it_is_read(big_session, tmp_path) -> None:
    db, _ = big_session
    small = _peak_mib(tmp_path, "inspect", "session", "u", "small", "--plain", "--db", str(db))
    big = _peak_mib(tmp_path, "inspect", "session", "u", "big", "--db", str(db))
    assert (
        (tmp_path / "out")
        .read_text()
        .startswith(
            f"session big of user u: {MESSAGES:,} turn(s), {MESSAGES * CHARS:,} characters, as plain text (over "
        )
    )
    assert big - small < 10, (small, big)


@linux
def test_a_turn_in_a_big_session_reads_its_neighbours_only(big_session, tmp_path) -> None:
    db, middle = big_session
    small = _peak_mib(tmp_path, "inspect", "session", "u", "small", "--json", "--db", str(db))
    turn = _peak_mib(tmp_path, "inspect", "turn", middle, "--json", "--db", str(db))
    shown = json.loads((tmp_path / "out").read_text())
    assert (shown["position"], shown["of"], len(shown["before"]), len(shown["after"])) == (
        MESSAGES // 2,
        MESSAGES,
        2,
        2,
    )
    assert turn - small < 8, (small, turn)  # the whole session laid out: ~+40 MiB


PAGED = 1_200  # more than one read of rows (_FETCH_ROWS): the command is still reading when its reader pauses


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "plain"])
def test_a_reader_slow_to_take_the_output_holds_up_no_forget(cli, db_path, as_json) -> None:
    # `refind inspect session u s | less`: the output waits on its reader. It held one read open all along (round
    # 29's streaming), so a forget meanwhile waited 2 s and could not truncate the WAL (`checkpointed: false`: the
    # text it removed stayed in the files), and the messages it forgot were printed after it had answered
    with Store(db_path, retention_days=None) as s:
        for r in range(0, PAGED, 100):
            messages = [
                {"role": "user", "content": f"msg{i:06d} " + "y" * 1000, "timestamp": T0 + i} for i in range(r, r + 100)
            ]
            s.add(parse_add({"request_id": f"r{r}", "user_id": "u", "session_id": "paged", "messages": messages}))
        s.add(parse_add({"request_id": "o", "user_id": "u", "session_id": "other", "messages": messages[:1]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")} | {"PYTHONPATH": str(ROOT)}
    args = ["inspect", "session", "u", "paged", "--db", str(db_path), *(["--json"] if as_json else [])]
    reader = subprocess.Popen([sys.executable, "-m", "refind_cli", *args], env=env, stdout=subprocess.PIPE)
    try:
        assert reader.stdout is not None
        first = reader.stdout.read(1000)  # it is printing; what follows waits in the full pipe
        other = cli("forget", "--user", "u", "--session", "other", "--yes", "--json")
        assert other.exit_code == 0, other.output
        assert json.loads(other.output)["checkpointed"] is True
        paged = cli("forget", "--user", "u", "--session", "paged", "--yes", "--json")
        assert json.loads(paged.output)["checkpointed"] is True
        printed = (first + reader.stdout.read()).decode()
    finally:
        reader.kill()
        reader.wait(30)
    assert reader.returncode == 0
    assert 0 < printed.count("msg0") < PAGED  # what was read before the forget, not what it removed after
