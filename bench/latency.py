"""Latency: a change of the document to the line `setui watch` prints; the `y` key in the
approval dialog to the POST arriving at the emulator.

(a) Events appear every 3 s, each at a different fraction of a second so the changes
fall at every phase of the 1 s polling grid (with whole seconds they would all meet the
grid at the same phase and the spread would be an accident of start-up). The emulator
knows when each change happens (`Emulator.real_time` of the event's `at`); the line is
stamped when read from watch's stdout. Reference: the documents' own sample, polling the
same emulator at the same time, stamped when it prints "Processed events from document".

(b) In-process, as tests/ui does it: `SetuiApp` under `run_test` against the emulator,
with a real store (the audit record is committed before the POST, fsync and all). The
emulator's request list is swapped for one that stamps each arrival, so the figure is
keystroke -> request parsed by the server, with no polling in between. Reference: a
bare httpx POST to the same emulator, same process, same stamps.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import time
from typing import Any

from common import (
    EVENTS_PATH,
    SETUI,
    LineStamps,
    Row,
    env_for,
    guid,
    interrupt,
    ms,
    p95,
    post_key,
    ratio,
    run_parts,
    sample_argv,
    sample_env,
    sample_script,
    scratch,
    until,
    write_scenario,
)

from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator

INTERVAL = 1.0
SPACING = 3.0
APPROVAL_TARGET = 0.050


class StampedList(list):  # type: ignore[type-arg]
    """Stands in for `Emulator.requests`: the server appends under its own lock, and this
    notes time.perf_counter() at that moment and can wake a waiter at once, so nobody
    polls the list from the loop being timed."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[tuple[float, Any]] = []
        self.on_post: Any = None  # called (on the server's thread) when a POST arrives

    def append(self, item: Any) -> None:
        self.stamps.append((time.perf_counter(), item))
        super().append(item)
        if item.method == "POST" and self.on_post is not None:
            self.on_post()


# -- (a) change detection ---------------------------------------------------------------------
def change_scenario(count: int) -> tuple[dict[str, object], dict[str, float]]:
    """Two events from the start, then one every SPACING s; {EventId: scenario second}."""
    appear = {guid(100 + k): round(SPACING * k + (k * 0.37) % 1.0, 3)
              for k in range(1, count + 1)}
    events = [{"id": guid(1), "type": "Reboot", "notice": "7d"},
              {"id": guid(2), "type": "Redeploy", "notice": "7d", "resources": ["vm-9"]}]
    events += [{"id": event_id, "type": "Reboot", "at": at, "notice": "7d",
                "resources": [f"vm-{i % 7}"]}
               for i, (event_id, at) in enumerate(appear.items())]
    return {"name": "bench-latency", "vm_name": "vm-0", "events": events}, appear


def change_detection(quick: bool) -> list[Row]:
    count = 6 if quick else 24
    work = scratch("latency")
    data, appear = change_scenario(count)
    path = write_scenario(work / "scenario.json", data)
    with Emulator(load_scenario(str(path)), speed=1) as emulator:
        watch_dir = work / "watch-data"
        watch = subprocess.Popen(
            [*SETUI, "watch", "--json", "--endpoint", emulator.url, "--interval", str(INTERVAL),
             "--data-dir", str(watch_dir)],
            env=env_for(watch_dir), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        argv, feed = sample_argv(sample_script(emulator.url, work))
        sample = subprocess.Popen(argv, env=sample_env(work), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert sample.stdin is not None
        sample.stdin.write(feed)
        sample.stdin.close()
        watch_lines, sample_lines = LineStamps(watch.stdout), LineStamps(sample.stdout)
        last = max(appear.values())
        time.sleep(max(0.0, emulator.real_time(last) - time.time()) + 2 * INTERVAL + 0.5)
        interrupt(watch)
        interrupt(sample)
        changed_at = {event_id: emulator.real_time(at) for event_id, at in appear.items()}
        # Incarnation 1 is the first document; the k-th appearance makes incarnation k + 1.
        by_incarnation = {k + 2: when for k, when in enumerate(
            sorted(changed_at.values()))}
    watch_delays = []
    for stamp, line in watch_lines.join():
        record = json.loads(line)
        if record["change"] == "appeared" and record["event_id"] in changed_at:
            watch_delays.append(stamp - changed_at[record["event_id"]])
    sample_delays = []
    prefix = "Processed events from document: "
    for stamp, line in sample_lines.join():
        if prefix in line:
            number = int(line.split(prefix, 1)[1])
            if number in by_incarnation:
                sample_delays.append(stamp - by_incarnation[number])
    target = INTERVAL + 0.100
    measured = p95(watch_delays)
    reference = p95(sample_delays)
    rows = [Row(f"change detection: document changes -> `watch --json` line, p95 of "
                f"{len(watch_delays)} (median {ms(statistics.median(watch_delays))})",
                ms(measured), f"docs' sample p95 {ms(reference)} of {len(sample_delays)}",
                ratio(measured, reference), f"<= {ms(target)} (interval + 100 ms)",
                measured <= target)]
    if len(watch_delays) < count:
        rows.append(Row("change detection: changes missed by `watch`",
                        f"{count - len(watch_delays)} of {count}", "-", "-", "0", False))
    return rows


# -- (b) approval ------------------------------------------------------------------------------
def approval_scenario(count: int) -> dict[str, object]:
    # An approval_delay of 30 days: an approved event stays Scheduled and the emulator
    # answers 200 every time. setui approves each event once (a second approval asks
    # again), so each cycle approves an event of its own: guid(1) .. guid(count).
    return {"name": "bench-approve", "vm_name": "vm-0", "approval_delay": "30d",
            "events": [{"id": guid(k), "type": "Reboot", "notice": "7d",
                        "resources": ["vm-0"], "source": "User"} for k in range(1, count + 1)]}


def _alive() -> int:
    """Objects alive, the frozen ones too (setui freezes its start-up heap once it has drawn,
    see setui.system.gctune, and gc.get_objects leaves frozen objects out)."""
    return len(gc.get_objects()) + gc.get_freeze_count()


async def _approvals(emulator: Emulator, stamped: StampedList, data: Any,
                     repeats: int, *, first: int = 1, sock: Any = None,
                     ) -> tuple[list[float], float]:
    """The delays, and how many objects each dialog cycle left behind (a growing heap is
    what makes the full garbage collections, the tail of this figure, longer). ``sock``:
    the dashboard attached to the agent answering there (it approves), else standalone;
    events ``first`` .. ``first + repeats - 1`` are approved."""
    from setui.core.client import ImdsClient
    from setui.settings.config import Config
    from setui.store import Store
    from setui.system.identity import Identity
    from setui.ui.app import SetuiApp
    from setui.ui.screens.confirm import ConfirmationModal
    from setui.ui.widgets.events import EventsTable

    identity = Identity(user="bench", ssh_client=None, host="bench")
    store = None
    if sock is not None:
        from setui.api.attach import attach
        from setui.ui.attached import AttachedApp

        client, words = attach(Config(socket=sock))
        if client is None:
            raise RuntimeError(words)
        # The app reads through the client, and closes it when it stops.
        app: Any = AttachedApp(agent=client, identity=identity,
                               config=Config(socket=sock, vm_name="vm-0", bell=False))
    else:
        store = Store.open_dir(data)
        config = Config(endpoint=emulator.url, data_dir=data, interval=INTERVAL,
                        vm_name="vm-0", bell=False)
        # The client as `setui` builds it (default rate limit): pauses between approvals
        # below keep its bucket full, as a person reading the dialog would.
        app = SetuiApp(client=ImdsClient(emulator.url), config=config, store=store,
                       identity=identity, poll=True)
    app.confirm_guard = 0.0

    def posts() -> list[float]:
        return [t for t, r in list(stamped.stamps) if r.method == "POST"]

    def settled(event_id: str) -> bool:
        note = app.session.approvals.get(event_id)
        return note is not None and not note.pending

    # Woken by the server's thread rather than by polling: a waiter spinning in the app's
    # loop every millisecond would itself slow the loop it is timing.
    loop = asyncio.get_running_loop()
    arrived = asyncio.Event()
    stamped.on_post = lambda: loop.call_soon_threadsafe(arrived.set)
    delays: list[float] = []
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(lambda: app.session.document is not None)
            await pilot.pause(0.5)
            gc.collect()
            objects = _alive()
            for cycle in range(first, first + repeats):
                app.main_screen.query_one(EventsTable).select_key(guid(cycle))
                await pilot.pause()
                post_key(app, "a")
                await until(lambda: isinstance(app.screen, ConfirmationModal))
                # The dialog drawn and read, and the rate limit's bucket full again: a cycle
                # spends four requests (the poll, the re-read before the POST, the POST, the
                # poll after it), so cycles closer than a second would drain it.
                await asyncio.sleep(1.2)
                before = len(posts())
                arrived.clear()
                start = time.perf_counter()
                post_key(app, "y")
                await asyncio.wait_for(arrived.wait(), 10)
                delays.append(posts()[before] - start)
                await until(lambda cycle=cycle: settled(guid(cycle)), step=0.01)
            await pilot.pause(0.5)
            gc.collect()
            left = (_alive() - objects) / repeats
    finally:
        stamped.on_post = None
        if store is not None:
            store.close()
    return delays, left


def _bare_posts(emulator: Emulator, stamped: StampedList, repeats: int) -> list[float]:
    import httpx

    body = json.dumps({"StartRequests": [{"EventId": guid(1)}]}).encode()
    delays = []
    with httpx.Client(base_url=emulator.url, headers={"Metadata": "true"}) as client:
        client.get(EVENTS_PATH, params={"api-version": "2020-07-01"})  # connection open
        for _ in range(repeats):
            before = len(stamped.stamps)
            start = time.perf_counter()
            client.post(EVENTS_PATH, params={"api-version": "2020-07-01"}, content=body)
            delays.append(stamped.stamps[before][0] - start)
            time.sleep(0.05)
    return delays


def approval(quick: bool) -> list[Row]:
    repeats = 8 if quick else 30
    work = scratch("approval")
    path = write_scenario(work / "scenario.json", approval_scenario(repeats))
    with Emulator(load_scenario(str(path)), speed=1) as emulator:
        stamped = StampedList()
        emulator.requests = stamped
        reference = _bare_posts(emulator, stamped, repeats)
        measured, left = asyncio.run(_approvals(emulator, stamped, work / "data", repeats))
    m, r = p95(measured), p95(reference)
    return [Row(f"approval: `y` in the dialog -> POST at the emulator, p95 of {len(measured)} "
                f"(median {ms(statistics.median(measured))})", ms(m),
                f"bare httpx POST p95 {ms(r)}", ratio(m, r),
                f"<= {ms(APPROVAL_TARGET)}", m <= APPROVAL_TARGET),
            Row("approval dialog: objects still alive per open + approve cycle, after a full "
                "collection (info: each cycle approves a new event, so this is mostly the "
                "table's and Textual's bounded render caches growing with it; opening and "
                "cancelling on one row leaves the heap flat)", f"{left:,.0f}",
                f"{repeats} cycles", "-", "-", None)]


def approval_attached(quick: bool) -> list[Row]:
    """`y` -> POST through the agent (the dashboard attached to it: the agent reads the
    document again, checks its store, records and posts), beside the standalone dashboard
    doing it all itself, against one emulator in the same run."""
    repeats = 8 if quick else 30
    work = scratch("approval-attached")
    path = write_scenario(work / "scenario.json", approval_scenario(2 * repeats))
    with Emulator(load_scenario(str(path)), speed=1) as emulator:
        stamped = StampedList()
        emulator.requests = stamped
        sock = work / "api.sock"
        env = env_for(work / "agent-data")
        env["SETUI_SOCKET"] = str(sock)
        with (work / "agent.out").open("w") as log:
            agent = subprocess.Popen(
                [*SETUI, "agent", "--endpoint", emulator.url, "--interval", str(INTERVAL),
                 "--data-dir", str(work / "agent-data"), "--vm-name", "vm-0"],
                env=env, stdout=log, stderr=log)
        try:
            from attached import _answering

            if not _answering(sock, time.monotonic() + 30):
                raise RuntimeError("the agent's socket never answered")
            through, _ = asyncio.run(_approvals(emulator, stamped, None, repeats, sock=sock))
            alone, _ = asyncio.run(_approvals(emulator, stamped, work / "data", repeats,
                                              first=repeats + 1))
        finally:
            interrupt(agent)
    m, r = p95(through), p95(alone)
    return [Row(f"approval through the agent: `y` in an attached dashboard -> POST at the "
                f"emulator, p95 of {len(through)} (median {ms(statistics.median(through))})",
                ms(m), f"standalone dashboard p95 {ms(r)} (same run)", ratio(m, r),
                f"<= {ms(APPROVAL_TARGET)}", m <= APPROVAL_TARGET)]


def run(quick: bool = False) -> list[Row]:
    # The approval figure runs five times over in bench/approval.py (its stability is the
    # target); here only the change detection.
    return run_parts("latency", (change_detection,), quick)
