"""`refind add FILE.jsonl.gz`: a truncated .gz stores every whole line before the cut (then the same error and exit
code as before), and the reader reads the files ``gzip`` reads — concatenated members, zero padding — to the same
bytes, and refuses what it refuses (but for a bad header CRC or reserved flag bits, which zlib refuses too)."""

from __future__ import annotations

import gzip
import io
import json
import random
import sqlite3
import zlib
from pathlib import Path

import pytest

from refind_cli.errors import RefindError
from refind_cli.replay import _Gunzip, open_lines

TRUNCATED = "cannot read: Compressed file ended before the end-of-stream marker was reached; stored before it: "
WORDS = [
    "kayak",
    "lake",
    "blue",
    "tram",
    "Lisbon",
    "sister",
    "Maya",
    "cat",
    "Biscuit",
    "boat",
    "Saltwind",
    "locker",
    "garden",
    "pepper",
    "shoes",
    "hike",
]


def _lines(count: int, seed: int = 7) -> bytes:
    """Add requests whose text does not compress away (about 4:1), so a few KB of .gz hold many lines."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        text = " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(80))
        request = {
            "request_id": f"r{i}",
            "user_id": "u",
            "session_id": "s",
            "messages": [{"role": "user", "content": text}],
        }
        out.append(json.dumps(request) + "\n")
    return "".join(out).encode()


def _stored_ids(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT request_id FROM messages ORDER BY seq")]


@pytest.mark.parametrize("cut", [3_000, 20])
def test_a_truncated_gz_stores_every_whole_line_before_the_cut(cli, db_path: Path, tmp_path: Path, cut: int) -> None:
    good = _lines(3_000)  # ~1.8 MB: more than one MiB read of the old reader, whose last one was lost whole
    packed = gzip.compress(good)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(packed[: len(packed) - cut])  # cut inside the last few KB
    prefix = zlib.decompressobj(wbits=31).decompress(broken.read_bytes())  # every byte before the cut
    whole = prefix.count(b"\n")
    assert good.startswith(prefix) and 0 < whole < 3_000

    result = cli("add", "--file", str(broken))
    assert result.exit_code == 1, result.output
    assert f"{TRUNCATED}{whole:,} requests ({whole:,} messages), kept" in " ".join(result.output.split())
    assert _stored_ids(db_path) == [f"r{i}" for i in range(whole)]  # every whole line, in order; none cut short

    whole_file = tmp_path / "whole.jsonl.gz"
    whole_file.write_bytes(packed)
    again = json.loads(cli("add", "--file", str(whole_file), "--json").output)
    assert (again["requests_added"], again["duplicates"]) == (3_000 - whole, whole)


def _read_all(data: bytes, chunk: int, size: int) -> bytes:
    reader = _Gunzip(io.BytesIO(data), chunk=chunk)
    out = []
    while piece := reader.read(size):
        assert len(piece) <= size
        out.append(piece)
    return b"".join(out)


@pytest.mark.parametrize(("chunk", "size"), [(1, 1), (1, 7), (7, 3), (64, 1 << 20), (1 << 17, 1 << 20), (3, 1)])
def test_the_reader_reads_what_gzip_reads(chunk: int, size: int) -> None:
    parts = [b"", b"a line\n" * 50, bytes(range(256)) * 20, b"\n".join(WORDS[i].encode() * 40 for i in range(5))]
    files = [
        gzip.compress(parts[1]),
        gzip.compress(parts[0]),  # an empty member
        b"".join(gzip.compress(p) for p in parts),  # concatenated members are one gzip file
        gzip.compress(parts[1]) + b"\0" * 9 + gzip.compress(parts[2]) + b"\0" * 3,  # zero padding, as gzip skips it
        gzip.compress(parts[3], compresslevel=1, mtime=0),
    ]
    for data in files:
        assert _read_all(data, chunk, size) == gzip.decompress(data)


@pytest.mark.parametrize(
    "tail",
    [
        b"garbage",  # not a member after the first
        b"\x1f",  # half a header
    ],
)
def test_what_follows_a_member_is_refused_as_gzip_refuses_it(tail: bytes) -> None:
    data = gzip.compress(b"one line\n") + tail
    with pytest.raises(gzip.BadGzipFile) as ours:
        _read_all(data, 4, 1 << 20)
    with pytest.raises(gzip.BadGzipFile) as theirs:
        gzip.decompress(data)
    assert str(ours.value) == str(theirs.value)


def test_a_damaged_or_cut_trailer_is_one_read_error(tmp_path: Path) -> None:
    packed = gzip.compress(b"one line\n" * 100)
    damaged = bytearray(packed)
    damaged[-6] ^= 0xFF  # the CRC in the trailer
    for data, reason in ((bytes(damaged), "incorrect data check"), (packed[:-8], "end-of-stream marker")):
        path = tmp_path / "f.jsonl.gz"
        path.write_bytes(data)
        lines, _, _ = open_lines(str(path))
        with pytest.raises(RefindError, match=f"f.jsonl.gz: cannot read: .*{reason}"):
            list(lines)
