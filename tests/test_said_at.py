"""When a message was said, as every entry point reads it: one message is one request whatever the spelling of its
time (``Memory.add``'s ``api-…`` id is derived from the request as read, and an id an earlier refind derived from the
payload as sent is still recognised), and a number is read the one way an Add's ``timestamp`` is, over HTTP, a
replay line, ``refind add --at`` / ``--timestamp``, ``Memory.add(at=)`` and MCP's ``at``."""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from refind_cli import Memory
from refind_cli.contract import parse_add, parse_date, parse_said_at
from refind_cli.errors import Forgotten, InvalidInput
from refind_cli.store import Store

MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
SPELLINGS_OF_MS = (MS, MS // 1000, MS + 0.5, str(MS), str(MS // 1000), f" {MS} ", "2023-11-14T22:13:20Z")
SPELLINGS_OF_NONE = (None, 0, -1, -1.0, "-1", "0")


def _old_id(user: str, session: str, messages: list[Any]) -> str:
    """The id refind gave a Memory.add without a request id until round 25: the payload as sent, hashed."""
    data = json.dumps([user, session, messages], ensure_ascii=False, separators=(",", ":"))
    return "api-" + hashlib.sha256(data.encode("utf-8")).hexdigest()[:20]


def _requests(db: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT request_id, message_count FROM requests ORDER BY recorded_at, request_id"
        ).fetchall()


def _said(db: Path) -> list[int | None]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT said_at FROM messages ORDER BY seq")]


# ---- 1. one message, one request, whatever the spelling of its time ---------------------------------------------


def test_memory_add_stores_a_message_once_whatever_the_spelling_of_its_time(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, retention_days=None) as memory:
        for spelling in SPELLINGS_OF_NONE:
            message = {"role": "user", "content": "no time", "timestamp": spelling}
            statuses = [memory.add([message], user="u", session="s").status]
            statuses.append(memory.add("no time", user="u", session="s", at=spelling).status)
            assert statuses == ["added" if spelling is None else "duplicate", "duplicate"], spelling
        # the timestamp left out of the message altogether
        assert memory.add([{"role": "user", "content": "no time"}], user="u", session="s").status == "duplicate"
        for spelling in SPELLINGS_OF_MS:
            message = {"role": "user", "content": "at ms", "timestamp": spelling}
            if not (isinstance(spelling, str) and "T" in spelling):  # (a date is `at`'s, not a timestamp's)
                first = memory.add([message], user="u", session="s").status
                assert first == ("added" if spelling == MS else "duplicate"), spelling
            assert memory.add("at ms", user="u", session="s", at=spelling).status == "duplicate", spelling
    assert [n for _, n in _requests(db)] == [1, 1]
    assert _said(db) == [None, MS]


def test_a_canonical_payload_keeps_the_id_an_earlier_refind_gave_it(tmp_path: Path) -> None:
    # the new id is the hash of [user, session, [{"role", "content", "timestamp"}]] with the timestamp in ms: what
    # the old one hashed for a payload sent in that shape (a string with `at` in ms or as a date, or null)
    with Memory(tmp_path / "m.db", retention_days=None) as memory:
        for at, ts in ((MS, MS), ("2023-11-14T22:13:20Z", MS), (None, None)):
            outcome = memory.add(f"said at {at}", user="u", session="s", at=at)
            expected = _old_id("u", "s", [{"role": "user", "content": f"said at {at}", "timestamp": ts}])
            assert outcome.request_id == expected


@pytest.mark.parametrize(
    "sent",
    [
        {"at": MS // 1000},  # Unix seconds, hashed as given
        {"at": -1},  # the placeholder, hashed as -1
        {"messages": [{"content": "hello", "role": "user"}]},  # keys in another order, no timestamp
        {"messages": [{"role": "user", "content": "hello", "timestamp": str(MS)}]},  # digits
    ],
)
def test_a_request_stored_under_its_legacy_id_is_a_replay_not_a_duplicate(tmp_path: Path, sent) -> None:
    """A database written before round 25 holds the request under the hash of the payload as it was sent: the same
    call again is an identical replay of it (not a second copy under the new id), and refused once forgotten."""
    db = tmp_path / "m.db"
    messages = sent.get("messages") or [{"role": "user", "content": "hello", "timestamp": sent["at"]}]
    legacy = _old_id("u", "s", messages)

    def again() -> str:
        if "messages" in sent:
            return memory.add(sent["messages"], user="u", session="s").status
        return memory.add("hello", user="u", session="s", at=sent["at"]).status

    with Memory(db, retention_days=None) as memory:
        # what the old Memory.add stored: this request under the legacy id
        memory.add_many([{"request_id": legacy, "user_id": "u", "session_id": "s", "messages": messages}])
        assert again() == "duplicate"
        assert [rid for rid, _ in _requests(db)] == [legacy]
        memory.forget(user="u", request_id=legacy)
        with pytest.raises(Forgotten):  # not stored again under the new id
            again()
    assert _requests(db) == []


# ---- 2. a number read the one way, at every entry point -----------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored", "note"),
    [
        ("-1", None, "at: -1 read as no said-at (a placeholder for an unknown time)"),
        (-1, None, "at: -1 read as no said-at (a placeholder for an unknown time)"),
        (f"{MS}.5", MS, "at: 1700000000000.5 read as 1700000000000 ms (the fraction of a millisecond dropped)"),
        (MS + 0.5, MS, "at: 1700000000000.5 read as 1700000000000 ms (the fraction of a millisecond dropped)"),
        (f" {MS} ", MS, None),
        ("1700000000", MS, "at: 1700000000 read as Unix seconds (×1000 = 1700000000000 ms)"),
        ("20231114", 1_699_920_000_000, None),  # a compact ISO date: 8 digits
        ("2023-11-14T22:13:20Z", MS, None),
        # RFC 3339's z in lower case, which an Add's timestamp reads: `at` refused it (a probe of round 30)
        ("2023-11-14T22:13:20z", MS, None),
        ("2023-11-15 06:13:20+08", MS, None),
    ],
)
def test_parse_said_at_reads_a_number_as_a_timestamp_and_a_date_as_a_date(given, stored, note) -> None:
    notes: list[str] = []
    assert parse_said_at(given, "at", notes) == stored
    assert notes == ([note] if note else [])


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # strptime read "202311" as 2023-01-01 (and "2023111" as 2023-11-01): a month in digits is no date
        ("202311", "at: '202311' is not a date (in digits a date is YYYYMMDD, such as 20231101) nor Unix ms"),
        ("2023111", "at: '2023111' is not a date (in digits a date is YYYYMMDD, such as 20231101) nor Unix ms"),
        ("soon", "at: 'soon' is not an ISO 8601 time such as 2023-05-08T13:56 or 2023-05-08, nor Unix ms"),
        ("17", "at: 17 is neither Unix milliseconds in [100000000000, 10000000000000) nor Unix seconds in "),
        ("1.5e12", "at: '1.5e12' is not an ISO 8601 time such as 2023-05-08T13:56 or 2023-05-08, nor Unix ms"),
    ],
)
def test_parse_said_at_refuses_what_it_cannot_read(given, message) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_said_at(given, "at")
    assert info.value.message.startswith(message)


def test_digits_alone_are_a_date_only_as_yyyymmdd() -> None:
    # Python's own parsers read "2023050812" as 2023-05-08 and "2023050812345" (Unix ms, in 2034) as 23:45 that day
    assert parse_date("20231101") == 1_698_796_800_000
    for digits in ("202311", "2023111", "2023050812", "2023050812345"):
        with pytest.raises(InvalidInput, match="is not a date"):
            parse_date(digits)
    assert parse_said_at("2023050812345", "at") == 2_023_050_812_345


def test_digits_and_a_z_are_no_day_with_its_time_dropped(cli, db_path: Path) -> None:
    # "2023111506Z" (the 15th at 06:00 UTC, written without its T) was read as the 15th at 00:00 — a said-at stored
    # six hours early, a --date-from that let the night in — while "2023111506" is refused; "2023-11-14zZ" was the
    # 14th (a review of round 30: the lower-case z made both spellings pass)
    for given in ("2023111506Z", "2023111506z", "202311150613Z", "2023-11-14zZ", "2023-11-14Zz"):
        with pytest.raises(InvalidInput, match="is not a date"):
            parse_date(given)
        with pytest.raises(InvalidInput, match=r"is not an ISO 8601 time such as 2023-05-08T13:56 or 2023-05-08, nor"):
            parse_said_at(given, "at")
    refused = cli("add", "x", "-u", "u", "-s", "s", "--at", "2023111506Z")
    assert refused.exit_code == 2, refused.output
    assert "error: --at: '2023111506Z' is not an ISO 8601 time" in " ".join(refused.output.split()), refused.output
    assert not db_path.exists() or _said(db_path) == []
    # a date with its Z, in either case, is still its day
    assert parse_date("20231114Z") == parse_date("2023-11-14z") == parse_date("2023-11-14") == 1_699_920_000_000


def test_cli_add_reads_at_and_timestamp_as_the_contract_reads_a_timestamp(cli, db_path: Path) -> None:
    # `--at -1` was refused while `--timestamp -1` was read; `--at` and `--timestamp` refused a fraction HTTP floors
    for flag, value, said in (
        ("--at", "-1", "warning: --at: -1 read as no said-at (a placeholder for an unknown time)"),
        ("--at", f"{MS}.5", "warning: --at: 1700000000000.5 read as 1700000000000 ms (the fraction of a millisecond"),
        ("--timestamp", f"{MS}.5", "warning: --timestamp: 1700000000000.5 read as 1700000000000 ms (the fraction"),
        ("--timestamp", "-1", "warning: --timestamp: -1 read as no said-at"),
    ):
        result = cli("add", f"message {flag} {value}", "-u", "u", "-s", "s", flag, value)
        assert result.exit_code == 0, result.output
        assert said in " ".join(result.output.split()), result.output
    assert _said(db_path) == [None, MS, MS, None]
    # one message, one request: `--at -1` is the message without a said-at, as no --at at all is
    assert cli("add", "message --at -1", "-u", "u", "-s", "s").output.startswith("already stored (identical replay")
    for args, message in (
        (("--at", "202311"), "error: --at: '202311' is not a date (in digits a date is YYYYMMDD, such as 20231101)"),
        (("--timestamp", "2023-11-14"), "error: --timestamp: '2023-11-14' is not Unix milliseconds; give a date or"),
        (("--timestamp", "17"), "error: --timestamp: 17 is neither Unix milliseconds in [100000000000,"),
    ):
        refused = cli("add", "x", "-u", "u", "-s", "s", *args)
        assert refused.exit_code == 2 and message in " ".join(refused.output.split()), refused.output


def test_memory_add_reads_at_as_a_timestamp_is_read(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, retention_days=None) as memory:
        memory.add("fraction", user="u", session="s", at=MS + 0.5)  # refused: "must be … got float"
        memory.add("digits", user="u", session="s", at=str(MS))  # refused: "date '1700000000000' is not a date"
        memory.add("placeholder", user="u", session="s", at="-1")
        with pytest.raises(InvalidInput, match=r"^at: '202311' is not a date \(in digits a date is YYYYMMDD"):
            memory.add("month", user="u", session="s", at="202311")
        with pytest.raises(
            InvalidInput,
            match=r"^at: must be Unix milliseconds, an ISO 8601 time or a datetime that names its zone, got bool$",
        ):
            memory.add("true", user="u", session="s", at=True)  # type: ignore[arg-type]
    assert _said(db) == [MS, MS, None]


@pytest.mark.parametrize(
    ("timestamp", "stored", "logged"),
    [
        ("-1", None, "messages[0].timestamp (string); messages[0].timestamp (no said-at)"),
        (f" {MS} ", MS, "messages[0].timestamp (string)"),
        (f"{MS}.5", MS, "messages[0].timestamp (string); messages[0].timestamp (fraction dropped)"),
        ("2023-11-14T22:13:20Z", MS, "messages[0].timestamp (ISO time)"),  # one instant: read (a probe of round 25)
        ("2023-11-15 06:13:20.000+08:00", MS, "messages[0].timestamp (ISO time)"),
        ("2023-11-14t22:13:20z", MS, "messages[0].timestamp (ISO time)"),  # RFC 3339 §5.6: either case (a probe)
        ("20231114T221320Z", MS, "messages[0].timestamp (ISO time)"),  # ISO 8601's basic form
        ("20231115T061320.000+0800", MS, "messages[0].timestamp (ISO time)"),
        # an offset of hours alone (ISO 8601's ±hh), as PostgreSQL writes a timestamptz as text, and a decimal comma:
        # a 422, the whole Add lost (a probe of round 30)
        ("2023-11-15 06:13:20+08", MS, "messages[0].timestamp (ISO time)"),
        ("2023-11-14 14:13:20.000000-08", MS, "messages[0].timestamp (ISO time)"),
        ("2023-11-14T22:13:20,000Z", MS, "messages[0].timestamp (ISO time)"),
    ],
)
def test_http_reads_a_number_or_a_zoned_time_sent_as_a_string(
    make_client, db_path, caplog, timestamp, stored, logged
) -> None:
    # a 422 loses the whole Add (the platform does not retry): a number as a string is read, as digits were
    caplog.set_level(logging.INFO)
    body = {
        "request_id": "r1",
        "user_id": "u",
        "session_id": "s",
        "messages": [{"role": "user", "content": "hello", "timestamp": timestamp}],
    }
    response = make_client().post("/v1/memories/add", json=body)
    assert response.status_code == 200, response.json()
    assert _said(db_path) == [stored]
    notes = [r.getMessage() for r in caplog.records if r.name == "refind.server" and "normalized" in r.getMessage()]
    assert notes == [f"add normalized {logged.count(';') + 1} value(s): {logged}"]


@pytest.mark.parametrize(
    ("timestamp", "message"),
    [
        (
            "1.7e12",
            "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got string (read too: a number as a string, an ISO 8601 time that names its zone such as 2024-03-10T10:00:00Z)",
        ),
        (
            "soon",
            "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got string (read too: a number as a string, an ISO 8601 time that names its zone such as 2024-03-10T10:00:00Z)",
        ),
        ("-5", "messages[0].timestamp: -5 is neither Unix milliseconds in [100000000000, 10000000000000)"),
        (  # a time without its zone, or a bare date, names no instant: refused as before
            "2023-11-14T22:13:20",
            "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got string (read too: a number as a string, an ISO 8601 time that names its zone such as 2024-03-10T10:00:00Z)",
        ),
        ("2023-11-14", "messages[0].timestamp: must be Unix milliseconds (an integer) or null, got string"),
        ("9999-01-01T00:00Z", "messages[0].timestamp: '9999-01-01T00:00Z' is outside the dates refind stores"),
        # written as a time with its zone, naming none: said so, not "got string (read too: … an ISO 8601 time …)"
        (
            "2023-02-29T10:00:00Z",
            "messages[0].timestamp: '2023-02-29T10:00:00Z' is written as an ISO 8601 time but names none that exists",
        ),
        (
            "2023-12-31T23:59:60Z",
            "messages[0].timestamp: '2023-12-31T23:59:60Z' is written as an ISO 8601 time but names none that exists",
        ),
        ("2023-11-14T22:13:20+24:00", "messages[0].timestamp: '2023-11-14T22:13:20+24:00' is written as an ISO 8601"),
    ],
)
def test_http_still_refuses_what_is_no_number(make_client, timestamp, message) -> None:
    body = {"request_id": "r", "user_id": "u", "session_id": "s"}
    body["messages"] = [{"role": "user", "content": "x", "timestamp": timestamp}]  # type: ignore[assignment]
    response = make_client().post("/v1/memories/add", json=body)
    assert response.status_code == 422 and response.json()["error"]["message"].startswith(message)


def test_a_date_bound_reads_a_lower_case_z_as_an_upper_case_one() -> None:
    # `--date-from 2023-11-14T22:13:20z` was "is not a date" (a probe of round 30)
    assert parse_date("2023-11-14T22:13:20z") == parse_date("2023-11-14T22:13:20Z") == MS
    assert parse_date("2023-11-14z", end=True) == parse_date("2023-11-14Z", end=True) == 1_700_006_399_999


def test_cli_replay_stores_a_line_timed_as_postgresql_writes_a_time(cli, db_path: Path, tmp_path: Path) -> None:
    # `SELECT now()::text` — "2023-11-15 06:13:20.5+08" — was an invalid line, its message not stored (exit 2)
    source = tmp_path / "log.jsonl"
    line = {"user_id": "u", "session_id": "s", "role": "user"}
    source.write_text(
        "".join(
            json.dumps({**line, "content": c, "timestamp": t}) + "\n"
            for c, t in (("a", "2023-11-15 06:13:20.5+08"), ("b", "2023-11-14 14:13:21-08"))
        )
    )
    result = cli("add", "--file", str(source))
    assert result.exit_code == 0, result.output
    assert _said(db_path) == [MS + 500, MS + 1000]


def test_a_replay_line_reads_a_number_sent_as_a_string(tmp_path: Path) -> None:
    from refind_cli.replay import replay

    source = tmp_path / "log.jsonl"
    line = {"user_id": "u", "session_id": "s", "role": "user", "content": "x"}
    source.write_text(
        "\n".join(json.dumps({**line, "content": c, "timestamp": t}) for c, t in (("a", "-1"), ("b", f" {MS} ")))
    )
    with Store(tmp_path / "r.db", retention_days=None) as store:
        summary = replay(store, str(source))
        assert (summary.invalid_lines, summary.messages_added) == (0, 2)
    assert parse_add(
        {"request_id": "r", "user_id": "u", "session_id": "s", "messages": [{**line, "timestamp": "-1"}]}
    ).normalized == (
        "messages[0].timestamp: the string '-1' read as a number",
        "messages[0].timestamp: -1 read as no said-at (a placeholder for an unknown time)",
    )
