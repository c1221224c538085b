"""``setui service uninstall``: take away what ``service install`` put in place, each
thing said as it goes, and leave the record.

Removed: the agent's unit (stopped and disabled first on the running system), the login
line's hook (only a hook of setui's own: its marker says so), and /etc/setui when it is
empty (install made it; a config file or a policy in it is the administrator's and
stays). Left, and said: the store (/var/lib/setui, the history and the audit log are
the VM's record, not part of the installation) and the group setui (the store's files
carry it, and its members are the administrator's choice). What to remove is derived
from the layout, the same paths install writes, so nothing has to be remembered between
the two. Under ``--root DIR`` it runs no systemctl.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import IO

from setui.install.installer import EXIT_FAILED, EXIT_OK, Systemctl, reach_systemctl, voices
from setui.install.layout import GROUP, Layout, shown
from setui.install.loginhook import is_ours
from setui.install.unit import AGENT_UNIT

__all__ = ["uninstall"]


def _refusal(layout: Layout) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"systemd units are for Linux; this is {sys.platform}: nothing to uninstall"
    if os.geteuid() != 0:
        where = "" if layout.host else f" (under {shown(layout.root)} too)"
        return ("uninstalling the service removes its unit and the login line's hook, "
                f"and runs systemctl, which needs root{where}. Run it with sudo:\n"
                '  sudo "$(command -v setui)" service uninstall')
    return None


def uninstall(layout: Layout, *, out: IO[str], err: IO[str],
              systemctl: Systemctl | None = None) -> int:
    """Remove the service from ``layout``'s system; ``systemctl`` as for install."""
    say, fail = voices(out, err)
    refused = _refusal(layout)
    if refused is not None:
        return fail(refused)
    try:
        systemctl = reach_systemctl(layout, systemctl, err)
    except FileNotFoundError:
        return fail("systemctl was not found on PATH: the unit cannot be stopped here; "
                    "nothing was changed")
    unit = layout.agent_unit
    if os.path.lexists(unit):
        if systemctl is not None and not systemctl("disable", "--now", AGENT_UNIT):
            return fail("the agent was not stopped, so nothing was removed")
        if systemctl is not None:
            say(f"stopped and disabled {AGENT_UNIT}")
        try:
            os.unlink(unit)
        except OSError as exc:
            return fail(f"cannot remove {shown(unit)}: {exc.strerror or exc}")
        say(f"removed {shown(unit)}")
    else:
        say(f"not there: {shown(unit)}")
    drop_ins = layout.unit_dir / f"{AGENT_UNIT}.d"
    if drop_ins.is_dir():
        say(f"note: {shown(drop_ins)} holds drop-ins, left as they are (yours)")
    status = _remove_hook(layout, say, fail)
    _remove_config_dir(layout, say)
    if systemctl is not None and not systemctl("daemon-reload"):
        return EXIT_FAILED
    if systemctl is None:
        say(f"(under {shown(layout.root)}: no systemctl was run)")
    group = GROUP if layout.host else f"{GROUP} (in {shown(layout.group_file)})"
    say(f"left: the store {shown(layout.store)} (this VM's history and audit log) and the "
        f"group {group}, for you to remove if the record is not to be kept")
    return status


def _remove_hook(layout: Layout, say: Callable[[str], None],
                 fail: Callable[[str], int]) -> int:
    hook = layout.login_hook
    if hook.is_symlink():
        say(f"left {shown(hook)}: it is a symbolic link, not the hook setui writes")
        return EXIT_OK
    try:
        text = hook.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        say(f"not there: {shown(hook)}")
        return EXIT_OK
    except OSError as exc:
        return fail(f"cannot read {shown(hook)}: {exc.strerror or exc}")
    if not is_ours(text):
        say(f"left {shown(hook)}: it is not the hook setui writes")
        return EXIT_OK
    try:
        os.unlink(hook)
    except OSError as exc:
        return fail(f"cannot remove {shown(hook)}: {exc.strerror or exc}")
    say(f"removed {shown(hook)}: logins no longer show this VM's events")
    return EXIT_OK


def _remove_config_dir(layout: Layout, say: Callable[[str], None]) -> None:
    directory = layout.config_dir
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        return
    except OSError:
        if directory.is_dir():
            say(f"left {shown(directory)}: it holds files of yours (the agent's config "
                "or policy)")
        return
    say(f"removed {shown(directory)} (it was empty)")
