"""Every use of Textual's private API, in one place, each with why.

setui is written against Textual's public API. Where a measured problem could not be
solved with it, the private name it needed is used here and nowhere else, with what it
fixes, what was measured, and the upstream report or a reproduction beside it. Textual
is pinned to the minor version these were written for (``textual~=8.2.8`` in
pyproject.toml); ``make test-textual-latest`` runs the UI tests against the newest
release, and every workaround checks that the internals it needs are there and falls
back to Textual's own behaviour when they are not.

The workarounds:

* :func:`install`: partial repaints cropped at both ends (``ChopsUpdate``), and
  rendered only in the rows they cover (``Compositor._get_renders``). Installed
  explicitly, once, when a setui app starts (:class:`setui.ui.shell.TerminalApp`), not
  as a side effect of a widget mounting.
* the events table's cell updates (:func:`table_internals` and the functions after it).
* ``FooterKey``: the Footer's key widget, for the key bar (at the imports).
* :func:`forget_rendered_widgets`: a closed dialog's widgets let go.
* :func:`quiet_input`: Textual's input thread asleep until a key arrives, not awake ten
  times a second. Installed explicitly as the app's driver class when it starts.
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import threading
from codecs import getincrementaldecoder
from collections.abc import Callable
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.control import Control
from rich.segment import Segment
from rich.style import Style
from textual.driver import Driver
from textual.strip import Strip
from textual.widget import PseudoClasses
from textual.widgets import DataTable

# The key bar: Textual exports Footer but not the key widget it composes (FooterKey, in
# textual.widgets._footer in 8.2.8). setui.ui.widgets.keys composes the same widgets, so
# its key bar looks, clicks and is styled like the Footer, with whole keys at any width.
from textual.widgets._footer import FooterKey
from textual.widgets.data_table import ColumnKey, RowKey

__all__ = [
    "FooterKey",
    "discard_cell_render",
    "forget_rendered",
    "forget_rendered_widgets",
    "install",
    "installed",
    "put_cell",
    "quiet_input",
    "render_cell",
    "row_end_style",
    "table_internals",
    "table_state",
    "whole_cells",
]


# -- partial repaints ------------------------------------------------------------------------
_MARK = "_setui_crops_span_start"


def whole_cells(strip: Strip, start: int, stop: int) -> tuple[int, int]:
    """``[start, stop)`` widened so it does not cut a double-width character in two
    (half of one written alone would blank the other half on the terminal)."""
    if strip.text.isascii():
        return start, stop
    position = 0
    for text, _style, control in strip:
        if control:
            continue
        for char in text:
            width = cell_len(char)
            if width == 2:
                if position < start < position + 2:
                    start = position
                if position < stop < position + 2:
                    stop = position + 2
            position += width
            if position >= stop:
                return start, stop
    return start, stop


def _render_segments(self: Any, console: Console) -> str:
    """``ChopsUpdate.render_segments`` of textual 8.2.8, cropped at ``x1`` as well."""
    sequences: list[str] = []
    append = sequences.append
    move_to = Control.move_to
    chops = self.chops
    chop_ends = self.chop_ends
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        line = chops[y]
        ends = chop_ends[y]
        for end, (x, strip) in zip(ends, line.items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            if x1 <= x and end <= x2:  # the whole chop is in the span
                append(move_to(x, y).segment.text)
                append(strip.render(console))
                continue
            start, stop = whole_cells(strip, max(x1 - x, 0), min(end, x2) - x)
            append(move_to(x + start, y).segment.text)
            append(strip.crop(start, stop).render(console))
        if y != last_y:
            append("\n")
    return "".join(sequences)


def installed() -> bool:
    """Whether partial updates are cropped at the start of their spans."""
    from textual._compositor import ChopsUpdate

    return bool(getattr(ChopsUpdate.render_segments, _MARK, False))


def install() -> bool:
    """Write only the cells a refresh asked for, not everything left of them.

    Fixes: Textual (8.2.8) turns a refreshed region into terminal output with
    ``ChopsUpdate.render_segments``, which writes each widget's part of a line from the
    widget's left edge up to the end of the dirty span (Textualize/textual#5625, closed
    without a change): a clock digit at column 194 rewrites the whole status line, a
    countdown cell the table row up to it, a note at a lane's right end the whole lane.

    Measured: uncropped, that is most of the 5-50 KB/s the dashboard writes every second;
    cropped, 389-579 B/s idle in a maintenance window at 80x24 and 200x60
    (bench/RESULTS.md). tests/ui/test_widgets.py checks that a clock tick writes its one
    digit, tests/ui/test_layout.py that a minute of partial repaints leaves the terminal
    showing exactly the screen.

    The method is replaced by the same loop, cropped at the start of the span as well
    (widened to whole double-width characters). Once per process; False, and nothing
    changed, when this Textual's ``ChopsUpdate`` is not the one this was written for.
    """
    from textual._compositor import ChopsUpdate

    if installed():
        return True
    original = ChopsUpdate.render_segments
    init = getattr(ChopsUpdate.__init__, "__code__", None)
    if init is None or init.co_varnames[1:4] != ("chops", "spans", "chop_ends"):
        return False

    def render_segments(self: Any, console: Console) -> str:
        if not self.spans:
            return original(self, console)
        return _render_segments(self, console)

    render_segments.__doc__ = _render_segments.__doc__
    setattr(render_segments, _MARK, True)
    # The patch itself (see above): mypy rightly refuses to assign to a method, and this
    # is the one place that means to.
    ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    _install_cropped_renders()
    return True


def _install_cropped_renders() -> None:
    """Render, for a partial repaint, only the lines of each widget that the repaint
    covers.

    Fixes: Textual's (8.2.8) ``Compositor._get_renders`` picks the widgets of a partial
    update by whether their *clip* (the screen, for a widget of a screen) overlaps the
    box around the dirty regions, so every visible widget, and the screen itself, renders
    all its lines (styles, line filters, a crop per line) for a clock digit; then only the
    lines in the dirty spans are used. Measured: on the idle dashboard at 200x60 each
    second's tick renders 60 lines of the screen, the key bar, the timeline and the
    summary besides the table's rows and the clock (~0.2-0.3 ms a second, by timing each
    widget's render_lines; bench/RESULTS.md, "one poller per VM").

    The clip each widget is rendered in is narrowed to the rows of that box, as Textual
    does itself for a widget partly scrolled out of view (the same render_lines with a
    crop); a widget outside them renders nothing. Only for partial updates (a crop
    smaller than the screen); full ones are Textual's. Needs :func:`install`'s cropped
    output: a line's chops outside the dirty spans may then be left unrendered.
    """
    from textual._compositor import Compositor
    from textual.geometry import Region

    original = Compositor._get_renders
    if getattr(original, _MARK, False):
        return
    if getattr(original, "__code__", None) is None or original.__code__.co_varnames[:2] != (
            "self", "crop"):
        return

    def _get_renders(self: Any, crop: Region | None = None) -> Any:
        if crop is None or crop == self.size.region:
            return original(self, crop)
        return _cropped_renders(self, crop)

    setattr(_get_renders, _MARK, True)
    Compositor._get_renders = _get_renders  # type: ignore[method-assign]


def _cropped_renders(self: Any, crop: Any) -> Any:
    """``Compositor._get_renders`` of textual 8.2.8 for a crop, each widget clipped to
    the crop's rows (see :func:`_install_cropped_renders`)."""
    from textual.geometry import Region

    top, bottom = crop.y, crop.bottom
    for widget, (region, clip) in self.visible_widgets.items():
        y = max(clip.y, top)
        clip = Region(clip.x, y, clip.width, min(clip.bottom, bottom) - y)
        if clip.height <= 0 or not crop.overlaps(region.intersection(clip)):
            continue
        new_x, new_y, new_width, new_height = region.intersection(clip)
        if new_width and new_height:
            yield (region, clip, widget.render_lines(
                Region(new_x - region.x, new_y - region.y, new_width, new_height)))


# -- the events table ------------------------------------------------------------------------
# Fixes: DataTable.update_cell repaints the whole table and throws away every rendered cell
# (it clears all four render caches: Textualize/textual#3551 put that back after a
# regression; #1483 notes the caches cannot be invalidated per cell), and a repainted row
# is rendered again cell by cell (two walks of the style tree and nine cache look-ups a
# row, ~0.5 ms). Measured: through update_cell, ten ticking countdowns cost ~5.5 ms a
# second and rewrite every row; updated in place, 0.66 ms for ten changed rows.
# setui.ui.widgets.events keeps its own rendered rows and cells and needs DataTable's as
# textual 8.2 has them: these functions. tests/ui/test_widgets.py compares every line with
# what DataTable draws for the same state, so a Textual that renders otherwise fails there.

_CACHES = ("_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache")
_NEEDED = ("_y_offsets", "_render_cell", "_get_styles_to_render_cell", "_show_hover_cursor",
           "_pseudo_class_state", "_update_count", "_labelled_row_exists")


def table_internals(table: DataTable[Any]) -> bool:
    """Whether this Textual's DataTable has what the functions below use (textual 8.2);
    if not, the events table uses DataTable's own update_cell and render_line."""
    return (isinstance(getattr(table, "_data", None), dict)
            and all(hasattr(getattr(table, name, None), "discard") for name in _CACHES)
            and all(hasattr(table, name) for name in _NEEDED))


def labelled_rows(table: DataTable[Any]) -> bool:
    """Whether any row has a label (the in-place paths draw no row labels)."""
    return bool(table._labelled_row_exists)


def put_cell(table: DataTable[Any], row: str, column: str, value: object) -> None:
    """Set a cell's value without update_cell's repaint of everything."""
    table._data[RowKey(row)][ColumnKey(column)] = value


def forget_rendered(table: DataTable[Any], cells: set[tuple[str, str]],
                    rows: set[str], indexes: set[int], ys: set[int]) -> None:
    """Drop what DataTable rendered of these cells and of the lines that hold them, and
    nothing else. Its caches are keyed as in textual 8.2's _data_table.py: cells by (row
    key, column key, ...), rows by (row key, ...), row renderables by (update count, row
    index), lines by (y, ...)."""

    def drop(cache: Any, stale: Callable[[tuple[Any, ...]], bool]) -> None:
        for key in [key for key in cache.keys() if stale(key)]:  # noqa: SIM118 (no __iter__)
            cache.discard(key)

    drop(table._cell_render_cache, lambda key: (key[0], key[1]) in cells)
    drop(table._row_render_cache, lambda key: key[0] in rows)
    drop(table._row_renderable_cache, lambda key: key[1] in indexes)
    drop(table._line_cache, lambda key: key[0] in ys)


def table_state(table: DataTable[Any]) -> tuple[bool, PseudoClasses, int]:
    """What every rendered line depends on beyond the public state: whether the hover
    cursor shows, the pseudo classes, and the count of updates."""
    return table._show_hover_cursor, table._pseudo_class_state, table._update_count


def render_cell(table: DataTable[Any], row_index: int, column_index: int, base_style: Style,
                width: int, *, cursor: bool, hover: bool) -> list[Segment]:
    """One cell's segments, as DataTable renders them."""
    return table._render_cell(row_index, column_index, base_style, width, cursor=cursor,
                              hover=hover)[0]


def discard_cell_render(table: DataTable[Any],
                        key: tuple[object, object, Style, bool, bool, bool, int, PseudoClasses]
                        ) -> None:
    """Drop DataTable's own copy of a cell's render (the events table keeps its own):
    ``key`` is DataTable's cell cache key, with the row and column as the table names them."""
    table._cell_render_cache.discard((RowKey(str(key[0])), ColumnKey(str(key[1])), *key[2:]))


def row_end_style(table: DataTable[Any], *, hover: bool, cursor: bool, show_cursor: bool,
                  show_hover: bool) -> Style:
    """The style of the space right of the last column, as DataTable gives it."""
    style, _ = table._get_styles_to_render_cell(False, False, False, hover, cursor,
                                                show_cursor, show_hover, False, False)
    return style


# -- dialogs ---------------------------------------------------------------------------------
def forget_rendered_widgets() -> None:
    """Let a closed dialog's widgets go.

    Fixes: Textual 8.2.8 caches ``StylesCache.get_inner_outer`` with ``lru_cache(1024)``
    on the method, so the cache keeps every widget's StylesCache (and the lines it
    rendered) alive, up to 1,024 of them (Textualize/textual#6665): each dialog left its
    widgets behind that way. Measured: with the Footer's leak (#6666), about 4,000 objects
    a dialog, lengthening every later full collection until one landed between an
    approval's y and its POST (bench/upstream/footer_leak.py reproduces both;
    tests/ui/test_layout.py checks a closed dialog's lines are let go). The cache only
    saves blending two colours; it is emptied when a dialog closes.
    """
    try:
        from textual._styles_cache import StylesCache

        StylesCache.get_inner_outer.cache_clear()
    except (ImportError, AttributeError):
        return


# -- the input thread --------------------------------------------------------------------------
class _Wakeup(threading.Event):
    """The input thread's exit flag, which also wakes the thread when it is set: a byte
    down a pipe the thread selects on beside the terminal. The pipe lives as long as one
    run of the thread (a suspended app stops the thread and starts another on resume)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._write: int | None = None

    def open(self) -> int:
        """A fresh pipe for this run of the thread: its reading end."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        with self._lock:
            self._write = write
        return read

    def close(self, read: int) -> None:
        with self._lock:
            write, self._write = self._write, None
        os.close(read)
        if write is not None:
            os.close(write)

    def set(self) -> None:
        with self._lock:  # never a write to a pipe closed (and its number reused) meanwhile
            super().set()
            if self._write is not None:
                with contextlib.suppress(BlockingIOError):  # full: the thread is awake
                    os.write(self._write, b"\0")


def _drain(read: int) -> None:
    with contextlib.suppress(BlockingIOError):
        os.read(read, 4096)


def _quiet_run_input_thread(self: Any) -> None:
    """``LinuxDriver.run_input_thread`` of textual 8.2.8, asleep while nothing is half read.

    The same loop (one selector, the XTermParser fed what is read, its ``tick`` after every
    wake for the lone-ESC timeout), with two changes: the select waits with no timeout
    while the parser holds nothing partial (its ``_timeout_time`` is None), and 0.1 s, as
    upstream, while it does; and it watches a pipe that :class:`_Wakeup` writes to when
    the driver sets ``exit_event``, so leaving (quit, suspend) does not wait for a key.
    """
    from textual._loop import loop_last
    from textual._parser import ParseError
    from textual._xterm_parser import XTermParser

    exit_event: _Wakeup = self.exit_event
    wake = exit_event.open()
    os.set_blocking(wake, False)
    selector = selectors.SelectSelector()
    fileno = self.fileno
    selector.register(fileno, selectors.EVENT_READ)
    selector.register(wake, selectors.EVENT_READ)
    parser = XTermParser(self._debug)
    feed, tick = parser.feed, parser.tick
    decode = getincrementaldecoder("utf-8")().decode

    def process(ready: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
        keys = []
        for key, mask in ready:
            if key.fd == wake:
                _drain(wake)
            elif mask & selectors.EVENT_READ:
                keys.append(key)
        for last, _key in loop_last(keys):
            text = decode(os.read(fileno, 1024 * 4), final=final and last)
            if not text:  # stdin is a pipe that ended
                break
            for event in feed(text):
                self.process_message(event)
        for event in tick():
            self.process_message(event)

    try:
        while not exit_event.is_set():
            process(selector.select(None if parser._timeout_time is None else 0.1))
        selector.unregister(fileno)
        selector.unregister(wake)
        process(selector.select(0.1), final=True)
    finally:
        selector.close()
        exit_event.close(wake)
        try:
            for _event in feed(""):
                pass
        except (EOFError, ParseError):
            pass


@functools.cache
def _quiet_driver(base: type[Driver]) -> type[Driver]:
    """``base`` (textual 8.2.8's LinuxDriver) with the input thread of
    :func:`_quiet_run_input_thread` and an ``exit_event`` that wakes it."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        self.exit_event = _Wakeup()

    quiet: type[Driver] = type(f"Quiet{base.__name__}", (base,), {
        "__init__": __init__, "run_input_thread": _quiet_run_input_thread,
        "__doc__": f"{base.__name__} whose input thread sleeps until a key arrives."})
    return quiet


def quiet_input(driver_class: type[Driver]) -> type[Driver]:
    """The driver to run the app with: Textual's Linux driver with its input thread asleep
    until a key arrives (or it is told to stop), else ``driver_class`` unchanged.

    Fixes: Textual (8.2.8, and its main branch in June 2026) reads the terminal in a
    thread that loops on ``selector.select(0.1)`` in ``LinuxDriver.run_input_thread``:
    it wakes ten times a second whether or not a key came, to call the parser's ``tick``
    (which only matters while an escape sequence is half read: a lone ESC is told from
    the start of a sequence by a timeout) and to see ``exit_event``.

    Measured: the attached dashboard idle cost 0.59 % of a core at 80x24, of which that
    thread took 0.09-0.13 % (schedstat, 30 s; a kernel wake costs ~60 us here). With
    this driver, side by side with Textual's in one run (40 s): 0.11 % for Textual's
    input thread, and 0.008 % for every thread but the main one together here
    (bench/RESULTS.md, "one poller per VM").

    The thread is :func:`_quiet_run_input_thread`: upstream's loop, asleep while the
    parser holds nothing, ticking every 0.1 s (as upstream's always does) while it does,
    woken through a pipe when ``exit_event`` is set. tests/ui/test_input_thread.py runs a
    real setui in a pty: the thread asleep with no timeout, a key after it, a lone ESC,
    quit, suspend and resume. Only Textual's own ``LinuxDriver`` is replaced (not another
    driver, nor the headless one of Pilot), and only when its parser keeps the timeout
    this reads.
    """
    try:
        from textual._xterm_parser import XTermParser
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:
        return driver_class
    if driver_class is not LinuxDriver or not callable(getattr(LinuxDriver, "run_input_thread",
                                                               None)):
        return driver_class
    probe = XTermParser()
    if "_timeout_time" not in vars(probe) or probe._timeout_time is not None:
        return driver_class
    return _quiet_driver(LinuxDriver)
