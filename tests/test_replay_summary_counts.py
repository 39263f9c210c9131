"""A replay's summary agrees with the problems it printed: lines read are the file's lines with --strict too, a
problem naming several lines (a request_id's lines apart from its first ones) counts each of them as an invalid
line, and the hint about replaying only the fixed lines is given only where a refused line may be a message line
without request_id (whose group's id comes from its content)."""

from __future__ import annotations

import json
from pathlib import Path


def msg(content: str, rid: str | None = None, session: str = "s1", role: str = "user") -> str:
    line = {"user_id": "u", "session_id": session, "role": role, "content": content}
    if rid is not None:
        line["request_id"] = rid
    return json.dumps(line)


def write(path: Path, *lines: str) -> str:
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


BAD = (
    msg("a", "r1"),
    msg("b", "r1"),
    msg("c", "r2", session="s2"),
    msg("d", "r1"),  # lines 4-5: r1's lines apart from its lines 1-2
    msg("e", "r1"),
    "not json",
    msg("x", "r3", role="bogus"),
    json.dumps({"request_id": "r4", "user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "x"}],
                "extra": 1}),
)  # fmt: skip


def test_a_strict_replay_counts_the_lines_it_read_and_each_line_it_refused(cli, tmp_path) -> None:
    path = write(tmp_path / "bad.jsonl", *BAD)
    result = cli("add", "--file", path, "--strict", "--json")
    assert result.exit_code == 2, result.output
    summary = json.loads(result.output)
    assert summary["lines"] == 8
    wheres = [p.split(": ", 1)[0].removeprefix(f"{path}:") for p in summary["problems"][:-1]]
    assert sorted(wheres) == ["4-5", "6", "7", "8"]
    assert summary["invalid_lines"] == 5  # lines 4, 5, 6, 7 and 8
    table = cli("add", "--file", path, "--strict")
    flat = " ".join(table.output.split())
    assert "lines read │ 8 │" in flat and "invalid lines │ 5 │" in flat


def test_lines_apart_from_their_request_count_as_the_lines_the_problem_names(cli, tmp_path) -> None:
    path = write(tmp_path / "apart.jsonl", *BAD[:5])
    result = cli("add", "--file", path, "--json")
    assert result.exit_code == 2, result.output
    summary = json.loads(result.output)
    assert summary["lines"] == 5 and summary["invalid_lines"] == 2
    assert summary["problems"] == [
        f"{path}:4-5: request_id 'r1' of user 'u': lines 4–5 are not next to its lines 1–2, which alone made that "
        "request (message lines make one request only while consecutive), so these are not stored: only another "
        "request_id stores them (moved next to the first lines, they would be another payload under an id already "
        "taken: a conflict)"
    ]


def test_a_span_of_lines_apart_counts_its_own_lines_not_the_blank_or_bad_ones_between(cli, tmp_path) -> None:
    # lines 3 and 6 are r1's apart from its line 1; 4 is blank, 5 refused on its own: 3 lines refused, not 5
    path = write(
        tmp_path / "between.jsonl",
        msg("a", "r1"),
        msg("x", "r2", session="s2"),
        msg("b", "r1"),
        "",
        "not json",
        msg("c", "r1"),
    )
    result = cli("add", "--file", path, "--json")
    summary = json.loads(result.output)
    assert result.exit_code == 2 and summary["invalid_lines"] == 3, result.output
    strict = json.loads(cli("add", "--file", path, "--strict", "--json").output)
    assert strict["invalid_lines"] == 3
    assert strict["problems"][-1] == f"{path}: --strict: nothing stored because 3 line(s) are invalid"


HINT = "hint: once fixed, replay a file of the invalid lines only"


def test_no_hint_when_every_refused_line_carries_a_request_id(cli, tmp_path) -> None:
    path = write(tmp_path / "keyed.jsonl", *BAD[:5], BAD[6], BAD[7].replace('"extra": 1', '"extra": 1, "x": []'))
    result = cli("add", "--file", path)
    assert result.exit_code == 2, result.output
    assert "role: must be one of" in result.output and HINT not in result.output


def test_the_hint_when_a_refused_line_may_be_a_message_line_without_request_id(cli, tmp_path) -> None:
    for bad in (msg("x", role="bogus"), "not json", json.dumps({"user_id": "u", "session_id": "s1"})):
        path = write(tmp_path / "log.jsonl", msg("first"), bad, msg("third"))
        result = cli("add", "--file", path)
        assert result.exit_code == 2, result.output
        assert HINT in result.output, bad
