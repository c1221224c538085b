"""The dashboard screen: status line, events table, selected event, timeline, footer.

The screen holds only view state (the filter and this-VM-only, reactives it watches;
the selection); the session is its host's, a read-only view (:class:`DashboardHost`) it
is given, never the app class. What a key asks of the app (approve, hold, details,
poll, history, audit) goes up as a message (setui.ui.messages), so the live dashboard
and a replay answer the same screen each in its own way.
:meth:`MainScreen.refresh_view` recomputes every text from the session and the clock,
and each widget repaints only what changed, so calling it once a second costs next to
nothing when nothing happens.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from setui.core.health import ConnectionState
from setui.core.model import Event
from setui.core.order import sort_key
from setui.core.timefmt import age, local_differs, time_of_day, utc_time
from setui.ui.format import (
    Palette,
    Urgency,
    approved_label,
    countdown,
    impact,
    resources_summary,
    safe,
)
from setui.ui.messages import (
    ApprovalNote,
    ApprovalRequested,
    AuditRequested,
    DetailsRequested,
    HistoryRequested,
    HoldRequested,
    PollRequested,
    Session,
)
from setui.ui.themes import MONO_THEME
from setui.ui.widgets.events import EventsTable, Row, columns_for, tier_for
from setui.ui.widgets.keys import KeyBar
from setui.ui.widgets.notices import NoticeLine, Notices, give_notice
from setui.ui.widgets.status import StatusBar, StatusView
from setui.ui.widgets.summary import EventSummary
from setui.ui.widgets.timeline import ZOOMS, Lane, Timeline
from setui.ui.widgets.window import WindowPane

if TYPE_CHECKING:
    from setui.ui.host import DashboardHost

__all__ = ["VIEW_KEYS", "MainScreen", "build_lanes", "build_rows", "matches", "share_height"]

_RESOURCE_WIDTH = {"wide": 16, "medium": 16, "narrow": 13}
_SUMMARY_LINES = 3  # a rule and two lines
_TIMELINE_FRAME = 2  # its rule and its axis
_FOOTER_LINES = 1
_EMPTY_LINES = 5  # "No scheduled events" and its padding, when the table is hidden
_ROOM_FOR_NOT_BEFORE = 72  # columns: below, the table leaves out its NotBefore column


def share_height(lines: int, *, rows: int, lanes: int) -> tuple[int, int]:
    """Split ``lines`` between the table (a header and ``rows``) and the timeline's lanes.

    Both get what they need when it fits. When it does not, the table keeps at least half
    (its rows are what the operator acts on) and the timeline gets the rest, at least one
    lane; with no rows the "No scheduled events" text keeps four lines.
    """
    table_want = rows + 1 if rows else 4
    table_min = min(table_want, max(4, lines // 2))
    lane_lines = max(1, min(lanes, lines - table_min))
    return max(lines - lane_lines, 3), lane_lines


def matches(event: Event, text: str) -> bool:
    """Whether the filter text occurs in any field of the event (case ignored)."""
    if not text:
        return True
    haystack = " ".join([event.event_type, event.status, event.event_id, *event.resources,
                         event.description or "", event.source or ""]).casefold()
    return text.casefold() in haystack


def _approval_cell(note: ApprovalNote | None, tier: str, now: datetime) -> Text:
    if note is None:
        return Text()
    if note.pending:
        return Text(note.in_flight(now, short=True), style="bold")
    if note.approved:
        if tier == "narrow":
            return Text(approved_label(note.at, note.user, short=True), style="bold")
        return Text(f"{utc_time(note.at)} by {safe(note.user, 10)}", style="bold")
    if note.unknown:  # a try may have arrived: not "failed", and not approved either
        if tier == "narrow":
            return Text("? unknown", style="bold")
        return Text(f"? unknown {note.at.astimezone(timezone.utc):%H:%M}", style="bold")
    if not note.refused:
        if tier == "narrow":  # the reason and the time are in the summary under the table
            return Text("✗ failed", style="bold")
        return Text(f"✗ failed {note.at.astimezone(timezone.utc):%H:%M}", style="bold")
    return Text()


def _countdown_cell(label: str, style: str, stale: bool, palette: Palette) -> Text:
    if not stale:
        return Text(label, style=style)
    # The count goes on in the service's clock, but what it counts down to is old news.
    return Text(f"{label}?", style=palette.soon)


def _type_style(mine: bool, urgency: Urgency, loud: str, row_style: str) -> str:
    if not mine:
        return row_style
    return loud if urgency is Urgency.STARTED else "bold"


@functools.lru_cache(maxsize=512)
def _cell(plain: str, style: str) -> Text:
    """A cell's text that stays the same from one second to the next (a type, a time of
    day, a resource list), made once: shared between rows and calls, so read-only. The
    table compares a row's cells every second, and the same object compares at once."""
    return Text(plain, style=style)


def build_rows(events: Sequence[Event], session: Session, vm_name: str | None, now: datetime,
               palette: Palette, tier: str, *, stale: bool = False) -> list[Row]:
    """The table's rows, in the order given; texts cut to fit their columns. ``stale``:
    the document is older than "live" allows, so every countdown says so (the event may
    have started, or gone, since). The texts are shared between calls: read-only."""
    rows: list[Row] = []
    for event in events:
        life = session.lives.get(event.event_id)
        mine = event.affects(vm_name)
        cd = countdown(event, now, started_at=life.started_at if life else None,
                       started_exact=life.started_exact if life else True)
        row_style = "" if mine else palette.secondary
        loud = palette.for_urgency(cd.urgency) if mine else ""
        nb = event.not_before
        cells = {
            "type": _cell(safe(event.event_type, 12), _type_style(mine, cd.urgency, loud,
                                                                   row_style)),
            "status": _cell(safe(event.status, 12), row_style),
            "countdown": _countdown_cell(cd.label(loud=mine, short=tier == "narrow"),
                                         loud or row_style, stale, palette),
            "utc": _cell(time_of_day(nb, now) if nb else "—", row_style),
            "local": _cell(time_of_day(nb, now, None) if nb else "—", row_style),
            "impact": _cell(impact(event), row_style),
            "source": _cell(safe(event.source, 10) if event.source is not None else "—",
                            row_style),
            "resources": _cell(resources_summary(event.resources, vm_name,
                                                 _RESOURCE_WIDTH[tier]),
                               "bold" if mine else row_style),
            "approved": _approval_cell(session.approvals.get(event.event_id), tier, now),
        }
        rows.append(Row(event.event_id, cells))
    return rows


def build_lanes(events: Sequence[Event], session: Session, vm_name: str | None,
                now: datetime, selected: str | None,
                keep: Callable[[Event], bool]) -> list[Lane]:
    """Lanes for the shown events, then the gone ones (newest first) that ``keep``
    accepts."""
    lanes: list[Lane] = []
    for event in events:
        life = session.lives.get(event.event_id)
        lanes.append(Lane(
            key=event.event_id, event_type=event.event_type, this_vm=event.affects(vm_name),
            not_before=event.not_before, duration=event.duration,
            started_at=life.started_at if life and event.is_started else None,
            started_exact=life.started_exact if life else True,
            urgency=countdown(event, now).urgency if event.is_scheduled else Urgency.STARTED,
            selected=event.event_id == selected))
    for gone in session.gone:
        if not keep(gone.event):
            continue
        lanes.append(Lane(
            key=f"gone:{gone.event.event_id}:{gone.at.isoformat()}",
            event_type=gone.event.event_type, this_vm=gone.event.affects(vm_name),
            not_before=gone.event.not_before, duration=gone.event.duration,
            started_at=gone.started_at, gone_at=gone.at, fate=gone.fate))
    return lanes


# The timeline's zoom and the table's cursor: the same keys live and in a replay.
VIEW_KEYS: list[BindingType] = [
    Binding("plus", "zoom_in", "Zoom in", show=False),
    Binding("minus", "zoom_out", "Zoom out", show=False),
    Binding("j", "cursor_down", "Down", show=False),
    Binding("k", "cursor_up", "Up", show=False),
    Binding("g", "top", "First", show=False),
    Binding("G", "bottom", "Last", show=False),
]


class MainScreen(Screen[None]):
    """The dashboard."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # One key, two bindings: check_action offers the one that applies. Read-only,
        # a is not shown; where the agent says this user may not approve, it is shown
        # dimmed; either way pressing it says why.
        Binding("a", "approve", "Approve"),
        Binding("a", "approve_read_only", "Approve", show=False),
        # The bar keeps the keys in this order and drops them from the right where room
        # is short (widgets.keys). Attached, holding the agent is what only this
        # dashboard does: H comes next. Standalone it works too (through the store) but
        # is not shown: the agent this dashboard is not attached to may not be running.
        Binding("H", "hold", "Hold agent"),
        Binding("H", "hold_quietly", "Hold agent", show=False),
        Binding("d", "details", "Details", key_display="⏎"),
        Binding("enter", "details", "Details", show=False),
        # The plan and the log whole (attached), the log whole (standalone). One key:
        # the bar places it where its first binding is, in both modes.
        Binding("w", "window", "Plan+log"),
        Binding("w", "window_log", "Log"),
        Binding("slash", "filter", "Filter"),
        Binding("m", "this_vm", "This VM"),
        Binding("r", "poll_now", "Poll"),
        Binding("h", "history", "History"),
        Binding("l", "audit", "Audit"),
        *VIEW_KEYS,
        # Shown while a filter is open or set (see check_action): what Escape does then.
        Binding("escape", "clear_filter", "Clear filter"),
    ]

    # What hides rows; the view and the keys follow them however they are set.
    filter_text: reactive[str] = reactive("", init=False, bindings=True)
    this_vm_only: reactive[bool] = reactive(False, init=False, bindings=True)

    def __init__(self, host: DashboardHost, *, zoom: int | None = None,
                 read_only: bool = False, mono: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._host = host
        self.notices = Notices(mono)  # shown on this screen's notice line
        self.read_only = read_only  # approvals are off: no key for them (check_action)
        self._zoom = zoom  # the timeline's first zoom level (ZOOMS), None: its default
        self._tier: str | None = None
        # Attached to the agent (set by its app before mounting): the keys of that mode.
        self.attached = False

    @property
    def setui(self) -> DashboardHost:
        """The dashboard's state, as this screen reads it."""
        return self._host

    def watch_filter_text(self) -> None:
        self.refresh_view()

    def watch_this_vm_only(self) -> None:
        self.refresh_view()

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield EventsTable(id="events")
        yield Static(id="empty")
        yield EventSummary(id="summary")
        yield Timeline(id="timeline")
        yield WindowPane(id="window")
        yield Input(placeholder="filter: type, status, EventId, resource, description…",
                    id="filter")
        yield NoticeLine(self.notices)
        yield KeyBar()

    def on_mount(self) -> None:
        if self._zoom is not None:
            self.query_one(Timeline).zoom_level = max(0, min(self._zoom, len(ZOOMS) - 1))
        self.query_one(EventsTable).focus()
        self.refresh_view()

    # -- the view ---------------------------------------------------------------------------
    def visible_events(self) -> tuple[list[Event], int]:
        """The events to show, most urgent first, and how many the filters hid."""
        host = self.setui
        document = host.session.document
        if document is None:
            return [], 0
        seen: set[str] = set()
        events: list[Event] = []
        for event in document.events:
            if event.event_id not in seen:  # a duplicate EventId: the first one counts
                seen.add(event.event_id)
                events.append(event)
        shown = [e for e in events if self._keep(e)]

        def key(event: Event) -> tuple[object, ...]:
            life = host.session.lives.get(event.event_id)
            return sort_key(event, host.vm_name, started_at=life.started_at if life else None,
                            first_seen=life.first_seen if life else None)

        return sorted(shown, key=key), len(events) - len(shown)

    def _keep(self, event: Event) -> bool:
        if self.this_vm_only and not event.affects(self.setui.vm_name):
            return False
        return matches(event, self.filter_text)

    def refresh_view(self) -> None:
        """Recompute every text; widgets repaint only what changed."""
        if not self.is_mounted:
            return
        with contextlib.suppress(NoMatches):  # NoMatches: being torn down (quitting)
            self._refresh_view()

    def _refresh_view(self) -> None:
        host = self.setui
        now = host.now()
        palette = host.palette
        session = host.session
        width = self.size.width or self.app.size.width
        tier = tier_for(width)
        events, hidden = self.visible_events()
        table = self.query_one(EventsTable)
        health = host.health()
        columns = columns_for(tier, local=local_differs(now), here=host.approvals_here)
        if width < _ROOM_FOR_NOT_BEFORE:
            # The countdown says when; NotBefore itself is in the summary's second line.
            columns = [c for c in columns if c[0] != "utc"]
        table.sync(columns, build_rows(events, session, host.vm_name, now, palette,
                                       tier, stale=host.stale()))
        empty = self.query_one("#empty", Static)
        table.display = bool(events)
        empty.display = not events
        if events and self.focused is None:
            table.focus()  # a hidden table loses the focus; give it back when it shows
        if not events:
            empty.update(self._empty_text(hidden, now))
        selected = table.selected_key
        document = session.document
        event = document.event(selected) if document is not None and selected else None
        self._mark_selection(table, event, now)
        self.query_one(EventSummary).show(event, host.vm_name, now,
                                          session.approvals.get(selected or ""), palette,
                                          agent=host.agent_plan(selected) if event else "")
        status = self.query_one(StatusBar)
        status.show(StatusView(
            now=now, endpoint=host.config.endpoint, health=health,
            vm_name=host.vm_name, demo=host.demo, read_only=host.config.read_only,
            incarnation=document.incarnation if document is not None else None,
            last_seen=session.last_seen, store_problem=host.store_status,
            filter_text=self.filter_text, this_vm_only=self.this_vm_only,
            hidden=hidden, recorder=host.recorder_note,
            replay=host.replay_label, link=host.link), palette)
        lanes = build_lanes(events, session, host.vm_name, now, selected, self._keep)
        box = self.query_one("#filter", Input)
        height = self.size.height or self.app.size.height
        table_lines, lane_lines = share_height(
            height - (status.lines + _SUMMARY_LINES + _TIMELINE_FRAME + _FOOTER_LINES
                      + (1 if box.display else 0) + self.query_one(NoticeLine).lines),
            rows=len(events), lanes=len(lanes))
        timeline = self.query_one(Timeline)
        timeline.show(lanes, now, palette, max_lanes=lane_lines)
        # The table takes what the timeline leaves, so the summary and the timeline sit
        # right under its last row; the pane under them takes the free space, if any.
        table_room = table_lines + lane_lines - (timeline.lines - 1)
        table.fit(table_room)
        used = (status.lines + _SUMMARY_LINES + 1 + timeline.lines + _FOOTER_LINES
                + (1 if box.display else 0) + self.query_one(NoticeLine).lines
                + (min(len(events) + 1, max(table_room, 3)) if events else _EMPTY_LINES))
        self.query_one(WindowPane).show(host.window(), now, palette, height - used)

    def _mark_selection(self, table: EventsTable, event: Event | None, now: datetime) -> None:
        """The selection takes the colour of this VM's urgency (app.tcss): the cursor's
        colours would otherwise hide the red of the row that matters most. Not where no
        colour is shown (NO_COLOR, setui-mono): there the selection is reverse, and the
        row's `!!` says the urgency."""
        level = Urgency.CALM
        colour = not self.app.no_color and self.app.theme != MONO_THEME
        if colour and event is not None and event.affects(self.setui.vm_name):
            level = countdown(event, now).urgency
        table.set_class(level is Urgency.WARNING, "-selected-soon")
        table.set_class(level >= Urgency.CRITICAL, "-selected-urgent")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":  # nothing to clear: Escape is not offered
            return self._filtering()
        if action == "approve":  # dimmed where the agent says this user may not approve
            return False if self.read_only else None if self.setui.approvals_off else True
        if action == "approve_read_only":  # what a refused `a` runs: the app says why
            return self.read_only or bool(self.setui.approvals_off)
        if action in ("hold", "window"):  # the keys of the mode the dashboard is in
            return self.attached
        if action in ("hold_quietly", "window_log"):
            return not self.attached
        return True

    def _filtering(self) -> bool:
        if not self.is_mounted:
            return False
        return bool(self.filter_text) or self.query_one("#filter", Input).display

    def _empty_text(self, hidden: int, now: datetime) -> Text:
        session = self.setui.session
        if session.document is None:
            health = self.setui.health()
            if health.state is ConnectionState.ENABLING:
                text = Text("Waiting for the first answer from the metadata service…\n",
                            style="bold")
                text.append("The first call enables Scheduled Events on this VM and can take "
                            "up to 2 minutes.")
                return text
            # Failing: the status line above says why and when the next try is.
            text = Text("No answer from the metadata service yet.\n", style="bold")
            text.append("The line above says why and when the next try is; r tries now.")
            return text
        if hidden:
            why = []
            if self.this_vm_only:
                why.append("this VM only (m shows all)")
            if self.filter_text:
                why.append(f"filter “{safe(self.filter_text, 40)}” (Escape clears it)")
            return Text(f"No events to show: {hidden} hidden by {' and '.join(why)}.",
                        style="bold")
        health = self.setui.health()
        if health.state is not ConnectionState.LIVE and session.last_seen is not None:
            # Not "unchanged": nothing is known since the last answer, and how old it is.
            return self._old_news(session.document.incarnation, session.last_seen,
                                  health.state, now)
        text = Text("No scheduled events.\n", style="bold")
        since = session.incarnation_since
        line = f"Incarnation {session.document.incarnation}"
        if since is not None:
            seconds = max(0.0, (now - since).total_seconds())
            line += (f", unchanged since {time_of_day(since, now)} UTC "
                     f"({age(seconds)} ago).")
        if session.gone:
            last = session.gone[0]
            line += (f" Last change: {safe(last.event.event_type, 20)} {last.fate} at "
                     f"{time_of_day(last.at, now)} UTC.")
        text.append(line)
        return text

    def _old_news(self, incarnation: int, seen: datetime, state: ConnectionState,
                  now: datetime) -> Text:
        """An empty document that is not live: the last answer, its age, and why newer
        news may be missing."""
        old = age(max(0.0, (now - seen).total_seconds()))
        text = Text(f"No scheduled events in the last answer (incarnation {incarnation}, "
                    f"at {time_of_day(seen, now)} UTC, {old} old).\n", style="bold")
        why = ("Nothing was recording then" if self.setui.replay_label
               else f"The service is {state.value} now")
        text.append(f"{why}: events may have been scheduled since.")
        return text

    # -- notices ----------------------------------------------------------------------------
    def notify(self, message: str, *, title: str = "",
               severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """An answer to a key on this screen: on its notice line, never over it."""
        give_notice(self, self.notices, message, title=title, severity=severity,
                    timeout=timeout, markup=markup, own=True)

    def show_news(self, message: str, *, title: str = "",
                  severity: SeverityLevel = "information", timeout: float | None = None,
                  markup: bool = True) -> None:
        """The dashboard's news: on the notice line, waiting there while another screen
        is on top (its time counts from when it is seen)."""
        give_notice(self, self.notices, message, title=title, severity=severity,
                    timeout=timeout, markup=markup, own=False)

    def clear_notices(self) -> None:
        self.notices.clear()
        with contextlib.suppress(NoMatches):
            self.query_one(NoticeLine).show()

    def on_notice_line_resized(self) -> None:
        self.refresh_view()  # the table and the timeline share what the notices leave

    # -- events -----------------------------------------------------------------------------
    def on_resize(self) -> None:
        self.refresh_view()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.refresh_view()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_details()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not self.filter_text:
            self.query_one("#filter", Input).display = False
            self.refresh_bindings()
        self.query_one(EventsTable).focus()

    def palette_commands(self) -> list[SystemCommand]:
        """This screen's actions for the command palette (ctrl+p)."""
        approve = [] if self.read_only else [
            SystemCommand("Approve the selected event",
                          "Asks for confirmation first; recorded in the audit log (a)",
                          self.action_approve)]
        return [
            *approve,
            SystemCommand("Hold or release the agent for the selected event",
                          "setui agent takes no step for it while held; audit-logged (H)",
                          self.action_hold),
            SystemCommand("The agent's plan and the change log" if self.attached
                          else "The change log",
                          "What the agent plans and what just happened, whole (w)"
                          if self.attached else "What just happened, whole (w)",
                          self.action_window),
            SystemCommand("Details of the selected event",
                          "Every field, its life so far, raw JSON (Enter, d)",
                          self.action_details),
            SystemCommand("Filter events", "Show only rows containing a text (/)",
                          self.action_filter),
            SystemCommand("This VM only", "Toggle showing only this VM's events (m)",
                          self.action_this_vm),
            SystemCommand("Zoom the timeline in", "Less time, more detail (+)",
                          self.action_zoom_in),
            SystemCommand("Zoom the timeline out", "More time, less detail (-)",
                          self.action_zoom_out),
        ]

    # -- actions ----------------------------------------------------------------------------
    def _selected(self) -> str | None:
        return self.query_one(EventsTable).selected_key

    def _request(self, request: Callable[[str], Message]) -> None:
        """Ask the app for ``request`` on the selected event; say so where none is."""
        selected = self._selected()
        if selected is None:
            self.notify("No event is selected.", severity="warning", markup=False)
        else:
            self.post_message(request(selected))

    def action_approve(self) -> None:
        self._request(ApprovalRequested)

    def action_approve_read_only(self) -> None:
        """``a`` in a read-only dashboard: the app says why nothing is approved."""
        self.action_approve()

    def action_hold(self) -> None:
        self._request(HoldRequested)

    def action_hold_quietly(self) -> None:
        """``H`` standalone: the same hold, through the store the agent reads."""
        self.action_hold()

    def action_window(self) -> None:
        """``w``: the plan and the change log whole, scrollable."""
        from setui.ui.screens.window import WindowScreen

        host = self.setui
        self.app.push_screen(WindowScreen(host.window, host.now, lambda: host.palette))

    def action_window_log(self) -> None:
        """``w`` standalone: the change log whole."""
        self.action_window()

    def action_details(self) -> None:
        selected = self._selected()
        if selected is not None:
            self.post_message(DetailsRequested(selected))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()
        self.refresh_bindings()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if not box.display and not self.filter_text:
            return
        box.value = ""
        box.display = False
        self.filter_text = ""
        self.refresh_bindings()
        self.query_one(EventsTable).focus()

    def action_this_vm(self) -> None:
        vm_name = self.setui.vm_name
        if not self.this_vm_only and not vm_name:
            self.notify("This VM's name is not known yet.", severity="warning", markup=False)
            return
        self.this_vm_only = not self.this_vm_only
        self.notify(f"Showing only the events that affect {safe(vm_name, 40)}."
                    if self.this_vm_only else "Showing all events.", timeout=3, markup=False)

    def action_poll_now(self) -> None:
        self.post_message(PollRequested())

    def action_history(self) -> None:
        self.post_message(HistoryRequested())

    def action_audit(self) -> None:
        self.post_message(AuditRequested())

    def action_zoom_in(self) -> None:
        if self.query_one(Timeline).zoom_in():
            self.refresh_view()

    def action_zoom_out(self) -> None:
        if self.query_one(Timeline).zoom_out():
            self.refresh_view()

    def action_cursor_down(self) -> None:
        self.query_one(EventsTable).action_cursor_down()

    def action_cursor_up(self) -> None:
        self.query_one(EventsTable).action_cursor_up()

    def action_top(self) -> None:
        self.query_one(EventsTable).move_cursor(row=0, animate=False)

    def action_bottom(self) -> None:
        table = self.query_one(EventsTable)
        table.move_cursor(row=max(table.row_count - 1, 0), animate=False)
