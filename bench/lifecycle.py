"""What scrubbing costs: Adds with secure_delete on vs off, forget and expire vs a plain DELETE, export vs a SELECT.

Every ratio compares against a baseline measured in the same run on the same synthetic data (bench/synth.py).

    .venv/bin/python bench/lifecycle.py [--users 20] [--messages 2000]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth  # noqa: E402

from refind_cli import lifecycle  # noqa: E402
from refind_cli.store import DAY_MS, Store  # noqa: E402

T_ADD = 1_750_000_000_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _fill(path: Path, users: int, messages: int, *, secure: bool) -> tuple[float, Clock]:
    """Fill a store; half the users are recorded 40 days before the other half. Returns (seconds, clock)."""
    clock = Clock(T_ADD)
    store = Store(path, clock=clock, retention_days=30)
    if not secure:
        store.conn.execute("PRAGMA secure_delete = OFF")
    start = time.perf_counter()
    for u in range(users):
        clock.now = T_ADD if u < users // 2 else T_ADD + 40 * DAY_MS
        synth.fill(store, f"user{u}", messages, seed=1)
    took = time.perf_counter() - start
    store.close()
    return took, clock


def _plain_delete(store: Store, where: str, params: list) -> None:
    with store.write():
        store.conn.execute(f"DELETE FROM messages WHERE {where}", params)
        store.conn.execute(f"DELETE FROM requests WHERE {where}", params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--messages", type=int, default=2000, help="messages per user")
    args = ap.parse_args()
    total = args.users * args.messages
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        on, off = Path(tmp) / "on.db", Path(tmp) / "off.db"
        # Alternate the two fills (off, on, off, on) into fresh files and keep each one's best time.
        t_on = t_off = float("inf")
        for attempt in range(2):
            for secure, path in ((False, off), (True, on)):
                for sfx in ("", "-wal", "-shm"):
                    Path(f"{path}{sfx}").unlink(missing_ok=True)
                took, _ = _fill(path, args.users, args.messages, secure=secure)
                if secure:
                    t_on = min(t_on, took)
                else:
                    t_off = min(t_off, took)
        rows.append(("add (replay) of all messages", f"{total / t_on:,.0f} msg/s", f"{total / t_off:,.0f} msg/s",
                     t_on / t_off))

        now = T_ADD + 50 * DAY_MS  # the first half of the users is past the 30-day window
        s_on = Store(on, clock=Clock(now), retention_days=30)
        s_off = Store(off, clock=Clock(now), retention_days=30)
        s_off.conn.execute("PRAGMA secure_delete = OFF")

        victim = f"user{args.users - 1}"
        t0 = time.perf_counter()
        forgot = lifecycle.forget(s_on, victim)
        t_forget = time.perf_counter() - t0
        t0 = time.perf_counter()
        _plain_delete(s_off, "user_id = ?", [victim])
        t_plain = time.perf_counter() - t0
        rows.append((f"forget one user ({forgot.messages:,} messages)", f"{t_forget * 1000:,.0f} ms",
                     f"{t_plain * 1000:,.0f} ms", t_forget / t_plain))

        t0 = time.perf_counter()
        expired = lifecycle.expire(s_on)
        t_expire = time.perf_counter() - t0
        cutoff = s_off.retention_cutoff()
        t0 = time.perf_counter()
        _plain_delete(s_off, "recorded_at < ?", [cutoff])
        t_plain = time.perf_counter() - t0
        rows.append((f"expire ({expired.messages:,} messages, {len(expired.users)} users)",
                     f"{t_expire * 1000:,.0f} ms", f"{t_plain * 1000:,.0f} ms", t_expire / t_plain))

        user = f"user{args.users - 2}"
        t0 = time.perf_counter()
        result = lifecycle.export(s_on, user, io.StringIO())
        t_export = time.perf_counter() - t0
        t0 = time.perf_counter()
        s_off.conn.execute("SELECT request_id, session_id, role, content, said_at FROM messages WHERE user_id = ? "
                           "ORDER BY seq", (user,)).fetchall()
        t_select = time.perf_counter() - t0
        rows.append((f"export one user ({result.messages:,} messages)", f"{t_export * 1000:,.1f} ms",
                     f"{t_select * 1000:,.1f} ms", t_export / t_select))
        s_on.close()
        s_off.close()

    print(f"users={args.users} messages/user={args.messages} (total {total:,})\n")
    print("| operation | refind (scrubbed) | baseline | ratio |")
    print("|---|---:|---:|---:|")
    for name, a, b, ratio in rows:
        print(f"| {name} | {a} | {b} | {ratio:.2f}× |")
    print("\nbaselines: add with PRAGMA secure_delete=OFF; forget/expire = plain DELETE of the same rows with "
          "secure_delete=OFF and no checkpoint; export = the SELECT of the same rows")


if __name__ == "__main__":
    main()
