"""README's examples of export, forget, inspect and expire given an empty --user: refused as invalid input (exit 2)
naming the flag, as search and expire refused it. Before, `refind export --user "$U"` with U unset answered "nothing
to export: no visible messages for user ''" (exit 4), forget "nothing stored for user ''", and `inspect searches
--user ""` listed every user's searches."""

from __future__ import annotations

import pytest
from helpers import add_request


@pytest.fixture
def alice(store):
    add_request(store, "r1", "alice", "s1", "I went hiking at Mount Rainier")


@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "blank"])
@pytest.mark.parametrize(
    ("args", "more"),
    [
        (["export", "--user"], ""),
        (["forget", "--yes", "--user"], ""),
        (["search", "hiking", "--mode", "bm25", "--user"], ""),
        (["expire", "--dry-run", "--user"], " (leave the flag out for every user)"),
        (["inspect", "searches", "--user"], " (leave the flag out for every user)"),
        (["inspect", "events", "--user"], " (leave the flag out for every user)"),
        (["inspect", "tombstones", "--user"], " (leave the flag out for every user)"),
    ],
    ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else None,
)
def test_an_empty_user_is_invalid_input_naming_the_flag(cli, alice, db_path, args, more, blank):
    before = db_path.read_bytes()
    r = cli(*args, blank)
    assert r.exit_code == 2, r.output
    whitespace = ", got only whitespace" if blank else ""
    assert r.stderr == f"error: --user: must be a non-empty string{more}{whitespace}\n"
    assert db_path.read_bytes() == before


def test_a_date_that_is_none_of_the_forms_names_them_all(cli, alice):
    r = cli("search", "hiking", "--user", "alice", "--mode", "bm25", "--date-from", "-5")
    assert r.exit_code == 2
    assert r.stderr == (
        "error: --date-from: date '-5' is not a date: expected YYYY/MM/DD, YYYY-MM-DD, YYYYMMDD, an ISO 8601 time "
        "such as 2023-05-08T13:56, or Unix ms\n"
    )
