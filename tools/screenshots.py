"""``make screenshots``: SVG screenshots of the dashboard attached to the agent.

Run as ``python tools/screenshots.py [DIR]`` (default ``screenshots``) with setui
installed (``make screenshots`` does both), as root or any user (the user's name is in
the pictures). A developer's tool: it lives outside the package, so it is never
installed on a VM. Each session starts the built-in emulator playing the ``busy``
scenario on a manual clock, a real ``setui agent`` child process on a temporary data
directory and socket with a policy, and the dashboard attached to it, driven headless
with ``run_test`` (as harlequin's ``scripts/export_screenshots.py`` does). What the
pictures show: the agent's ``drain`` prepare hook still running (it waits on a file
the tool removes at the end), a Freeze held through the API as the tool's user, a stall
the agent measured (the agent stopped with SIGSTOP for a few seconds), the change log;
then the approval dialog, history and the agent's audit log.

The same code makes byte-identical files (run it twice and ``cmp`` them). What makes
that work:

* One clock for everyone, the emulator's :class:`ManualClock`, moved only by the
  script. The agent child runs through this file (``--pinned-agent``), which, before
  setui is imported, makes its wall clock (``setui.core.clock.utc_now``) and its
  service clock (``ServiceClock.now``) read that clock from a file the script writes at
  each move. So every time the agent stamps (steps, holds, audit records, its start) is
  the emulator's, to the microsecond. The dashboard's wall clock, and its ``now()``
  (elsewhere the agent's time run on by the monotonic clock since its last frame), are
  the manual clock too. Its monotonic clock stays real: the agent's health comes
  decoded on it, and the heartbeat, hooks and timeouts need time to pass.
* The script moves the clock, then waits until the dashboard has the agent's answer
  for that moment (``session.last_seen``), so nothing is seen at another time; the
  stall is kept by the agent before the clock moves on.
* The emulator listens on a fixed loopback address and port (the history shows it).
* Masked, as the last resort, because they are real and cannot be fixed: the status
  line shows :data:`SHOWN_ENDPOINT` and :data:`SHOWN_PID`, the audit log an approval's
  latency as :data:`SHOWN_LATENCY_MS`, and the stall, made by a real SIGSTOP, is shown
  to the whole second of its start and length (their tenths are the scheduler's).
* Notices are cleared before each picture: which are still up depends on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from setui.core.impact import Impact
    from setui.core.model import Event
    from setui.emulator.server import Emulator, ManualClock
    from setui.ui.attached import AttachedApp

__all__ = ["SHOWN_ENDPOINT", "SHOWN_PID", "T0", "main", "take_screenshots"]

T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
TIME_ZONE = "Europe/Amsterdam"  # local time differs from UTC, as on most people's VMs
SHOWN_ENDPOINT = "http://169.254.169.254"  # what the status line says on a real VM
SHOWN_PID = 812  # the agent's pid, as the status line shows it
SHOWN_LATENCY_MS = 38.0  # an approval's round trip to the service, as the audit log shows it
# The emulator's address, fixed: the history shows the endpoint each answer came from.
# A loopback address of its own, so the port is free whatever else listens.
EMULATOR_HOST, EMULATOR_PORT = "127.169.254.254", 16925
WIDE = (120, 36)
NARROW = (80, 24)
START = 200  # scenario second the agent and the dashboard start at
HOLD_AT = 210  # the Freeze of this VM and web-1 held, before the policy would approve it
STALL_AT = 230  # the agent stopped for STALL_SECONDS (real ones)
STALL_SECONDS = 3.0
MAIN_AT = 290  # the prepare running, the hold due, the stall logged
APPROVE_AT = 500  # the Terminate of web-3 is up for approval
TIMEOUT = 30.0  # seconds for anything to happen; a hang becomes an error, not a wait

POLICY = """\
[[rule]]
name = "drain"
event_type = ["Reboot", "Redeploy"]
this_vm = true
other_vms = false
prepare = ["{hook}"]
approve = "after-prepare"

[[rule]]
name = "short-freeze"
event_type = ["Freeze"]
max_duration = 9
this_vm = true
other_vms = true
approve = "before-not-before"
approve_before = 60
"""
HOOK = """\
#!/bin/sh
# drain: waits while {gate} is there (the pictures show it running)
while [ -e "{gate}" ]; do sleep 0.2; done
"""


def _fixed_time_zone() -> None:
    os.environ["TZ"] = TIME_ZONE
    if hasattr(time, "tzset"):
        time.tzset()


# -- the agent child --------------------------------------------------------------------
def _pinned_agent(clock_file: Path, argv: list[str]) -> int:
    """``setui agent ARGV`` with its wall and service clocks reading ``clock_file`` (see
    the module doc). Patched before any other setui module is imported, so every
    ``from setui.core.clock import utc_now`` gets the pinned one."""
    import setui.core.clock as clocks

    def pinned() -> datetime:
        return datetime.fromtimestamp(float(clock_file.read_text(encoding="ascii")),
                                      timezone.utc)

    def service_now(self: clocks.ServiceClock) -> datetime:
        del self
        return pinned()

    clocks.utc_now = pinned
    clocks.ServiceClock.now = service_now  # type: ignore[method-assign]
    from setui.cli import main as setui_main

    return setui_main(["agent", *argv])


class SharedClock:
    """The emulator's manual clock, each move also written to ``path`` for the agent."""

    def __init__(self, clock: ManualClock, path: Path) -> None:
        self._clock = clock
        self._path = path
        self._write()

    def __call__(self) -> float:
        return self._clock()

    def set(self, t: float) -> None:
        self._clock.set(t)
        self._write()

    def _write(self) -> None:
        part = self._path.with_suffix(".part")
        part.write_text(repr(self._clock()), encoding="ascii")
        part.replace(self._path)  # whole or not at all, for the agent's reads


@dataclass
class Agent:
    proc: subprocess.Popen[bytes]
    socket: Path
    gate: Path
    log: Path


@contextlib.contextmanager
def _agent(url: str, scratch: Path, clock: SharedClock) -> Iterator[Agent]:
    """The agent child on the emulator at ``url``: its store, socket, policy and hook in
    ``scratch``; the hook let go and the agent stopped on the way out."""
    from setui.api.client import AgentClient, ApiError

    gate, hook = scratch / "draining", scratch / "drain"
    gate.touch()
    hook.write_text(HOOK.format(gate=gate), encoding="utf-8")
    hook.chmod(0o755)
    policy = scratch / "policy.toml"
    policy.write_text(POLICY.format(hook=hook), encoding="utf-8")
    sock, log = scratch / "api.sock", scratch / "agent.log"
    env = dict(os.environ, SETUI_CONFIG=str(scratch / "config.toml"), PYTHONUNBUFFERED="1")
    env.pop("SETUI_SOCKET", None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--pinned-agent", str(scratch / "clock"), "--",
             "--endpoint", url, "--interval", "0.2", "--data-dir", str(scratch / "data"),
             "--socket", str(sock), "--policy", str(policy), "--stop-grace", "2",
             "--json"], stdout=out, stderr=subprocess.STDOUT, env=env)
    agent = Agent(proc, sock, gate, log)
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"screenshots: the agent ended ({proc.returncode}):\n"
                                   f"{log.read_text(encoding='utf-8', errors='replace')}")
            try:
                AgentClient.connect(sock, timeout=2).close()
                break
            except ApiError:
                if time.monotonic() > deadline:
                    raise RuntimeError("screenshots: the agent's socket never answered") from None
                time.sleep(0.1)
        yield agent
    finally:
        gate.unlink(missing_ok=True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _ShownRecord:
    """The agent's record as the screens read it, each approval's latency (this
    machine's, in milliseconds) shown as :data:`SHOWN_LATENCY_MS` and each stall to the
    whole second."""

    def __init__(self, record: Any) -> None:
        self._record = record

    def __getattr__(self, name: str) -> Any:
        return getattr(self._record, name)

    def audit(self, **kwargs: Any) -> list[Any]:
        return [r if r.latency_ms is None else replace(r, latency_ms=SHOWN_LATENCY_MS)
                for r in self._record.audit(**kwargs)]

    def impacts(self, **kwargs: Any) -> list[Impact]:
        return [_whole_impact(i) for i in self._record.impacts(**kwargs)]


def _whole(seconds: float | None) -> float | None:
    return None if seconds is None else float(round(seconds))


def _whole_impact(impact: Impact) -> Impact:
    """A stall to the whole second of its start and length (see the module doc)."""
    return replace(impact, at=impact.at.replace(microsecond=0),
                   seconds=float(round(impact.seconds)),
                   wall_seconds=_whole(impact.wall_seconds),
                   boottime_seconds=_whole(impact.boottime_seconds))


def _shot_app(**kwargs: Any) -> AttachedApp:
    """The attached dashboard, its status line showing :data:`SHOWN_ENDPOINT` and
    :data:`SHOWN_PID`, and the stalls it reads shown to the whole second."""
    from setui.store.records import AuditRecord
    from setui.ui.attached import AttachedApp
    from setui.ui.host import LinkView

    class ShotApp(AttachedApp):
        CSS_PATH = str(Path(inspect.getfile(AttachedApp)).parent / str(AttachedApp.CSS_PATH))

        def __init__(self, *, wall: Callable[[], datetime], **kw: Any) -> None:
            super().__init__(clock=wall, **kw)
            self.config = replace(self.config, endpoint=SHOWN_ENDPOINT)

        def now(self) -> datetime:
            # The agent's time, which is the manual clock, without the real monotonic
            # clock's run from its last frame.
            return self._clock()

        @property
        def link(self) -> LinkView:
            view = super().link
            pid = f"pid {self.attached.hello.agent.pid}"
            return replace(view, text=view.text.replace(pid, f"pid {SHOWN_PID}"),
                           short=view.short.replace(pid, f"pid {SHOWN_PID}"))

        @property
        def record(self) -> Any:
            return _ShownRecord(self.agent)

        def _log_read(self, records: list[AuditRecord], impacts: list[Impact]) -> None:
            super()._log_read(records, [_whole_impact(i) for i in impacts])

    return ShotApp(**kwargs)


@dataclass
class Shooter:
    """One running app, its emulator, agent and clock, and where the pictures go."""

    app: AttachedApp
    pilot: Any
    emulator: Emulator
    clock: SharedClock
    agent: Agent
    out: Path
    written: list[Path] = field(default_factory=list)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), timezone.utc)

    async def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError(f"screenshots: timed out waiting for {what}")
            await self.pilot.pause(0.02)

    async def settle(self) -> None:
        """Wait until the dashboard has the agent's answer for the clock's current time."""
        wanted = self.now()
        await self.wait_for(lambda: self.app.session.last_seen == wanted,
                            f"the agent's answer at {wanted:%H:%M:%S}")
        await self.pilot.pause()

    async def advance_to(self, second: float, step: float = 20.0) -> None:
        """Move the clock to a scenario second in steps, the agent and the app seeing
        each step (so starts and disappearances are seen as they happen)."""
        target = self.emulator.epoch + second
        while self.clock() < target:
            self.clock.set(min(self.clock() + step, target))
            await self.settle()

    async def press(self, *keys: str) -> None:
        await self.pilot.press(*keys)
        await self.pilot.pause()

    async def select(self, event: Event) -> None:
        from setui.ui.widgets.events import EventsTable

        table = self.app.main_screen.query_one(EventsTable)
        if not table.select_key(event.event_id):
            raise RuntimeError(f"screenshots: no row for {event.event_type} {event.event_id}")
        await self.pilot.pause()

    def event(self, kind: str, *resources: str) -> Event:
        document = self.app.session.document
        found = next((e for e in (document.events if document else ())
                      if e.event_type == kind and e.resources == resources), None)
        if found is None:
            raise RuntimeError(f"screenshots: the scenario has no {kind} of {resources}")
        return found

    async def shoot(self, name: str) -> None:
        self.app.clear_notifications()
        await self.pilot.pause()
        path = self.out / f"{name}.svg"
        path.write_text(self.app.export_screenshot(), encoding="utf-8")
        self.written.append(path)
        print(f"wrote {path}")


Script = Callable[[Shooter], Awaitable[None]]


async def _session(out: Path, size: tuple[int, int], script: Script, *,
                   theme: str | None = None) -> list[Path]:
    from setui.api.attach import attach
    from setui.emulator.scenario import load_scenario
    from setui.emulator.server import Emulator, ManualClock
    from setui.settings.config import Config
    from setui.system.identity import Identity, account_name

    with tempfile.TemporaryDirectory(prefix="setui-shots-") as name:
        scratch = Path(name)
        manual = ManualClock(T0.timestamp())
        emulator = Emulator(load_scenario("busy"), clock=manual, speed=1.0,
                            host=EMULATOR_HOST, port=EMULATOR_PORT)
        url = emulator.start()
        clock = SharedClock(manual, scratch / "clock")
        clock.set(emulator.epoch + START)
        try:
            with _agent(url, scratch, clock) as agent:
                settings: dict[str, Any] = {"theme": theme} if theme else {}
                config = Config(socket=agent.socket, data_dir=scratch / "mine", bell=False,
                                **settings)
                client, words = attach(config)
                if client is None:
                    raise RuntimeError(f"screenshots: not attached: {words}")
                app = _shot_app(
                    agent=client, config=config,
                    wall=lambda: datetime.fromtimestamp(clock(), timezone.utc),
                    identity=Identity(user=account_name(os.getuid()), ssh_client="10.0.0.5",
                                      host="vm-web-0"))
                app.confirm_guard = 0.0  # the guard is real time; the pictures need none
                async with app.run_test(size=size) as pilot:
                    shooter = Shooter(app, pilot, emulator, clock, agent, out)
                    await shooter.settle()
                    await script(shooter)
                    return shooter.written
        finally:
            emulator.stop()


async def _up_to_main(s: Shooter) -> None:
    """The Freeze held through the API, a stall, then the clock on to MAIN_AT."""
    from setui.api.client import AgentClient

    freeze = s.event("Freeze", "web-0", "web-1")
    await s.advance_to(HOLD_AT)
    with AgentClient.connect(s.agent.socket) as client:
        client.hold(freeze.event_id)
    await s.wait_for(lambda: freeze.event_id in s.app.attached.plan.held, "the hold")
    await s.advance_to(STALL_AT)
    os.kill(s.agent.proc.pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(STALL_SECONDS)  # the stimulus: a gap the agent must measure
    finally:
        os.kill(s.agent.proc.pid, signal.SIGCONT)
    # Kept before the clock moves on: its start is counted back from the clock's time.
    with AgentClient.connect(s.agent.socket) as client:
        endpoint = client.hello.agent.endpoint
        await s.wait_for(lambda: bool(client.impacts(endpoint=endpoint, newest=1)),
                         "the agent to keep the stall")
    await s.advance_to(STALL_AT + 20)  # the agent ties the stall at its next poll
    await s.wait_for(lambda: any(e.what == "measured" for e in s.app.change_log.entries()),
                     "the stall in the change log")
    await s.advance_to(MAIN_AT)


async def _tour(s: Shooter) -> None:
    """The main screen, the approval dialog, then history and audit with records in."""
    from setui.ui.screens.audit import AuditScreen
    from setui.ui.screens.confirm import ConfirmationModal
    from setui.ui.screens.history import HistoryScreen, IncarnationScreen
    from setui.ui.screens.main import MainScreen

    await _up_to_main(s)
    await s.select(s.event("Reboot", "web-0"))
    await s.shoot("main")

    await s.advance_to(APPROVE_AT)
    terminate = s.event("Terminate", "web-3")  # a neighbour's: approved on its behalf
    await s.select(terminate)
    await s.press("a")
    await s.wait_for(lambda: isinstance(s.app.screen, ConfirmationModal), "the dialog")
    await s.shoot("approve")
    await s.press("y", "e", "s", "enter")  # not this VM's: the word "yes", typed

    def approved() -> bool:
        note = s.app.session.approvals.get(terminate.event_id)
        return note is not None and note.approved and not note.pending

    await s.wait_for(approved, "the approval's outcome")
    await s.wait_for(lambda: isinstance(s.app.screen, MainScreen), "the dashboard")
    await s.advance_to(APPROVE_AT + 5, step=5)  # the service starts it

    await s.press("h")
    await s.wait_for(lambda: isinstance(s.app.screen, HistoryScreen), "the history")
    await s.shoot("history-list")
    await s.press("enter")  # the newest incarnation: the Terminate started
    await s.wait_for(lambda: isinstance(s.app.screen, IncarnationScreen), "an incarnation")
    await s.shoot("history")
    await s.press("escape", "escape")
    await s.wait_for(lambda: isinstance(s.app.screen, MainScreen), "the dashboard")

    await s.press("l")
    await s.wait_for(lambda: isinstance(s.app.screen, AuditScreen), "the audit log")
    await s.shoot("audit")


async def _main_only(s: Shooter, name: str) -> None:
    await _up_to_main(s)
    await s.select(s.event("Reboot", "web-0"))
    await s.shoot(name)


async def take_screenshots(out: Path) -> list[Path]:
    """Write every screenshot into ``out``; return the files written. The tour picks
    events of the ``busy`` scenario by type and VM."""
    out.mkdir(parents=True, exist_ok=True)
    written = await _session(out, WIDE, _tour)
    written += await _session(out, NARROW, lambda s: _main_only(s, "main-80x24"))
    written += await _session(out, WIDE, lambda s: _main_only(s, "main-mono"),
                              theme="setui-mono")
    return written


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--pinned-agent"] and len(args_in) >= 3 and args_in[2] == "--":
        return _pinned_agent(Path(args_in[1]), args_in[3:])
    parser = argparse.ArgumentParser(prog="python tools/screenshots.py",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", nargs="?", default="screenshots", type=Path,
                        help="folder for the SVG files (default: screenshots)")
    args = parser.parse_args(args_in)
    _fixed_time_zone()
    os.environ.pop("NO_COLOR", None)  # the mono picture is asked for by name
    started = time.monotonic()
    written = asyncio.run(take_screenshots(args.out))
    print(f"{len(written)} screenshots in {args.out}/ in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
