"""Fast paths on the search path give exactly their reference's answers: block times by arithmetic
(blocks.format_time / iso_utc) are the text datetime writes, made once per value; a block's lines are the ones the
neighbour rule written with all(…) gives (blocks.block_lines); expand.max_edits skips its per-character scan for ASCII
words with the same result."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from refind_cli import blocks
from refind_cli.blocks import FAST_TIME_MS, block_lines, format_time, iso_utc, render_line
from refind_cli.expand import max_edits
from refind_cli.search_config import SearchConfig
from refind_cli.store import StoredMessage


def reference_time(ms: int, *, seconds: bool = False) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def reference_iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_block_times_are_datetimes_text_across_and_around_the_fast_range():
    lo, hi = FAST_TIME_MS
    rng = random.Random(9)
    values = [rng.randrange(lo, hi) for _ in range(20_000)]
    values += [rng.randrange(lo, hi) // 60_000 * 60_000 + d for d in (-1, 0, 1, 999, 59_999) for _ in range(500)]
    values += [lo - 1, lo, hi - 1, hi, 0, -1, 1, 951_782_400_000, 4_107_542_399_999]  # edges, 2000-02-29, 2100
    values += [1_709_164_800_000, 1_709_251_199_999, 1_735_689_599_999]  # 2024-02-29, its last ms, 2024-12-31
    for ms in values:
        assert format_time(ms) == reference_time(ms), ms
        assert format_time(ms, seconds=True) == reference_time(ms, seconds=True), ms
        assert iso_utc(ms) == reference_iso(ms), ms
    assert format_time(None) == ""
    assert format_time(1_683_554_160_000) == "2023-05-08 13:56"
    assert iso_utc(1_683_554_160_123) == "2023-05-08T13:56:00.123Z"


def test_a_time_shown_again_is_not_formatted_again():
    # a search's blocks repeat their times (a session's recorded-at, the turns of a question asked again): each text
    # is made once and remembered; an int and a float of one value are remembered apart (their paths differ)
    ms = 1_683_554_160_123
    blocks._stamp.cache_clear()
    iso_utc.cache_clear()
    for _ in range(3):
        assert format_time(ms) == "2023-05-08 13:56"
        assert format_time(ms, seconds=True) == "2023-05-08 13:56:00"
        assert iso_utc(ms) == "2023-05-08T13:56:00.123Z"
    assert (blocks._stamp.cache_info().misses, blocks._stamp.cache_info().hits) == (2, 4)
    assert (iso_utc.cache_info().misses, iso_utc.cache_info().hits) == (1, 2)
    assert format_time(float(ms)) == reference_time(ms)
    assert blocks._stamp.cache_info().misses == 3


def reference_block_lines(messages: list[StoredMessage], anchor: int, cfg: SearchConfig) -> list[str]:
    """block_lines as round 29 wrote it: the lines next to a line toward the anchor tested with all(…)."""
    stamps = [format_time(m.said_at) for m in messages]
    days = [stamp.rpartition(" ")[0] for stamp in stamps]
    out: list[str] = []
    for k, m in enumerate(messages):
        stamp = stamps[k]
        if k == anchor or not stamp:
            out.append(render_line(m.said_at, m.role, m.content, stamp=stamp))
            continue
        near = [k - 1] if k > anchor else [k + 1, k - 1] if k else [k + 1]
        if cfg.stamps == "day" and all(days[j] == days[k] for j in near):
            stamp = stamp[len(days[k]) + 1 :]
        if cfg.roles == "change" and all(messages[j].role == m.role for j in near):
            out.append(f"[{stamp}] {m.content}")
        else:
            out.append(f"[{stamp}] {m.role}: {m.content}")
    return out


def test_block_lines_are_the_neighbour_rule_written_with_all():
    rng = random.Random(30)
    day = 86_400_000
    configs = [SearchConfig(stamps=s, roles=r) for s in ("day", "full") for r in ("change", "every")]
    for _ in range(3_000):
        size = rng.randint(2, 7)
        at = [1_700_000_000_000 + rng.choice((0, 0, day, 2 * day)) + rng.randrange(3_600_000) for _ in range(size)]
        messages = [
            StoredMessage(k, f"m{k}", "u", "s", "r", k, rng.choice(("user", "assistant")), f"text {k}", said, said)
            for k, said in enumerate(None if rng.random() < 0.1 else t for t in sorted(at))
        ]
        anchor, cfg = rng.randrange(size), rng.choice(configs)
        assert block_lines(messages, anchor, cfg) == reference_block_lines(messages, anchor, cfg)


ALPHABETS = ((0x00C0, 0x024F), (0x0370, 0x03FF), (0x1F00, 0x1FFF), (0x0400, 0x052F), (0x0530, 0x058F), (0x10A0, 0x10FF))


def reference_max_edits(word: str) -> int:
    # letters of Latin, Greek, Cyrillic, Armenian and Georgian only (round 15 added all but Latin)
    if not word.isalpha() or not all(c.isascii() or any(a <= ord(c) <= b for a, b in ALPHABETS) for c in word):
        return 0
    return 0 if len(word) <= 3 else 1 if len(word) <= 5 else 2


def test_max_edits_is_the_per_character_rule():
    rng = random.Random(9)
    alphabet = "abcXYZéüßøŁ12_-'中文한글ДжΩ \u0250\u00bf\u00c0\u024f\u00d7ἀԱჰאبक\u0530\u058f\u052f\u0530\u10ff"
    words = ["", "a", "abc", "abcd", "abcde", "abcdef", "nikolas", "café", "über", "straße", "łódź", "naïve1"]
    words += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 9))) for _ in range(20_000)]
    for word in words:
        assert max_edits(word) == reference_max_edits(word), word


def test_iso_times_past_the_fast_range_are_whole_milliseconds():
    # a probe of round 18: datetime.fromtimestamp(ms / 1000) read 9635161138567 as …58.566 (the float is under it);
    # about 6% of milliseconds from 2100 to 2286 were one early in MCP's and the planner's said_at
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    rng = random.Random(18)
    values = [rng.randrange(FAST_TIME_MS[1], 9_999_999_999_999) for _ in range(20_000)]
    values += [rng.randrange(-(10**12), FAST_TIME_MS[0]) for _ in range(5_000)]
    for ms in values:
        assert iso_utc(ms) == (epoch + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")[:-6] + "Z", ms
    assert iso_utc(9_635_161_138_567) == "2275-04-30T01:38:58.567Z"
