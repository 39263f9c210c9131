"""Files refind writes for a user (an export, an evaluation's misses): whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from .errors import InvalidInput
from .signals import sigterm_as_ctrl_c


@contextmanager
def whole_file(output: Path, *, option: str, example: str) -> Iterator[TextIO]:
    """A text stream that becomes ``output`` when the block ends without an error: written next to it and renamed
    into place, so a failed run never leaves a partial file (nor replaces the one that was there). Readable by its
    owner only, as the database is (what refind writes for a user quotes their conversations), also when it replaces
    a file that others could read. ``output`` an existing stream that is not a regular file (``/dev/stdout``, a FIFO)
    is written into directly. ``option`` names the flag in errors; ``example``: a file name to suggest when
    ``output`` is a folder."""
    folder = output.parent if str(output.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidInput(f"{option}: folder {folder} does not exist")
    if output.is_dir():
        raise InvalidInput(f"{option}: {output} is a folder; name a file to write, e.g. {output / example}")
    if output.exists() and not output.is_file():  # /dev/stdout, a FIFO: a stream to write into, not a file to replace
        with open(output, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=folder)
    except OSError as exc:
        raise InvalidInput(f"{option}: cannot write in folder {folder}: {exc.strerror}") from None
    try:
        with sigterm_as_ctrl_c():
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
                yield out
            os.replace(tmp, output)
    except BaseException:  # (SIGTERM too: a partial copy of a user's messages left hidden, out of a forget's reach)
        Path(tmp).unlink(missing_ok=True)
        raise
