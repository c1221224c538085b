"""``Enter`` / ``d``: everything about one event, its notice and what it did to the VM (as
the agent measured it), its life so far, and its raw JSON (``r``).

The screen follows the event while it is open (once a second, from the app's session):
an operator who leaves it up sees the countdown run and the event start or leave the
document, not a snapshot from when the key was pressed.

All of it is network or database text and is shown literally: rich ``Text`` only,
control characters neutralised by :func:`setui.core.textsafe.printable`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from rich.console import Console
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.widgets import Static

from setui.core.diff import field_time
from setui.core.impact import IMPACT_SOURCE
from setui.core.model import Event, is_this_vm
from setui.core.notice import (
    DEFAULT_TERMINATE_NOTICE,
    AdvanceNotice,
    measure_notice,
    notice_words,
    unwatched,
)
from setui.core.textsafe import printable
from setui.core.timefmt import stamp
from setui.ui.format import countdown, impact, safe
from setui.ui.messages import ApprovalNote, EventLife, GoneEvent, Session
from setui.ui.screens.offloop import query_store
from setui.ui.screens.scrolled import SCROLL_KEYS, ScrolledPage
from setui.ui.widgets.keys import KeyBar
from setui.ui.widgets.notices import NoticeLine, Notices, give_notice

if TYPE_CHECKING:
    from setui.store import StoryEntry
    from setui.store.reading import Record

__all__ = ["DetailsScreen", "DetailsView", "EventDetails", "clipboard_problem",
           "describe_event", "details_screen", "event_json", "event_notice", "raw_json"]

_KNOWN = ("EventId", "EventType", "EventStatus", "NotBefore", "DurationInSeconds",
          "EventSource", "ResourceType", "Resources", "Description")
RAW_LINES = 500
_LABEL = 20  # "  " and the 18-cell field name: where a field's value starts
_MOMENT = 16  # "  HH:MM:SS UTC  ": where a line of the event's life starts its text
_MIN_ROOM = 16  # narrower than this, a hanging indent would leave a ribbon: let it wrap
_CHROME = 4  # the body's padding and scrollbar, for the width before the first layout
# Text.wrap needs a console; only its measuring is used, so one quiet instance will do.
_MEASURE = Console(width=200, color_system=None, force_terminal=False, file=None)


def _when(moment: datetime) -> str:
    return stamp(moment, date=False)


def event_notice(event: Event, life: EventLife | None, story: Sequence[StoryEntry],
                 terminate: float = DEFAULT_TERMINATE_NOTICE) -> AdvanceNotice | None:
    """The event's notice (core.notice): from the record's story when it saw the event
    appear (it may have, before this session began), else from this session's life."""
    kind = event.event_type.value
    appeared = next((e for e in story if e.source == "history" and e.kind == "appeared"), None)
    if appeared is not None:
        started = next((e for e in story if e.source == "history" and e.kind == "started"),
                       None)
        return measure_notice(
            kind, first_seen=appeared.time,
            announced=field_time("NotBefore", appeared.not_before),
            appeared_started=appeared.status == "Started",
            unseen=unwatched(initial=appeared.initial, certain=appeared.certain),
            started_at=started.time if started is not None else None,
            started_exact=started is not None and started.certain, terminate=terminate)
    if life is None:
        return None
    return measure_notice(
        kind, first_seen=life.first_seen, announced=life.announced,
        appeared_started=life.appeared_started,
        unseen=unwatched(initial=life.initial, certain=life.appeared_certain),
        started_at=life.started_at, started_exact=life.started_exact, terminate=terminate)


def describe_event(event: Event, *, vm_name: str | None, now: datetime, present: bool,
                   life: EventLife | None = None, note: ApprovalNote | None = None,
                   story: Sequence[StoryEntry] = (), story_problem: str | None = None,
                   gone: GoneEvent | None = None, width: int | None = None,
                   terminate: float = DEFAULT_TERMINATE_NOTICE) -> Text:
    """Every field, its notice and what was measured of it, the life setui saw (its
    monitor's, continued from the record after a restart), and the stored story.

    The event's type and id are in the screen's title, so the body starts with the
    fields. ``width`` (cells) wraps long values under their own column (a hanging
    indent) instead of back under the field names, where they would read as a field.
    """
    out = Text()

    def field(name: str, value: str, style: str = "") -> None:
        out.append(f"  {name:<18}", style="bold")
        _hanging(out, Text(value, style=style), width, _LABEL)

    if not present:
        fate, at, incarnation = _fate(life, gone)
        when = f" at {_when(at)}" if at is not None else ""
        seen = f" (incarnation {incarnation})" if incarnation is not None else ""
        _hanging(out, Text(f"!! No longer in the document: {fate}{when}{seen}. Below is "
                           "its last known state.", style="bold"), width, 0)
        out.append("\n")
    out.append("Fields\n", style="bold underline")
    field("EventId", safe(event.event_id, 200))
    field("EventType", safe(event.event_type, 60) + (f"  ({event.effect})" if event.effect
                                                     else "  (a type setui does not know)"))
    status = safe(event.status, 60) + ("" if event.status.known
                                       else "  (a status setui does not know)")
    if present and event.is_started:  # how long it has been under way, ticking
        status += "  " + countdown(event, now, started_at=life.started_at if life else None,
                                   started_exact=life.started_exact if life else True).label()
    field("EventStatus", status)
    if event.not_before is not None:
        text = stamp(event.not_before)
        if present and not event.is_started:
            text += f"  {countdown(event, now).label()}"
        field("NotBefore", text)
    else:
        field("NotBefore", "(empty: the event has started)" if event.is_started else "(none)")
    raw_duration = event.raw.get("DurationInSeconds", None) if event.raw else event.duration
    field("DurationInSeconds", f"{safe(json.dumps(raw_duration), 40)}  → impact {impact(event)}")
    field("EventSource", safe(event.source, 60) if event.source is not None else "(absent)")
    field("ResourceType", safe(event.resource_type, 60) if event.resource_type else "(absent)")
    if event.resources:
        for index, name in enumerate(event.resources[:200]):
            label = "Resources" if index == 0 else ""
            field(label, safe(name, 120) + ("  ◀ this VM" if is_this_vm(name, vm_name) else ""),
                  "bold" if is_this_vm(name, vm_name) else "")
        if len(event.resources) > 200:
            field("", f"… and {len(event.resources) - 200} more")
    else:
        field("Resources", "(none listed)")
    touches = "yes" if event.affects(vm_name) else "no"
    field("Affects this VM", f"{touches} ({safe(vm_name, 60) if vm_name else 'name unknown'})")
    field("Description", safe(event.description, 2000) if event.description else "(absent)")
    for key in sorted(k for k in (event.raw or {}) if k not in _KNOWN)[:50]:
        field(safe(key, 18), safe(json.dumps(event.raw[key], ensure_ascii=False), 200))

    def moment(when: datetime, text: str, style: str = "") -> None:
        out.append(f"  {_when(when)}  ", style=style or None)
        _hanging(out, Text(text, style=style), width, _MOMENT)

    out.append("\nNotice and impact\n", style="bold underline")
    notice = event_notice(event, life, story, terminate)
    field("Notice", notice_words(notice) if notice is not None else "not known: not seen "
          "by this session, and no record of it", "bold" if notice and notice.short else "")
    measured = [e for e in story if e.source == IMPACT_SOURCE]
    for index, entry in enumerate(measured[-20:]):
        field("Impact" if index == 0 else "", printable(entry.detail, 300), "bold")
    if not measured:
        field("Impact", "no stall or boot recorded for it (the agent measures them while "
              "it runs)" if not story_problem else "see its life below")

    out.append("\nIts life as setui saw it\n", style="bold underline")
    if life is None:
        out.append("  not seen by this session\n")
    else:
        first = "in the first document setui saw" if life.initial else "appeared"
        moment(life.first_seen, f"{first} (incarnation {life.first_incarnation})")
        if life.started_at is not None:
            how = "started" if life.started_exact else "already started when first seen"
            moment(life.started_at, how + (f" (incarnation {life.started_incarnation})"
                                           if life.started_incarnation is not None else ""))
        for noted_at, text in life.notes:
            moment(noted_at, printable(text, 300))
    if not present:
        fate, at, incarnation = _fate(life, gone)
        seen = f" at incarnation {incarnation}" if incarnation is not None else ""
        if at is not None:
            moment(at, f"gone: {fate}, left the document{seen}", "bold")
        else:
            out.append(f"  gone: {fate}, left the document{seen}\n", style="bold")
    if note is not None and note.pending:
        out.append("  approval under way…\n", style="bold")

    out.append("\nFrom the history and the audit log\n", style="bold underline")
    if story_problem:
        out.append("  not available: ")
        _hanging(out, Text(printable(story_problem, 300)), width, 17)
    elif not story:
        out.append("  nothing recorded about this event\n")
    for entry in story[-100:]:
        where = f" #{entry.incarnation}" if entry.incarnation is not None else ""
        head = f"  {stamp(entry.time, local=False)}{where}  "
        out.append(head)
        text = printable(entry.kind, 20) + (f"  {printable(entry.detail, 300)}"
                                             if entry.detail else "")
        _hanging(out, Text(text), width, len(head))
    out.append("\nr: raw JSON   Escape: back\n", style="dim")
    return out


def _fate(life: EventLife | None, gone: GoneEvent | None,
          ) -> tuple[str, datetime | None, int | None]:
    """How, when and at which incarnation an event left the document, as far as known."""
    if life is not None and life.gone_at is not None:
        return _fate_words(life.fate), life.gone_at, life.gone_incarnation
    if gone is not None:
        return _fate_words(gone.fate), gone.at, gone.incarnation
    return _fate_words(None), None, None


def _fate_words(fate: str | None) -> str:
    """``gone`` means it left unseen: whether it ran is not known, and it never reads
    as cancelled."""
    if fate in (None, "gone"):
        return "gone unseen (whether it ran is not known)"
    return fate


def _hanging(out: Text, value: Text, width: int | None, indent: int) -> None:
    """Append ``value`` and a newline; wrapped to ``width`` cells with every line after
    the first starting ``indent`` cells in, under the value's first character."""
    room = (width or 0) - indent
    if width is None or room < _MIN_ROOM or value.cell_len <= room:
        out.append_text(value)
        out.append("\n")
        return
    for index, line in enumerate(value.wrap(_MEASURE, room, overflow="fold")):
        if index:
            out.append(" " * indent)
        line.rstrip()
        out.append_text(line)
        out.append("\n")


def raw_json(event: Event) -> Text:
    """The event as the service sent it, indented; every line made safe."""
    try:
        lines = json.dumps(dict(event.raw), indent=2, ensure_ascii=False).splitlines()
    except (TypeError, ValueError):
        lines = [repr(event.raw)]
    out = Text()
    out.append("Raw JSON of the event, as the service sent it\n\n", style="bold underline")
    for line in lines[:RAW_LINES]:
        out.append(printable(line, 2000) + "\n")
    if len(lines) > RAW_LINES:
        out.append(f"… {len(lines) - RAW_LINES} more lines\n", style="italic")
    out.append("\nr: fields   c: copy the JSON   Escape: back\n", style="dim")
    return out


def event_json(event: Event) -> str:
    """The event's JSON for the clipboard: the document as sent, indented, every character
    outside ASCII escaped (\\u009b, not the character), so a paste is the same JSON and
    cannot act on a terminal."""
    try:
        return json.dumps(dict(event.raw), indent=2, ensure_ascii=True)
    except (TypeError, ValueError):
        return json.dumps(repr(event.raw), ensure_ascii=True)


def clipboard_problem(environ: Mapping[str, str]) -> str | None:
    """Why the terminal's clipboard sequence (OSC 52) is known not to get through here,
    or None when it may: terminals that take it say nothing back, so setui can only say
    where it is known to be lost."""
    term = environ.get("TERM", "")
    if environ.get("TMUX"):
        return "tmux passes it on only with `set -g set-clipboard on`"
    if environ.get("STY") or term.startswith("screen"):
        return "GNU screen does not pass it on"
    if term == "linux":
        return "the Linux console has no clipboard"
    return None


@dataclass(frozen=True)
class DetailsView:
    """What the screen shows at one moment: its title, the fields and the raw JSON."""

    title: Text
    body: Text
    raw: Text


class EventDetails:
    """Builds an event's details from the live session, so the screen can follow the
    event: its countdown, its life, and its leaving the document.

    The store's story is read again only when the document's incarnation or this
    event's approval note changed: a query a second for a screen someone is reading
    would be waste, and nothing else adds to the story.
    """

    def __init__(self, event_id: str, session: Session, *, store: Record | None,
                 store_problem: str | None,
                 terminate: float = DEFAULT_TERMINATE_NOTICE) -> None:
        self.event_id = event_id
        self.session = session
        self.terminate = terminate  # a Terminate's documented notice (the config's)
        self.store = store
        self.store_problem = store_problem
        self._event: Event | None = None  # the last one seen, shown if it is forgotten
        self._story_key: object = None
        self._story: list[StoryEntry] = []
        self._story_problem: str | None = None
        self._asked: object = None  # the key of the read last handed out
        # A read of the story the screen should run on a thread: (key, query), or None.
        self.pending: tuple[object, Callable[[], list[StoryEntry]]] | None = None
        self._raw: tuple[Event, Text] | None = None  # the raw JSON of the event it is of

    def find(self) -> tuple[Event | None, bool, GoneEvent | None]:
        """(event, present in the document now, its GoneEvent if it left)."""
        document = self.session.document
        event = document.event(self.event_id) if document is not None else None
        if event is not None:
            self._event = event
            return event, True, None
        gone = next((g for g in self.session.gone if g.event.event_id == self.event_id), None)
        if gone is not None:
            self._event = gone.event
        return self._event, False, gone

    def view(self, *, now: datetime, vm_name: str | None, width: int | None) -> DetailsView:
        event, present, gone = self.find()
        if event is None:  # only before the first find(): details_screen checks that
            raise LookupError(self.event_id)
        life = self.session.lives.get(self.event_id)
        note = self.session.approvals.get(self.event_id)
        story, problem = self._read_story(note)
        title = Text(f"Event {safe(event.event_type, 24)} {safe(event.event_id, 40)}")
        if not present:
            title.append(f"  · gone: {_fate(life, gone)[0]}", style="bold")
        body = describe_event(event, vm_name=vm_name, now=now, present=present, life=life,
                              note=note, story=story, story_problem=problem, gone=gone,
                              width=width, terminate=self.terminate)
        # Events are immutable and a new document brings new ones: the same object means
        # the same JSON, so the dump is not redone every second.
        if self._raw is None or self._raw[0] is not event:
            self._raw = (event, raw_json(event))
        return DetailsView(title, body, self._raw[1])

    def _read_story(self, note: ApprovalNote | None) -> tuple[list[StoryEntry], str | None]:
        """The story as last read; when it may have grown, the read to make next is
        left in :attr:`pending` for the screen to run off the event loop."""
        document = self.session.document
        key = (document.incarnation if document is not None else None, note)
        if key != self._story_key and key != self._asked:
            if self.store is None:
                self._story_key = key
                self._story, self._story_problem = [], self.store_problem
            else:
                store, event_id = self.store, self.event_id
                self._asked = key
                self.pending = (key, lambda: list(store.event_story(event_id)))
                if self._story_key is None:
                    self._story_problem = "reading its story from the history…"
        return self._story, self._story_problem

    def take_story(self, key: object, story: list[StoryEntry] | None,
                   problem: str | None) -> None:
        """The answer to a read :attr:`pending` asked for."""
        self._story_key = key
        self._story, self._story_problem = story or [], problem


class DetailsScreen(ScrolledPage, ModalScreen[None]):
    """Details of one event, following it once a second; ``r`` switches between the
    fields and the raw JSON."""

    SCROLLED = "#details"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("d", "close", "Back", show=False),
        # One key, two bindings: check_action shows the one that says what r does now.
        Binding("r", "raw", "Raw JSON"),
        Binding("r", "fields", "Fields"),
        Binding("c", "copy", "Copy JSON"),
        *SCROLL_KEYS,
    ]

    def __init__(self, details: EventDetails, *, vm_name: Callable[[], str | None],
                 clock: Callable[[], datetime]) -> None:
        super().__init__()
        self.details = details
        self._clock = clock  # the dashboard's clock, or a replay's cursor
        self._vm_name = vm_name  # the host's: it may be learned while the screen is open
        self.showing_raw = False
        self._view: DetailsView | None = None
        self.notices = Notices()  # what c (copy) says, on the screen's notice line

    def compose(self) -> ComposeResult:
        # Built here, not on mount: the body is there as soon as the screen is.
        self._view = self._build(max(self.app.size.width - _CHROME, 20))
        yield Static(self._view.title, id="details-title")
        with VerticalScroll(id="details"):
            yield Static(self._view.body, id="details-body")
        yield NoticeLine(self.notices)
        yield KeyBar()

    def on_mount(self) -> None:
        self.page().focus()
        self.set_interval(1.0, self.refresh_details, name="details-tick")
        self.call_after_refresh(self.refresh_details)  # now the body's real width is known

    def on_resize(self) -> None:
        self.refresh_details()

    def now(self) -> datetime:
        """The host's clock, so the details and the dashboard agree on every countdown."""
        return self._clock()

    def _build(self, width: int | None) -> DetailsView:
        return self.details.view(now=self.now(), vm_name=self._vm_name(), width=width)

    def refresh_details(self) -> None:
        """Rebuild for the current time and document; redraw only what changed, so the
        scroll position and a reader's place are kept."""
        if not self.is_mounted:
            return
        body = self.query_one("#details-body", Static)
        width = body.size.width or max(self.app.size.width - _CHROME, 20)
        view = self._build(width)
        self._read_pending()
        old = self._view
        self._view = view
        if old is None or view.title != old.title:
            self.query_one("#details-title", Static).update(view.title)
        shown, before = ((view.raw, old.raw if old else None) if self.showing_raw
                         else (view.body, old.body if old else None))
        if shown != before:
            body.update(shown)

    def _read_pending(self) -> None:
        """Run the story's read the details asked for, on a thread; redraw with it."""
        pending, self.details.pending = self.details.pending, None
        if pending is None:
            return
        key, read = pending

        def done(story: list[StoryEntry]) -> None:
            self.details.take_story(key, story, None)
            self.refresh_details()

        def failed(message: str) -> None:
            self.details.take_story(key, None, message)
            self.refresh_details()

        query_store(self, read, done, failed, group="details-story")

    def notify(self, message: str, *, title: str = "",
               severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """An answer to a key on this screen: on its notice line, never over the
        details."""
        give_notice(self, self.notices, message, title=title, severity=severity,
                    timeout=timeout, markup=markup, own=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "raw":
            return not self.showing_raw
        if action == "fields":
            return self.showing_raw
        return True

    def action_raw(self) -> None:
        self._show(raw=True)

    def action_fields(self) -> None:
        self._show(raw=False)

    def action_copy(self) -> None:
        """``c``: the event's JSON to the terminal's clipboard (OSC 52), and what to do
        where that is known not to get through."""
        event, present, _gone = self.details.find()
        if event is None:
            return
        text = event_json(event)
        self.app.copy_to_clipboard(text)
        document = self.details.session.document
        fallback = (f"`setui history show {document.incarnation}` prints the whole document"
                    if present and document is not None else
                    f"`setui history --event {safe(event.event_id, 40)}` tells its story")
        problem = clipboard_problem(os.environ)
        if problem is None:
            self.notify(f"Copied the event's JSON ({len(text)} characters) through the "
                        f"terminal's clipboard sequence. Nothing in the clipboard? Your "
                        f"terminal does not take it: {fallback}.", title="Copied",
                        timeout=8, markup=False)
        else:
            self.notify(f"Sent the event's JSON to the terminal's clipboard, but {problem}. "
                        f"Else {fallback}.", title="Clipboard", severity="warning",
                        timeout=12, markup=False)

    def _show(self, *, raw: bool) -> None:
        self.showing_raw = raw
        # Raw JSON is never wrapped: a line is copied whole, and scrolls sideways.
        self.set_class(raw, "-raw")
        assert self._view is not None
        self.query_one("#details-body", Static).update(self._view.raw if raw
                                                       else self._view.body)
        self.page().scroll_home(animate=False)
        self.refresh_bindings()


def details_screen(event_id: str, session: Session, *, vm_name: Callable[[], str | None],
                   clock: Callable[[], datetime], store: Record | None,
                   store_problem: str | None,
                   terminate: float = DEFAULT_TERMINATE_NOTICE) -> DetailsScreen | None:
    """The details of an event in the document, or of one gone this session; None for
    an event this session does not know. ``terminate``: a Terminate's documented notice."""
    details = EventDetails(event_id, session, store=store,
                           store_problem=store_problem if store is None else None,
                           terminate=terminate)
    if details.find()[0] is None:
        return None
    return DetailsScreen(details, vm_name=vm_name, clock=clock)
