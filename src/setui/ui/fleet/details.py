"""Enter on a line: the event (or the VM) with every series behind it, and for an event
the exact command that approves it, to run on one of its VMs. Nothing is approved from
here: the fleet view is read-only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from setui.core.timefmt import precise
from setui.fleet.model import Fleet, FleetEvent, FleetImpact, FleetVm, VmState
from setui.ui.fleet.view import (
    EventLine,
    Line,
    VmLine,
    approve_command,
    event_countdown,
    utc,
    vm_words,
)
from setui.ui.format import safe
from setui.ui.screens.scrolled import SCROLL_KEYS, ScrolledPage
from setui.ui.widgets.keys import KeyBar

__all__ = ["FleetDetailsScreen", "details_text", "impact_text"]

MAX_SERIES_SHOWN = 64
# setui_agent_waiting's reasons, in words.
_WAITING = {"budget": "an early approval waits for its group's disruption budget",
            "prometheus": "an early approval waits: its agent cannot ask Prometheus for "
                          "the disruption budget"}


def _labels(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{safe(k, 40)}={safe(v, 128)!s}" for k, v in sorted(labels.items())
                     if k != "__name__")


def _listed(event: FleetEvent) -> str:
    total, missing = event.listed_count, event.without_agent
    text = f"{total} VM{'s' * (total != 1)}"
    if missing:
        text += (f"; {missing} of them with no agent reporting it (none, stopped, or not "
                 "scraped): each agent names only its own VM, so their names are in the "
                 "document on any VM that lists it (setui events there)")
    return text


def _waiting(vm: FleetVm) -> str:
    return "; ".join(_WAITING.get(r, f"waiting: {safe(r, 40)}") for r in vm.waiting)


def impact_text(impact: FleetImpact) -> str:
    """A VM's last measured stall or boot: "stall 4.8s at 2026-...Z, Freeze C7061BAC..."."""
    what = "paused" if impact.kind == "stall" else ("down" if impact.kind == "boot"
                                                     else safe(impact.kind, 20))
    tied = (f"{safe(impact.event_type, 24)} {safe(impact.event_id, 64)}" if impact.event_id
            else "no event announced")
    return f"{what} {precise(impact.seconds)} at {safe(impact.at, 40)}: {tied}"


def _event_text(event: FleetEvent, fleet: Fleet, now: datetime) -> Text:
    text = Text()
    text.append(f"Event {safe(event.event_id, 128)}\n\n", style="bold")
    rows = [
        ("type", safe(event.event_type, 60)),
        ("status", " / ".join(safe(s, 30) for s in event.statuses) or "none given"),
        ("source", safe(event.source, 30) or "not given"),
        ("NotBefore", safe(event.not_before_text, 60) or "none"),
        ("countdown", event_countdown(event, now).label()),
        ("group", safe(event.group.label, 80)),
        ("resources", ", ".join(safe(r, 64) for r in event.resources)
         or ("none listed" if not event.listed_count else "none has an agent reporting it")),
        ("listed", _listed(event)),
        ("approved by", ", ".join(safe(a, 64) for a in event.approved_by)
         or "nobody, as far as the reporting agents' audit logs know"),
    ]
    for name, value in rows:
        text.append(f"  {name:<12}", style="bold")
        text.append(f"{value}\n")
    if event.stale:
        text.append("\n  Every VM reporting it has stopped answering: this is what they said "
                    "last, not what is true now.\n", style="bold")
    text.append("\nReported by\n", style="bold")
    for key in event.reporters:
        vm = fleet.vms.get(key)
        state = vm_words(vm, now.timestamp()) if vm is not None else "unknown"
        if vm is not None and vm.waiting:
            state += f"; {_waiting(vm)}"
        text.append(f"  {safe(key.vm_name, 64)}  ({state})\n")
    measured = [(key, vm.impact) for key in event.reporters
                if (vm := fleet.vms.get(key)) is not None and vm.impact is not None
                and vm.impact.event_id.casefold() == event.event_id.casefold()]
    if measured:
        text.append("\nWhat it did, as each VM's agent measured it\n", style="bold")
        for key, impact in measured:
            text.append(f"  {safe(key.vm_name, 64)}  {impact_text(impact)}\n")
    text.append("\nTo approve it, run on one of its VMs ", style="bold")
    affected = [r for r in event.resources][:5]
    text.append(f"({', '.join(safe(r, 64) for r in affected) or 'any VM that sees it'}):\n")
    text.append(f"\n    {approve_command(event)}\n\n", style="bold reverse")
    text.append("  It asks first and writes that VM's audit log; this view approves "
                "nothing.\n")
    text.append(f"\nSeries ({len(event.series)} shown)\n", style="bold")
    for labels in event.series[:MAX_SERIES_SHOWN]:
        text.append(f"  azure_scheduledevent_event{{{_labels(labels)}}}\n")
    return text


def _vm_text(vm: FleetVm, now: datetime) -> Text:
    text = Text()
    text.append(f"VM {safe(vm.name, 128)}\n\n", style="bold")
    rows = [
        ("agent", vm_words(vm, now.timestamp())),
        ("group", safe(vm.group.label, 80)),
        *((name, safe(value, 128) or "(empty)") for name, value in vm.identity.items()),
        ("last success", utc(vm.last_success) if vm.last_success else "never / not exported"),
        ("reported at", utc(vm.reported_at)),
        ("instance", safe(vm.instance, 128) or "unknown"),
        ("job", safe(vm.job, 128) or "unknown"),
        ("events", ", ".join(safe(e, 64) for e in vm.event_ids) or "none"),
        *((("waiting", _waiting(vm)),) if vm.waiting else ()),
        ("last impact", impact_text(vm.impact) if vm.impact is not None
         else "none recorded by its agent (or an agent that does not export it)"),
    ]
    for name, value in rows:
        text.append(f"  {name:<16}", style="bold")
        text.append(f"{value}\n")
    if vm.state is VmState.GONE:
        text.append("\n  Prometheus no longer has its series: check the agent on the VM "
                    "(systemctl status) and the scrape target (Prometheus's targets page).\n")
    return text


def details_text(line: Line, fleet: Fleet, now: datetime) -> Text:
    if isinstance(line, EventLine):
        return _event_text(line.event, fleet, now)
    if isinstance(line, VmLine):
        return _vm_text(line.vm, now)
    return Text(f"{safe(line.group.label, 80)}: choose an event or a VM.")


class FleetDetailsScreen(ScrolledPage, ModalScreen[None]):
    SCROLLED = "#details"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        *SCROLL_KEYS,
    ]

    def __init__(self, body: Callable[[], Text]) -> None:
        super().__init__()
        self._draw = body
        self.body = body()

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="details"):
            yield Static("Details  (Escape closes)", id="details-title")
            yield Static(self.body, id="details-body", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        self.page().focus()
        self.set_interval(1.0, self._tick, name="details-tick")

    def _tick(self) -> None:
        """Drawn again every second: the countdown and the ages move with the clock."""
        body = self._draw()
        if body.plain != self.body.plain:
            self.body = body
            self.query_one("#details-body", Static).update(body)
