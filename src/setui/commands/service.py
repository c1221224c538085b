"""``setui service``: the systemd unit that keeps a recorder running.

History exists only while something polls. ``setui service print`` shows the unit and
``setui service install [--now]`` puts it in place, so ``setui watch`` records from boot
to shutdown with nobody logged in. The unit is shipped as package data
(``setui/data/setui-recorder.service``); what changes per machine is ExecStart=, which
must name the Python that runs *this* setui (a venv or pipx install is invisible to a
service that would look for ``setui`` on PATH).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import IO

from setui import __version__
from setui.commands.common import EXIT_FAILED, EXIT_OK
from setui.textsafe import printable

__all__ = ["AGENT_UNIT_NAME", "UNIT_CONFIG", "UNIT_DIR", "UNIT_NAME", "UnitError",
           "add_arguments", "exec_start_word", "install", "policy_problems", "render_unit", "run",
           "template", "unit_problems"]

UNIT_NAME = "setui-recorder.service"
AGENT_UNIT_NAME = "setui-agent.service"  # `setui agent` instead of `setui watch`
UNIT_DIR = Path("/etc/systemd/system")
# What the units cannot see: ProtectHome= hides the home directories (usually not
# readable by the service's own user anyway), PrivateTmp= gives it a /tmp and /var/tmp of
# its own. An interpreter, a setui, a policy or a hook there cannot be used by the unit.
_HIDDEN = tuple((PurePosixPath(top), why) for top, why in (
    ("/home", "ProtectHome="), ("/root", "ProtectHome="), ("/run/user", "ProtectHome="),
    ("/tmp", "PrivateTmp=: it has a /tmp of its own"),
    ("/var/tmp", "PrivateTmp=: it has a /var/tmp of its own")))
# The units' config file (Environment=SETUI_CONFIG=): the agent's policy is found from it.
UNIT_CONFIG = Path("/etc/setui/config.toml")
# An ExecStart= word that systemd takes as it is: anything else is quoted.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9/._+,:@=%-]+")
_EXEC_LINE = re.compile(r"^ExecStart=(\S+) (-m setui\.cli .*)$", re.MULTILINE)


class UnitError(Exception):
    """The unit cannot be written for this installation; the message says why."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    print_parser = actions.add_parser(
        "print", help="write the unit to stdout",
        description=f"Write {UNIT_NAME}, with ExecStart= naming this Python, to stdout.")
    install_parser = actions.add_parser(
        "install", help=f"install {UNIT_NAME} (as root) and reload systemd",
        description=f"Write {UNIT_DIR / UNIT_NAME} (mode 0644, replaced atomically), then "
                    "run `systemctl daemon-reload`. Needs root.")
    install_parser.add_argument("--now", action="store_true",
                                help="also enable the unit and start it now "
                                     "(systemctl enable --now)")
    install_parser.add_argument("--unit-dir", type=Path, default=None, metavar="DIR",
                                help=f"write the unit into DIR instead of {UNIT_DIR} "
                                     "(root is then not required; systemctl still runs)")
    for sub in (print_parser, install_parser):
        sub.add_argument("--agent", action="store_true",
                         help=f"{AGENT_UNIT_NAME} (runs `setui agent`, with the policy "
                              "/etc/setui/policy.toml if it exists) instead of the recorder")


def template(name: str = UNIT_NAME) -> str:
    """The unit as shipped: ExecStart= names /usr/bin/python3."""
    return resources.files("setui.data").joinpath(name).read_text(encoding="utf-8")


def exec_start_word(path: str) -> str:
    """``path`` as the first word of ExecStart=: in double quotes when it has spaces, with
    ``%`` doubled (systemd expands specifiers there; ``$`` it leaves alone in this word).

    systemd refuses outright an executable whose name holds a quote, an apostrophe, a
    backslash or a control character ("Executable name contains special characters"),
    quoted or not: such a path is refused here, where the message can say what to do.
    """
    if not path or any(not char.isprintable() or char in "\"'\\" for char in path):
        raise UnitError(f"systemd cannot run an interpreter at {printable(path, 200)}: its "
                        "path is empty or holds a quote, an apostrophe, a backslash or a "
                        "control character. Install setui under a plainer path")
    text = path.replace("%", "%%")
    return text if _PLAIN_WORD.fullmatch(path) else f'"{text}"'


def render_unit(python: str | None = None, name: str = UNIT_NAME) -> str:
    """The unit with ExecStart= running ``python -m setui.cli watch`` (default: the
    interpreter running now)."""
    if os.name != "posix":
        raise UnitError(f"systemd units are for Linux; this is {sys.platform}. Run `setui "
                        "watch` under this system's own service manager instead")
    interpreter = sys.executable if python is None else python
    if not interpreter or not PurePosixPath(interpreter).is_absolute():
        raise UnitError(f"cannot tell which Python runs setui (sys.executable is "
                        f"{printable(interpreter or 'empty', 200)}): run setui with an "
                        "interpreter given by its absolute path")
    text = template(name)
    found = _EXEC_LINE.findall(text)
    if len(found) != 1:  # a packaging mistake, not the user's
        raise UnitError(f"the shipped {name} has {len(found)} ExecStart= lines of the "
                        "form 'ExecStart=PYTHON -m setui.cli ...'; expected exactly one")
    word = exec_start_word(interpreter)
    text = _EXEC_LINE.sub(lambda match: f"ExecStart={word} {match.group(2)}", text)
    note = (f"# ExecStart= below was written by setui {__version__} for the Python at\n"
            f"# {printable(interpreter)}. After moving or removing that installation, run\n"
            f"# `setui service install` again from the new one.\n\n")
    head, sep, rest = text.partition("[Unit]")
    return head + note + sep + rest if sep else note + text


def unit_problems(python: str | None = None, package: Path | None = None) -> list[str]:
    """Why the unit could not run this installation, if it could not: an interpreter or a
    setui package where the service cannot see it (a home directory, /tmp)."""
    interpreter = sys.executable if python is None else python
    if package is None:
        import setui

        package = Path(setui.__file__).parent
    # The venv's own path and the interpreter it links to: both must be reachable.
    return _hidden([("Python setui runs from", Path(interpreter)),
                    ("Python setui runs from", Path(interpreter).resolve()),
                    ("setui package", package.resolve())])


def policy_problems(config: Path = UNIT_CONFIG) -> list[str]:
    """What the agent's unit could not see of the policy it would read (named in
    ``config``, else beside it) and of that policy's hooks."""
    return _hidden(_policy_files(config))


def _hidden(candidates: list[tuple[str, Path]]) -> list[str]:
    problems: list[str] = []
    seen: set[Path] = set()
    for what, path in candidates:
        hidden = next(((top, why) for top, why in _HIDDEN
                       if PurePosixPath(path).is_relative_to(top)), None)
        if hidden is not None and path not in seen:
            seen.add(path)
            top, why = hidden
            problems.append(f"the {what}, {printable(str(path))}, is under {top}, which the "
                            f"service cannot see ({why}, and it runs as a user of its own)")
    return problems


def _policy_files(config: Path) -> list[tuple[str, Path]]:
    """The policy the agent's unit would read, and its hooks; none when it cannot be read
    (the agent itself says why when it starts)."""
    from setui.agent.policy import PolicyError, default_policy, load_policy
    from setui.config import ConfigError, load_config

    try:
        named = load_config(config, environ={}).policy if config.exists() else None
    except ConfigError:
        return []
    path = named or default_policy(config)
    try:
        policy = load_policy(path)
    except PolicyError:
        return [("policy", path)]
    return [("policy", path)] + [(f"{step} hook of rule {rule.name}", Path(hook.argv[0]))
                                 for rule, step, hook in policy.hooks()]


def _say(stream: IO[str], text: str) -> None:
    stream.write(text + "\n")
    stream.flush()


def _write_atomically(directory: Path, name: str, text: str) -> bool:
    """Write ``directory/name`` (mode 0644) by renaming a complete temporary file over
    it, so systemd never reads half a unit. Returns whether the content changed."""
    target = directory / name
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if target.read_text(encoding="utf-8") == text and \
                (target.stat().st_mode & 0o777) == 0o644:
            return False
    from setui.store.files import write_atomically

    write_atomically(target, text, mode=0o644)
    return True


def _systemctl(systemctl: str, *args: str, err: IO[str]) -> bool:
    """Run systemctl with its output shown as it is; say in words when it fails."""
    command = " ".join(("systemctl", *args))
    try:
        done = subprocess.run([systemctl, *args], stdin=subprocess.DEVNULL, check=False)
    except OSError as exc:
        _say(err, f"setui: cannot run {command}: {exc.strerror or exc}")
        return False
    if done.returncode != 0:
        _say(err, f"setui: `{command}` failed (exit {done.returncode}); see its message "
                  "above")
        return False
    return True


def install(*, now: bool, unit_dir: Path | None, out: IO[str], err: IO[str],
            name: str = UNIT_NAME) -> int:
    """``setui service install``: root check, write, daemon-reload, optionally enable."""
    unit = name.removesuffix(".service")
    if not sys.platform.startswith("linux"):
        _say(err, f"setui: systemd units are for Linux; this is {sys.platform}. Run "
                  "`setui watch` under this system's own service manager instead.")
        return EXIT_FAILED
    directory = UNIT_DIR if unit_dir is None else unit_dir.expanduser()
    if unit_dir is None and os.geteuid() != 0:
        _say(err, f"setui: installing the service writes {UNIT_DIR / name} and runs "
                  "systemctl, which needs root. Run it with sudo, naming this setui "
                  "(sudo does not keep your PATH):\n"
                  '  sudo "$(command -v setui)" service install --now')
        return EXIT_FAILED
    try:
        text = render_unit(name=name)
    except UnitError as exc:
        _say(err, f"setui: {exc}")
        return EXIT_FAILED
    problems = unit_problems()
    if problems:
        _say(err, "setui: not installing the service: " + "; ".join(problems) + ". Install "
                  "setui where every user can read it (a venv in /opt, or `sudo pipx "
                  "install --global setui`) and run its `setui service install`; or adapt "
                  "`setui service print` by hand.")
        return EXIT_FAILED
    for problem in policy_problems() if name == AGENT_UNIT_NAME else []:
        _say(err, f"setui: warning: {problem}")
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        _say(err, "setui: systemctl was not found on PATH: this system does not seem to "
                  "run systemd, so there is nothing to install the unit into. `setui "
                  "service print` shows the unit; `setui watch` records under any other "
                  "service manager.")
        return EXIT_FAILED
    if not directory.is_dir():
        _say(err, f"setui: cannot install the service: {printable(str(directory))} is not "
                  "a directory")
        return EXIT_FAILED
    target = directory / name
    existed = target.exists()
    try:
        changed = _write_atomically(directory, name, text)
    except OSError as exc:
        _say(err, f"setui: cannot write {printable(str(target))}: {exc.strerror or exc}")
        return EXIT_FAILED
    _say(out, f"{'wrote' if changed else 'unchanged:'} {printable(str(target))}")
    if not _systemctl(systemctl, "daemon-reload", err=err):
        return EXIT_FAILED
    if now:
        if not _systemctl(systemctl, "enable", "--now", name, err=err):
            _say(err, f"setui: see why with `systemctl status {unit}` and "
                      f"`journalctl -u {unit}`")
            return EXIT_FAILED
        _say(out, f"{unit} is enabled and started. Check it with "
                  f"`systemctl status {unit}`.")
    else:
        _say(out, "Start it, now and at every boot, with `systemctl enable --now "
                  f"{unit}`.")
    if existed and changed:
        _say(out, f"If {unit} was already running, `systemctl restart "
                  f"{unit}` makes it use the new unit.")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    name = AGENT_UNIT_NAME if getattr(args, "agent", False) else UNIT_NAME
    if args.action == "print":
        try:
            text = render_unit(name=name)
        except UnitError as exc:
            _say(sys.stderr, f"setui: {exc}")
            return EXIT_FAILED
        for problem in unit_problems() + (policy_problems() if name == AGENT_UNIT_NAME
                                          else []):
            _say(sys.stderr, f"setui: warning: {problem}")
        sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_OK
    return install(now=args.now, unit_dir=args.unit_dir, out=sys.stdout, err=sys.stderr,
                   name=name)
