"""``Enter`` / ``d``: everything about one event, its life so far, and its raw JSON (``r``).

All of it is network or database text and is shown literally: rich ``Text`` only,
control characters neutralised by :func:`setui.textsafe.printable`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from setui.core.model import Event
from setui.textsafe import printable
from setui.ui.format import countdown, impact, is_this_vm, safe, utc_and_local
from setui.ui.messages import ApprovalNote, EventLife, Session

if TYPE_CHECKING:
    from setui.store import Store, StoryEntry

__all__ = ["DetailsScreen", "describe_event", "details_screen", "raw_json"]

_KNOWN = ("EventId", "EventType", "EventStatus", "NotBefore", "DurationInSeconds",
          "EventSource", "ResourceType", "Resources", "Description")
RAW_LINES = 500


def _when(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%H:%M:%S UTC")


def describe_event(event: Event, *, vm_name: str | None, now: datetime, present: bool,
                   life: EventLife | None = None, note: ApprovalNote | None = None,
                   story: Sequence[StoryEntry] = (), story_problem: str | None = None,
                   ) -> Text:
    """Every field, the life this session saw, and the stored story."""
    out = Text()

    def field(name: str, value: str, style: str = "") -> None:
        out.append(f"  {name:<18}", style="bold")
        out.append(value + "\n", style=style or None)

    out.append(f"{safe(event.event_type, 40)}  ", style="bold")
    out.append(safe(event.event_id, 80))
    if not present:
        out.append(f"  (no longer in the document: {life.fate if life and life.fate else 'gone'})",
                   style="bold")
    out.append("\n\nFields\n", style="bold underline")
    field("EventId", safe(event.event_id, 200))
    field("EventType", safe(event.event_type, 60) + ("" if event.event_type.known
                                                     else "  (a type setui does not know)"))
    field("EventStatus", safe(event.status, 60) + ("" if event.status.known
                                                   else "  (a status setui does not know)"))
    if event.not_before is not None:
        text = utc_and_local(event.not_before, now)
        if present:
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
    out.append(f"  {'Description':<18}", style="bold")
    out.append(safe(event.description, 2000) if event.description else "(absent)")
    out.append("\n")
    for key in sorted(k for k in (event.raw or {}) if k not in _KNOWN)[:50]:
        field(safe(key, 18), safe(json.dumps(event.raw[key], ensure_ascii=False), 200))

    out.append("\nIts life in this session\n", style="bold underline")
    if life is None:
        out.append("  not seen by this session\n")
    else:
        first = "in the first document setui saw" if life.initial else "appeared"
        out.append(f"  {_when(life.first_seen)}  {first} (incarnation {life.first_incarnation})"
                   "\n")
        if life.started_at is not None:
            how = "started" if life.started_exact else "already started when first seen"
            out.append(f"  {_when(life.started_at)}  {how}"
                       + (f" (incarnation {life.started_incarnation})"
                          if life.started_incarnation is not None else "") + "\n")
        for when, text in life.notes:
            out.append(f"  {_when(when)}  {printable(text, 300)}\n")
        if life.gone_at is not None:
            out.append(f"  {_when(life.gone_at)}  {life.fate or 'gone'}: left the document "
                       f"(incarnation {life.gone_incarnation})\n", style="bold")
    if note is not None and note.pending:
        out.append("  approval under way…\n", style="bold")

    out.append("\nFrom the history and the audit log\n", style="bold underline")
    if story_problem:
        out.append(f"  not available: {printable(story_problem, 300)}\n")
    elif not story:
        out.append("  nothing recorded about this event\n")
    for entry in story[-100:]:
        where = f" #{entry.incarnation}" if entry.incarnation is not None else ""
        out.append(f"  {entry.time.astimezone(timezone.utc).strftime('%Y-%m-%d %H:%M:%S')}"
                   f"{where}  {printable(entry.kind, 20)}")
        if entry.detail:
            out.append(f"  {printable(entry.detail, 300)}")
        out.append("\n")
    out.append("\nr: raw JSON   Escape: back\n", style="dim")
    return out


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
    out.append("\nr: fields   Escape: back\n", style="dim")
    return out


class DetailsScreen(ModalScreen[None]):
    """Details of one event; ``r`` switches between the fields and the raw JSON."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("d", "close", "Back", show=False),
        Binding("r", "raw", "Raw JSON"),
        Binding("j", "scroll(1)", "Down", show=False),
        Binding("k", "scroll(-1)", "Up", show=False),
    ]

    def __init__(self, title: str, body: Text, raw: Text) -> None:
        super().__init__()
        self._title = title
        self._body = body
        self._raw = raw
        self.showing_raw = False

    def compose(self) -> ComposeResult:
        yield Static(Text(self._title), id="details-title")
        with VerticalScroll(id="details"):
            yield Static(self._body, id="details-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#details", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss()

    def action_raw(self) -> None:
        self.showing_raw = not self.showing_raw
        self.query_one("#details-body", Static).update(
            self._raw if self.showing_raw else self._body)
        self.query_one("#details", VerticalScroll).scroll_home(animate=False)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#details", VerticalScroll).scroll_relative(y=lines, animate=False)


def details_screen(event_id: str, session: Session, *, vm_name: str | None, now: datetime,
                   store: Store | None, store_problem: str | None) -> DetailsScreen | None:
    """The details of an event in the document, or of one gone this session."""
    document = session.document
    event = document.event(event_id) if document is not None else None
    present = event is not None
    if event is None:
        gone = next((g for g in session.gone if g.event.event_id == event_id), None)
        if gone is None:
            return None
        event = gone.event
    story: list[StoryEntry] = []
    problem = store_problem if store is None else None
    if store is not None:
        from setui.store import StoreError

        try:
            story = store.event_story(event_id)
        except StoreError as exc:
            problem = str(exc)
    body = describe_event(event, vm_name=vm_name, now=now, present=present,
                          life=session.lives.get(event_id),
                          note=session.approvals.get(event_id), story=story,
                          story_problem=problem)
    title = f"Event {safe(event.event_type, 24)} {safe(event.event_id, 40)}"
    return DetailsScreen(title, body, raw_json(event))
