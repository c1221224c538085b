"""``setui`` attached to the agent: the same dashboard, its news from the agent alone.

The agent is the VM's one poller, recorder and approver: this app asks IMDS nothing and
keeps no store. Its monitor is an :class:`~setui.api.attached.AttachedMonitor` (the
agent's state pushes), its approver an :class:`~setui.api.approving.AgentApprover` (the
agent approves, as the kernel says this user is; progress comes back to the same row and
notice line), its screens read the agent's record through the
:class:`~setui.api.client.AgentClient` it attached with (the Record a store answers too,
on threads), the agent's plan per event comes with its plan pushes, and ``H`` is the
agent's own hold and release. ``r`` asks nothing: it says what the agent last heard.
When the agent goes, the state is shown stale and the link says so; back, the approvals
whose answer was lost are looked up in its audit log.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path

from setui.agent.plan import event_plan as plan_of_steps
from setui.agent.plan import plan_words
from setui.api.approving import AgentApprover
from setui.api.attached import AttachedMonitor
from setui.api.client import AgentClient, ApiError, HoldAnswer
from setui.api.codec import Plan
from setui.approval.snapshot import find_event
from setui.core.clock import utc_now
from setui.core.impact import Impact
from setui.core.model import Document
from setui.core.textsafe import printable
from setui.core.timefmt import age
from setui.settings.config import Config
from setui.store.agent import HOLD, RELEASE, RUNNING
from setui.store.records import APPROVED, AuditRecord, Step
from setui.system.identity import Identity
from setui.ui.agentwindow import HELD_WORDS, RELEASED_WORDS, due_while_held, event_plan
from setui.ui.app import SetuiApp
from setui.ui.changelog import event_name
from setui.ui.format import safe
from setui.ui.host import LinkView, PlannedEvent, WindowView
from setui.ui.messages import ApprovalDone, ApprovalNote

__all__ = ["HOLDS_LOOKED_AT", "IMPACTS_LOOKED_AT", "AttachedApp", "hold_words"]

HOLDS_LOOKED_AT = 200  # the audit log's newest records read for who holds what
IMPACTS_LOOKED_AT = 20  # the newest stalls and boots read when the document changes


def hold_words(answer: HoldAnswer) -> str:
    """What the dashboard says of the agent's answer to ``H``: held or released, and
    when no rule of its policy acts on the event, that the hold changes nothing it does."""
    words = HELD_WORDS if answer.held else RELEASED_WORDS
    if not answer.acts:
        why = "no rule of the agent's policy applies to this event" if answer.rule is None \
            else f"its rule {safe(answer.rule, 80)} only watches and tells"
        words = (f"{'Held' if answer.held else 'Released'}, but {why}: the agent takes no "
                 "step for it, held or not.")
    if answer.running:
        words += f" Its {printable(answer.running, 40)} step, already running, goes on."
    return words


class AttachedApp(SetuiApp):
    """The dashboard over the agent ``agent`` greeted it as (see the module doc); the app
    reads the agent's record through it and closes it when it stops."""

    approver: AgentApprover  # what _approver() below builds for the shell

    def __init__(self, *, agent: AgentClient, config: Config,
                 clock: Callable[[], datetime] = utc_now,
                 mono: Callable[[], float] = time.monotonic, identity: Identity | None = None,
                 user_themes: Path | None = None, zoom: int | None = None,
                 config_path: Path | None = None, read_only_why: str | None = None) -> None:
        hello = agent.hello
        self.path = agent.path
        self._hello = hello
        self.agent = agent
        self._approvals_off: str | None = None
        # The status line names the endpoint the agent polls, whatever this user's is.
        config = replace(config, endpoint=hello.agent.endpoint)
        super().__init__(client=None, config=config, clock=clock, mono=mono,
                         identity=identity, user_themes=user_themes, zoom=zoom,
                         config_path=config_path, read_only_why=read_only_why)
        self.vm_name = config.vm_name or hello.agent.vm_name
        self.main_screen.attached = True  # its keys: H and the plan shown
        self._plan_seen: object = None  # the plan the change log took in last
        self._held_seen: frozenset[str] | None = None  # the holds looked up last
        self._incarnation_seen: int | None = None  # the document the impacts were read at
        self._looking = False  # a look at the audit log for holds is under way
        self._window: tuple[tuple[object, ...], WindowView, int, bool] | None = None

    # -- what the shell builds ------------------------------------------------------------
    def _monitor(self) -> AttachedMonitor:  # type: ignore[override]
        return AttachedMonitor(self.path, self._hello, state=self.session, mono=self._mono,
                               wall=self._clock, on_link=self._link_changed)

    def _approver(self) -> AgentApprover:  # type: ignore[override]
        return AgentApprover(self.agent, read_only=self.config.read_only,
                             hello=lambda: self.attached.hello, wall=self._clock)

    @property
    def attached(self) -> AttachedMonitor:
        assert isinstance(self.monitor, AttachedMonitor)
        return self.monitor

    def _greet(self) -> None:
        why = self.approvals_off
        if why is not None:
            self.notify(f"You may read here, not approve: {safe(why, 300)}",
                        title="Approvals", timeout=10, markup=False)

    async def _let_go(self) -> None:
        self.agent.close(bye=False)

    # -- what the status line and the keys say --------------------------------------------
    @property
    def link(self) -> LinkView:
        monitor = self.attached
        if monitor.lost is not None:
            return LinkView(monitor.link_words(), monitor.link_short(), lost=True)
        return LinkView(monitor.link_words(), monitor.link_short(), every=monitor.heard_every)

    @property
    def approvals_here(self) -> bool:
        """The rows show the agent's word on every approval (any user's, its policy's),
        each with who approved: not this dashboard's alone."""
        return False

    @property
    def approvals_off(self) -> str | None:
        return None if self.config.read_only else self.approver.why_not()

    @property
    def recorder_note(self) -> str | None:
        return None  # the agent records: the link says whose history it is

    @property
    def store_status(self) -> str | None:
        """Why the agent does not record the history now, in its words."""
        recording = self.attached.recording
        if recording is None or recording.recording:
            return None
        return f"the agent: {recording.problem or 'it keeps no store'}"

    @property
    def record(self) -> AgentClient:
        return self.agent

    # -- updates --------------------------------------------------------------------------
    def _taken(self) -> None:
        monitor = self.attached
        self.vm_name = self.config.vm_name or monitor.vm_name
        self._take_approvals()
        self._take_log()
        off = self.approvals_off
        if off != self._approvals_off:  # a new hello may say otherwise (approvers reread)
            self._approvals_off = off
            self.main_screen.refresh_bindings()

    def _take_log(self) -> None:
        """What the agent did since the last push, into the change log: approvals, each
        step begun or ended; a hold or release sends a look at the audit log for who."""
        monitor, log = self.attached, self.change_log
        if self._plan_seen is None and self.session.document is not None:  # attached now
            log.known(self.session.lives, self.session.gone, self.session.document,
                      self.vm_name)
        log.approved(monitor.approvals, self._event_name)
        plan = monitor.plan
        if plan is not self._plan_seen:
            self._plan_seen = plan
            log.planned(plan.steps, self.now(), self._event_name)
        document = self.session.document
        incarnation = document.incarnation if document is not None else None
        holds, news = plan.held != self._held_seen, incarnation != self._incarnation_seen
        if (holds or news) and not self._looking:
            self._held_seen, self._incarnation_seen = plan.held, incarnation
            self._looking = True
            self.run_worker(partial(self._read_log, holds, news), thread=True,
                            group="agent-log", exit_on_error=False)

    def _read_log(self, holds: bool, news: bool) -> None:
        """On a thread: the audit log's newest records, for who held and released; and,
        the document having changed, the stalls and boots the agent measured lately."""
        records: list[AuditRecord] = []
        impacts: list[Impact] = []
        with contextlib.suppress(ApiError), AgentClient.connect(self.path) as client:
            if holds:
                records = [r for r in client.audit(limit=HOLDS_LOOKED_AT)
                           if r.action in (HOLD, RELEASE)]
            if news:
                impacts = client.impacts(endpoint=self._hello.agent.endpoint,
                                         newest=IMPACTS_LOOKED_AT)
        with contextlib.suppress(RuntimeError):  # the app stopped meanwhile
            self.call_from_thread(self._log_read, records, impacts)

    def _log_read(self, records: list[AuditRecord], impacts: list[Impact]) -> None:
        self._looking = False
        self.change_log.audited(records, self._event_name)
        self.change_log.measured(impacts, self._event_name)
        self._take_log()  # what changed again meanwhile
        self.main_screen.refresh_view()

    def _event_name(self, event_id: str) -> tuple[str, bool]:
        """An event's name for the log ("Reboot F020BA2E"), and whether it is this VM's."""
        event = find_event(self.session.document, event_id)
        life = None if event is not None else next(
            (g.event for g in self.session.gone if g.event.event_id == event_id), None)
        event = event or life
        mine = event is not None and bool(self.vm_name) and event.affects(self.vm_name)
        return event_name(event, event_id), mine

    def window(self) -> WindowView:
        """The agent's plan for the current events that have one (this VM's first), and
        the change log: the same view while nothing it shows has changed, unless a step
        runs or an event is held (their words move with the clock)."""
        document, plan = self.session.document, self.attached.plan
        made = (document, plan, self.vm_name)
        last = self._window
        if last is not None and all(a is b for a, b in zip(made, last[0], strict=True)) \
                and self.change_log.version == last[2] and not last[3]:
            return last[1]
        view = self._make_window(document, plan)
        ticks = bool(plan.held) or any(s.state == RUNNING for s in plan.steps)
        self._window = (made, view, self.change_log.version, ticks)
        return view

    def _make_window(self, document: Document | None, plan: Plan) -> WindowView:
        now = self.now()
        steps: dict[str, list[Step]] = {}
        for step in plan.steps:
            steps.setdefault(step.event_id, []).append(step)
        planned = []
        for event in document.events if document is not None else ():
            held = event.event_id in plan.held
            if event.event_id not in steps and not held:
                continue
            hold = self.change_log.holds.get(event.event_id) if held else None
            shown = plan_of_steps(steps.get(event.event_id, ()), now=now)
            if shown is not None and held:
                shown = due_while_held(shown, event, now, hold)
            mine = bool(self.vm_name) and event.affects(self.vm_name)
            planned.append(PlannedEvent(event.event_id, event_name(event, event.event_id),
                                        mine, shown, held, hold))
        planned.sort(key=lambda p: not p.mine)  # this VM's first, else in document order
        return WindowView(attached=True, plans=tuple(planned), log=self.change_log)

    def _take_approvals(self) -> None:
        """The agent's word on who approved each current event (any client, its policy)
        shown on the row, unless this dashboard knows newer of it."""
        for event_id, record in self.attached.approvals.items():
            note = self.session.approvals.get(event_id)
            if record.result != APPROVED or (note is not None and (
                    note.pending or note.approved or note.at > record.time)):
                continue
            self.session.approvals[event_id] = ApprovalNote(
                event_id, record.time, record.user, approved=True,
                message=f"approved by {record.user} (the agent's audit log, record "
                        f"{record.seq})")

    def _link_changed(self, lost: bool, words: str) -> None:
        """The agent went, or is back: said once; back, what became of the approvals
        whose answer was lost is asked of its audit log."""
        said = safe(words, 300)
        self.notify(f"{said[:1].upper()}{said[1:]}.", severity="warning" if lost
                    else "information", timeout=10 if lost else 6, markup=False)
        if not lost:
            self.run_worker(self._look_up, thread=True, group="audit", exit_on_error=False)

    def _look_up(self) -> None:
        outcomes = self.approver.look_up()
        if outcomes:
            self.post_message(ApprovalDone(self.approvals.noted(outcomes)))

    def redraw(self) -> None:
        self.main_screen.refresh_view()  # the plan comes with the agent's pushes

    def poll_now(self) -> None:
        """``r``: nothing is asked of IMDS here; say what the agent last heard (or try to
        reach it again at once, while it is away)."""
        monitor = self.attached
        if monitor.lost is not None:
            monitor.poll_now()
            self.notify("Trying to reach the agent again now…", timeout=3, markup=False)
            return
        self.notify(self._heard(), title="The agent polls (this dashboard asks IMDS nothing)",
                    timeout=6, markup=False)

    def _heard(self) -> str:
        """What the agent last heard from IMDS, as far as its last word says."""
        monitor, state = self.attached, self.session
        health = monitor.health()
        every = f"it polls every {monitor.interval:g} s"
        if state.document is None or state.last_seen is None:
            return f"No answer yet ({health.state.value}); {every}."
        events = len(state.document.events)
        mine = sum(1 for e in state.document.events if e.affects(self.vm_name)) \
            if self.vm_name else 0
        old = age(max(0.0, (self.now() - state.last_seen).total_seconds()),
                  monitor.heard_every)
        text = (f"Its last answer, {old} old: incarnation {state.document.incarnation}, "
                f"{events} event{'' if events == 1 else 's'}")
        text += f" ({mine} for this VM)" if mine else ""
        reason = f" ({safe(health.last_error, 200)})" if health.last_error else ""
        return f"{text}; connection {health.state.value}{reason}; {every}."

    # -- the agent's plan and its hold ----------------------------------------------------
    def agent_plan(self, event_id: str | None) -> str:
        if event_id is None:
            return ""
        plan = self.attached.plan
        steps = [s for s in plan.steps if s.event_id == event_id]
        held, now = event_id in plan.held, self.now()
        event = find_event(self.session.document, event_id)
        shown = plan_of_steps(steps, now=now) if held and event is not None else None
        if shown is None or event is None:
            return event_plan(steps, held=held, now=now)
        # Held past its approve time: said as due, and by whom (as the pane says it).
        hold = self.change_log.holds.get(event.event_id)
        who = f"HELD by {hold.user}" if hold is not None else "HELD by a person"
        text = plan_words(due_while_held(shown, event, now, hold))
        return f"{who}; {text}"

    def toggle_hold(self, event_id: str) -> None:
        """``H``: the agent's own hold (or release) of the event, on a thread."""
        event = find_event(self.session.document, event_id)
        spelt = event.event_id if event is not None else event_id
        hold = spelt not in self.attached.plan.held
        self.run_worker(partial(self._hold, spelt, hold), thread=True, group="agent-hold",
                        exit_on_error=False)

    def _hold(self, event_id: str, hold: bool) -> None:
        try:
            with AgentClient.connect(self.path) as client:
                answer = client.hold(event_id) if hold else client.release(event_id)
        except ApiError as exc:
            words, severity = f"Not changed: {printable(exc.message, 300)}", "error"
        else:
            words, severity = hold_words(answer), "information"
        with contextlib.suppress(RuntimeError):  # the app stopped meanwhile
            self.call_from_thread(self.notify, words, severity=severity, timeout=6,
                                  markup=False)
