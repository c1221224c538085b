"""Textual's private API in one module (setui.ui.compat), installed at app start; the
Textual pinned to the minor version tested; screens that post messages up and keep their
state in reactives instead of reaching into the app or Textual's bindings."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from textual import on
from textual.message import Message

from setui.core.health import ConnectionState, Health
from setui.core.model import parse_document
from setui.settings.config import Config
from setui.ui import messages
from setui.ui.format import Palette
from setui.ui.messages import Session
from setui.ui.screens.main import MainScreen
from setui.ui.widgets.events import EventsTable
from setui.ui.widgets.keys import KeyBar
from tests.support.screenhost import ScreenApp

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "setui"
# The brief's check, and Textual's private modules imported from anywhere.
PRIVATE = re.compile(r"textual\._|textual\.widgets\._|\._data\b|_render_cell|\._bindings"
                     r"|_cell_render_cache|_line_cache|_row_render_cache|\._filters\b"
                     r"|\._notifications\b|\._unnotify|\._refresh_notifications")


def test_textual_private_names_are_only_in_compat() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).as_posix() == "ui/compat.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)
    compat = (SRC / "ui" / "compat.py").read_text(encoding="utf-8")
    assert PRIVATE.search(compat)  # the check finds what it looks for


def test_textual_is_pinned_to_the_minor_version_tested() -> None:
    """A new minor release of Textual may change what compat relies on: it is a
    deliberate upgrade (`make test-textual-latest` tries the newest first)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    wanted = next(Requirement(line.strip().strip('",'))
                  for line in text.splitlines() if line.strip().startswith('"textual'))
    installed = metadata.version("textual")
    assert wanted.specifier.contains(installed), (wanted, installed)
    major, minor, *_ = (int(part) for part in installed.split("."))
    assert not wanted.specifier.contains(f"{major}.{minor + 1}.0"), wanted


_FRESH = """
import sys
from textual.app import App
from setui.ui import compat
from setui.ui.widgets.lines import ChangedLines

class Plain(App):
    def compose(self):
        yield ChangedLines()

async def main():
    async with Plain().run_test() as pilot:
        await pilot.pause()
    print("after a widget:", compat.installed())
    from setui.ui.shell import TerminalApp
    TerminalApp()
    print("after the app:", compat.installed())

import asyncio
asyncio.run(main())
"""


@pytest.mark.slow
def test_the_repaint_patch_is_installed_by_the_app_not_by_a_widget() -> None:
    """Mounting a widget changed Textual's compositor for the whole process; the app
    installs it, explicitly, when it starts (in a fresh interpreter: it is process-wide)."""
    done = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["after a widget: False", "after the app: True"]


# -- the main screen with any host: messages up, state in reactives --------------------------
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
DOCUMENT = parse_document({"DocumentIncarnation": 3, "Events": [
    {"EventId": "E1", "EventType": "Reboot", "EventStatus": "Scheduled",
     "ResourceType": "VirtualMachine", "Resources": ["web-0"],
     "NotBefore": "Sun, 22 Nov 2026 10:20:00 GMT", "DurationInSeconds": 5},
    {"EventId": "E2", "EventType": "Freeze", "EventStatus": "Scheduled",
     "ResourceType": "VirtualMachine", "Resources": ["db-0"],
     "NotBefore": "Sun, 22 Nov 2026 10:30:00 GMT", "DurationInSeconds": 5},
]})


@dataclass
class Host:
    """The smallest read-only view a main screen needs: no app behind it."""

    session: Session = field(default_factory=Session)
    vm_name: str | None = "web-0"
    palette: Palette = field(default_factory=Palette)
    config: Config = field(default_factory=Config)
    demo: bool = False
    replay_label: str | None = None
    store_status: str | None = None
    recorder_note: str | None = None
    link: None = None
    approvals_off: str | None = None
    approvals_here = True

    def now(self) -> datetime:
        return T0

    def health(self) -> Health:
        return Health(state=ConnectionState.LIVE, last_success=T0)

    def stale(self) -> bool:
        return False

    def agent_plan(self, event_id: str | None) -> str:
        return ""

    def window(self) -> None:
        return None


class HostApp(ScreenApp):
    """Hosts a main screen, with the dashboard's stylesheet, and records what it is
    asked, as messages."""

    CSS_PATH = str(SRC / "ui" / "app.tcss")

    def __init__(self, screen: MainScreen) -> None:
        super().__init__(screen)
        self.asked: list[Message] = []

    @on(messages.ApprovalRequested)
    @on(messages.HoldRequested)
    @on(messages.DetailsRequested)
    @on(messages.PollRequested)
    @on(messages.HistoryRequested)
    @on(messages.AuditRequested)
    def asked_for(self, message: Message) -> None:
        self.asked.append(message)


def hosted(*, read_only: bool = False) -> tuple[MainScreen, HostApp]:
    """A main screen over the two events, on a bare host, in an app that records."""
    host = Host()
    host.session.document = DOCUMENT
    screen = MainScreen(host=host, read_only=read_only)
    return screen, HostApp(screen)


async def test_the_main_screen_asks_by_messages_and_reads_only_its_host() -> None:
    screen, app = hosted()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen.refresh_view()
        await pilot.pause()
        assert screen.query_one(EventsTable).keys == ["E1", "E2"]
        await pilot.press("a", "H", "d", "r", "h", "l")
        await pilot.pause()
        asked = [(type(m).__name__, getattr(m, "event_id", None)) for m in app.asked]
        assert asked == [("ApprovalRequested", "E1"), ("HoldRequested", "E1"),
                         ("DetailsRequested", "E1"), ("PollRequested", None),
                         ("HistoryRequested", None), ("AuditRequested", None)]


async def test_the_filter_is_state_the_screen_watches() -> None:
    screen, app = hosted()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        keys = screen.query_one(KeyBar)

        def offered() -> list[str]:
            return [shown.action for shown in keys._keys()]

        assert "clear_filter" not in offered()
        screen.filter_text = "db-0"  # set from anywhere: the view and the keys follow
        await pilot.pause()
        assert screen.query_one(EventsTable).keys == ["E2"]
        assert "clear_filter" in offered()
        screen.this_vm_only = True
        await pilot.pause()
        assert screen.query_one(EventsTable).keys == []
        await pilot.press("escape")
        await pilot.pause()
        assert screen.filter_text == "" and screen.query_one(EventsTable).keys == ["E1"]


async def test_read_only_offers_no_approve_key_through_check_action() -> None:
    screen, app = hosted(read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "approve" not in [shown.action for shown in screen.query_one(KeyBar)._keys()]
        assert screen.check_action("approve", ()) is False
        await pilot.press("a")  # still said why, by the app that hosts it
        await pilot.pause()
        assert [type(m).__name__ for m in app.asked] == ["ApprovalRequested"]


def test_no_textual_subclass_of_ours_takes_a_private_name_of_textuals() -> None:
    """An attribute of ours named as one of Textual's own overwrites it: FleetApp's
    `_closing`, set at unmount, was MessagePump's, and Textual then skipped closing the
    app's messages and timers. Every `self._name =` under ui/ is checked against the
    private attributes Textual's base classes set."""
    import textual

    base = Path(textual.__file__).parent
    assigned = re.compile(r"self\.(_[a-zA-Z]\w*)\s*(?::[^=]*)?=[^=]")
    theirs: set[str] = set()
    for name in ("message_pump.py", "dom.py", "widget.py", "app.py", "screen.py",
                 "scroll_view.py"):
        theirs |= set(assigned.findall((base / name).read_text(encoding="utf-8")))
    assert "_closing" in theirs  # the check finds what it looks for
    found = []
    for path in sorted((SRC / "ui").rglob("*.py")):
        if path.name == "compat.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            clash = [n for n in assigned.findall(line) if n in theirs]
            if clash:
                found.append(f"{path.relative_to(ROOT)}:{number}: {clash}")
    assert found == [], "\n".join(found)
