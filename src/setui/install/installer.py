"""``setui service install``, step by step, each step said as it is done.

The order keeps a failure harmless: everything is checked before anything changes (the
unit can be written for this setui, the group exists or is made, the store can be taken
over); the recorder is stopped before its store moves, and its unit is removed only once
the store is the agent's, so an install that stops half way leaves a recorder that is
stopped, not one whose history is gone; the agent's unit comes last, then systemd is
told. On the running system it asks systemctl; under ``--root`` it runs nothing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

from setui.install.group import GroupError, ensure_group
from setui.install.layout import GROUP, Layout, shown
from setui.install.loginhook import render_hook
from setui.install.takeover import StorePlan, TakeoverError, busy, carry_out, plan_store
from setui.install.unit import (
    AGENT_UNIT,
    RECORDER_UNIT,
    UnitError,
    policy_problems,
    render_unit,
    unit_problems,
)
from setui.store.place import AGENT_DIR_MODE, AGENT_FILE_MODE
from setui.system.atomicfile import write_atomically

__all__ = ["EXIT_FAILED", "EXIT_OK", "Systemctl", "install", "reach_systemctl", "voices"]

EXIT_OK, EXIT_FAILED = 0, 1
_UNIT_MODE = 0o644
_CONFIG_DIR_MODE = 0o700  # only the agent reads its config and policy


def _say(stream: IO[str], text: str) -> None:
    stream.write(text + "\n")
    stream.flush()


def voices(out: IO[str], err: IO[str]) -> tuple[Callable[[str], None], Callable[[str], int]]:
    """What install and uninstall tell: ``say`` a step to ``out``; ``fail`` says why to
    ``err`` and gives the exit status to return."""
    def fail(text: str) -> int:
        _say(err, f"setui: {text}")
        return EXIT_FAILED

    return functools.partial(_say, out), fail


class Systemctl:
    """systemctl, run with its own output shown; a failure said in words."""

    def __init__(self, path: str, err: IO[str]) -> None:
        self.path = path
        self.err = err

    def __call__(self, *args: str) -> bool:
        command = " ".join(("systemctl", *args))
        try:
            done = subprocess.run([self.path, *args], stdin=subprocess.DEVNULL, check=False)
        except OSError as exc:
            _say(self.err, f"setui: cannot run {command}: {exc.strerror or exc}")
            return False
        if done.returncode != 0:
            _say(self.err, f"setui: `{command}` failed (exit {done.returncode}); see its "
                           "message above")
            return False
        return True

    def active(self, unit: str) -> bool:
        try:
            return subprocess.run([self.path, "is-active", "--quiet", unit],
                                  stdin=subprocess.DEVNULL, check=False).returncode == 0
        except OSError:
            return False


def reach_systemctl(layout: Layout, given: Systemctl | None, err: IO[str]
                    ) -> Systemctl | None:
    """How to reach systemd for ``layout``: ``given``, else the systemctl on PATH; None
    under a root, where nothing is run. FileNotFoundError: this system has none."""
    if not layout.host:
        return None
    if given is not None:
        return given
    found = shutil.which("systemctl")
    if found is None:
        raise FileNotFoundError("systemctl")
    return Systemctl(found, err)


def _refusal(layout: Layout) -> str | None:
    """Why nothing can be installed here at all, or None."""
    if not sys.platform.startswith("linux"):
        return (f"systemd units are for Linux; this is {sys.platform}. Run `setui agent` "
                "under this system's own service manager instead.")
    if os.geteuid() != 0:
        where = "" if layout.host else f" (under {shown(layout.root)} too: it sets owners)"
        return ("installing the service makes the group setui, /var/lib/setui and the unit, "
                f"and runs systemctl, which needs root{where}. Run it with sudo, naming "
                "this setui (sudo does not keep your PATH):\n"
                '  sudo "$(command -v setui)" service install --now')
    return None


def install(layout: Layout, *, now: bool, out: IO[str], err: IO[str],
            systemctl: Systemctl | None = None) -> int:
    """Install the agent's unit on ``layout``'s system. ``systemctl``: how to reach
    systemd on the running system (None: found on PATH); never used under a root."""
    say, fail = voices(out, err)
    refused = _refusal(layout)
    if refused is not None:
        return fail(refused)
    try:
        text = render_unit()
    except UnitError as exc:
        return fail(str(exc))
    problems = unit_problems()
    if problems:
        return fail("not installing the service: " + "; ".join(problems) + ". Install "
                    "setui where only root can change it and the service can see it (a "
                    "venv in /opt, or `sudo pipx install --global setui`) and run its "
                    "`setui service install`; or adapt `setui service print` by hand.")
    # Under a root the policy's paths are that system's, not this one's: not looked at.
    for problem in policy_problems(layout.config_file) if layout.host else []:
        _say(err, f"setui: warning: {problem}")
    try:
        systemctl = reach_systemctl(layout, systemctl, err)
    except FileNotFoundError:
        return fail("systemctl was not found on PATH: this system does not seem to run "
                    "systemd, so there is nothing to install the unit into. `setui "
                    "service print` shows the unit; `setui agent` runs under any other "
                    "service manager.")
    if layout.host and not layout.unit_dir.is_dir():
        return fail(f"cannot install the service: {shown(layout.unit_dir)} is not a "
                    "directory")
    try:
        gid, made = ensure_group(layout, GROUP)
        say(f"{'made' if made else 'found'} the group {GROUP} (gid {gid})"
            + (f" in {shown(layout.group_file)}" if not layout.host else ""))
        plan = plan_store(layout, gid, GROUP)
    except (GroupError, TakeoverError) as exc:
        return fail(f"not installing the service: {exc}")
    except OSError as exc:
        return fail(f"not installing the service: cannot look at the store: "
                    f"{exc.strerror or exc}: {exc.filename}")
    stopped = _stop_what_uses(layout, plan, systemctl, say)
    if stopped is None:
        return EXIT_FAILED
    if plan.needed and (holding := busy(plan)):
        fail("not taking the store over while something has it open: "
             + "; ".join(holding) + ". Stop it and run install again; nothing was changed")
        _start_again(stopped, systemctl, say)
        return EXIT_FAILED
    status = _take_store(plan, say, fail)
    if status != EXIT_OK:
        return status
    _config_dir(layout, say, err)
    if _login_hook(layout, say, err) != EXIT_OK:
        return EXIT_FAILED
    return _write_units(layout, text, systemctl, now=now, say=say, fail=fail,
                        restart=any(unit == AGENT_UNIT for unit, _ in stopped))


# A unit stopped for the takeover, and how to bring it back as it was.
Stopped = list[tuple[str, tuple[str, ...]]]


def _stop_what_uses(layout: Layout, plan: StorePlan, systemctl: Systemctl | None,
                    say: Callable[[str], None]) -> Stopped | None:
    """Stop the recorder (it retires) and, when the store must change, the agent that runs
    on it. What was stopped; None when systemctl failed (said)."""
    stopped: Stopped = []
    if systemctl is None:
        return stopped
    if os.path.lexists(layout.recorder_unit):
        if not systemctl("disable", "--now", RECORDER_UNIT):
            return None
        say(f"stopped and disabled {RECORDER_UNIT} (it retires into {AGENT_UNIT})")
        stopped.append((RECORDER_UNIT, ("enable", "--now", RECORDER_UNIT)))
    if plan.needed and os.path.lexists(layout.agent_unit) and systemctl.active(AGENT_UNIT):
        if not systemctl("stop", AGENT_UNIT):
            _start_again(stopped, systemctl, say)
            return None
        say(f"stopped {AGENT_UNIT} while its store is taken over")
        stopped.append((AGENT_UNIT, ("start", AGENT_UNIT)))
    return stopped


def _start_again(stopped: Stopped, systemctl: Systemctl | None,
                 say: Callable[[str], None]) -> None:
    """Bring back what was stopped for a takeover that did not happen."""
    for unit, how in stopped:
        if systemctl is not None and systemctl(*how):
            say(f"started {unit} again, as it was")


def _take_store(plan: StorePlan, say: Callable[[str], None],
                fail: Callable[[str], int]) -> int:
    if plan.needed:
        try:
            carry_out(plan, say)
        except TakeoverError as exc:
            return fail(str(exc))
        except OSError as exc:
            return fail(f"taking over the store failed: {exc.strerror or exc}: "
                        f"{exc.filename}. What was done is said above; run install again")
    else:
        say(f"unchanged: {shown(plan.target)} ({plan.owner}, mode {AGENT_DIR_MODE:04o}; "
            f"its files {AGENT_FILE_MODE:04o})")
    for note in plan.notes:
        say(note)
    return EXIT_OK


def _config_dir(layout: Layout, say: Callable[[str], None], err: IO[str]) -> None:
    """/etc/setui, root's alone: the agent's config file and its policy go there (both
    optional), and a policy's notification URLs carry their services' tokens."""
    directory = layout.config_dir
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        directory.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        directory.mkdir(mode=_CONFIG_DIR_MODE)
        os.chmod(directory, _CONFIG_DIR_MODE)
        say(f"made {shown(directory)} (root, {_CONFIG_DIR_MODE:04o}): the agent's config "
            "file config.toml and its policy policy.toml go there, both optional")
        return
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        _say(err, f"setui: warning: {shown(directory)} is not a directory of root's that "
                  f"only root may write ({stat.filemode(st.st_mode)}, uid {st.st_uid}): "
                  "the agent refuses a policy there")


def _login_hook(layout: Layout, say: Callable[[str], None], err: IO[str]) -> int:
    """The login line's hook in /etc/profile.d (setui.install.loginhook): 0644, root's,
    replaced whole. A running system without /etc/profile.d gets none (said)."""
    target = layout.login_hook
    if layout.host and not target.parent.is_dir():
        say(f"note: {shown(target.parent)} is not a directory here, so logins will not "
            "show this VM's events: the login line is not installed")
        return EXIT_OK
    try:
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        changed = _write_unit(target, render_hook())
    except OSError as exc:
        _say(err, f"setui: cannot write {shown(target)}: {exc.strerror or exc}. Nothing "
                  "else was changed after the store; run install again")
        return EXIT_FAILED
    say(f"{'wrote' if changed else 'unchanged:'} {shown(target)}: an interactive login "
        "shell shows this VM's events, for root and group setui")
    return EXIT_OK


def _write_units(layout: Layout, text: str, systemctl: Systemctl | None, *, now: bool,
                 restart: bool, say: Callable[[str], None],
                 fail: Callable[[str], int]) -> int:
    target = layout.agent_unit
    existed = target.exists()
    try:
        layout.unit_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        changed = _write_unit(target, text)
    except OSError as exc:
        return fail(f"cannot write {shown(target)}: {exc.strerror or exc}")
    say(f"{'wrote' if changed else 'unchanged:'} {shown(target)}")
    if os.path.lexists(layout.recorder_unit):
        try:
            os.unlink(layout.recorder_unit)
        except OSError as exc:
            return fail(f"cannot remove {shown(layout.recorder_unit)}: "
                        f"{exc.strerror or exc}")
        say(f"removed {shown(layout.recorder_unit)}: its history is the agent's now")
    for unit, why in ((RECORDER_UNIT, "they no longer apply to anything"),
                      (AGENT_UNIT, "they still apply to the new unit: check that none sets "
                                   "User=, DynamicUser= or StateDirectory=")):
        drop_ins = layout.unit_dir / f"{unit}.d"
        if drop_ins.is_dir():
            say(f"note: {shown(drop_ins)} holds drop-ins, left as they are: {why}")
    unit = AGENT_UNIT.removesuffix(".service")
    if systemctl is None:
        say(f"(under {shown(layout.root)}: no systemctl was run)")
        return EXIT_OK
    if not systemctl("daemon-reload"):
        return EXIT_FAILED
    if now or restart:
        if not systemctl(*(("enable", "--now") if now else ("start",)), AGENT_UNIT):
            return fail(f"see why with `systemctl status {unit}` and `journalctl -u {unit}`")
        say(f"{unit} is {'enabled and started' if now else 'started again'}. Check it "
            f"with `systemctl status {unit}`.")
    else:
        say(f"Start it, now and at every boot, with `systemctl enable --now {unit}`.")
    if existed and changed and not restart:
        say(f"If {unit} was already running, `systemctl restart {unit}` makes it use the "
            "new unit.")
    say(f"Members of group {GROUP} talk to the agent and read the history and the audit "
        f"log through it: `usermod -aG {GROUP} NAME` (then they log in again).")
    return EXIT_OK


def _write_unit(target: Path, text: str) -> bool:
    """Write the unit or the hook (0644) by renaming a complete file over it, so systemd
    or a login never reads half of one. Whether its content changed."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if target.read_text(encoding="utf-8") == text and \
                stat.S_IMODE(target.stat().st_mode) == _UNIT_MODE:
            return False
    write_atomically(target, text, mode=_UNIT_MODE)
    return True
