"""A replay's batch is bounded by its messages and text, not only by its requests: a file of big Adds (thousands
of messages, or a pasted log of megabytes, each) held 500 of them in memory at once and committed them together
(round 28: 2.7 GB for 40 lines of 5 MB; a file of 500 such lines was killed for memory, run after run)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from refind_cli import replay as replay_module
from refind_cli.replay import replay
from refind_cli.store import Store


def _request(i: int, messages: int, chars: int = 10) -> str:
    texts = [f"r{i} m{j} " + "x" * chars for j in range(messages)]
    return json.dumps(
        {
            "request_id": f"r{i}",
            "user_id": "u1",
            "session_id": f"s{i % 3}",
            "messages": [
                {"role": "user", "content": t, "timestamp": 1_700_000_000_000 + i * 100 + j}
                for j, t in enumerate(texts)
            ],
        }
    )


def _replay_batches(db_path, log, parallel: bool, monkeypatch) -> tuple[list[int], list[str]]:
    """(the requests of each batch committed, the stored contents in order)."""
    batches: list[int] = []
    add_prepared = Store.add_prepared

    def counted(self, prepared, **kw):
        prepared = list(prepared)
        batches.append(len(prepared))
        return add_prepared(self, prepared, **kw)

    monkeypatch.setattr(Store, "add_prepared", counted)
    with Store(db_path, retention_days=None) as store:
        summary = replay(store, str(log), parallel=parallel)
        assert summary.requests_added == 12 and summary.invalid_lines == 0
    conn = sqlite3.connect(db_path)
    try:
        contents = [r[0] for r in conn.execute("SELECT content FROM messages ORDER BY seq")]
    finally:
        conn.close()
    return batches, contents


@pytest.mark.parametrize("parallel", [False, True])
def test_a_batch_ends_at_its_messages(tmp_path, monkeypatch, parallel: bool) -> None:
    log = tmp_path / "big.jsonl"
    log.write_text("".join(_request(i, 4) + "\n" for i in range(12)))
    monkeypatch.setattr(replay_module, "BATCH_MESSAGES", 10, raising=False)
    batches, contents = _replay_batches(tmp_path / "a.db", log, parallel, monkeypatch)
    assert batches == [3, 3, 3, 3]  # 3 requests of 4 messages reach 10: 4 batches, not one of 12 (of up to 500)
    assert contents == [f"r{i} m{j} " + "x" * 10 for i in range(12) for j in range(4)]


@pytest.mark.parametrize("parallel", [False, True])
def test_a_batch_ends_at_its_characters(tmp_path, monkeypatch, parallel: bool) -> None:
    log = tmp_path / "long.jsonl"
    log.write_text("".join(_request(i, 1, chars=1000) + "\n" for i in range(12)))
    monkeypatch.setattr(replay_module, "BATCH_CHARS", 2500, raising=False)
    batches, contents = _replay_batches(tmp_path / "a.db", log, parallel, monkeypatch)
    assert batches == [3, 3, 3, 3]  # three messages of ~1,000 characters pass 2,500
    assert contents == [f"r{i} m0 " + "x" * 1000 for i in range(12)]


def test_groups_of_twenty_are_cut_as_before(tmp_path, monkeypatch) -> None:
    """500 requests of a replay's groups of 20 messages (10,000) stay one batch: the common file is committed as
    often as before."""
    log = tmp_path / "groups.jsonl"
    log.write_text("".join(_request(i, 20, chars=2) + "\n" for i in range(12)))
    batches, contents = _replay_batches(tmp_path / "a.db", log, False, monkeypatch)
    assert batches == [12] and len(contents) == 240
    assert replay_module.BATCH_MESSAGES >= replay_module.BATCH_SIZE * 20
