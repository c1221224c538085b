"""Two lines under the table about the selected event: what the narrow table leaves out."""

from __future__ import annotations

import itertools
from datetime import datetime

from rich.cells import cell_len
from rich.text import Text

from setui.core.model import Event, is_this_vm
from setui.core.timefmt import stamp
from setui.ui.format import (
    Palette,
    approved_label,
    impact,
    safe,
)
from setui.ui.messages import ApprovalNote
from setui.ui.widgets.lines import ChangedLines

__all__ = ["EventSummary", "summary_lines"]

_NAMES = 12
_THIS_VM = " (this VM)"
_OTHERS_CELLS = 30  # other VMs named after this one; the rest are counted


def summary_lines(event: Event | None, vm_name: str | None, now: datetime,
                  note: ApprovalNote | None, palette: Palette, width: int,
                  agent: str = "") -> list[Text]:
    """Line 1: type, status, resources (this VM first, "(this VM)" never cut: the name is
    shortened instead), approval, source, impact; line 2: why an approval failed, if it
    did, what `setui agent` plans and does (when it acts on the event), NotBefore and the
    Description, quoted. Everything from the network is shown literally."""
    if event is None:
        return [Text(""), Text("")]
    width = max(width, 10)
    first = Text()
    first.append("› ", style="bold")
    first.append(safe(event.event_type, 24), style="bold")
    first.append(f"  {safe(event.status, 20)}")
    first.append("  for ")
    # The line is cut at the screen's width anyway; naming a few is enough (an event
    # can list thousands, and this runs every second).
    mine = next((r for r in event.resources if is_this_vm(r, vm_name)), None)
    others = [safe(name, 40) for name in itertools.islice(
        (r for r in event.resources if not is_this_vm(r, vm_name)), _NAMES)]
    if mine is not None:
        room = max(6, width - first.cell_len - cell_len(_THIS_VM) - 1)  # 1: the "…"
        first.append(safe(mine, min(40, room)) + _THIS_VM, style="bold")
    budget = first.cell_len + _OTHERS_CELLS
    named = 1 if mine is not None else 0
    for name in others:
        sep = ", " if named else ""
        if named and first.cell_len + len(sep) + cell_len(name) > budget:
            break
        first.append(sep + name, style=None if mine is not None else palette.secondary)
        named += 1
    if not event.resources:
        first.append("no resources listed", style=palette.secondary)
    elif named < len(event.resources):
        first.append(f", +{len(event.resources) - named} more", style=palette.muted)
    failed = note is not None and not note.pending and not note.approved
    if note is not None and not failed:
        first.append("  ")
        if note.pending:  # retries can take up to 70 s: show that it is still going, and why
            first.append(safe(note.in_flight(now), 120), style="bold")
        else:
            first.append(approved_label(note.at, note.user), style="bold")
    if event.source is not None:
        first.append(f"  source {safe(event.source, 20)}")
    first.append(f"  impact {impact(event)}")
    second = Text()
    if note is not None and failed:
        # The row only has room for "✗ failed" (or "? unknown"): the reason gets the
        # line's start.
        said = "? approval" if note.unknown else "✗ not approved"
        second.append(f"{said} {note.at:%H:%M:%S}: {safe(note.message, 120)}  ",
                      style=palette.urgent)
    if agent:
        second.append(f"agent: {safe(agent, 200)}  ", style="bold")
    if event.not_before is not None:
        second.append(f"NotBefore {stamp(event.not_before)}  ")
    if event.description:
        second.append("“" + safe(event.description, 400) + "”", style=palette.muted)
    for line in (first, second):
        line.truncate(width, overflow="ellipsis")
    return [first, second]


class EventSummary(ChangedLines):
    """Shows :func:`summary_lines` for the selected event; repaints only changed cells
    (an approval under way counts its seconds here)."""

    DEFAULT_CSS = """
    EventSummary { height: 2; padding: 0 1; }
    """

    def show(self, event: Event | None, vm_name: str | None, now: datetime,
             note: ApprovalNote | None, palette: Palette, agent: str = "") -> None:
        width = (self.size.width or self.app.size.width) - 2
        self.set_lines(summary_lines(event, vm_name, now, note, palette, width, agent))
