"""`refind search` (without --json) whose blocks hold over TABLE_MAX_CHARS characters: plain text, every line of
every block whole, the anchor's lines marked (rich wrapped a panel of a 5 MB pasted log for ~5 s); panels, as before,
for the common list (round 28)."""

from __future__ import annotations

import json

from refind_cli.cli import render

T0 = 1_685_606_400_000
LOG = "\n".join(f"2024-01-01 12:00:{i % 60:02d} INFO worker[{i}] disk quota exceeded on node{i}" for i in range(3_000))


def _add(cli, content: str, session: str, i: int) -> None:
    line = json.dumps(
        {
            "request_id": f"r{i}",
            "user_id": "alice",
            "session_id": session,
            "messages": [{"role": "user", "content": content, "timestamp": T0 + i * 60_000}],
        }
    )
    assert cli("add", "--file", "-", "--quiet", "--retention-days", "off", input=line + "\n").exit_code == 0


def _search(cli, *extra: str):
    return cli("search", "worker quota", "--user", "alice", "--mode", "bm25", "--retention-days", "off", *extra)


def test_a_pasted_log_is_shown_as_plain_text(cli) -> None:
    _add(cli, "Alice: my worker hit its quota\r again", "s1", 0)
    _add(cli, LOG, "s2", 1)
    assert len(LOG) > render.TABLE_MAX_CHARS
    result = _search(cli)
    assert result.exit_code == 0, result.output
    out = result.output
    data = json.loads(_search(cli, "--json").output)["data"]
    chars = sum(len(item["content"]) for item in data)
    assert out.startswith(
        f"2 result(s), {chars:,} characters, as plain text (over 100,000 characters; --json gives the exact text)\n\n"
    )
    assert "╭" not in out and "│" not in out
    for rank, item in enumerate(data, 1):
        assert f"── #{rank}  score {item['score']:.4f}  session " in out
        assert f"· id {item['id']}\n" in out
    for line in LOG.split("\n")[1:]:
        assert f"\n> {line}\n" in out  # the anchor's lines, each whole
    assert "\n> [2023-06-01 08:00] user: Alice: my worker hit its quota\\x0d again\n" in out


def test_a_short_list_is_panels_as_before(cli) -> None:
    _add(cli, "Alice: my worker hit its quota again", "s1", 0)
    out = _search(cli).output
    assert "╭" in out and "as plain text" not in out
