"""The dashboard app: a shell that renders the monitor's state and routes keys.

The :class:`~setui.monitor.Monitor` polls, keeps the service's clock, tracks the events'
lives and records the history on a thread of its own; the screens and widgets draw what
it knows; :class:`~setui.approval.approver.Approver` is the only way to an approval, asked
by the :class:`~setui.ui.approving.Approvals` the app owns (the dialog, the approval in a
worker). The app announces, rings the bell and answers what the screens ask: nothing
here waits on SQLite or the network on Textual's event loop. Everything that tells time
calls :meth:`SetuiApp.now`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker

from setui.approval.approver import Approver
from setui.core.apiversions import limits
from setui.core.clock import utc_now
from setui.core.health import Health
from setui.core.poller import Poller
from setui.monitor import Monitor
from setui.session import ThisVm
from setui.settings.config import Config, ConfigError, save_setting
from setui.system.identity import Identity
from setui.ui.agentwindow import AgentWindow
from setui.ui.approving import Approvals
from setui.ui.changelog import ChangeLog
from setui.ui.format import (
    Palette,
    announcement,
    combine,
    connection_announcement,
    poll_report,
    safe,
)
from setui.ui.host import LinkView, WindowView
from setui.ui.messages import ApprovalDone, EventRequest, PollUpdate, Session
from setui.ui.screens.confirm import GUARD_SECONDS
from setui.ui.screens.details import details_screen
from setui.ui.screens.help import HelpScreen
from setui.ui.screens.main import MainScreen
from setui.ui.shell import TerminalApp
from setui.ui.themes import (
    ThemeChosen,
    install_themes,
    theme_provider,
)
from setui.ui.widgets.notices import Noticed

if TYPE_CHECKING:
    from setui.api.approving import AgentApprover
    from setui.api.attached import AttachedMonitor
    from setui.core.client import ImdsClient
    from setui.store import Store
    from setui.store.reading import Record

__all__ = ["SetuiApp"]


class SetuiApp(TerminalApp):
    """``setui`` and ``setui demo``: the Scheduled Events dashboard."""

    CSS_PATH = "app.tcss"
    TITLE = "setui"
    replay_label: str | None = None  # live: no REPLAY badge
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),  # Ctrl+C too: see TerminalApp
    ]

    def __init__(self, *, client: ImdsClient | None, config: Config, store: Store | None = None,
                 store_problem: str | None = None, demo: bool = False,
                 clock: Callable[[], datetime] = utc_now,
                 mono: Callable[[], float] = time.monotonic, identity: Identity | None = None,
                 poll: bool = True, user_themes: Path | None = None,
                 zoom: int | None = None, config_path: Path | None = None,
                 read_only_why: str | None = None, standalone: str | None = None,
                 no_approvals: str | None = None) -> None:
        """``standalone``: this dashboard polls IMDS itself, and why when it was not asked
        to (setui.api.attach's words: "" when told to); None says nothing of it (the demo,
        tests). ``no_approvals``: why it may not approve, standalone (the agent should
        answer and does not: setui.api.attach). ``client`` is None only for a dashboard
        attached to the agent (ui.attached)."""
        super().__init__()
        self.config_path = config_path  # where a theme picked in the palette is saved
        self.client = client
        self.config = config
        self.store = store
        self.store_problem = store_problem
        self.demo = demo
        self._clock = clock
        self._mono = mono
        self.identity = identity or Identity.current()
        self._poll = poll
        self._user_themes = user_themes
        self.theme_names: list[str] = []  # setui's and the user's themes, for the palette
        self.session = Session()
        self.vm_name: str | None = config.vm_name
        self.palette = Palette()
        self.confirm_guard = GUARD_SECONDS
        self.bells = 0
        self.notices: deque[str] = deque(maxlen=500)  # "title: message", oldest first
        self.monitor: Monitor | AttachedMonitor = self._monitor()
        self._poll_worker: Worker[None] | None = None
        self.main_screen = MainScreen(self, zoom=zoom, read_only=config.read_only, mono=mono)
        self.approver: Approver | AgentApprover = self._approver()
        # Where read-only came from (the option, the config file), when the caller knows.
        read_only = (read_only_why or "the --read-only option, or read-only = true in the "
                     "config file") if config.read_only else None
        self.approvals = Approvals(self, self.approver, self.session, identity=self.identity,
                                   mono=mono, read_only=read_only, no_approvals=no_approvals)
        self.standalone = standalone
        self.title = "setui DEMO: the built-in emulator, not a real VM" if demo else "setui"
        self._report_poll = False  # r was pressed: say what the next answer was
        self.agent_window = AgentWindow(self, store, endpoint=config.endpoint,
                                        identity=self.identity)
        self.change_log = ChangeLog()  # what just happened, for the pane and `w`
        self._log_view = WindowView(attached=False, plans=(), log=self.change_log)

    def _approver(self) -> Approver:
        assert self.client is not None
        return Approver(self.client, None if self.store is None else self.store.audit_log,
                        endpoint=self.config.endpoint,
                        identity=self.identity, read_only=self.config.read_only,
                        store_problem=self.store_problem, wall=self.now)

    def _monitor(self) -> Monitor:
        assert self.client is not None
        return Monitor(self.client, endpoint=self.config.endpoint, interval=self.config.interval,
                       store=self.store, vm_name=self.vm_name, state=self.session,
                       command="setui demo" if self.demo else "setui (dashboard)",
                       wall=self._clock, mono=self._mono, on_store_problem=self._store_problem)

    @property
    def poller(self) -> Poller | None:
        """The monitor's poller; None attached to the agent (it polls)."""
        return self.monitor.poller

    def now(self) -> datetime:
        """The time every countdown, age and record uses: the service's time, carried on
        the monotonic clock between answers (see :class:`~setui.core.clock.ServiceClock`)."""
        return self.monitor.now()

    def health(self) -> Health:
        """The connection's health at this moment: "live" turns "stale" by itself."""
        return self.monitor.health()

    def stale(self) -> bool:
        """Whether the document shown is older than "live" allows."""
        return self.monitor.stale()

    @property
    def recorder_note(self) -> str | None:
        """Whether another recorder keeps the history while this dashboard is closed."""
        recorder = self.monitor.recorder
        if recorder is None:
            # A store it may only read is the agent's: the agent keeps its history.
            readonly = self.store is not None and self.store.readonly
            return "history: the agent's, read-only" if readonly else None
        if not recorder.others:
            return "history: only while open"  # no other recorder on this store
        other = recorder.others[-1]
        return f"recorder: pid {other.pid}"

    @property
    def link(self) -> LinkView | None:
        """"standalone": this dashboard polls IMDS itself (when the caller said so)."""
        return None if self.standalone is None else LinkView("standalone", "standalone")

    @property
    def approvals_here(self) -> bool:
        """Standalone, the rows show the approvals made in this dashboard alone."""
        return True

    @property
    def approvals_off(self) -> str | None:
        """Standalone: why approving here would go around the agent, if it would (the
        main screen knows read-only itself)."""
        return self.approvals.no_approvals

    @property
    def record(self) -> Record | None:
        """What the history, audit and details screens read: the store."""
        return None if self.store is None else self.store.record

    @property
    def store_status(self) -> str | None:
        """Why the history is not being recorded, or None when it is: why recording
        failed last, while it still fails; else why there is no store."""
        recorder = self.monitor.recorder
        if recorder is not None and recorder.problem:
            return recorder.problem
        if self.store is None:
            return self.store_problem or "no store is open"
        return None

    # -- start and stop ---------------------------------------------------------------------
    def get_default_screen(self) -> Screen[None]:
        return self.main_screen

    def on_mount(self) -> None:
        self._install_themes()
        self.theme_changed_signal.subscribe(self, lambda _theme: self._restyle())
        self._restyle()
        if self._poll:
            self._start_polling()
        self.set_interval(1.0, self.redraw, name="tick")
        self._check_size()
        self._greet()

    def _greet(self) -> None:
        """What a standalone dashboard says and starts once mounted: this VM's name asked
        of IMDS, what the configured api-version lacks, why it runs standalone, and a
        store it cannot write."""
        assert self.client is not None
        if not self.vm_name:
            self.run_worker(self._find_vm_name(), group="vm-name", exit_on_error=False)
        if self.store is not None:
            self.run_worker(self._find_vm_id(), group="vm-id", exit_on_error=False)
        lacks = limits(self.client.api_version)
        if lacks is not None:  # the commands say it on stderr (cli.py)
            self.notify(lacks, severity="warning", timeout=30, markup=False)
        if self.approvals_off and not self.config.read_only:  # why standalone, and so what
            self.notify(safe(self.approvals_off, 700), title="Approvals are off",
                        severity="warning", timeout=15, markup=False)
        elif self.standalone:  # why, when it was not asked for
            said = safe(self.standalone, 300)
            self.notify(f"{said[:1].upper()}{said[1:]}; this dashboard polls IMDS itself.",
                        timeout=8, markup=False)
        if self.store is None:
            self.notify(f"No history or audit log: {self.store_status}. Approvals are refused "
                        "until the audit log can be written.", severity="warning",
                        timeout=10, markup=False)

    async def on_unmount(self) -> None:
        if self._poll_worker is not None:
            self._poll_worker.cancel()
        await self.monitor.aclose()
        await self._let_go()

    async def _let_go(self) -> None:
        """What the monitor does not close itself (Textual calls every class's on_unmount:
        an app built on this one says what it holds here)."""
        if self.client is not None:
            await self.client.aclose()

    def _install_themes(self) -> None:
        self.theme_names, problems = install_themes(self, self.config.theme, self._user_themes)
        if problems:
            self.notify("\n".join(safe(p, 300) for p in problems), title="Theme problems",
                        severity="warning", timeout=15, markup=False)

    def on_theme_chosen(self, message: ThemeChosen) -> None:
        """Remember the palette's choice for the next start, off the event loop."""
        if self.config_path is None:
            return
        self.run_worker(partial(self._save_theme, self.config_path, message.name),
                        thread=True, group="config", exit_on_error=False)

    def _save_theme(self, path: Path, name: str) -> None:
        """On a thread: write the theme into the config file, and say where (or why not)."""
        try:
            save_setting(path, "theme", name)
        except ConfigError as exc:
            self.call_from_thread(self.notify, f"Theme {safe(name, 60)} is used now but not "
                                  f"saved: {safe(exc, 300)}", severity="warning",
                                  timeout=10, markup=False)
            return
        self.call_from_thread(self.notify, f"Theme {safe(name, 60)} saved to "
                              f"{safe(path, 200)}.", timeout=4, markup=False)

    def search_themes(self) -> None:
        """The palette's theme switcher, offering setui's and the user's themes rather
        than burying them among Textual's own."""
        self.push_screen(CommandPalette(providers=[theme_provider(self.theme_names)],
                                        placeholder="Search for themes…"))

    def _restyle(self) -> None:
        self.palette = Palette.from_variables(self.get_css_variables())
        self.main_screen.refresh_view()

    def _start_polling(self) -> None:
        self._poll_worker = self.run_worker(self._poll_loop(self.monitor), name="poll",
                                            group="poll", exclusive=True, exit_on_error=False)

    async def _poll_loop(self, monitor: Monitor | AttachedMonitor) -> None:
        try:
            async for update in monitor.updates():
                self.post_message(PollUpdate(update.result, update.announce,
                                             update.previous_state))
        except Exception as exc:  # the monitor is built never to end; if it does, say so
            self.notify(f"Polling stopped ({type(exc).__name__}: {safe(exc, 200)}). "
                        "Press r to start it again.", severity="error", timeout=60,
                        markup=False)

    async def _find_vm_name(self) -> None:
        """Ask IMDS until it names this VM (awaits only: the loop never blocks); until
        then the status line says the name is not known."""
        assert self.client is not None
        self.vm_name = await ThisVm(None).learn(self.client)
        self.monitor.vm_name = self.vm_name
        self.redraw()

    async def _find_vm_id(self) -> None:
        """Ask IMDS for the compute metadata until it answers: this VM's vmId keys the
        claims and the agent's steps and holds in the store (until then, the endpoint)."""
        assert self.client is not None
        vm_id = await ThisVm(None).learn_id(self.client)
        self.approver.vm_id = vm_id
        self.agent_window.learned(vm_id)

    def poll_now(self) -> None:
        """Ask the service at once (``r``); restarts polling if it had stopped."""
        if not self._poll:
            return
        if self._poll_worker is None or self._poll_worker.is_finished:
            self.monitor = self._monitor()  # the old one closed its recorder on the way out
            self._start_polling()
        else:
            self.monitor.poll_now()
        self._report_poll = True
        self.notify("Asking the service now…", timeout=2, markup=False)

    def redraw(self) -> None:
        document = self.session.document
        if document is not None and document.events:
            self.agent_window.read([e.event_id for e in document.events], self._mono())
        self.main_screen.refresh_view()

    # -- the agent ----------------------------------------------------------------------------
    def agent_plan(self, event_id: str | None) -> str:
        """What `setui agent` plans and does for the event ("" when nothing)."""
        return self.agent_window.text(event_id, self.now())

    def window(self) -> WindowView | None:
        """Standalone, the change log alone."""
        return self._log_view

    def toggle_hold(self, event_id: str) -> None:
        """``H``: hold or release the agent's automation for the event."""
        self.agent_window.toggle(event_id, self.session.document, self.now())

    # -- results ----------------------------------------------------------------------------
    def on_poll_update(self, message: PollUpdate) -> None:
        """Announce what the monitor saw (it already took the result), and redraw."""
        self.change_log.took(message.result.changes, self.vm_name)
        self._taken()
        said = [announcement(change, self.vm_name, self.now()) for change in message.announce]
        if message.previous_state is not None:
            said.append(connection_announcement(message.previous_state, self.session.health))
        item = combine([s for s in said if s is not None])
        if item is not None:  # one notice per answer, however much changed in it
            self.notify(item.text, title=item.title, markup=False, timeout=10 if item.mine
                        else 4, severity=item.severity)
        if self._report_poll:  # r asked: this is its answer (or the one it was folded in)
            self._report_poll = False
            report = poll_report(message.result, self.vm_name)
            self.notify(report.text, title=report.title, markup=False, timeout=4,
                        severity=report.severity)
        # The bell is for this VM's events; a neighbour's are news on the screen. With
        # the VM's name not known yet, every event might be this VM's.
        if message.announce and self.config.bell and (
                not self.vm_name or any(c.event is not None and c.event.affects(self.vm_name)
                                        for c in message.announce)):
            self.bell()
        self.redraw()

    def _taken(self) -> None:
        """The monitor took an update, about to be announced: an app built on this one
        reads what else it says here (Textual calls every class's message handler)."""

    def _store_problem(self, brief: str | None, full: str | None) -> None:
        """The recorder failed (``full`` says why) or recovered (both None)."""
        if full is not None:
            self.notify(f"Cannot record the history: {safe(full, 300)}", severity="error",
                        timeout=15, markup=False)
        else:
            self.notify("Recording the history again.", timeout=5, markup=False)
        self.redraw()

    def bell(self) -> None:
        self.bells += 1
        super().bell()

    def notify(self, message: str, *, title: str = "",
               severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """The dashboard's news, on its notice line and never over any screen (see
        setui.ui.widgets.notices); every notice is also kept in :attr:`notices`, as one
        may be gone before anyone reads it."""
        self.notices.append(f"{title}: {message}" if title else message)
        self.main_screen.show_news(message, title=title, severity=severity, timeout=timeout,
                                   markup=markup)

    def clear_notifications(self) -> None:
        """Textual's, and the notices on the dashboard's notice line."""
        super().clear_notifications()
        self.main_screen.clear_notices()

    def on_noticed(self, message: Noticed) -> None:
        """A screen answered a key with a notice of its own: kept with the rest."""
        self.notices.append(message.text)

    # -- what the screens ask -----------------------------------------------------------------
    # (setui.ui.messages: ApprovalRequested, HoldRequested, DetailsRequested, ...)
    def on_approval_requested(self, message: EventRequest) -> None:
        self.approvals.request(message.event_id)

    def on_approval_done(self, message: ApprovalDone) -> None:
        self.approvals.done(message)

    async def action_quit(self) -> None:
        """``q``, Ctrl+C and Ctrl+Q: the approvals' quit (it asks while one is in flight)."""
        self.approvals.quit()

    def on_hold_requested(self, message: EventRequest) -> None:
        self.toggle_hold(message.event_id)

    def on_details_requested(self, message: EventRequest) -> None:
        self.open_details(message.event_id)

    def on_poll_requested(self, _message: Message) -> None:
        self.poll_now()

    def on_history_requested(self, _message: Message) -> None:
        self.action_history()

    def on_audit_requested(self, _message: Message) -> None:
        self.action_audit()

    # -- other screens ----------------------------------------------------------------------
    def open_details(self, event_id: str) -> None:
        screen = details_screen(event_id, self.session, vm_name=lambda: self.vm_name,
                                clock=self.now, store=self.record,
                                store_problem=self.store_status,
                                terminate=self.config.terminate_notice)
        if screen is not None:
            self.push_screen(screen)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(read_only=self.config.read_only))

    def action_history(self) -> None:
        from setui.ui.screens.history import HistoryScreen

        self.push_screen(HistoryScreen(self.record, self.store_problem, clock=self.now,
                                       config=self.config, vm_name=self.vm_name))

    def action_audit(self) -> None:
        from setui.ui.screens.audit import AuditScreen

        self.push_screen(AuditScreen(self.record, self.store_problem))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # Textual's "Keys" lists the focused widget's generic bindings ("Page Left"):
        # setui's keys are in its help.
        yield from (c for c in super().get_system_commands(screen) if c.title != "Keys")
        yield SystemCommand("Keys", "setui's keys, and how to read the dashboard (?)",
                            self.action_help)
        if screen is self.main_screen:
            yield from self.main_screen.palette_commands()
        yield SystemCommand("Poll now", "Ask the metadata service at once (r)", self.poll_now)
        yield SystemCommand("History", "Past incarnations of the events document (h)",
                            self.action_history)
        yield SystemCommand("Audit log", "Who approved what, and when (l)", self.action_audit)
        yield SystemCommand("Help", "Every key, and how to read the dashboard (?)",
                            self.action_help)
