"""Every date entry point reads a date one way (contract.parse_when): Unix ms or seconds as digits, YYYYMMDD, YYYY-MM-DD,
an ISO 8601 time (UTC unless it names a zone) — and from Python an aware datetime or a date. Before, `refind search
--date-from 1710000000000` was refused while Memory.search took the int, Unix seconds were read as milliseconds of
January 1970, and the Python API refused a datetime."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from helpers import add

from refind_cli import InvalidInput, Memory
from refind_cli.contract import parse_when

MARCH_9 = 1_709_942_400_000  # 2024-03-09T00:00:00Z
HOUR = 3_600_000


@pytest.mark.parametrize(
    "given",
    [
        MARCH_9,
        str(MARCH_9),
        MARCH_9 // 1000,  # Unix seconds, as an Add's timestamp reads them
        str(MARCH_9 // 1000),
        "20240309",
        "2024-03-09",
        "2024/03/09",
        "2024-03-09T00:00:00Z",
        "2024-03-09T08:00:00+08:00",
        datetime(2024, 3, 9, tzinfo=UTC),
        datetime(2024, 3, 9, 8, tzinfo=timezone(timedelta(hours=8))),
        date(2024, 3, 9),
    ],
    ids=repr,
)
def test_every_spelling_of_a_day_is_the_same_bound(given):
    assert parse_when(given, "date_from") == MARCH_9


def test_a_bare_day_ends_at_its_last_millisecond_as_date_to():
    for given in ("20240309", "2024-03-09", date(2024, 3, 9)):
        assert parse_when(given, "date_to", end=True) == MARCH_9 + 86_400_000 - 1
    assert parse_when(datetime(2024, 3, 9, tzinfo=UTC), "date_to", end=True) == MARCH_9  # an instant is itself


def test_a_naive_datetime_is_refused_naming_the_argument():
    with pytest.raises(InvalidInput) as caught:
        parse_when(datetime(2024, 3, 9, 10, 30), "date_from")
    assert caught.value.message == (
        "date_from: 2024-03-09T10:30:00 names no time zone; give an aware datetime (datetime(..., "
        "tzinfo=datetime.UTC), or datetime.now(datetime.UTC)), a date or Unix milliseconds"
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("202403", "date_from: '202403' is not a date (in digits a date is YYYYMMDD, such as 20231101) nor Unix ms"),
        (-5, "date_from: -5 is not a time in Unix milliseconds (0 to 253402300799999)"),
        (1.5, "date_from: must be a date (such as 2023-05-08), an ISO 8601 time or Unix milliseconds, got float"),
        (True, "date_from: must be a date (such as 2023-05-08), an ISO 8601 time or Unix milliseconds, got bool"),
    ],
)
def test_what_is_no_time_is_refused_exactly(given, message):
    with pytest.raises(InvalidInput) as caught:
        parse_when(given, "date_from")
    assert caught.value.message == message


@pytest.fixture
def two_days(store):
    add(store, "alice", "s1", ("user", "hiking at Rainier"), at=MARCH_9 - 86_400_000)  # 8 March
    add(store, "alice", "s2", ("user", "hiking at Whitney"), at=MARCH_9 + HOUR)  # 9 March
    return store


@pytest.mark.parametrize("given", [str(MARCH_9), str(MARCH_9 // 1000), "20240309", "2024-03-09T00:00:00Z"])
def test_the_cli_takes_a_date_from_in_unix_ms_and_seconds(cli, two_days, given):
    r = cli("search", "hiking", "--user", "alice", "--mode", "bm25", "--json", "--date-from", given)
    assert r.exit_code == 0, r.output
    assert [b["content"] for b in json.loads(r.output)["data"]] == ["[2024-03-09 01:00] user: hiking at Whitney"]


def test_the_python_api_takes_an_aware_datetime_and_a_date(db_path, two_days):
    two_days.close()
    with Memory(db_path, retention_days=None) as memory:
        for bound in (datetime(2024, 3, 9, tzinfo=UTC), date(2024, 3, 9), MARCH_9, str(MARCH_9), "20240309"):
            assert [e.content for e in memory.search("hiking", user="alice", date_from=bound)] == [
                "[2024-03-09 01:00] user: hiking at Whitney"
            ], bound
        assert [e.session_id for e in memory.search("hiking", user="alice", date_to=date(2024, 3, 8))] == ["s1"]
        with pytest.raises(InvalidInput, match=r"^as_of: 2024-03-09T00:00:00 names no time zone; give an aware"):
            memory.search("hiking", user="alice", as_of=datetime(2024, 3, 9))


def test_memory_add_takes_an_aware_datetime_and_refuses_a_naive_one(db_path):
    with Memory(db_path, retention_days=None) as memory:
        memory.add("hiking at Whitney", user="alice", session="s1", at=datetime(2024, 3, 9, 1, tzinfo=UTC))
        memory.add("hiking at Rainier", user="alice", session="s2", at=date(2024, 3, 8))
        assert {e.session_id: e.said_at for e in memory.search("hiking", user="alice")} == {
            "s1": MARCH_9 + HOUR,
            "s2": MARCH_9 - 86_400_000,
        }
        with pytest.raises(InvalidInput, match=r"^at: 2024-03-09T01:00:00 names no time zone; give an aware datetime"):
            memory.add("naive", user="alice", session="s3", at=datetime(2024, 3, 9, 1))
