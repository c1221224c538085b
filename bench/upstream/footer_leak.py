"""Textual's Footer keeps every FooterKey it ever composed alive (textual 8.2.8).

Each FooterKey is composed with ``data_bind(compact=Footer.compact)``, which adds a
``(FooterKey, setter)`` watcher to the Footer's ``compact`` reactive. Textual drops
watchers of closed widgets only when that reactive changes, and ``compact`` never does;
but the Footer recomposes whenever its screen's bindings are refreshed, for example each
time a screen above it is dismissed. So every modal opened and closed leaves the old
FooterKeys (and all they hold) alive, and every later full garbage collection is longer.

A second, bounded, retention shows in the same run: ``StylesCache.get_inner_outer`` is
decorated with ``lru_cache(1024)`` on the method, so its keys hold the StylesCache (and
every line it rendered) of each widget rendered, the closed modals' too, up to 1,024.

Run: python bench/upstream/footer_leak.py [cycles]  (needs only textual)
Prints the objects still alive after a full collection, the Footer's watchers, and how
many StylesCaches that lru_cache holds.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Footer, Label


class Dialog(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        yield Label("a modal")


class LeakApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "one", "One"), Binding("b", "two", "Two"),
        Binding("c", "three", "Three"), Binding("d", "four", "Four")]

    def compose(self) -> ComposeResult:
        yield Label("main screen")
        yield Footer()


def watchers(footer: Footer) -> int:
    return len(getattr(footer, "__watchers", {}).get("compact", []))


def styles_caches() -> int:
    from textual._styles_cache import StylesCache

    return StylesCache.get_inner_outer.cache_info().currsize


async def main(cycles: int) -> None:
    app = LeakApp()
    async with app.run_test() as pilot:
        await pilot.pause()
        footer = app.query_one(Footer)
        gc.collect()
        start = len(gc.get_objects())
        print(f"before: {start} objects, {watchers(footer)} watchers on Footer.compact, "
              f"{styles_caches()} StylesCaches held by get_inner_outer's lru_cache")
        for _ in range(cycles):
            await app.push_screen(Dialog())
            await pilot.pause()
            app.pop_screen()
            await pilot.pause()
            await pilot.pause()
        gc.collect()
        alive = len(gc.get_objects())
        print(f"after {cycles} open/close cycles: {alive} objects "
              f"(+{(alive - start) / cycles:.0f} per cycle), "
              f"{watchers(footer)} watchers on Footer.compact, "
              f"{styles_caches()} StylesCaches held by get_inner_outer's lru_cache")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
