"""The audit screen (``l``): who approved what, when, and what the service answered.

The verify status of the hash chain is at the top, in words: "chain intact" or a loud
TAMPERED line naming the first bad record. Attempts are paired with their outcomes where
the log allows, so one row tells one approval. All values are shown literally.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from setui.core.textsafe import printable
from setui.core.timefmt import stamp
from setui.store.records import UNKNOWN, action_word
from setui.ui.screens.history import DetailScreen, local_and_utc, pretty_json
from setui.ui.screens.listing import BACK_KEYS, CURSOR_KEYS, TableNavigation
from setui.ui.screens.offloop import query_store
from setui.ui.widgets.keys import KeyBar

if TYPE_CHECKING:
    from setui.store import AuditRecord, VerifyResult
    from setui.store.reading import Record

__all__ = ["AuditRow", "AuditScreen", "describe_row", "pair_records"]

PAGE = 500
_SHORT_ID = 8
# Cells of "action and outcome" in the table: 21 lets all four columns (the time with
# its year) fit in 80 columns; each column more gives this one more, up to 60 (the
# details have it all anyway).
_WHAT_LIMIT = 21
_WHAT_MAX = 60
_ATTEMPT = "approve-attempt"
_OUTCOME = "approve-outcome"


@dataclass(frozen=True)
class AuditRow:
    """One line of the screen: an attempt with its outcome, or a record on its own."""

    record: AuditRecord
    outcome: AuditRecord | None = None

    @property
    def is_attempt(self) -> bool:
        return self.record.action == _ATTEMPT


def pair_records(records: Sequence[AuditRecord]) -> list[AuditRow]:
    """Pair each approve-outcome with its attempt: by ``attempt_seq`` where the outcome
    names it, else the latest earlier unpaired attempt on the same event and endpoint.

    ``records`` is newest first, as the store gives them; so is the result. An outcome
    whose attempt is not among ``records`` (older than the page) stays a row of its own.
    """
    rows: list[AuditRow] = []
    by_seq: dict[int, int] = {}
    pending: dict[tuple[Any, ...], list[int]] = {}
    for record in sorted(records, key=lambda r: r.seq):
        key = (record.event_id, record.endpoint)
        if record.action == _ATTEMPT:
            by_seq[record.seq] = len(rows)
            pending.setdefault(key, []).append(len(rows))
            rows.append(AuditRow(record))
            continue
        index: int | None = None
        if record.action == _OUTCOME:
            named = getattr(record, "attempt_seq", None)
            if named is not None:
                index = by_seq.get(named)
            elif pending.get(key):
                index = pending[key][-1]
        if index is not None and rows[index].outcome is None:
            rows[index] = AuditRow(rows[index].record, record)
            attempt = rows[index].record
            waiting = pending.get((attempt.event_id, attempt.endpoint), [])
            if index in waiting:
                waiting.remove(index)
        else:
            rows.append(AuditRow(record))
    return rows[::-1]


def _safe(value: Any, limit: int | None = None) -> str:
    """Like printable, but a field the record lacks shows as nothing, not "None"."""
    return "" if value is None else printable(value, limit)


def _latency(value: Any) -> str:
    if value is None:
        return ""
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else float(value)
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _outcome_text(row: AuditRow, limit: int | None = 40) -> Text:
    """"✓ 200 · 42 ms" or "× FAILED 400 Bad Request · 42 ms": words, not colour alone."""
    record = row.outcome or row.record
    if row.is_attempt and row.outcome is None:
        if getattr(row.record, "has_outcome", None) is False:
            # setui stopped between the POST and writing the answer down (the details say so).
            return Text("? outcome unknown", style="bold")
        return Text("? no outcome recorded", style="bold")
    status, error = getattr(record, "status", None), getattr(record, "error", None)
    parts = []
    status_text = _safe(status, 20)
    error_text = _safe(error, 1000)
    if status_text and not error_text.startswith(status_text):
        parts.append(status_text)
    if error_text:
        parts.append(error_text)
    latency = _latency(getattr(record, "latency", None))
    if latency:
        parts.append(latency)
    if getattr(record, "result", None) == UNKNOWN:  # a try may have arrived: not a failure
        return Text(printable("? " + " · ".join(parts), limit), style="bold")
    ok = not error and (status is None or str(status).startswith("2"))
    if not ok:
        text = "× " + ("FAILED " if record.action == _OUTCOME else "") + " · ".join(parts)
    else:
        text = ("✓ " if record.action == _OUTCOME else "") + " · ".join(parts)
    return Text(printable(text, limit), style="" if ok else "bold")


def _action_text(row: AuditRow) -> str:
    action = row.record.action
    return "approve" if action in (_ATTEMPT, _OUTCOME) else _safe(action_word(action), 20)


def _who(record: AuditRecord, *, short: bool = False) -> str:
    """``oncall@vm-web-0 (ssh 10.0.0.5)``; ``short``: user and host only, for the table
    (the SSH client is in the details)."""
    who = _safe(record.user, 16 if short else 40) or "?"
    if record.host:
        who += "@" + _safe(record.host, 16 if short else 60)
    if record.ssh_client and not short:
        who += f" (ssh {_safe(record.ssh_client, 60)})"
    return who


def _short_time(moment: Any) -> str:
    """``2024-05-14 09:31:00`` under a heading that says UTC: the one way times are
    written (core.timefmt), as the history's list does; the local time is in the
    details."""
    utc, _ = local_and_utc(moment)
    return utc


def _what_text(row: AuditRow, limit: int = _WHAT_LIMIT) -> Text:
    """``approve ✓ 200 · 42 ms``, ``cancelled``, ``refused × event has started``: the
    action and how it ended, cut to ``limit`` cells for the table."""
    text = Text(_action_text(row))
    outcome = _outcome_text(row, limit=limit - text.cell_len - 1)
    if outcome.plain:
        text.append(" ")
        text.append_text(outcome)
    return text


def _event_text(record: AuditRecord) -> str:
    """``Reboot 1a2b3c4d``: the type and the EventId's first 8 characters (a GUID's first
    group); the whole id is in the details."""
    short = _safe(record.event_id)[:_SHORT_ID]
    return f"{_event_type(record)} {short}".strip()


def _count_text(records: int, rows: int, exhausted: bool) -> str:
    """What the table holds, in words: rows shown and, when they differ, the records."""
    if records == 0:
        return ("No approvals recorded yet. Each approval, cancel and refusal is written "
                "here before anything is sent.")
    shown = f"{rows} row{'s' if rows != 1 else ''}"
    if rows != records:
        shown += f" from {records} records (attempt and outcome share a row)"
    if not exhausted:
        return f"The newest {shown}; older ones load at the end of the list. Enter: details."
    return f"{shown[:1].upper()}{shown[1:]}. Enter: details."


def _event_type(record: AuditRecord) -> str:
    snapshot = getattr(record, "event", None)
    if isinstance(snapshot, dict):
        return _safe(snapshot.get("EventType", ""), 20)
    return _safe(getattr(snapshot, "event_type", "") or "", 20)


def describe_row(row: AuditRow) -> Text:
    """Every field of an attempt (and its outcome), as safe text."""
    out = Text()
    for title, record in (("Record", row.record), ("Outcome", row.outcome)):
        if record is None:
            if row.is_attempt and getattr(row.record, "has_outcome", None) is False:
                out.append("No outcome was recorded for this attempt: setui stopped between "
                           "asking the service and writing its answer down, so whether the "
                           "approval reached the service is unknown.\n", style="bold")
            elif row.is_attempt:
                out.append("No outcome is recorded for this attempt.\n", style="bold")
            continue
        out.append(f"{title} #{record.seq}: {_safe(record.action, 40)}\n",
                   style="bold underline")
        fields = [
            ("time", stamp(record.time)),
            ("user", _safe(record.user, 200)),
            ("ssh client", _safe(record.ssh_client, 200)),
            ("host", _safe(record.host, 200)),
            ("endpoint", _safe(record.endpoint, 200)),
            ("event", _safe(record.event_id, 200)),
            ("event type", _event_type(record)),
            ("incarnation", _safe(getattr(record, "incarnation", None))),
            ("status", _safe(getattr(record, "status", None), 200)),
            ("error", _safe(getattr(record, "error", None), 1000)),
            ("latency", _latency(getattr(record, "latency", None))),
        ]
        details = getattr(record, "details", None) or {}
        if isinstance(details, dict):
            fields += [(_safe(key, 40), _safe(json.dumps(value, ensure_ascii=False,
                                                         default=str), 500))
                       for key, value in sorted(details.items())]
        for name, value in fields:
            if value:
                out.append(f"  {name:<12}")
                out.append(value + "\n")
        snapshot = getattr(record, "event", None)
        if snapshot:
            out.append("  event as shown when approved:\n")
            raw = snapshot if isinstance(snapshot, str) else json.dumps(
                getattr(snapshot, "raw", snapshot), ensure_ascii=False, default=str)
            out.append_text(pretty_json(raw, 200))
        out.append("\n")
    return out


class AuditScreen(TableNavigation):
    """The audit log, newest first, under the chain's verify status."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *BACK_KEYS,
        Binding("enter", "open", "Details", priority=True),
        Binding("r", "reload", "Reload and verify"),
        *CURSOR_KEYS,
    ]
    DEFAULT_CSS = """
    AuditScreen #audit-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    AuditScreen #audit-verify { height: auto; max-height: 4; padding: 0 1; text-style: bold; }
    AuditScreen #audit-verify.ok { color: $setui-ok; }
    AuditScreen #audit-verify.alarm {
        color: $setui-alarm-foreground; background: $setui-alarm-background;
        text-style: $setui-alarm-style;
    }
    AuditScreen #audit-status { height: auto; max-height: 4; padding: 0 1; }
    AuditScreen #audit-table { height: 1fr; }
    """

    def __init__(self, store: Record | None, problem: str | None = None,
                 page_size: int = PAGE) -> None:
        super().__init__()
        self.store = store
        self.problem = problem
        self.page_size = page_size
        self.limit = page_size
        self.rows: list[AuditRow] = []
        self.exhausted = False
        self._loading = False  # records are being read on the store's thread

    def compose(self) -> ComposeResult:
        yield Static(Text("Audit log: approvals, newest first"), id="audit-title")
        yield Static(id="audit-verify")
        yield Static(id="audit-status")
        yield DataTable(id="audit-table", cursor_type="row", zebra_stripes=True)
        yield KeyBar()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # Who did what comes before which event: at 80 columns the last column is the one
        # cut, and a shortened EventId (the full one is a key away) loses least.
        table.add_column(Text("When (UTC)"), key="time")
        table.add_column(Text("Action and outcome"), key="what")
        table.add_column(Text("Who"), key="who")
        table.add_column(Text("Event"), key="event")
        self.action_reload()
        table.focus()

    def action_reload(self) -> None:
        self.limit = self.page_size
        self._verify()
        self._load()

    def _verify(self) -> None:
        banner = self.query_one("#audit-verify", Static)
        banner.set_class(False, "ok")
        banner.set_class(False, "alarm")
        if self.store is None:
            reason = (self.problem or "no store is open").rstrip(".")
            banner.update(Text(printable(f"Audit log not available: {reason}.")))
            banner.set_class(True, "alarm")
            return
        banner.update(Text("Verifying the audit chain…"))
        query_store(self, self.store.verify_audit, self._show_verified, self._unreadable,
                    group="audit-verify")

    def _unreadable(self, message: str) -> None:
        banner = self.query_one("#audit-verify", Static)
        banner.update(Text(printable(f"!! AUDIT LOG UNREADABLE: {message}")))
        banner.set_class(True, "alarm")

    def _show_verified(self, result: VerifyResult) -> None:
        banner = self.query_one("#audit-verify", Static)
        if result.ok:
            count = result.count
            text = Text(f"✓ Audit chain ok, {count} record{'s' if count != 1 else ''} verified")
            if result.warning:  # not tampering, but the witness cannot vouch for the end
                text.append(printable(f"; note: {result.warning}"))
            banner.update(text)
            banner.set_class(True, "ok")
        else:
            what = str(result.problem or "does not match the chain").rstrip(".")
            where = ""
            if result.first_bad is not None and f"record {result.first_bad}" not in what:
                where = f"record {result.first_bad}: "
            banner.update(Text(printable(f"!! TAMPERED: {where}{what}. Records from there on "
                                         "cannot be trusted.")))
            banner.set_class(True, "alarm")

    def _load(self) -> None:
        if self.store is None:
            self.query_one(DataTable).clear()
            self.rows = []
            self.exhausted = True
            return
        if self._loading:
            return
        self._loading = True
        if not self.rows:
            self.query_one("#audit-status", Static).update(Text("Loading the audit log…"))
        store, limit = self.store, self.limit
        query_store(self, lambda: list(store.audit(limit=limit)), self._show_records,
                    self._records_failed, group="audit-load")

    def _records_failed(self, message: str) -> None:
        self._loading = False
        self.exhausted = True
        self.query_one("#audit-status", Static).update(
            Text(printable(f"Could not read the audit log: {message}")))

    def _show_records(self, records: list[AuditRecord]) -> None:
        self._loading = False
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        self.exhausted = len(records) < self.limit
        self.rows = pair_records(records)
        limit = max(_WHAT_LIMIT, min(_WHAT_MAX, _WHAT_LIMIT + self.app.size.width - 80))
        for index, row in enumerate(self.rows):
            table.add_row(Text(_short_time(row.record.time)), _what_text(row, limit),
                          Text(_who(row.record, short=True)), Text(_event_text(row.record)),
                          key=str(index))
        self.query_one("#audit-status", Static).update(
            Text(_count_text(len(records), len(self.rows), self.exhausted)))
        if self.rows:
            table.move_cursor(row=min(keep, len(self.rows) - 1))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= len(self.rows) - 1 and not self.exhausted and self.rows:
            self.limit += self.page_size
            self._load()

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if not 0 <= table.cursor_row < len(self.rows):
            return
        row = self.rows[table.cursor_row]
        self.app.push_screen(DetailScreen(f"Audit › record {row.record.seq}", describe_row(row)))
