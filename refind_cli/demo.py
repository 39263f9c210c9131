"""`make demo`: the main job, offline, on a fresh local database (demo.db)."""

from __future__ import annotations

import os
import sys
from pathlib import Path



def main() -> None:
    from .cli import app

    root = Path(__file__).resolve().parent.parent
    db = root / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.environ["REFIND_DB"] = str(db)
    steps = [
        ["add", "--file", str(root / "fixtures" / "conversations.jsonl")],
        ["add", "--file", str(root / "fixtures" / "messages.jsonl")],
    ]
    for argv in steps:
        print(f"\n$ refind {' '.join(argv)}", flush=True)
        try:
            app(argv, standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                sys.exit(exc.code)


if __name__ == "__main__":
    main()
