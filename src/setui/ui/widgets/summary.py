"""Two lines under the table about the selected event: what the narrow table leaves out."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.widgets import Static

from setui.core.model import Event
from setui.ui.format import (
    Palette,
    approved_label,
    impact,
    is_this_vm,
    safe,
    utc_and_local,
)
from setui.ui.messages import ApprovalNote

__all__ = ["EventSummary", "summary_lines"]


def summary_lines(event: Event | None, vm_name: str | None, now: datetime,
                  note: ApprovalNote | None, palette: Palette, width: int) -> list[Text]:
    """Line 1: type, status, source, impact, resources, approval; line 2: NotBefore and
    the Description, quoted. Everything from the network is shown literally."""
    if event is None:
        return [Text(""), Text("")]
    first = Text()
    first.append("› ", style="bold")
    first.append(safe(event.event_type, 24), style="bold")
    first.append(f"  {safe(event.status, 20)}")
    if note is not None and (note.approved or note.pending):
        first.append("  ")
        first.append("approving…" if note.pending else approved_label(note.at, note.user),
                     style="bold")
    if event.source is not None:
        first.append(f"  source {safe(event.source, 20)}")
    first.append(f"  impact {impact(event)}")
    first.append("  for ")
    names = []
    for name in event.resources:
        names.append(safe(name, 40) + (" (this VM)" if is_this_vm(name, vm_name) else ""))
    first.append(", ".join(names) if names else "no resources listed",
                 style=None if event.affects(vm_name) else palette.secondary)
    second = Text()
    if event.not_before is not None:
        second.append(f"NotBefore {utc_and_local(event.not_before, now)}  ")
    if event.description:
        second.append("“" + safe(event.description, 400) + "”", style=palette.muted)
    for line in (first, second):
        line.truncate(max(width, 10), overflow="ellipsis")
    return [first, second]


class EventSummary(Static):
    """Shows :func:`summary_lines` for the selected event."""

    DEFAULT_CSS = """
    EventSummary { height: 2; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: list[Text] | None = None

    def show(self, event: Event | None, vm_name: str | None, now: datetime,
             note: ApprovalNote | None, palette: Palette) -> None:
        width = (self.size.width or self.app.size.width) - 2
        lines = summary_lines(event, vm_name, now, note, palette, width)
        if lines == self._shown:
            return
        self._shown = lines
        self.update(Text("\n").join(lines), layout=False)

    def plain(self) -> str:
        return "\n".join(line.plain for line in self._shown or ())
