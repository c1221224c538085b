"""Replay (``setui replay``, ``p`` in the history): the dashboard as it was at a moment.

The screen is the main screen, drawn from a :class:`ReplayView` instead of the live
app: the session is rebuilt from the store for the cursor's moment (see
:mod:`setui.monitor.replay`), and the view's clock *is* that moment, so every countdown,
age and timeline is relative to it. There is no approve key at all, and no poll. The
record is read once, on a thread; moving the cursor folds it again in memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message

from setui.core.health import ConnectionState, Health
from setui.core.impact import impact_words
from setui.core.timefmt import time_of_day
from setui.monitor.replay import Moment, Recording, load_recording
from setui.store.records import APPROVE_OUTCOME, APPROVED, REFUSED, UNKNOWN, AuditRecord
from setui.ui.format import Palette
from setui.ui.messages import ApprovalNote, EventRequest, Session
from setui.ui.screens.details import details_screen
from setui.ui.screens.main import VIEW_KEYS, MainScreen
from setui.ui.screens.offloop import query_store

if TYPE_CHECKING:
    from setui.settings.config import Config
    from setui.store.reading import Record

__all__ = ["SPEEDS", "ReplayScreen", "ReplayView", "approval_notes"]

SPEEDS = (1, 10, 60)  # space cycles: paused, 1x, 10x, 60x, paused
_TICK = 0.25  # seconds between moves of the cursor while playing


def approval_notes(records: tuple[AuditRecord, ...]) -> list[ApprovalNote]:
    """The audit records as the dashboard's approval notes, oldest first: an accepted
    approval, a failed one, a refusal. An operator's "no" in the dialog changed nothing."""
    attempts = {r.seq: r for r in records}
    notes: list[ApprovalNote] = []
    for record in records:
        if record.event_id is None:
            continue
        if record.action == APPROVE_OUTCOME:
            attempt = attempts.get(record.attempt_seq or -1)
            user = attempt.user if attempt is not None else record.user
            ok, unknown = record.result == APPROVED, record.result == UNKNOWN
            words = (f"approved by {user}: HTTP {record.status}" if ok else
                     f"approval by {user}, {record.error}" if unknown
                     else f"approval failed: {record.error or f'HTTP {record.status}'}")
            notes.append(ApprovalNote(record.event_id, record.time, user, approved=ok,
                                      unknown=unknown, message=words))
        elif record.action == REFUSED:
            notes.append(ApprovalNote(record.event_id, record.time, record.user, refused=True,
                                      message=f"refused by setui: {record.error or 'no reason'}"))
    return notes


@dataclass
class ReplayView:
    """What the main screen reads of its host, answered from the record at the cursor."""

    config: Config
    vm_name: str | None
    demo: bool = False
    session: Session = field(default_factory=Session)
    moment: Moment | None = None
    at: datetime | None = None
    speed: int = 0  # 0: paused
    loaded: bool = False
    problem: str | None = None
    palette: Palette = field(default_factory=Palette)  # the app's theme, kept by the screen

    @property
    def replay_label(self) -> str:
        if self.at is None:
            return "REPLAY"
        return f"REPLAY {self.at:%b %d}"

    @property
    def store_status(self) -> str | None:
        """Shown on a line of its own: why nothing is known here, when nothing is; else
        the last stall or boot the agent measured up to a few minutes before."""
        if self.problem:
            return self.problem
        if self.moment is not None and self.moment.hole is None and self.moment.impacts:
            return f"measured: {impact_words(self.moment.impacts[-1], local=False)}"
        if self.moment is not None and self.moment.hole is not None:
            hole = self.moment.hole
            now = self.now()
            if hole.open:
                return (f"nothing has recorded since {time_of_day(hole.start, now)} UTC: "
                        "what changed since was not seen")
            return (f"nothing was recording from {time_of_day(hole.start, now)} to "
                    f"{time_of_day(hole.end, now)} UTC: what changed then was not seen")
        return None

    @property
    def link(self) -> None:
        """A replay shows the past: no agent, and nothing standalone, to speak of."""
        return None

    @property
    def approvals_here(self) -> bool:
        """The rows show the approvals recorded in the audit log, whoever made them (an
        operator, the agent's rules), each with who approved: "Approved", not "here"."""
        return False

    @property
    def approvals_off(self) -> None:
        return None  # a replay has no approve key at all

    @property
    def recorder_note(self) -> str | None:
        if not self.loaded:
            return "reading the record…"
        return f"playing {self.speed}x" if self.speed else "paused (space plays)"

    def now(self) -> datetime:
        """The cursor: every countdown is relative to it."""
        from setui.core.clock import utc_now

        return self.at if self.at is not None else utc_now()

    def health(self) -> Health:
        return self.session.health

    def stale(self) -> bool:
        return self.session.health.state is not ConnectionState.LIVE

    def agent_plan(self, event_id: str | None) -> str:
        """The agent's plan is now, not the moment's: a replay does not show it."""
        del event_id
        return ""

    def window(self) -> None:
        """Nor the change log of now: the replay's own timeline is the past."""
        return None


class ReplayScreen(MainScreen, inherit_bindings=False):
    """The dashboard at a past moment, with a time cursor and no way to approve."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "step(-1)", "Prev incarn.", key_display="←", priority=True),
        Binding("right", "step(1)", "Next", key_display="→", priority=True),
        Binding("left_square_bracket", "minute(-1)", "-1 min", key_display="[",
                priority=True),
        Binding("right_square_bracket", "minute(1)", "+1 min", key_display="]",
                priority=True),
        Binding("space", "play", "Play", priority=True),
        Binding("d", "details", "Details", key_display="⏎"),
        Binding("enter", "details", "Details", show=False),
        Binding("slash", "filter", "Filter", show=False),
        Binding("m", "this_vm", "This VM", show=False),
        *VIEW_KEYS,
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("q", "close", "Close"),
    ]

    def __init__(self, store: Record | None, config: Config, *, vm_name: str | None = None,
                 since: datetime | None = None, until: datetime | None = None,
                 at: datetime | None = None, endpoint: str | None = None,
                 store_problem: str | None = None,
                 mono: Callable[[], float] = time.monotonic) -> None:
        view = ReplayView(config, vm_name)
        super().__init__(view)
        self._view = view
        self._vm_name = vm_name  # as given (--vm-name); else the record's, at the cursor
        self._store = store
        self._range = (since, until, endpoint)
        self._wanted = at
        self._store_problem = store_problem
        self._mono = mono
        self.recording: Recording | None = None
        self._played_at: float | None = None

    @property
    def setui(self) -> ReplayView:
        return self._view

    def refresh_view(self) -> None:
        if self.is_mounted:  # in the theme of the app it is shown in
            self._view.palette = Palette.from_variables(self.app.theme_variables)
        super().refresh_view()

    # -- what the main screen's keys ask (setui.ui.messages): a replay answers them itself,
    # never the app it is shown in --------------------------------------------------------
    def on_approval_requested(self, message: EventRequest) -> None:
        message.stop()
        self.notify("A replay cannot approve: it shows the past.", severity="warning",
                    markup=False)

    def on_hold_requested(self, message: EventRequest) -> None:
        message.stop()
        self.notify("A replay cannot hold the agent: it shows the past.",
                    severity="warning", markup=False)

    def on_details_requested(self, message: EventRequest) -> None:
        message.stop()
        view = self._view
        screen = details_screen(message.event_id, view.session, vm_name=lambda: view.vm_name,
                                clock=view.now, store=None,
                                store_problem="a replay tells the life up to its moment "
                                "only; `setui history --event ID` has all of it",
                                terminate=view.config.terminate_notice)
        if screen is not None:
            self.app.push_screen(screen)

    def on_poll_requested(self, message: Message) -> None:
        message.stop()  # a replay does not poll

    def on_history_requested(self, message: Message) -> None:
        message.stop()  # not from a replay: it would show what came after the moment

    def on_audit_requested(self, message: Message) -> None:
        message.stop()  # not from a replay, for the same reason

    @property
    def moment(self) -> datetime | None:
        return self.setui.at

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(_TICK, self._tick, name="replay-tick")
        view = self.setui
        if self._store is None:
            view.problem = f"no record to replay: {self._store_problem or 'no store is open'}"
            view.loaded = True
            self.refresh_view()
            return
        store = self._store
        since, until, endpoint = self._range
        query_store(self, lambda: load_recording(store, since=since, until=until,
                                                 endpoint=endpoint),
                    self._loaded, self._failed, group="replay-load")

    def _failed(self, message: str) -> None:
        view = self.setui
        view.loaded, view.problem = True, f"cannot read the record: {message}"
        self.refresh_view()

    def _loaded(self, recording: Recording | None) -> None:
        view = self.setui
        view.loaded = True
        if recording is None:
            view.problem = "nothing was recorded in that time"
            self.refresh_view()
            return
        self.recording = recording
        # The status line names the endpoint the record is of, not the configured one.
        view.config = replace(view.config, endpoint=recording.endpoint)
        at = self._wanted
        if at is None:  # --from is a moment asked for; without it, the first events
            at = recording.start if self._range[0] is not None else recording.opening()
        self.go(recording.clamp(at))

    def go(self, at: datetime) -> None:
        """Put the cursor at ``at`` and draw the dashboard as it was then."""
        view = self.setui
        recording = self.recording
        if recording is None:
            return
        at = recording.clamp(at)
        session = Session()
        recording.state_at(at, session)
        moment = recording.moment(at)
        for note in approval_notes(moment.audit):
            session.note_approval(note)
        view.session, view.moment, view.at = session, moment, at
        view.vm_name = self._vm_name or recording.vm_name_at(at)
        self.refresh_view()

    def _empty_text(self, hidden: int, now: datetime) -> Text:
        view = self.setui
        if view.session.document is None:
            if not view.loaded:
                return Text("Reading the record…", style="bold")
            return Text(view.problem or "Nothing was recorded before this moment.",
                        style="bold")
        if not view.session.document.events and self.recording is not None:
            text = Text("Nothing scheduled here.\n", style="bold")
            following = self.recording.step(now, 1)
            text.append(f"→ next change, {time_of_day(following, now)} UTC" if following > now
                        else "Nothing changed after this in the record.")
            return text
        return super()._empty_text(hidden, now)

    # -- the cursor -------------------------------------------------------------------------
    def action_step(self, direction: int) -> None:
        if self.recording is not None and self.moment is not None:
            self.go(self.recording.step(self.moment, direction))

    def action_minute(self, direction: int) -> None:
        if self.moment is not None:
            self.go(self.moment + timedelta(minutes=direction))

    def action_play(self) -> None:
        view = self.setui
        order = (0, *SPEEDS)
        view.speed = order[(order.index(view.speed) + 1) % len(order)]
        self._played_at = self._mono() if view.speed else None
        self.refresh_view()

    def _tick(self) -> None:
        view = self.setui
        if not view.speed or self.moment is None or self._played_at is None:
            return
        mono = self._mono()
        elapsed, self._played_at = mono - self._played_at, mono
        self.advance(elapsed * view.speed)

    def advance(self, seconds: float) -> None:
        """Move the cursor on by ``seconds``; playing stops at the end of the record."""
        if self.moment is None or self.recording is None:
            return
        target = self.moment + timedelta(seconds=seconds)
        if target >= self.recording.end:
            self.setui.speed = 0
        self.go(target)

    def action_close(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.dismiss()
        else:
            self.app.exit()
