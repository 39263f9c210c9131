"""`refind add FILE.jsonl.gz`: a truncated .gz stores every whole line before the cut (then the same error and exit
code as before), and the reader reads the files ``gzip`` reads — concatenated members, zero padding — to the same
bytes, and refuses what it refuses (but for a bad header CRC or reserved flag bits, which zlib refuses too)."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import random
import sqlite3
import threading
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


def test_a_damaged_trailer_is_refused_before_a_line_is_read_and_a_cut_one_when_reached(tmp_path: Path) -> None:
    packed = gzip.compress(b"one line\n" * 100)
    damaged = bytearray(packed)
    damaged[-6] ^= 0xFF  # the CRC in the trailer
    path = tmp_path / "f.jsonl.gz"
    path.write_bytes(bytes(damaged))
    with pytest.raises(RefindError, match="f.jsonl.gz: damaged .gz file: the data of the gzip member at byte 0 "):
        open_lines(str(path))
    path.write_bytes(packed[:-8])
    lines, _, _ = open_lines(str(path))
    with pytest.raises(RefindError, match="f.jsonl.gz: cannot read: .*end-of-stream marker"):
        list(lines)


NOTHING = "nothing from it was stored — replay an intact copy"


def _altered(good: bytes, line: int = 700) -> bytes:
    """A .gz of ``good`` with 4 bytes of text overwritten in the middle (the probe's ``dd`` of 4 × 0xFF into the
    file): stored uncompressed (deflate's level 0), so its deflate data stays valid and only the CRC-32 at the member's
    end tells — the text of line ``line`` (1-based, or the next one not split by a block header) is altered."""
    packed = gzip.compress(good, compresslevel=0)
    lines = good.split(b"\n")
    for text in lines[line - 1 :]:
        if (at := packed.find(text)) >= 0:
            at += text.index(b'"content": "') + len(b'"content": "')
            damaged = packed[:at] + b"\xff" * 4 + packed[at + 4 :]
            assert zlib.decompressobj(wbits=31).decompress(damaged[:-8]) != good  # what a reader gets before the end
            return damaged
    raise AssertionError("no line outside a block header")


def _fifo(tmp_path: Path, data: bytes) -> tuple[str, threading.Thread]:
    """A named pipe (read once, not seekable) a thread writes ``data`` into once a reader opens it."""
    path = tmp_path / "log.pipe"
    os.mkfifo(path)

    def write() -> None:
        with contextlib.suppress(BrokenPipeError), open(path, "wb") as pipe:
            pipe.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return str(path), writer


def _add(cli, tmp_path: Path, data: bytes, via: str, *flags: str):
    """``refind add`` of ``data`` from a file, from stdin, or from a named pipe; (result, the name it is given)."""
    if via == "file":
        path = tmp_path / "log.jsonl.gz"
        path.write_bytes(data)
        return cli("add", "--file", str(path), *flags), str(path)
    if via == "stdin":
        return cli("add", "--file", "-", *flags, input=data), "<stdin>"
    name, writer = _fifo(tmp_path, data)
    result = cli("add", "--file", name, *flags)
    writer.join(5)
    return result, name


VIA = ["file", "stdin", pytest.param("pipe", marks=pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="fifo"))]


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("via", VIA)
def test_a_gz_whose_member_fails_its_crc_stores_nothing(cli, db_path: Path, tmp_path: Path, via, strict) -> None:
    """The probe: 4 bytes overwritten mid-file decompress to altered text that gzip notices only at the member's end;
    the batches before it were committed (an id stored with the wrong text, the intact file then a conflict)."""
    good = _lines(1_200)  # (batches of 500: the old replay committed two before the check failed, line 700 altered)
    packed = gzip.compress(good)
    damaged = _altered(good)

    result, name = _add(cli, tmp_path, damaged, via, *(["--strict"] if strict else []))
    assert result.exit_code == 1, result.output
    assert " ".join(result.output.split()) == (
        f"error: {name}: damaged .gz file: the data of the gzip member at byte 0 does not match its CRC-32 checksum; "
        f"{NOTHING}"
    )
    assert not db_path.exists()  # nothing stored: no database either

    intact = tmp_path / "intact"
    intact.mkdir()
    again, _ = _add(cli, intact, packed, "file", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["requests_added"] == 1_200
    assert _stored_ids(db_path) == [f"r{i}" for i in range(1_200)]


def test_corrupt_deflate_data_and_a_later_member_failing_are_refused_whole(cli, db_path: Path, tmp_path: Path) -> None:
    first = gzip.compress(_lines(50, seed=1))
    invalid = first[:10] + b"\xff" + first[11:]  # the first deflate block's header: block type 3, which is none
    result, name = _add(cli, tmp_path, invalid, "file")
    assert result.exit_code == 1, result.output
    assert " ".join(result.output.split()) == (
        f"error: {name}: damaged .gz file: the compressed data of the gzip member at byte 0 is corrupt (zlib: invalid "
        f"block type); {NOTHING}"
    )
    # a file of two members, the second one damaged: nothing of the first (intact) member is stored either
    result, name = _add(cli, tmp_path, first + _altered(_lines(300, seed=2), line=150), "file")
    assert result.exit_code == 1, result.output
    assert (
        f"the data of the gzip member at byte {len(first):,} does not match its CRC-32 checksum; {NOTHING}"
        in " ".join(result.output.split())
    )
    assert not db_path.exists()


@pytest.mark.parametrize("via", VIA)
def test_a_gz_followed_by_garbage_stores_nothing_and_says_where(cli, db_path: Path, tmp_path: Path, via) -> None:
    """It stored every line, then said "the same command stores the rest" (there was none): now nothing is stored
    from it, and the message says where its gzip data ends."""
    packed = gzip.compress(_lines(100))
    result, name = _add(cli, tmp_path, packed + b"garbage\n", via)
    assert result.exit_code == 1, result.output
    assert " ".join(result.output.split()) == (
        f"error: {name}: damaged .gz file: the bytes from byte {len(packed):,} on are not gzip data (trailing "
        "garbage, or a gzip member whose header is damaged); nothing from it was stored — replay an intact copy, or "
        "what precedes those bytes (`gzip -dc` decompresses and checks it)"
    )
    assert not db_path.exists()


@pytest.mark.parametrize("via", VIA)
def test_members_and_zero_padding_are_still_stored_whole(cli, db_path: Path, tmp_path: Path, via) -> None:
    good = _lines(1_200)
    parts = [good[: len(good) // 3], good[len(good) // 3 : len(good) // 2], good[len(good) // 2 :]]
    data = gzip.compress(parts[0]) + gzip.compress(parts[1]) + b"\0" * 5 + gzip.compress(parts[2]) + b"\0" * 3
    assert gzip.decompress(data) == good
    result, _ = _add(cli, tmp_path, data, via, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["requests_added"] == 1_200
    assert _stored_ids(db_path) == [f"r{i}" for i in range(1_200)]


@pytest.mark.parametrize("via", VIA)
def test_a_truncated_gz_from_stdin_or_a_pipe_stores_every_whole_line_too(cli, db_path, tmp_path, via) -> None:
    """The check reads a truncated file to its cut and lets the replay store what precedes it (a pipe from its copy)."""
    packed = gzip.compress(_lines(1_500))
    cut = packed[: len(packed) - 2_000]
    whole = zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")
    result, _ = _add(cli, tmp_path, cut, via)
    assert result.exit_code == 1, result.output
    assert f"{TRUNCATED}{whole:,} requests ({whole:,} messages), kept" in " ".join(result.output.split())
    assert _stored_ids(db_path) == [f"r{i}" for i in range(whole)]
