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

import synth

from refind_cli import lifecycle
from refind_cli.store import DAY_MS, Store

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


def scrub_check(folder: Path, users: int, messages: int, *, secure: bool) -> tuple[int, int, bool]:
    """Plant unique secrets in one user's history while the store grows around them (page splits, overflow pages,
    WAL resets), forget that user, and count the secrets any byte of which (a 16-byte window) is still in the
    database or WAL files. Returns (leaked, planted, checkpointed)."""
    import secrets as rnd

    path = folder / f"scrub-{'on' if secure else 'off'}.db"
    store = Store(path, retention_days=None)
    if not secure:  # the baseline: a store that does not zero freed bytes (the build default on some systems)
        store.conn.execute("PRAGMA secure_delete = OFF")
    planted = []
    for u in range(users):
        for chunk in range(4):
            if u == users // 2:
                text = f"secret {rnd.token_hex(24)} " * 3 + "x" * (chunk * 2000)  # some spill to overflow pages
                planted.append(text)
                from refind_cli.contract import parse_add

                store.add(
                    parse_add(
                        {
                            "request_id": f"secret-{chunk}",
                            "user_id": f"user{u}",
                            "session_id": "vault",
                            "messages": [{"role": "user", "content": text}],
                        }
                    )
                )
            synth.fill(store, f"user{u}", messages // 4, seed=chunk)
    victim = f"user{users // 2}"
    if secure:
        checkpointed = lifecycle.forget(store, victim).checkpointed
    else:  # the baseline: a plain DELETE, no scrubbing, no checkpoint
        _plain_delete(store, "user_id = ?", [victim])
        checkpointed = False
    raw = b"".join(Path(f"{path}{sfx}").read_bytes() for sfx in ("", "-wal") if Path(f"{path}{sfx}").exists())
    leaked = 0
    for text in planted:
        data = text.encode()
        head = data[: data.index(b" x") if b" x" in data else len(data)]  # the unique part
        if any(head[i : i + 16] in raw for i in range(len(head) - 15)):
            leaked += 1
    store.close()
    return leaked, len(planted), checkpointed


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
        for _attempt in range(2):
            for secure, path in ((False, off), (True, on)):
                for sfx in ("", "-wal", "-shm"):
                    Path(f"{path}{sfx}").unlink(missing_ok=True)
                took, _ = _fill(path, args.users, args.messages, secure=secure)
                if secure:
                    t_on = min(t_on, took)
                else:
                    t_off = min(t_off, took)
        rows.append(
            ("add (replay) of all messages", f"{total / t_on:,.0f} msg/s", f"{total / t_off:,.0f} msg/s", t_on / t_off)
        )

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
        rows.append(
            (
                f"forget one user ({forgot.messages:,} messages)",
                f"{t_forget * 1000:,.0f} ms",
                f"{t_plain * 1000:,.0f} ms",
                t_forget / t_plain,
            )
        )

        t0 = time.perf_counter()
        expired = lifecycle.expire(s_on)
        t_expire = time.perf_counter() - t0
        cutoff = s_off.retention_cutoff()
        t0 = time.perf_counter()
        _plain_delete(s_off, "recorded_at < ?", [cutoff])
        t_plain = time.perf_counter() - t0
        rows.append(
            (
                f"expire ({expired.messages:,} messages, {len(expired.users)} users)",
                f"{t_expire * 1000:,.0f} ms",
                f"{t_plain * 1000:,.0f} ms",
                t_expire / t_plain,
            )
        )

        user = f"user{args.users - 2}"
        t0 = time.perf_counter()
        result = lifecycle.export(s_on, user, io.StringIO())
        t_export = time.perf_counter() - t0
        t0 = time.perf_counter()
        s_off.conn.execute(
            "SELECT request_id, session_id, role, content, said_at FROM messages WHERE user_id = ? ORDER BY seq",
            (user,),
        ).fetchall()
        t_select = time.perf_counter() - t0
        rows.append(
            (
                f"export one user ({result.messages:,} messages)",
                f"{t_export * 1000:,.1f} ms",
                f"{t_select * 1000:,.1f} ms",
                t_export / t_select,
            )
        )
        s_on.close()
        s_off.close()
        scrub = {
            secure: scrub_check(Path(tmp), min(args.users, 10), args.messages, secure=secure)
            for secure in (True, False)
        }

    print(f"users={args.users} messages/user={args.messages} (total {total:,})\n")
    print("| operation | refind (scrubbed) | baseline | ratio |")
    print("|---|---:|---:|---:|")
    for name, a, b, ratio in rows:
        print(f"| {name} | {a} | {b} | {ratio:.2f}× |")
    for secure, (leaked, planted, done) in scrub.items():
        how = "refind forget" if secure else "baseline: plain DELETE, secure_delete OFF, no checkpoint"
        print(
            f"\nscrub check ({how}): {leaked} of {planted} forgotten secrets still have bytes in the database "
            f"or WAL (WAL truncated: {done})"
        )
    print(
        "\nbaselines: add with PRAGMA secure_delete=OFF; forget/expire = plain DELETE of the same rows with "
        "secure_delete=OFF and no checkpoint; export = the SELECT of the same rows"
    )


if __name__ == "__main__":
    main()
