"""Slow paths found by a probe (round 28): legal inputs of uncommon shapes, each run as a `refind` command in a
fresh process, timed with its peak memory (wait4's ru_maxrss), in this checkout and in a baseline tree in the same
run (``--base``: a checkout of main, ``git worktree add --detach /tmp/base main``), the two taking turns.

  .venv/bin/python bench/slow_paths.py --base /tmp/base                 # every case, 2 rounds
  .venv/bin/python bench/slow_paths.py --base /tmp/base --case replay_fat --rounds 3

Cases (the inputs are generated, seeded, into a temporary directory):

- ``replay_fat``: ``refind add --file`` of 40 Adds of one 5 MB message each (a pasted log; 200 MB).
- ``replay_big_adds``: ``refind add --file`` of 1,000,000 short messages of one user in 200 Adds of 5,000.
- ``replay_groups``: the control, 200,000 messages in Adds of 20 (cut as before: 500 Adds a batch).
- ``replay_after_forget``: the log of one session of 100,000 message lines replayed again after that session was
  forgotten (every group refused as forgotten, exit 6).
- ``add_after_forget``: 50,000 new message lines of that user (another session) after the same forget.
- ``search_big_message``: ``refind search`` (not ``--json``) whose result is a 5 MB pasted log.
- ``inspect_user``: ``refind inspect user`` of a user of 50,000 sessions; ``inspect_events``: ``refind inspect
  events --limit 0`` of the same database's 50,000 events; ``inspect_users``: ``refind inspect users`` of 10,000 users.
- ``inspect_session_json`` / ``inspect_session_plain``: ``refind inspect session`` (``--json`` / the default, plain
  text past its limits) of one session of 200,000 messages; ``inspect_turn``: ``refind inspect turn`` (``--json``)
  of its middle turn; ``inspect_check``: ``refind inspect --check --json`` of the database of 10,000 users. What the
  two trees print is compared byte for byte (round 29).

What the replays stored is compared between the trees (ids and text of every message, in order): answers must not
change. The search and inspect cases print other text by design (plain lines past a limit, not a table).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000_000


def _write_adds(path: Path, adds: int, per_add: int, text: Callable[[random.Random], str], session: int) -> None:
    rng = random.Random(7)
    with path.open("w") as out:
        for r in range(adds):
            messages = [
                {"role": "user" if i % 2 == 0 else "assistant", "content": text(rng), "timestamp": T0 + r * 100_000 + i}
                for i in range(per_add)
            ]
            out.write(
                json.dumps(
                    {"request_id": f"r{r}", "user_id": "u", "session_id": f"s{r // session}", "messages": messages}
                )
                + "\n"
            )


VOCAB = [f"w{i}" for i in range(20_000)]


def _words(k: int) -> Callable[[random.Random], str]:
    return lambda rng: " ".join(rng.choices(VOCAB, k=k))


def setup_replay_fat(tmp: Path) -> Path:
    path = tmp / "fat.jsonl"
    _write_adds(path, 40, 1, _words(625_000), 1)  # ~5 MB a message
    return path


def setup_replay_big_adds(tmp: Path) -> Path:
    path = tmp / "big_adds.jsonl"
    _write_adds(path, 200, 5_000, _words(5), 4)
    return path


def setup_replay_groups(tmp: Path) -> Path:
    path = tmp / "groups.jsonl"
    _write_adds(path, 10_000, 20, _words(5), 1)
    return path


def _lines(path: Path, n: int, session: str, word: str) -> Path:
    rng = random.Random(9)
    vocab = [f"w{i}" for i in range(5_000)]
    with path.open("w") as out:
        for i in range(n):
            line = {"user_id": "u", "session_id": session, "role": "user" if i % 2 == 0 else "assistant"}
            line |= {"content": f"{word} " + " ".join(rng.choices(vocab, k=6)), "timestamp": T0 + i * 1000}
            out.write(json.dumps(line) + "\n")
    return path


def _made(tmp: Path, name: str, *commands: list[str]) -> Path:
    """A database made by this checkout's refind running ``commands`` ({db} its path)."""
    db = tmp / f"{name}.db"
    for args in commands:
        run(ROOT, [a.replace("{db}", str(db)) for a in args], ok=(0, 4, 6))
    return db


def setup_replay_after_forget(tmp: Path) -> Case:
    log = _lines(tmp / "session.jsonl", 100_000, "s1", "note")
    db = _made(
        tmp,
        "forgot",
        ["add", "--file", str(log), "--quiet", "--db", "{db}"],
        ["forget", "--user", "u", "--session", "s1", "--yes", "--db", "{db}"],
    )
    return Case(["add", "--file", str(log), "--quiet", "--db", "{db}"], template=db, exits=(6,))


def setup_add_after_forget(tmp: Path) -> Case:
    case = setup_replay_after_forget(tmp)
    log = _lines(tmp / "other.jsonl", 50_000, "s2", "other")
    return Case(["add", "--file", str(log), "--quiet", "--db", "{db}"], template=case.template)


def setup_search_big_message(tmp: Path) -> Case:
    log = tmp / "big.jsonl"
    _write_adds(
        log,
        1,
        1,
        lambda rng: "\n".join(f"12:00:{i % 60:02d} INFO worker[{i}] " + _words(8)(rng) for i in range(100_000)),
        1,
    )
    db = _made(tmp, "big", ["add", "--file", str(log), "--quiet", "--db", "{db}"])
    return Case(["search", "worker w17", "--user", "u", "--mode", "bm25", "--db", "{db}"], template=db, writes=False)


def _sessions_db(tmp: Path) -> Path:
    db = tmp / "sessions.db"
    if not db.exists():
        log = tmp / "sessions.jsonl"
        _write_adds(log, 50_000, 1, _words(8), 1)
        _made(tmp, "sessions", ["add", "--file", str(log), "--quiet", "--db", "{db}"])
    return db


def setup_inspect_user(tmp: Path) -> Case:
    return Case(["inspect", "user", "u", "--db", "{db}"], template=_sessions_db(tmp), writes=False)


def setup_inspect_events(tmp: Path) -> Case:
    return Case(["inspect", "events", "--limit", "0", "--db", "{db}"], template=_sessions_db(tmp), writes=False)


def setup_inspect_check(tmp: Path) -> Case:
    case = setup_inspect_users(tmp)
    return Case(["inspect", "--check", "--json", "--db", "{db}"], template=case.template, writes=False, compare=True)


def setup_inspect_users(tmp: Path) -> Case:
    db = tmp / "users.db"
    if not db.exists():
        log = tmp / "users.jsonl"
        rng = random.Random(3)
        with log.open("w") as out:
            for u in range(10_000):
                messages = [{"role": "user", "content": _words(8)(rng), "timestamp": T0 + i} for i in range(20)]
                line = {"request_id": "r", "user_id": f"user{u}", "session_id": "s", "messages": messages}
                out.write(json.dumps(line) + "\n")
        _made(tmp, "users", ["add", "--file", str(log), "--quiet", "--db", "{db}"])
    return Case(["inspect", "users", "--db", "{db}"], template=db, writes=False)


def _session_db(tmp: Path) -> Path:
    db = tmp / "session.db"
    if not db.exists():
        _made(
            tmp,
            "session",
            ["add", "--file", str(_lines(tmp / "big.jsonl", 200_000, "big", "note")), "--quiet", "--db", "{db}"],
        )
    return db


def setup_inspect_session_json(tmp: Path) -> Case:
    args = ["inspect", "session", "u", "big", "--json", "--db", "{db}"]
    return Case(args, template=_session_db(tmp), writes=False, compare=True)


def setup_inspect_session_plain(tmp: Path) -> Case:
    args = ["inspect", "session", "u", "big", "--db", "{db}"]
    return Case(args, template=_session_db(tmp), writes=False, compare=True)


def setup_inspect_turn(tmp: Path) -> Case:
    db = _session_db(tmp)
    conn = sqlite3.connect(db)
    try:
        (middle,) = conn.execute("SELECT id FROM messages ORDER BY seq LIMIT 1 OFFSET 100000").fetchone()
    finally:
        conn.close()
    return Case(["inspect", "turn", middle, "--json", "--db", "{db}"], template=db, writes=False, compare=True)


def _replay_case(setup: Callable[[Path], Path]) -> Callable[[Path], Case]:
    return lambda tmp: Case(["add", "--file", str(setup(tmp)), "--quiet", "--db", "{db}"])


CASES: dict[str, Callable[[Path], Case]] = {
    "replay_fat": _replay_case(setup_replay_fat),
    "replay_big_adds": _replay_case(setup_replay_big_adds),
    "replay_groups": _replay_case(setup_replay_groups),
    "replay_after_forget": setup_replay_after_forget,
    "add_after_forget": setup_add_after_forget,
    "search_big_message": setup_search_big_message,
    "inspect_user": setup_inspect_user,
    "inspect_events": setup_inspect_events,
    "inspect_users": setup_inspect_users,
    "inspect_session_json": setup_inspect_session_json,
    "inspect_session_plain": setup_inspect_session_plain,
    "inspect_turn": setup_inspect_turn,
    "inspect_check": setup_inspect_check,
}


@dataclass(frozen=True)
class Case:
    args: list[str]  # a refind command, "{db}" standing for the database
    template: Path | None = None  # copied to {db} before each run (None: a new database)
    writes: bool = True  # False: run on the template itself (it only reads)
    exits: tuple[int, ...] = (0,)
    compare: bool = False  # True: what the two trees print must be the same, byte for byte


def run(
    tree: Path, args: list[str], ok: tuple[int, ...] = (0,), printed: hashlib._Hash | None = None
) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of ``python -m refind_cli ARGS`` run from ``tree`` (its stdout into ``printed``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFIND_")} | {"PYTHONPATH": str(tree)}
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:  # files, not pipes: a replay's thousands
        # of refused lines fill a pipe
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "refind_cli", *args],
            cwd=tree,
            env=env,
            stdout=out if printed is not None else subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) not in ok:
            err.seek(0)
            raise RuntimeError(
                f"{tree}: refind {' '.join(args[:2])} exited {os.waitstatus_to_exitcode(status)}: "
                + err.read()[-2000:].decode(errors="replace")
            )
        if printed is not None:
            out.seek(0)
            while chunk := out.read(1 << 20):
                printed.update(chunk)
    return seconds, usage.ru_maxrss / 1024


def stored(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        digest = hashlib.sha256()
        for mid, content in conn.execute("SELECT id, content FROM messages ORDER BY seq"):
            digest.update(f"{mid}\0{content}\0".encode())
        return digest.hexdigest()
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="a checkout of the code to compare with (main)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="default: every case")
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args(argv)
    trees = {"this": ROOT, "base": Path(options.base).resolve()}
    with tempfile.TemporaryDirectory(prefix="refind-slow-") as tmp:
        for name in options.case or list(CASES):
            case = CASES[name](Path(tmp))
            times: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
            answers: dict[str, str] = {}
            for _ in range(options.rounds):
                for tree, where in trees.items():
                    db = case.template if not case.writes and case.template else Path(tmp) / f"{tree}.db"
                    if case.writes:
                        for suffix in ("", "-wal", "-shm"):
                            Path(f"{db}{suffix}").unlink(missing_ok=True)
                        if case.template is not None:
                            shutil.copyfile(case.template, db)
                    args = [a.replace("{db}", str(db)) for a in case.args]
                    printed = hashlib.sha256() if case.compare else None
                    times[tree].append(run(where, args, case.exits, printed))
                    if case.writes:
                        answers[tree] = stored(db)
                    elif printed is not None:
                        answers[tree] = printed.hexdigest()
            row = {tree: (min(s for s, _ in t), max(m for _, m in t)) for tree, t in times.items()}
            (ts, tm), (bs, bm) = row["this"], row["base"]
            same = "—" if not answers else "same" if answers["this"] == answers["base"] else "DIFFERENT"
            print(
                f"{name:20} this {ts:6.2f} s {tm:7.0f} MiB | base {bs:6.2f} s {bm:7.0f} MiB | "
                f"time {ts / bs:4.2f}× memory {tm / bm:4.2f}× | {'printed' if case.compare else 'stored'}: {same}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
