"""The history screen (``h``): past incarnations of the events document, newest first,
with the holes when nothing was recording and the stalls and boots the agent measured.

It opens fast whatever the size of the store: it reads one page of the newest
incarnations and the next page only when the cursor reaches the end. Enter opens one
incarnation: what changed since the previous one, field by field, and the raw document.
Everything that came from the network or the database is shown literally (rich ``Text``,
never markup) with control characters neutralised.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.color import Color, ColorParseError
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from setui.core.clock import utc_now
from setui.core.diff import diff_documents as compare_documents
from setui.core.diff import shown_value
from setui.core.holes import Hole, with_holes
from setui.core.impact import Impact, impact_words
from setui.core.model import Document, DocumentError, Event
from setui.core.textsafe import printable
from setui.core.timefmt import local_beside, stamp
from setui.settings.config import Config
from setui.ui.screens.listing import BACK_KEYS, CURSOR_KEYS, TableNavigation
from setui.ui.screens.offloop import query_store
from setui.ui.screens.replay import ReplayScreen
from setui.ui.screens.scrolled import ScrolledPage
from setui.ui.widgets.keys import KeyBar
from setui.ui.widgets.page import Page, raw

if TYPE_CHECKING:
    from setui.store import IncarnationRecord
    from setui.store.reading import Record

__all__ = ["DetailScreen", "DiffStyles", "HistoryScreen", "IncarnationScreen",
           "describe_incarnation", "diff_documents", "local_and_utc", "pretty_json"]

PAGE = 200
WIDE = 100  # columns from which the list has room for the local time beside UTC
RAW_LINES = 2000  # a hostile or huge document is cut here; `setui history` has it all
_FIELDS = ("EventType", "EventStatus", "NotBefore", "Resources", "ResourceType",
           "DurationInSeconds", "EventSource", "Description")


@dataclass(frozen=True)
class DiffStyles:
    """Rich styles for the diff; the markers (+ - ~ =) carry the meaning without them."""

    added: str = "bold"
    removed: str = "bold"
    changed: str = "bold"
    heading: str = "bold underline"
    quiet: str = "italic"

    @classmethod
    def from_theme(cls, variables: Mapping[str, str]) -> DiffStyles:
        """Colours from the app's current theme variables (``App.theme_variables``)."""

        def color(name: str) -> str:
            try:
                r, g, b = Color.parse(variables.get(name, "")).rgb
            except ColorParseError:
                return ""
            return f" rgb({r},{g},{b})"

        return cls(added="bold" + color("success"), removed="bold" + color("warning"),
                   changed="bold" + color("accent"))


def local_and_utc(moment: datetime) -> tuple[str, str]:
    """``("2024-05-01 12:03:22", "14:03:22")``: the UTC date and time, and the local time
    of day (``""`` where this machine's zone is UTC): the list's two time columns."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    utc = stamp(moment, local=False).removesuffix(" UTC")
    local = local_beside(moment).strip(" ()")
    return utc, local.rsplit(" ", 1)[0] if local else ""


def _why_removed(event: Event, fate: tuple[str, str] | None) -> str:
    kind, detail = fate or ("", "")
    if event.is_started:
        return "it had started, so it is over (completed)" + (f"; {detail}" if detail else "")
    if kind == "cancelled":
        return "it was still Scheduled and nothing was missed: Azure cancelled it"
    if kind == "gone":
        return f"it left unseen, so whether it ran is not known: {printable(detail, 300)}"
    return "it was still Scheduled when last recorded: cancelled, or it ran unseen"


def _when(moment: datetime) -> str:
    return stamp(moment)


def _field_order(raw: Mapping[str, Any]) -> list[str]:
    known = [name for name in _FIELDS if name in raw]
    return known + sorted(k for k in raw if k not in _FIELDS and k != "EventId")


def diff_documents(current: Document, previous: Document | None,
                   styles: DiffStyles | None = None,
                   fates: Mapping[str, tuple[str, str]] | None = None) -> Text:
    """A readable diff: events added, removed and changed (field by field), unchanged.

    ``fates``: how the history told each removed event's leaving (EventId -> kind,
    detail); a removal is told as "cancelled" only when the history proved it."""
    styles = styles or DiffStyles()
    out = Text()
    if previous is None:
        out.append("No earlier incarnation recorded: every event is shown as new.\n",
                   style=styles.quiet)
    diff = compare_documents(current, previous)
    added, removed, changed = diff.of("added"), diff.of("removed"), diff.of("changed")
    same = diff.unchanged
    if not diff.events:
        out.append("No event was added, removed or changed.\n")
    for item in added:
        out.append("+ added    ", style=styles.added)
        _event_heading(out, item.event)
        for name in _field_order(item.event.raw):
            out.append(f"    {name}: ")
            out.append(printable(shown_value(name, item.event.raw[name]), 300) + "\n")
    for item in removed:
        out.append("- removed  ", style=styles.removed)
        _event_heading(out, item.event)
        out.append(f"    {_why_removed(item.event, (fates or {}).get(item.event.event_id))}\n",
                   style=styles.quiet)
    for item in changed:
        out.append("~ changed  ", style=styles.changed)
        _event_heading(out, item.event)
        for name in _field_order(item.fields):
            was, now = item.fields[name]
            out.append(f"    {name}: ")
            out.append(printable(shown_value(name, was), 200))
            out.append(" -> ", style="bold")
            out.append(printable(shown_value(name, now), 200) + "\n")
    if same:
        out.append(f"= unchanged: {len(same)} event{'s' if len(same) != 1 else ''} ")
        out.append(printable(", ".join(e.event_id for e in same), 400) + "\n")
    extra = diff.duplicates
    if extra:
        out.append(f"! {extra} duplicate EventId entr{'ies' if extra > 1 else 'y'} in this "
                   "document; the first of each is compared\n", style="bold")
    return out


def _event_heading(out: Text, event: Event) -> None:
    out.append(printable(event.event_type, 40), style="bold")
    out.append(" ")
    out.append(printable(event.event_id, 80))
    out.append(f"  {printable(event.status, 40)}\n")


def pretty_json(raw_json: str, max_lines: int = RAW_LINES) -> Text:
    """The stored document, indented, each line made safe; cut after ``max_lines``."""
    try:
        lines = json.dumps(json.loads(raw_json), indent=2, ensure_ascii=False).splitlines()
    except (ValueError, RecursionError):
        lines = raw_json.splitlines()
    out = Text()
    for line in lines[:max_lines]:
        out.append_text(raw(printable(line, 2000)))
    if len(lines) > max_lines:
        out.append(f"... {len(lines) - max_lines} more lines (setui history shows all)\n",
                   style="italic")
    return out


def describe_incarnation(record: IncarnationRecord,
                         previous: IncarnationRecord | None,
                         previous_problem: str | None = None,
                         styles: DiffStyles | None = None) -> Text:
    """Everything about one stored incarnation, as safe text."""
    styles = styles or DiffStyles()
    out = Text()
    out.append(f"Incarnation {record.incarnation}\n", style="bold")
    out.append(f"first seen  {_when(record.first_seen)}\n")
    out.append(f"last seen   {_when(record.last_seen)}\n")
    out.append("endpoint    ")
    out.append(printable(record.endpoint, 200) + "\n")
    if record.changes:
        out.append("\nWhat happened\n", style=styles.heading)
        for change in record.changes:
            out.append(f"  {printable(change.kind, 20):<11} ")
            if change.event_id:
                out.append(printable(change.event_type or "", 20) + " ")
                out.append(printable(change.event_id, 80))
            if change.detail:
                out.append("  " + printable(change.detail, 300))
            out.append("\n")
    out.append("\n")
    if previous is not None:
        out.append(f"Changes since incarnation {previous.incarnation}, first seen "
                   f"{_when(previous.first_seen)}\n", style=styles.heading)
    else:
        out.append("Events\n", style=styles.heading)
        if previous_problem:
            out.append(f"The previous incarnation could not be read: {previous_problem}\n",
                       style="bold")
    try:
        current_doc = record.document()
        previous_doc = previous.document() if previous is not None else None
    except DocumentError as exc:
        out.append(f"The stored document cannot be read as events: {printable(exc, 300)}\n",
                   style="bold")
    else:
        fates = {c.event_id: (c.kind, c.detail) for c in record.changes if c.event_id}
        out.append_text(diff_documents(current_doc, previous_doc, styles, fates))
    out.append("\nRaw document\n", style=styles.heading)
    out.append_text(pretty_json(record.raw_json))
    return out


class DetailScreen(ScrolledPage):
    """A scrollable page of text with a title; Escape or q goes back."""

    SCROLLED = "#detail-scroll"
    BINDINGS: ClassVar[list[BindingType]] = [
        *BACK_KEYS,
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("g", "top", "Top", show=False),
        Binding("G", "bottom", "Bottom", show=False),
    ]
    DEFAULT_CSS = """
    DetailScreen #detail-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    DetailScreen #detail-scroll { padding: 0 1; overflow-x: auto; }
    """

    def __init__(self, title: str, body: Text) -> None:
        super().__init__()
        self._title = title
        self._body = body

    def compose(self) -> ComposeResult:
        yield Static(Text(self._title), id="detail-title")
        with VerticalScroll(id="detail-scroll"):
            yield Page(self._body, id="detail-body")
        yield KeyBar()

    def on_mount(self) -> None:
        self.page().focus()

    def on_resize(self) -> None:
        self.query_one(Page).refresh(layout=True)  # the prose wraps at the new width

    def action_back(self) -> None:
        self.dismiss()

    def action_scroll_down(self) -> None:
        self.page().scroll_down(animate=False)

    def action_scroll_up(self) -> None:
        self.page().scroll_up(animate=False)


class IncarnationScreen(DetailScreen):
    """One incarnation and its diff against the one before it."""

    def __init__(self, record: IncarnationRecord, previous: IncarnationRecord | None,
                 previous_problem: str | None = None, styles: DiffStyles | None = None) -> None:
        super().__init__(f"History › incarnation {record.incarnation}",
                         describe_incarnation(record, previous, previous_problem, styles))
        self.record = record


def _page(store: Record, size: int, last: IncarnationRecord | None, now: datetime
          ) -> tuple[list[IncarnationRecord], list[Hole | Impact]]:
    """One page of records, and the record's holes and measured stalls and boots from its
    oldest record up to the page before it (whose were listed with it): on the store's
    thread, never on the loop. ``now``: the host's time, where a hole still open ends."""
    page = list(store.history(limit=size, before=last))
    if not page:
        return page, []
    endpoints = sorted({r.endpoint for r in page})
    marks: list[Hole | Impact] = [hole for endpoint in endpoints
                                  for hole in store.holes(endpoint=endpoint, now=now)]
    # The page's stretch only (all that is older, on the last page): never everything.
    since = page[-1].first_seen if len(page) >= size else None
    marks += [impact for endpoint in endpoints
              for impact in store.impacts(endpoint=endpoint, since=since)]
    marks = [m for m in marks if last is None or m.start < last.first_seen]
    return page, sorted(marks, key=lambda mark: mark.start)


class HistoryScreen(TableNavigation):
    """Stored incarnations, newest first; pages in more as the cursor reaches the end."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *BACK_KEYS,
        Binding("enter", "open", "Open", priority=True),
        Binding("p", "replay", "Replay"),
        Binding("r", "reload", "Reload"),
        *CURSOR_KEYS,
    ]
    DEFAULT_CSS = """
    HistoryScreen #history-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    HistoryScreen #history-status { height: auto; max-height: 6; padding: 0 1; }
    HistoryScreen #history-status.problem { text-style: bold; color: $text-warning; }
    HistoryScreen #history-table { height: 1fr; }
    """

    def __init__(self, store: Record | None, problem: str | None = None,
                 page_size: int = PAGE, *, clock: Callable[[], datetime] = utc_now,
                 config: Config | None = None, vm_name: str | None = None) -> None:
        super().__init__()
        self.store = store
        self._clock = clock  # the host's time (the service's): where an open hole ends
        self.problem = problem
        self.page_size = page_size
        self._config = config or Config()  # for a replay (p): the endpoint, the theme
        self._vm_name = vm_name or self._config.vm_name
        self.records: list[IncarnationRecord] = []
        # The table's rows in order: records, the holes when nothing was recording, and
        # the stalls and boots the agent measured.
        self.rows: list[IncarnationRecord | Hole | Impact] = []
        self.exhausted = False
        self._loading = False  # a page is being read on the store's thread
        self.local_column = False

    def compose(self) -> ComposeResult:
        yield Static(Text("History: incarnations of the events document, newest first"),
                     id="history-title")
        yield Static(id="history-status")
        table: DataTable[Text] = DataTable(id="history-table", cursor_type="row",
                                           zebra_stripes=True)
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # UTC, as every time setui writes; the local time beside it only where it differs
        # and there is room: at 80 columns "what changed" needs the width more.
        self.local_column = self.app.size.width >= WIDE and bool(local_beside(utc_now()))
        table.add_column(Text("First seen (UTC)"), key="utc")
        if self.local_column:
            table.add_column(Text("Local"), key="local")
        table.add_column(Text("Incarn.", justify="right"), key="incarnation")
        table.add_column(Text("What changed"), key="summary")
        self.action_reload()
        table.focus()

    # Loading -------------------------------------------------------------------------

    def action_reload(self) -> None:
        self.query_one(DataTable).clear()
        self.records = []
        self.rows = []
        self.exhausted = False
        self._loading = False
        self._load_page()

    def _load_page(self) -> None:
        if self.exhausted or self._loading:
            return
        if self.store is None:
            self.exhausted = True
            reason = (self.problem or "no store is open").rstrip(".")
            self._say(f"History is not available: {reason}.", problem=True)
            return
        self._loading = True
        if not self.records:
            self._say("Loading the history…")
        store, size = self.store, self.page_size
        last, now = (self.records[-1] if self.records else None), self._clock()
        query_store(self, lambda: _page(store, size, last, now),
                    self._add_page, self._page_failed, group="history-page")

    def _page_failed(self, message: str) -> None:
        self._loading = False
        self._say(f"Could not read the history: {message}", problem=True)

    def _add_page(self, loaded: tuple[list[IncarnationRecord], list[Hole | Impact]]) -> None:
        page, holes = loaded
        self._loading = False
        self.exhausted = len(page) < self.page_size
        table = self.query_one(DataTable)
        for item in with_holes(page, holes, complete=self.exhausted):
            if isinstance(item, Hole):
                utc, local = local_and_utc(item.start)
                until = "until now" if item.open else f"to {stamp(item.end, local=False)}"
                table.add_row(Text(utc), *([Text(local)] if self.local_column else []),
                              Text("-", justify="right"),
                              Text(f"not recording from {stamp(item.start, local=False)} "
                                   f"{until}: changes then were not seen", style="italic"),
                              key=f"hole-{len(self.rows)}")
            elif isinstance(item, Impact):
                utc, local = local_and_utc(item.at)
                table.add_row(Text(utc), *([Text(local)] if self.local_column else []),
                              Text("-", justify="right"),
                              Text(f"measured: {impact_words(item, local=False)}",
                                   style="bold"),
                              key=f"impact-{len(self.rows)}")
            else:
                utc, local = local_and_utc(item.first_seen)
                table.add_row(Text(utc), *([Text(local)] if self.local_column else []),
                              Text(str(item.incarnation), justify="right"),
                              Text(printable(item.summary, 120)),
                              key=str(len(self.rows)))
                self.records.append(item)
            self.rows.append(item)
        self._show_count()

    def _show_count(self) -> None:
        count = len(self.records)
        if count == 0:
            self._say("No incarnations recorded yet. setui records each new events document "
                      "it sees, in the dashboard and in `setui watch`.")
        elif self.exhausted:
            self._say(f"{count} incarnation{'s' if count != 1 else ''}. "
                      "Enter: what changed, and the document; p: replay it.")
        else:
            self._say(f"The {count} newest incarnations; more load at the end of the list. "
                      "Enter: what changed, and the document; p: replay it.")

    def _say(self, message: str, *, problem: bool = False) -> None:
        status = self.query_one("#history-status", Static)
        status.update(Text(printable(message)))
        status.set_class(problem, "problem")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= len(self.rows) - 1 and not self.exhausted:
            self._load_page()

    # Actions -------------------------------------------------------------------------

    def _selected(self) -> IncarnationRecord | None:
        table = self.query_one(DataTable)
        if not 0 <= table.cursor_row < len(self.rows):
            return None
        row = self.rows[table.cursor_row]
        # A hole, a stall or a boot has nothing to open.
        return None if isinstance(row, (Hole, Impact)) else row

    def action_open(self) -> None:
        record = self._selected()
        if record is None or self.store is None:
            return
        store = self.store
        styles = DiffStyles.from_theme(self.app.theme_variables)

        def show(previous: IncarnationRecord | None, problem: str | None = None) -> None:
            self.app.push_screen(IncarnationScreen(record, previous, problem, styles))

        query_store(self, lambda: store.previous(record), show,
                    lambda message: show(None, message), group="history-open")

    def action_replay(self) -> None:
        """``p``: the dashboard as it was when this incarnation was first seen."""
        record = self._selected()
        if record is None:
            return
        self.app.push_screen(ReplayScreen(
            self.store, self._config, vm_name=self._vm_name, at=record.first_seen,
            endpoint=record.endpoint, store_problem=self.problem))
