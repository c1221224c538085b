"""The key bar at the bottom of every screen: whole keys only, the ones that matter first.

Textual's Footer lays its keys out in a row and lets the terminal's edge cut the last
ones: at 60 columns the dashboard's would end at "l Au", `?` Help and `q` Quit
gone. :class:`KeyBar` keeps the keys an operator cannot do without (:data:`ESSENTIAL`:
help, quit, approve, Escape, and a dialog's yes and no) and drops the others from the
right, whole, until the rest fits; what it drops is still in help (`?`) and the
command palette. The palette's own key shows only when there is room left for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer

from setui.ui.compat import FooterKey

__all__ = ["ESSENTIAL", "KeyBar", "Shown", "fit_keys"]

# Actions whose key stays on screen at any width.
ESSENTIAL = frozenset({"help", "quit", "approve", "close", "back", "clear_filter",
                       "confirm", "cancel"})
_GAP = 1  # a compact FooterKey's right margin


@dataclass(frozen=True)
class Shown:
    """One key as the bar shows it."""

    key: str
    display: str
    description: str
    action: str
    enabled: bool
    tooltip: str

    @property
    def width(self) -> int:
        """Cells it takes in the compact bar: key, space, description, margin."""
        return cell_len(self.display) + 1 + cell_len(self.description) + _GAP


def fit_keys(keys: Sequence[Shown], width: int) -> list[Shown]:
    """The keys that fit in ``width`` cells, in their order: the essential ones always,
    the others while there is room, dropped from the right."""
    kept = list(keys)
    for candidate in reversed(keys):
        if sum(k.width for k in kept) <= width:
            break
        if candidate.action not in ESSENTIAL:
            kept.remove(candidate)
    return kept


class KeyBar(Footer):
    """A compact Footer that fits whole keys to the width (see :func:`fit_keys`)."""

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._fitted: tuple[object, ...] | None = None  # what the bar shows now
        self._told = False  # the screen's bindings have been told once (as Footer waits)

    def _keys(self) -> list[Shown]:
        shown: dict[str, Shown] = {}
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show and binding.action not in shown:  # one key per action
                shown[binding.action] = Shown(binding.key, self.app.get_key_display(binding),
                                              binding.description, binding.action, enabled,
                                              tooltip)
        return list(shown.values())

    def _palette_key(self) -> tuple[Binding, bool, str] | None:
        if not self.app.ENABLE_COMMAND_PALETTE:
            return None
        found = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        if found is None:
            return None
        _node, binding, enabled, tooltip = found
        return binding, enabled, tooltip

    def _layout(self) -> tuple[list[Shown], tuple[Binding, bool, str] | None]:
        width = self.size.width or self.app.size.width
        every = self._keys()
        keys = fit_keys(every, width)
        palette = self._palette_key()
        if palette is not None:
            room = width - sum(k.width for k in keys)
            label = cell_len(self.app.get_key_display(palette[0])) + 2 + cell_len(
                palette[0].description)
            if len(keys) < len(every) or room < label + 2:  # the keys come first
                palette = None
        return keys, palette

    @staticmethod
    def _signature(keys: list[Shown], palette: tuple[Binding, bool, str] | None,
                   ) -> tuple[object, ...]:
        return (*keys, palette is not None and palette[1])

    def compose(self) -> ComposeResult:
        if not self._told:
            return
        keys, palette = self._layout()
        self._fitted = self._signature(keys, palette)
        # FooterKey is compact by default: no data_bind, whose watcher list keeps every
        # key ever composed alive (bench/upstream/footer_leak.py).
        for key in keys:
            yield FooterKey(key.key, key.display, key.description, key.action,
                            disabled=not key.enabled, tooltip=key.tooltip)
        if palette is not None:
            binding, enabled, _tooltip = palette
            yield FooterKey(binding.key, self.app.get_key_display(binding),
                            binding.description, binding.action, classes="-command-palette",
                            disabled=not enabled, tooltip=binding.tooltip or binding.description)

    def _changed(self) -> bool:
        """Whether the bar would show other keys now; if so, what it will show is noted,
        so that the signals queued before the recompose runs ask for no second one."""
        wanted = self._signature(*self._layout())
        if wanted == self._fitted:
            return False
        self._fitted = wanted
        return True

    def on_resize(self, event: Resize) -> None:
        if self._told and self._changed():
            self.call_after_refresh(self.recompose)

    def bindings_changed(self, screen: Screen[object]) -> None:
        """Recompose only when the keys shown would change: a screen refreshes its
        bindings often (each filter keystroke, each dialog closed), and a recomposed
        bar costs tens of milliseconds on the event loop."""
        # Footer.bindings_changed, but for the check of what changed.
        self._told = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        if self._changed():
            self.call_after_refresh(self.recompose)
