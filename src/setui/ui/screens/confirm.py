"""The one confirmation dialog, and what it says before an approval.

``ConfirmationModal`` answers True only for ``y`` (or, for an event that reaches beyond
this VM, the word ``yes`` typed and Enter), and only once the dialog has been up for
``guard`` seconds, so a key typed ahead or a key repeat cannot confirm it; an early key
is ignored and the dialog says so. ``n``, Escape and Ctrl+C answer False; every other
key does nothing, and pasted text is never read as keys.

What must be seen is laid out so nothing hides it: the warnings above, the fields in a
region that scrolls, "It will start for", "Recorded in the audit log as" and the keys
below; under 60x20 the dialog says it needs more room and approves nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from setui.core.model import Event, is_this_vm
from setui.core.timefmt import stamp, utc_time
from setui.system.gctune import freeze_heap_once
from setui.ui import compat
from setui.ui.format import countdown, impact, safe
from setui.ui.messages import ApprovalNote

__all__ = ["GUARD_SECONDS", "MIN_SIZE", "ConfirmationModal", "Prompt", "approval_prompt"]

GUARD_SECONDS = 0.5
MIN_SIZE = (60, 20)  # below this the dialog cannot show what is approved: it says so
_NAMES_SHOWN = 20  # resources named in the dialog; the rest are counted


@dataclass(frozen=True)
class Prompt:
    """What the dialog says, by where it goes: ``top`` (warnings), ``starts`` (who it
    starts for) and ``who`` (who is recorded) never scroll away; ``body`` scrolls.
    ``typed``: only the word "yes" confirms."""

    title: str
    body: Text
    top: Text = field(default_factory=Text)
    starts: Text = field(default_factory=Text)
    who: Text = field(default_factory=Text)
    loud: bool = False
    typed: bool = False


def _key(text: Text, key: str) -> None:
    text.append(f" {key} ", style="bold reverse")


class ConfirmationModal(ModalScreen[bool]):
    """Ask a yes/no question; ``y`` yes (or "yes" typed, then Enter), ``n``/Escape/Ctrl+C no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Yes", priority=True),
        Binding("n", "cancel", "No", priority=True),
        Binding("escape", "cancel", "No", show=False, priority=True),
        Binding("ctrl+c", "cancel", "No", show=False, priority=True),
    ]

    def __init__(self, prompt: Prompt | str, body: Text | None = None, *,
                 yes: str = "approve", no: str = "cancel", loud: bool = False,
                 guard: float = GUARD_SECONDS, mono: Callable[[], float] = time.monotonic,
                 refresh: Callable[[], Prompt] | None = None) -> None:
        if isinstance(prompt, str):
            prompt = Prompt(prompt, body if body is not None else Text(), loud=loud)
        super().__init__(classes="loud" if prompt.loud else None)
        self._prompt = prompt
        self._refresh = refresh  # called once a second: the prompt as it is now
        self._yes = yes
        self._no = no
        self._guard = guard
        self._mono = mono
        self._opened: float | None = None
        self._typed = ""  # what was typed towards "yes"
        self._too_small = False
        self.ignored = 0  # confirmations ignored by the guard (for tests)

    def compose(self) -> ComposeResult:
        prompt = self._prompt
        with Vertical(id="dialog"):
            yield Static(Text(prompt.title), id="dialog-title")
            yield Static(prompt.top, id="dialog-top")
            # Focusable, so the arrow keys scroll a body longer than the screen.
            with VerticalScroll(id="dialog-scroll"):
                yield Static(prompt.body, id="dialog-body")
            yield Static(prompt.starts, id="dialog-starts")
            yield Static(prompt.who, id="dialog-who")
            yield Static(self._keys(), id="dialog-keys")
            yield Static(self._note(), id="dialog-note")
            yield Static(Text(
                f"This dialog needs a terminal of at least {MIN_SIZE[0]}x{MIN_SIZE[1]} to "
                "show what would be approved; make it larger. Nothing can be approved "
                "until then.\n", style="bold") + self._cancel_keys(), id="dialog-small")

    def _cancel_keys(self) -> Text:
        keys = Text()
        _key(keys, "n")
        keys.append("/")
        _key(keys, "Esc")
        keys.append(f" {self._no}")
        return keys

    def _keys(self) -> Text:
        """The key line; it fits the 56 columns a 60-column screen leaves it."""
        keys = Text()
        if self._prompt.typed:
            keys.append("type ")
            _key(keys, "yes")
            keys.append(" then ")
            _key(keys, "Enter")
            keys.append(f" {self._yes} ")
            keys.append(f"[{self._typed:<3}]", style="bold")
            keys.append("  ")
        else:
            _key(keys, "y")
            keys.append(f" {self._yes}      ")
        return keys + self._cancel_keys()

    def _note(self) -> Text:
        if self._guard <= 0:
            return Text()
        if self.ignored:
            return Text(f"A key pressed in the first {self._guard:g} s was ignored: "
                        "press it again if you mean it.", style="bold")
        return Text(f"Keys pressed in the first {self._guard:g} s are ignored.",
                    style="dim")

    @property
    def prompt(self) -> Prompt:
        return self._prompt

    def plain(self) -> str:
        """Everything the dialog says, as text (for tests and the screen reader alike)."""
        prompt = self._prompt
        return "\n".join(t.plain for t in (Text(prompt.title), prompt.top, prompt.body,
                                           prompt.starts, prompt.who, self._keys()))

    def on_mount(self) -> None:
        self._opened = self._mono()
        # Normally done once the dashboard drew its first frame; if not, before the
        # first approval rather than never (see setui.system.gctune).
        self.call_after_refresh(freeze_heap_once)
        self._fit()
        self.call_after_refresh(self._fit)  # again, with the parts' heights laid out
        if self._refresh is not None:
            self.set_interval(1.0, self._update)

    def on_unmount(self) -> None:
        compat.forget_rendered_widgets()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        width, height = self.size.width or self.app.size.width, \
            self.size.height or self.app.size.height
        self._too_small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        for part in self.query_one("#dialog").children:
            part.display = (part.id == "dialog-small") == self._too_small and (
                part.id != "dialog-top" or bool(self._prompt.top.plain))
        # The body scrolls and everything else keeps its place on the screen: the
        # border, the title and its margin, the keys with their margin, and the note.
        fixed = 2 + 2 + 2 + 1
        for name in ("top", "starts", "who"):
            part = self.query_one(f"#dialog-{name}")
            if part.display:
                margin = part.styles.margin
                fixed += part.outer_size.height + margin.top + margin.bottom
        self.query_one("#dialog-scroll").styles.max_height = max(height - fixed, 2)

    def _update(self) -> None:
        assert self._refresh is not None
        prompt = self._refresh()
        if prompt == self._prompt:
            return
        self._prompt = prompt
        self.set_class(prompt.loud, "loud")
        self.query_one("#dialog-title", Static).update(Text(prompt.title))
        self.query_one("#dialog-top", Static).update(prompt.top)
        self.query_one("#dialog-body", Static).update(prompt.body)
        self.query_one("#dialog-starts", Static).update(prompt.starts)
        self.query_one("#dialog-who", Static).update(prompt.who)
        self.query_one("#dialog-keys", Static).update(self._keys())
        self._fit()
        self.call_after_refresh(self._fit)

    def _early(self) -> bool:
        """Whether a key now is too soon to be a decision (typed ahead, a held key)."""
        if self._opened is None or self._mono() - self._opened < self._guard:
            self.ignored += 1
            self.query_one("#dialog-note", Static).update(self._note())
            return True
        return False

    def action_confirm(self) -> None:
        if self._prompt.typed:
            self._type("y")
            return
        if self._too_small or self._early():
            return
        self.dismiss(True)

    def _type(self, char: str) -> None:
        if self._too_small or self._early():
            return
        self._typed = (self._typed + char)[-3:]
        self.query_one("#dialog-keys", Static).update(self._keys())

    def on_key(self, event: events.Key) -> None:
        """Typing "yes": letters, Backspace, and Enter to confirm it."""
        if not self._prompt.typed:
            return
        if event.key == "enter":
            event.stop()
            if self._too_small:
                return
            if self._typed.lower() == "yes":
                if not self._early():
                    self.dismiss(True)
                return
            # Enter with less than the word: say so, or it looks like a key that failed.
            # Short enough for the 56 columns a 60-column screen leaves the note.
            typed = f"“{self._typed}” is not “yes”" if self._typed else "Nothing typed yet"
            self.query_one("#dialog-note", Static).update(Text(
                f"{typed}: type the whole word yes, then Enter.", style="bold"))
        elif event.key == "backspace":
            event.stop()
            self._typed = self._typed[:-1]
            self.query_one("#dialog-keys", Static).update(self._keys())
        elif event.character is not None and len(event.character) == 1 \
                and event.character.isalpha():
            event.stop()
            self._type(event.character)

    def on_paste(self, event: events.Paste) -> None:
        event.stop()  # pasted text is never an answer

    def action_cancel(self) -> None:
        self.dismiss(False)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    if len(names) > _NAMES_SHOWN:
        shown += f" … and {len(names) - _NAMES_SHOWN} more"
    return shown


def approval_prompt(event: Event, *, vm_name: str | None, identity: str, now: datetime,
                    previous: ApprovalNote | None = None, present: bool = True,
                    stale: str | None = None, changes: tuple[str, ...] = (),
                    claimed: str | None = None, retried: bool = False) -> Prompt:
    """The approval dialog's prompt; loud, and asking for "yes" typed, when the event
    reaches beyond this VM.

    ``present=False``: the event left the document while the dialog was open.
    ``stale``: why the document shown may not be the service's current one.
    ``changes``: what changed since the operator last confirmed (asked again);
    ``retried``: found before a retry (a try had gone), not before the first send.
    ``claimed``: the earlier approval of this event, in words (asked again).
    """
    title = f"Approve this {safe(event.event_type, 24)} now?"
    top = Text()
    if changes:
        held = "It changed before a retry, so no retry was sent" if retried else \
            "It changed since you confirmed, so nothing was sent"
        top.append(f"!! {held}: " + "; ".join(safe(c, 160) for c in changes) + "\n",
                   style="bold reverse")
    if claimed:
        top.append(f"!! {safe(claimed, 300)}. Approve it again?\n", style="bold reverse")
    if not present or event.is_started:
        what = "has started" if present else "is no longer in the document"
        top.append(f"!! This event {what}: approving it now will be refused.\n",
                   style="bold reverse")
    mine = [r for r in event.resources if is_this_vm(r, vm_name)]
    others = [r for r in event.resources if not is_this_vm(r, vm_name)]
    if others:  # first, where no scrolling can hide it
        other_vms = f"{len(others)} other VM{'s' if len(others) != 1 else ''}"
        top.append(f"!! WARNING: this also starts it for {other_vms}: "
                   f"{', '.join(safe(r, 60) for r in others[:10])}"
                   f"{' …' if len(others) > 10 else ''}.\n", style="bold reverse")
    if not mine:
        this_vm = safe(vm_name, 60) if vm_name else "this VM (its name is not known yet)"
        top.append(f"!! This event does not list {this_vm}.\n", style="bold")
    if stale:
        top.append(f"!! {stale}\n", style="bold")
    top.rstrip()
    body = Text()

    def line(name: str, value: str, style: str = "") -> None:
        body.append(f"{name:<12}", style="bold")
        body.append(value + "\n", style=style or None)

    line("Event", f"{safe(event.event_type, 40)}, {safe(event.status, 20)}"
         + (f", source {safe(event.source, 20)}" if event.source is not None else ""))
    line("EventId", safe(event.event_id, 80))
    if event.not_before is not None:
        line("NotBefore", f"{stamp(event.not_before)}"
                          + (f", {countdown(event, now).text}" if present else ""))
    effect = f" ({event.effect})" if event.effect else ""  # what the documents say it does
    line("Impact", impact(event) + effect)
    if len(event.resources) > 1:
        line("Resources", f"{len(event.resources)}: "
             + ", ".join(safe(r, 60) for r in event.resources[:_NAMES_SHOWN * 5]))
    if event.description:
        line("Description", "“" + safe(event.description, 160) + "”")
    body.append("Approving lets Azure start this now instead of waiting for NotBefore.")
    if previous is not None and previous.approved:
        body.append(f"\nAlready {previous.message or 'approved'} "
                    f"({utc_time(previous.at)} UTC by {safe(previous.user, 24)}).")
    names = [safe(r, 60) + " (this VM)" for r in mine] + [safe(r, 60) for r in others]
    starts = Text()
    count = len(names)
    starts.append(f"It will start for {count} VMs:  " if count > 1 else "It will start for:  ",
                  style="bold")
    starts.append(_names(names) or "no resources listed", style="bold")
    who = Text("Recorded in the audit log as:  ")
    who.append(safe(identity, 120), style="bold")
    loud = bool(others) or not mine
    return Prompt(title, body, top, starts, who, loud=loud, typed=loud)
