"""The one confirmation dialog, and what it says before an approval.

``ConfirmationModal`` answers True only for ``y`` or Enter, and only once the dialog has
been up for ``guard`` seconds, so a key typed ahead or a key repeat cannot confirm it.
``n`` and Escape answer False; every other key does nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Static

from setui.core.model import Event
from setui.ui.format import countdown, impact, is_this_vm, safe, utc_and_local, utc_time
from setui.ui.messages import ApprovalNote
from setui.ui.widgets import heap

__all__ = ["GUARD_SECONDS", "ConfirmationModal", "approval_prompt", "forget_rendered_widgets",
           "hold_footers"]

GUARD_SECONDS = 0.3
_NAMES_SHOWN = 20  # resources named in the dialog; the rest are counted


_HELD = "_setui_footer_held"


def _shown_bindings(footer: Footer, screen: Screen[object]) -> tuple[object, ...]:
    """What a Footer composes from: the screen's shown bindings, as Footer.compose
    reads them, and whether it shows the command palette's key."""
    app = footer.app
    shown = tuple((binding.key, binding.action, binding.description, binding.group, enabled,
                   tooltip, app.get_key_display(binding))
                  for _node, binding, enabled, tooltip in screen.active_bindings.values()
                  if binding.show)
    return shown, footer.show_command_palette


def hold_footers(app: App[object]) -> None:
    """Let the Footers of the screens below recompose only when their keys change.

    Textual 8.2.8's Footer recomposes whenever its screen's bindings are refreshed, and
    a screen refreshes them each time it resumes: every dialog closed rebuilt the
    dashboard's Footer (30-40 ms on the event loop, in the way of the approval's POST),
    and each rebuilt FooterKey stays alive in a watcher list that is never pruned (about
    4,000 objects per dialog, lengthening every later full garbage collection; see
    bench/upstream/footer_leak.py). Here each Footer's subscription to its screen's
    bindings is replaced, once, by one that recomposes only when the keys it would show
    differ from the ones it shows.
    """
    for screen in app.screen_stack:
        for footer in screen.query(Footer):
            if getattr(footer, _HELD, False) or not footer.is_running:
                continue
            shown = {"now": _shown_bindings(footer, screen)}

            def bindings_changed(changed: Screen[object], footer: Footer = footer,
                                 shown: dict[str, object] = shown) -> None:
                wanted = _shown_bindings(footer, changed)
                if wanted == shown["now"]:
                    return  # the same keys: the Footer stays as it is
                shown["now"] = wanted
                footer.bindings_changed(changed)

            screen.bindings_updated_signal.unsubscribe(footer)
            screen.bindings_updated_signal.subscribe(footer, bindings_changed)
            setattr(footer, _HELD, True)


def forget_rendered_widgets() -> None:
    """Let a closed dialog's widgets go.

    Textual 8.2.8 caches ``StylesCache.get_inner_outer`` with ``lru_cache(1024)`` on the
    method, so the cache keeps every widget's StylesCache (and the lines it rendered)
    alive, up to 1,024 of them: each dialog left its widgets behind that way. The cache
    only saves blending two colours; it is emptied when a dialog closes.
    """
    with contextlib.suppress(ImportError, AttributeError):
        from textual._styles_cache import StylesCache

        StylesCache.get_inner_outer.cache_clear()


class ConfirmationModal(ModalScreen[bool]):
    """Ask a yes/no question; ``y``/Enter yes, ``n``/Escape no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Yes", priority=True),
        Binding("enter", "confirm", "Yes", show=False, priority=True),
        Binding("n", "cancel", "No", priority=True),
        Binding("escape", "cancel", "No", show=False, priority=True),
    ]

    def __init__(self, title: str, body: Text, *, yes: str = "approve", no: str = "cancel",
                 loud: bool = False, guard: float = GUARD_SECONDS,
                 mono: Callable[[], float] = time.monotonic,
                 refresh: Callable[[], Text] | None = None) -> None:
        super().__init__(classes="loud" if loud else None)
        self._title = title
        self._body = body
        self._refresh = refresh  # called once a second: the body as it is now
        self._yes = yes
        self._no = no
        self._guard = guard
        self._mono = mono
        self._opened: float | None = None
        self.ignored = 0  # confirmations ignored by the guard (for tests)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self._title), id="dialog-title")
            # Focusable, so the arrow keys scroll a body longer than the screen.
            with VerticalScroll(id="dialog-scroll"):
                yield Static(self._body, id="dialog-body")
            keys = Text()
            keys.append(" y ", style="bold reverse")
            keys.append(" or ")
            keys.append(" Enter ", style="bold reverse")
            keys.append(f" {self._yes}      ")
            keys.append(" n ", style="bold reverse")
            keys.append(" or ")
            keys.append(" Esc ", style="bold reverse")
            keys.append(f" {self._no}")
            yield Static(keys, id="dialog-keys")

    def on_mount(self) -> None:
        self._opened = self._mono()
        hold_footers(self.app)
        # Normally done once the dashboard drew its first frame; if not, before the
        # first approval rather than never (see setui.ui.widgets.heap).
        self.call_after_refresh(heap.freeze_heap_once)
        self._fit()
        if self._refresh is not None:
            self.set_interval(1.0, self._update_body)

    def on_unmount(self) -> None:
        forget_rendered_widgets()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        # The body scrolls and the key line never leaves the screen, however long the
        # body: border 2, title and its margin 2, keys and their margin 2.
        height = self.size.height or self.app.size.height
        self.query_one("#dialog-scroll").styles.max_height = max(height - 6, 3)

    def _update_body(self) -> None:
        assert self._refresh is not None
        body = self._refresh()
        if body != self._body:
            self._body = body
            self.query_one("#dialog-body", Static).update(body)

    def action_confirm(self) -> None:
        if self._opened is None or self._mono() - self._opened < self._guard:
            self.ignored += 1  # too soon: typed ahead or a held key, not a decision
            return
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


def approval_prompt(event: Event, *, vm_name: str | None, identity: str, now: datetime,
                    previous: ApprovalNote | None = None, present: bool = True,
                    stale: str | None = None) -> tuple[str, Text, bool]:
    """(title, body, loud) of the approval dialog; loud when other VMs are affected.

    ``present=False``: the event left the document while the dialog was open.
    ``stale``: why the document shown may not be the service's current one.
    """
    title = f"Approve this {safe(event.event_type, 24)} now?"
    body = Text()
    if not present or event.is_started:
        what = "has started" if present else "is no longer in the document"
        body.append(f"!! This event {what}: approving it now will be refused.\n\n",
                    style="bold reverse")
    mine = [r for r in event.resources if is_this_vm(r, vm_name)]
    others = [r for r in event.resources if not is_this_vm(r, vm_name)]
    if others:  # first, where no scrolling can hide it
        count = f"{len(others)} other VM{'s' if len(others) != 1 else ''}"
        body.append(f"!! WARNING: this also starts it for {count}: "
                    f"{', '.join(safe(r, 60) for r in others[:10])}"
                    f"{' …' if len(others) > 10 else ''}.\n", style="bold reverse")
        body.append("!! Approving affects every VM listed, not only this one.\n", style="bold")
    if not mine:
        who = safe(vm_name, 60) if vm_name else "this VM (its name is not known yet)"
        body.append(f"!! This event does not list {who}.\n", style="bold")
    if stale:
        body.append(f"!! {stale}\n", style="bold")
    if others or not mine or stale:
        body.append("\n")

    def field(name: str, value: str, style: str = "") -> None:
        body.append(f"{name:<12}", style="bold")
        body.append(value + "\n", style=style or None)

    field("Event", f"{safe(event.event_type, 40)}, {safe(event.status, 20)}"
          + (f", source {safe(event.source, 20)}" if event.source is not None else ""))
    field("EventId", safe(event.event_id, 80))
    if event.not_before is not None:
        field("NotBefore", f"{utc_and_local(event.not_before, now)}"
                           + (f", {countdown(event, now).text}" if present else ""))
    field("Impact", impact(event))
    if event.description:
        field("Description", "“" + safe(event.description, 160) + "”")
    body.append("\nApproving lets Azure start this now instead of waiting for NotBefore.\n")
    body.append("It will start for:  ", style="bold")
    names = [safe(r, 60) + " (this VM)" for r in mine] + [safe(r, 60) for r in others]
    shown = ", ".join(names[:_NAMES_SHOWN])
    if len(names) > _NAMES_SHOWN:
        shown += f" … and {len(names) - _NAMES_SHOWN} more"
    body.append(shown or "no resources listed", style="bold")
    body.append("\n")
    loud = bool(others) or not mine
    if previous is not None and previous.approved:
        body.append(f"\nAlready {previous.message or 'approved'} "
                    f"({utc_time(previous.at)} UTC by {safe(previous.user, 24)}).\n")
    body.append("\nRecorded in the audit log as:  ")
    body.append(safe(identity, 120), style="bold")
    body.append("\n")
    return title, body, loud
