"""The dashboard as ``setui`` opens it (commands.dashboard.live_app) where the agent should
answer and does not: a socket given on purpose that is not there, or the agent installed as
the service (under a test system root, SETUI_SYSTEM_ROOT) and not answering. It shows the
events standalone, and ``a`` approves nothing: it says why and what to do, with no dialog
and no request to the service."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from setui.commands.dashboard import live_app
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.settings.config import Config
from setui.ui.screens.confirm import ConfirmationModal
from setui.ui.widgets.events import EventsTable
from tests.support.dashboard import WIDE, wait_for
from tests.support.emulated import posts

MINE = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
SCENARIO = f"""
name = "no-bypass"
vm_name = "app-vm-1"
tail = 600

[[events]]
id = "{MINE}"
type = "Reboot"
source = "User"
at = 0
notice = "15m"
duration = -1
"""


@pytest.mark.parametrize("where", ["socket given", "service installed"])
async def test_the_dashboards_approvals_are_off_where_the_agent_should_answer(
        where: str, make_emulator: Callable[..., Emulator], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    emulator = make_emulator(parse_scenario(SCENARIO))
    system = tmp_path / "system"
    system.mkdir()
    monkeypatch.setenv("SETUI_SYSTEM_ROOT", str(system))
    socket = None
    if where == "socket given":
        socket = tmp_path / "missing.sock"
        said = (f"no agent at {socket}: nothing is there (the socket named by --socket, "
                "SETUI_SOCKET or socket = in the config)")
    else:
        unit = system / "etc" / "systemd" / "system" / "setui-agent.service"
        unit.parent.mkdir(parents=True)
        unit.write_text("[Unit]\n")
        said = f"the agent is installed as this VM's service ({unit})"
    config = Config(endpoint=emulator.url, data_dir=tmp_path / "data", socket=socket,
                    interval=0.2)
    app, store = live_app(config)
    try:
        async with app.run_test(size=WIDE) as pilot:
            table = app.main_screen.query_one(EventsTable)
            await wait_for(pilot, lambda: table.select_key(MINE))
            await pilot.pause()
            assert app.main_screen.active_bindings["a"].enabled is False  # shown, dimmed
            # Said once at the start: why, and what to do (not twice over, as standalone).
            [greeted] = [n for n in app.notices if said in n]
            assert greeted.startswith("Approvals are off: ") and "--standalone" in greeted
            await pilot.press("a")
            await wait_for(pilot, lambda: any(n.startswith("Not approved: ")
                                              for n in app.notices))
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmationModal)
            [refused] = [n for n in app.notices if n.startswith("Not approved: ")]
            assert refused == "Not approved: " + greeted.removeprefix("Approvals are off: ")
    finally:
        if store is not None:
            store.close()
    assert posts(emulator) == []
