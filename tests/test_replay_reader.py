"""The replay's two fast paths store exactly what storing each request alone stores: a batch written with one
statement per table (``Store._add_together``), and a reader process that parses, hashes and tokenizes the next batch
while this one writes (``replay(..., parallel=True)``). And the reader never outlives the replay, whatever stops it."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import PRINTS_READER_PID, Clock, ended
from hypothesis import given, settings
from hypothesis import strategies as st

from refind_cli import index_store, lifecycle
from refind_cli.contract import parse_add
from refind_cli.replay import replay
from refind_cli.store import DAY_MS, Store

T0 = 1_700_000_000_000
_ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=30)  # NUL, "_", capitals, punctuation
_TEXT = st.one_of(
    _ASCII, _ASCII, st.lists(st.sampled_from(["Kayaks", "the", "LISBON", "ran", "é", "北京"])).map(" ".join)
)
_SAID = st.one_of(st.none(), st.integers(0, 20_000).map(lambda d: d * DAY_MS + 5))
_REQUESTS = st.lists(
    st.tuples(
        st.sampled_from(["u1", "u2"]),
        st.sampled_from(["s1", "s2"]),
        st.lists(st.tuples(_TEXT, _SAID), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=6,
)


def add_line(rid: str, user: str, session: str, *contents: str, ts: int | None = T0) -> str:
    messages = [
        {"role": "user", "content": c, **({} if ts is None else {"timestamp": ts + i})} for i, c in enumerate(contents)
    ]
    return json.dumps({"request_id": rid, "user_id": user, "session_id": session, "messages": messages})


def mixed_lines() -> list[str]:
    """Every kind of line and outcome a replay meets, spread over batches of 4 requests."""
    lines = []
    for r in range(30):
        user = f"u{r % 3}"
        lines.append(add_line(f"r{r}", user, f"s{r // 6}", f"{user} talks of kayaks and Lisbon {r}", f"answer {r}"))
        if r == 5:
            lines.append(add_line("r3", "u0", "s0", "u0 talks of kayaks and Lisbon 3", "answer 3"))  # a duplicate
            lines.append("{not json")
        if r == 9:
            lines.append(add_line("r4", "u1", "s0", "another payload"))  # a conflict
            lines.append('{"request_id": "x", "request_id": "y"}')  # a key given twice
        if r == 12:
            lines.append(add_line("r12", "u0", "s2", "u0 talks of kayaks and Lisbon 12", "answer 12"))  # same batch
        if r == 20:
            lines.append(add_line("gone", "u2", "s9", "forgotten words"))  # forgotten before the replay
            lines.append(add_line("old", "u1", "s9", "said long ago", ts=None))  # stored past retention: again
    for i in range(7):  # message lines, grouped by session
        lines.append(json.dumps({"user_id": "u1", "session_id": "m", "role": "assistant", "content": f"line {i}"}))
    lines.append(add_line("r0", "u0", "s0", "u0 talks of kayaks and Lisbon 0", "answer 0"))  # a duplicate, last
    return lines


def contents(db: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(db)
    try:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        out = {
            t: conn.execute(f"SELECT * FROM {t}").fetchall()
            for t in tables
            # a random secret, a random db id, applied-at, random write ids (one per write transaction)
            if t not in ("secrets", "index_meta", "_migrations", "write_log")
        }
        # message ids and sessions sealed, content and said hashes keyed by the random secret (sealed.py): how many
        out["tombstones"] = [(*row[:-4], *(len(json.loads(h)) for h in row[-4:])) for row in out["tombstones"]]
        out["index_meta"] = conn.execute("SELECT * FROM index_meta WHERE key != 'db_id'").fetchall()
        return out
    finally:
        conn.close()


def replayed(tmp_path: Path, name: str, source: Path, *, parallel: bool) -> tuple[dict, dict]:
    """Replay ``source`` twice into a fresh database whose state before is the same every time."""
    db = tmp_path / f"{name}.db"
    clock = Clock(T0)
    with Store(db, clock=clock, retention_days=30) as store:
        store.add(parse_add(json.loads(add_line("gone", "u2", "s9", "forgotten words"))))
        lifecycle.forget(store, "u2", request_id="gone")
        store.add(parse_add(json.loads(add_line("old", "u1", "s9", "said long ago", ts=None))))
        clock.now += 31 * DAY_MS  # "old" is past retention, not swept
        first = replay(store, str(source), batch_size=4, parallel=parallel)
        clock.now += 1000
        again = replay(store, str(source), batch_size=4, parallel=parallel)
        assert index_store.verify(store.conn) == []
    return contents(db), {"first": first.as_dict(), "again": again.as_dict()}


def test_every_path_stores_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join(mixed_lines()) + "\n")
    used = {"together": 0, "placed": 0}  # the fast paths did run (each stores what the slow one would)
    add_together, placed = Store._add_together, index_store.placed

    def counted_together(self, requests, now, batch):
        got = add_together(self, requests, now, batch)
        used["together"] += got is not None
        return got

    def counted_placed(*args, **kwargs):
        used["placed"] += 1
        return placed(*args, **kwargs)

    monkeypatch.setattr(Store, "_add_together", counted_together)
    monkeypatch.setattr(index_store, "placed", counted_placed)
    together, together_summary = replayed(tmp_path, "together", source, parallel=False)
    assert used["together"] > 0
    reader, reader_summary = replayed(tmp_path, "reader", source, parallel=True)
    assert used["placed"] > 0  # segments the reader built ahead, placed by the writer
    monkeypatch.setattr(Store, "_add_together", lambda self, requests, now, batch: None)
    each, each_summary = replayed(tmp_path, "each", source, parallel=False)

    first = each_summary["first"]
    assert (first["requests_added"], first["duplicates"], first["conflicts"], first["forgotten"]) == (32, 3, 1, 1)
    assert first["invalid_lines"] == 2 and len(each["messages"]) == 30 * 2 + 1 + 7
    assert each_summary["again"]["messages_added"] == 0
    assert len(each["index_segments"]) > 3  # several batches, merged
    for table, rows in each.items():
        assert together[table] == rows, table
        assert reader[table] == rows, table
    assert together_summary == each_summary == reader_summary


def test_a_segment_built_ahead_is_not_used_for_a_user_with_a_request_not_added(tmp_path: Path) -> None:
    """The reader builds u0's segment of all of u0's requests in the batch; one of them is a duplicate, so the
    writer must index only the ones it wrote (built from their rows)."""
    source = tmp_path / "dup.jsonl"
    source.write_text(add_line("a", "u0", "s", "alpha words") + "\n")
    with Store(tmp_path / "d.db", retention_days=None) as store:
        replay(store, str(source), parallel=True)
        source.write_text("\n".join([add_line("a", "u0", "s", "alpha words"), add_line("b", "u0", "s", "beta")]) + "\n")
        assert replay(store, str(source), parallel=True).messages_added == 1
        assert index_store.verify(store.conn) == []


def test_a_read_error_stores_every_line_read_whole_before_it_and_says_so(tmp_path: Path) -> None:
    # 1.2 MB of lines cut short near the end: every whole line before the cut (three batches of 10 and some more) is
    # stored, by the writer alone and with the reader process
    good = "".join(add_line(f"r{i}", "u", "s", f"text {i} " + "x" * 30_000) + "\n" for i in range(40)).encode()
    packed = gzip.compress(good)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(packed[: len(packed) - 40])  # cut short: its end cannot be read
    read_whole = zlib.decompressobj(wbits=31).decompress(broken.read_bytes()).count(b"\n")
    assert 30 < read_whole < 40
    errors, stored = [], []
    for parallel in (False, True):
        with Store(tmp_path / f"e{parallel}.db", retention_days=None) as store:
            summary = replay(store, str(broken), batch_size=10, parallel=parallel)
            assert summary.fault is not None and summary.messages_added == read_whole
            errors.append(summary.fault.message)
            stored.append(store.counts()["messages"])
    assert errors[0] == errors[1] and "cannot read" in errors[0]
    assert f"stored before it: {read_whole} requests ({read_whole} messages)" in errors[0]
    assert stored[0] == stored[1] == read_whole  # those after the last full batch too
    with Store(tmp_path / "eFalse.db", retention_days=None) as store:  # the whole file: the rest, nothing twice
        whole = tmp_path / "whole.jsonl.gz"
        whole.write_bytes(packed)
        again = replay(store, str(whole), batch_size=10)
        assert (again.messages_added, again.duplicates, store.counts()["messages"]) == (40 - read_whole, read_whole, 40)


READER_LEFT = """
import json, os, sys
from refind_cli.replay import replay
from refind_cli.store import Store

forks = []
real_fork = os.fork

def fork():
    pid = real_fork()
    if pid:
        forks.append(pid)
    return pid

os.fork = fork

def stop(done, total):
    if done:
        raise RuntimeError("the writer stopped")

with Store(sys.argv[1], retention_days=None) as store:
    try:
        replay(store, "-", batch_size=100, parallel=True, on_progress=stop)
    except RuntimeError as exc:
        print(exc)
for pid in forks:
    try:
        os.kill(pid, 0)
        print("reader alive", pid)
    except ProcessLookupError:
        print("reader gone")
"""


def test_the_reader_does_not_outlive_a_writer_that_stops(tmp_path: Path) -> None:
    """The writer fails after its first batch while the reader waits for more of a stdin that never ends: the replay
    raises the writer's error and the reader is gone (killed, not waited for: it would wait for its line forever)."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(READER_LEFT), str(tmp_path / "w.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    # 180 requests of ~6 kB: the reader's first read (1 MiB) holds a batch of 100, the rest never completes another
    child.stdin.write("".join(add_line(f"r{i}", "u", "s", f"text {i} " + "x" * 6000) + "\n" for i in range(180)))
    child.stdin.flush()  # and left open
    try:
        child.wait(60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        pytest.fail("the replay waited for its reader, which waited for a line")
    finally:
        child.stdin.close()
    out, err = child.stdout.read(), child.stderr.read()
    assert out.split("\n")[:2] == ["the writer stopped", "reader gone"], out + err


def test_the_reader_is_reaped_after_a_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forks: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    source = tmp_path / "few.jsonl"
    source.write_text("".join(add_line(f"r{i}", "u", "s", f"text {i}") + "\n" for i in range(9)))
    with Store(tmp_path / "r.db", retention_days=None) as store:
        assert replay(store, str(source), batch_size=2, parallel=True).messages_added == 9
    assert len(forks) == 1
    with pytest.raises(ChildProcessError):  # reaped: no zombie left for this process to wait for
        os.waitpid(forks[0], os.WNOHANG)


@settings(max_examples=300, deadline=None)
@given(_REQUESTS)
def test_segments_built_ahead_are_the_segments_of_the_written_rows(
    requests: list[tuple[str, str, list[tuple[str, int | None]]]],
) -> None:
    rows, seqs, seq = [], {}, 10
    for user, session, messages in requests:
        for i, (text, said) in enumerate(messages):
            rows.append((seq, user, text, said, session, T0, i))
            seqs.setdefault(user, []).append(seq)
            seq += 2
    written = index_store.segments_of_rows(rows)
    ahead = index_store.segments_ahead((u, s, [("user", t, a) for t, a in m]) for u, s, m in requests)
    assert list(ahead) == list(written)
    for user, seg in written.items():
        assert index_store.encode(index_store.placed(ahead[user], seqs[user], T0)) == index_store.encode(seg)
        # and both are the reference: the segment of each message's tokens, numbered in order of first occurrence
        tokens = [(r[0], index_store.message_tokens(r[2], r[3])) for r in rows if r[1] == user]
        reference = index_store.build_segment(tokens)
        assert index_store.encode(replace(seg, meta=None)) == index_store.encode(reference)


READER_PID = (
    PRINTS_READER_PID
    + """
from refind_cli.replay import replay
from refind_cli.store import Store

with Store(sys.argv[1], retention_days=None) as store:
    replay(store, "-", parallel=True)
"""
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_the_reader_dies_with_a_writer_killed_outright(tmp_path: Path) -> None:
    """kill -9 of the writer while its reader waits for more of stdin: the reader dies too, at once."""
    import signal
    import time

    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(READER_PID), str(tmp_path / "k.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert writer.stdin is not None and writer.stdout is not None
    writer.stdin.write(add_line("r1", "u", "s", "hello") + "\n")
    writer.stdin.flush()  # and left open: the reader waits in its read
    reader = int(writer.stdout.readline())
    try:
        writer.send_signal(signal.SIGKILL)
        writer.wait(30)
        for _ in range(100):
            if ended(reader):
                break
            time.sleep(0.1)
        assert ended(reader), "the reader outlived its writer"
    finally:
        writer.stdin.close()
        if not ended(reader):
            os.kill(reader, signal.SIGKILL)


def test_a_process_with_other_threads_replays_in_one_process() -> None:
    """The reader is forked only from a single-threaded process (a fork keeps one thread and every lock)."""
    import threading

    from refind_cli import replay as replay_module

    if threading.active_count() == 1:  # (a thread left by another test would make it False here)
        assert replay_module._can_fork() == sys.platform.startswith("linux")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert replay_module._can_fork() is False
    finally:
        stop.set()
        other.join()
