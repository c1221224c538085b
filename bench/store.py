"""The store: reading history with 100,000 stored incarnations, and its growth over a day
of polling a document that does not change.

(a) The database is filled directly with SQL in the schema's own format (setui's
`stored_json`, `content_hash` and `ChangeRecord`), one transaction: through
`record_document` every new incarnation costs a durable commit, and 100,000 of them
would take minutes. One real `record_document` on top checks that the store takes the
filled rows as its own. Then `setui history --limit 50` runs as a process (best of 5;
reference `setui --version`, the start-up alone) and the history screen is opened in the
app (`h` until its table has rows and the frame is drawn; reference: the help screen).

(b) 24 h of polling once a second with an unchanged document is 86,400 calls of
`Store.history.record` with seen_at advancing by a second (quick: one hour, multiplied
by 24). Growth is the database and its -wal after the store is closed (SQLite
checkpoints and removes the -wal then); the -wal's size while running is reported too.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import statistics
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from common import (
    SETUI,
    FrameLog,
    Row,
    env_for,
    guid,
    ms,
    post_key,
    ratio,
    run_parts,
    scratch,
    until,
)

from setui.core.model import format_not_before, parse_document
from setui.store import DB_NAME, ChangeRecord, Store
from setui.store.records import stored_json, to_db_time

ROWS = 100_000
READ_TARGET = 0.150
GROWTH_TARGET = 16 * 1024
ENDPOINT = "http://169.254.169.254"
KINDS = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate")


def _event(n: int, seen: datetime) -> dict[str, Any]:
    return {
        "EventId": guid(n), "EventStatus": "Scheduled", "EventType": KINDS[n % 5],
        "ResourceType": "VirtualMachine", "Resources": [f"vm-{n % 7}", f"vm-{n % 5 + 7}"],
        "NotBefore": format_not_before(seen + timedelta(minutes=15)),
        "Description": "Virtual machine is going to be restarted as part of a planned "
                       "maintenance.",
        "EventSource": "Platform", "DurationInSeconds": -1,
    }


def _change(kind: str, event: dict[str, Any]) -> dict[str, Any]:
    return ChangeRecord(kind=kind, event_id=event["EventId"], event_type=event["EventType"],
                        status=event["EventStatus"], not_before=event["NotBefore"]).to_json()


def fill(data: Path, rows: int) -> datetime:
    """`rows` incarnations, one a minute up to now: two events at a time, one new and
    one cancelled in each. Returns the last one's time."""
    Store.open_dir(data).close()  # the schema, made by setui itself
    conn = sqlite3.connect(data / DB_NAME, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # a fixture, not a benchmark: no durability
    last = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=1)
    first = last - timedelta(minutes=rows - 1)
    incarnations: list[tuple[Any, ...]] = []
    changes: list[tuple[Any, ...]] = []
    events = [_event(10**9, first)]  # one event already there when recording began
    conn.execute("BEGIN")
    for i in range(rows):
        seen = first + timedelta(minutes=i)
        new = _event(i, seen)
        events.append(new)
        gone = events.pop(0) if len(events) > 2 else None
        raw = stored_json({"DocumentIncarnation": i + 1, "Events": events})
        # A Scheduled event leaving the document is "cancelled" to the tracker.
        record = [_change("appeared", new)] + ([_change("cancelled", gone)] if gone else [])
        summary = "; ".join(f"{c['kind']} {c['event_type']} {c['event_id'][:8]}"
                            for c in record)
        incarnations.append((i + 1, ENDPOINT, i + 1, hashlib.sha256(raw.encode()).hexdigest(),
                             to_db_time(seen), to_db_time(seen + timedelta(seconds=59)), raw,
                             stored_json(record), summary))
        changes += [(i + 1, p, c["event_id"], c["kind"]) for p, c in enumerate(record)]
        if len(incarnations) == 5000 or i == rows - 1:
            # In batches: this process's size would otherwise be every child's peak RSS
            # in wait4's accounting, and it is kept small for the suites that follow.
            conn.executemany("INSERT INTO incarnations (id, endpoint, incarnation, "
                             "content_hash, first_seen, last_seen, raw_json, changes_json, "
                             "summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", incarnations)
            conn.executemany("INSERT INTO event_changes (incarnation_id, position, event_id, "
                             "kind) VALUES (?, ?, ?, ?)", changes)
            incarnations.clear()
            changes.clear()
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return last


def _check(data: Path, last: datetime) -> None:
    """The store reads the rows, and derives a real change from the newest of them."""
    with Store.open_dir(data, history_days=None) as store:
        newest = store.history.incarnations(limit=1)[0]
        raw = parse_document(newest.raw_json)
        body = {"DocumentIncarnation": raw.incarnation + 1, "Events": [
            dict(e.raw) for e in raw.events[1:]]}
        document = parse_document(stored_json(body).encode())
        if not store.history.record(document, seen_at=last + timedelta(minutes=1),
                                    endpoint=ENDPOINT):
            raise RuntimeError("the store did not take a new incarnation on the filled rows")
        added = store.history.incarnations(limit=1)[0]
        if [c.event_id for c in added.changes] != [raw.events[0].event_id]:
            raise RuntimeError(f"unexpected changes on the filled rows: {added.changes}")


def _best_wall(argv: list[str], env: dict[str, str], runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        best = min(best, time.perf_counter() - start)
    return best


async def _screens(data: Path, runs: int) -> tuple[list[float], list[float]]:
    """Seconds from the `h` key to the first frame of the history screen with its rows;
    from `?` to the first frame of the help screen."""
    from setui.core.client import ImdsClient
    from setui.settings.config import Config
    from setui.system.identity import Identity
    from setui.ui.app import SetuiApp
    from setui.ui.screens.help import HelpScreen
    from setui.ui.screens.history import HistoryScreen
    from setui.ui.screens.main import MainScreen

    store = Store.open_dir(data, history_days=None)
    # Nothing listens on port 9; with poll=False and a known VM name it is never asked.
    app = SetuiApp(client=ImdsClient("http://127.0.0.1:9"),
                   config=Config(endpoint=ENDPOINT, vm_name="vm-0", data_dir=data),
                   store=store, identity=Identity(user="bench", ssh_client=None, host="bench"),
                   poll=False)

    def shown(screen: Any) -> bool:
        return isinstance(screen, HistoryScreen) and bool(screen.records)

    def helped(screen: Any) -> bool:
        return isinstance(screen, HelpScreen)

    history: list[float] = []
    help_: list[float] = []
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            frames = FrameLog(app)
            await pilot.pause(0.5)
            for _ in range(runs):
                for key, drawn, out in (("h", shown, history), ("question_mark", helped, help_)):
                    mark = len(frames.frames)
                    start = time.perf_counter()
                    post_key(app, key)
                    await until(lambda mark=mark, drawn=drawn: frames.first_since(mark, drawn))
                    out.append((frames.first_since(mark, drawn) or 0.0) - start)
                    post_key(app, "escape")
                    await until(lambda: isinstance(app.screen, MainScreen))
                    await asyncio.sleep(0.3)  # back to idle, as between two key presses
    finally:
        store.close()
    return history, help_


def reading(quick: bool) -> list[Row]:
    work = scratch("store-read")
    data = work / "data"
    started = time.perf_counter()
    last = fill(data, ROWS)
    filled = time.perf_counter() - started
    _check(data, last)
    env = env_for(data)
    version = _best_wall([*SETUI, "--version"], env)
    listing = _best_wall([*SETUI, "history", "--limit", "50", "--data-dir", str(data)], env)
    history, help_ = asyncio.run(_screens(data, 3 if quick else 7))
    opened, helped = statistics.median(history), statistics.median(help_)
    size = (data / DB_NAME).stat().st_size / 2**20
    # The target is the command's own work: interpreter and import start-up is the
    # cold-start figure's business (`setui --version`, <= 0.3 s), measured beside it.
    beyond = listing - version
    return [
        Row(f"`setui history --limit 50` beyond start-up, {ROWS:,} incarnations ({size:.0f} MB,"
            f" filled in {filled:.0f} s), best of 5 (whole: {ms(listing)})", ms(beyond),
            f"`setui --version` {ms(version)}", ratio(listing, version),
            f"<= {ms(READ_TARGET)}", beyond <= READ_TARGET),
        Row(f"history screen: `h` to first frame with rows, {ROWS:,} incarnations, median of "
            f"{len(history)} (first {ms(history[0])})", ms(opened),
            f"help screen (`?`) {ms(helped)}", ratio(opened, helped), f"<= {ms(READ_TARGET)}",
            opened <= READ_TARGET),
    ]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def growth(quick: bool) -> list[Row]:
    hours = 1 if quick else 24
    work = scratch("store-growth")
    data = work / "data"
    db = data / DB_NAME
    base = datetime(2026, 11, 22, tzinfo=timezone.utc)
    raw = {"DocumentIncarnation": 7, "Events": [_event(n, base) for n in range(3)]}
    document = parse_document(stored_json(raw).encode())
    store = Store.open_dir(data)
    store.history.record(document, seen_at=base, endpoint=ENDPOINT)
    store.close()  # the last connection closed: checkpointed, -wal removed
    before = _size(db)
    store = Store.open_dir(data)
    wal_peak = 0
    started = time.process_time()
    for second in range(1, hours * 3600 + 1):
        store.history.record(document, seen_at=base + timedelta(seconds=second),
                             endpoint=ENDPOINT)
        if second % 600 == 0:
            wal_peak = max(wal_peak, Path(f"{db}-wal").stat().st_size)
    cpu = time.process_time() - started
    store.close()
    grown = (_size(db) - before) * 24 / hours
    stored = store_last_seen(db)
    expected = to_db_time(base + timedelta(seconds=hours * 3600 - 60))
    if stored < expected:  # the store must still have recorded that it saw the document
        raise RuntimeError(f"last_seen {stored} is older than {expected}")
    note = "measured" if hours == 24 else "1 h measured, x 24"
    return [
        Row(f"store growth, 24 h of unchanged polling at 1/s ({note}), after checkpoint",
            f"{grown / 1024:.1f} KB", f"the store with one document {before / 1024:.0f} KB",
            ratio(grown, before), f"<= {GROWTH_TARGET // 1024} KB", grown <= GROWTH_TARGET),
        Row(f"store, {hours} h of unchanged polling: -wal while running; CPU in "
            "record_document (info)", f"-wal {wal_peak / 1024:.0f} KB",
            f"CPU {cpu:.2f} s for {hours * 3600:,} calls", "-", "-", None),
    ]


def store_last_seen(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(conn.execute("SELECT max(last_seen) FROM incarnations").fetchone()[0])
    finally:
        conn.close()


def run(quick: bool = False) -> list[Row]:
    return run_parts("store", (reading, growth), quick)
