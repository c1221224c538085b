"""NO_COLOR, read from the bytes a real `setui demo` writes to a real terminal (a pty)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.children import SETUI
from tests.support.dashboard import WIDE, MakeDashboard, start

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="a pty is POSIX-only")]

PATIENCE = 60.0
SGR = re.compile(rb"\x1b\[([0-9;:]*)m")


def _colour_parameters(parameters: bytes) -> list[str]:
    """The colour parts of one SGR sequence: 30-39, 40-49, 90-97, 100-107, and the
    38/48/58 extended forms."""
    found = []
    for part in re.split(rb"[;:]", parameters) if parameters else []:
        if not part:
            continue
        number = int(part)
        if 30 <= number <= 49 or 90 <= number <= 107 or number in (58, 59):
            found.append(part.decode())
    return found


def _run_in_a_pty(tmp_path: Path, **env: str) -> bytes:
    """`setui demo` at 80x24 in a pty until it has drawn an event, then q; its output."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    environment = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor",
                   "XDG_CONFIG_HOME": str(tmp_path / "config"), "SETUI_CONFIG": "",
                   **env}
    if "NO_COLOR" not in env:
        environment.pop("NO_COLOR", None)
    proc = subprocess.Popen([*SETUI, "demo", "--speed", "60", "--interval", "0.2"],
                            stdin=follower, stdout=follower, stderr=follower,
                            env=environment, start_new_session=True)
    os.close(follower)
    out = bytearray()
    deadline = time.monotonic() + PATIENCE
    asked_to_quit = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the other side closed: the app has ended
                    break
                if not chunk:
                    break
                out += chunk
            if not asked_to_quit and b"Freeze" in out and b"Approve" in out:
                os.write(leader, b"q")
                asked_to_quit = True
            if proc.poll() is not None and not ready:
                break
        assert asked_to_quit, out[-2000:]
        assert proc.wait(timeout=PATIENCE) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(leader)
    return bytes(out)


def test_no_color_sends_attributes_and_no_colour_at_all(tmp_path: Path) -> None:
    out = _run_in_a_pty(tmp_path, NO_COLOR="1")
    sequences = SGR.findall(out)
    colours = sorted({c for s in sequences for c in _colour_parameters(s)})
    assert colours == [], f"colour SGR parameters under NO_COLOR: {colours}"
    attributes = {p for s in sequences for p in re.split(rb"[;:]", s) if p}
    assert b"1" in attributes and b"7" in attributes  # bold, reverse: they carry the meaning


def test_without_no_color_the_same_run_has_colour(tmp_path: Path) -> None:
    # The check above can fail: the same reading finds the colours of a normal run.
    out = _run_in_a_pty(tmp_path)
    assert any(_colour_parameters(s) for s in SGR.findall(out))


# -- the same attributes whatever the theme -----------------------------------------------------
Attributes = tuple[str, bool, bool, bool, bool, bool]  # the character; bold, dim, italic,
# underline, reverse


def _drawn(app: Any) -> list[list[Attributes]]:
    """Each cell of the screen as it reaches the terminal (the app's line filters are
    applied when widgets render): its character and its attributes."""
    rows = []
    for strip in app.screen._compositor.render_strips():
        row: list[Attributes] = []
        for text, style, control in strip:
            if control:
                continue
            assert style is None or (style.color is None and style.bgcolor is None), style
            flags = (False,) * 5 if style is None else (
                bool(style.bold), bool(style.dim), bool(style.italic), bool(style.underline),
                bool(style.reverse))
            row += [(char, *flags) for char in text]
        rows.append(row)
    return rows


async def _dashboard_in(make_dashboard: MakeDashboard, theme: str) -> list[list[Attributes]]:
    d = make_dashboard(shown_endpoint=True)
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        d.app.theme = theme
        await d.wait_for(pilot, lambda: d.app.theme == theme)
        await pilot.pause()
        d.app.main_screen.refresh_view()
        await pilot.pause()
        return _drawn(d.app)


@pytest.mark.parametrize("theme", ["setui-dark", "setui-light", "setui-amber"])
async def test_no_color_draws_the_attributes_of_the_mono_theme_in_every_theme(
        make_dashboard: MakeDashboard, monkeypatch: pytest.MonkeyPatch, theme: str) -> None:
    """Under NO_COLOR no colour reaches the terminal, so a theme's colours cannot say
    anything: the selection must still be reverse and a neighbour's row dim, as the help
    says, whatever the theme. The attributes drawn are the mono theme's, cell by cell."""
    monkeypatch.setenv("NO_COLOR", "1")
    mono = await _dashboard_in(make_dashboard, "setui-mono")
    # The reference says what the help promises: the selected row (this VM's Freeze, the
    # first) is reverse, and a neighbour's row (web-1's Freeze, the third) is dim.
    text = ["".join(cell[0] for cell in row) for row in mono]
    selected = next(i for i, line in enumerate(text) if "▲ web-0 +1" in line)
    neighbour = next(i for i, line in enumerate(text) if line.rstrip().endswith("web-1"))
    assert all(cell[5] for cell in mono[selected][:40]), text[selected]
    assert all(cell[2] for cell in mono[neighbour][1:40] if cell[0] != " "), text[neighbour]
    drawn = await _dashboard_in(make_dashboard, theme)
    assert ["".join(cell[0] for cell in row) for row in drawn] == text
    for y, (want, got) in enumerate(zip(mono, drawn, strict=True)):
        assert got == want, f"line {y} {text[y]!r} differs in {theme}"
