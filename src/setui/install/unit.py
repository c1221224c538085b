"""The agent's systemd unit, as shipped and as written for this installation.

The unit is package data (``setui/data/setui-agent.service``); what changes per machine is
ExecStart=, which must name the Python that runs *this* setui (a venv or a pipx install is
invisible to a service that would look for ``setui`` on PATH). The unit runs as root, so
that Python and the setui it imports must be root's alone to change (sshd's StrictModes,
as for the policy and the hooks), and somewhere the unit can see.
"""

from __future__ import annotations

import os
import re
import sys
from importlib import resources
from pathlib import Path, PurePosixPath

from setui import __version__
from setui.core.textsafe import printable

__all__ = ["AGENT_UNIT", "RECORDER_UNIT", "UNIT_CONFIG", "UNIT_DIR", "UnitError",
           "exec_start_word", "policy_problems", "render_unit", "template", "unit_problems"]

AGENT_UNIT = "setui-agent.service"
# What `setui service install` wrote before the agent was the one service: retired into it.
RECORDER_UNIT = "setui-recorder.service"
UNIT_DIR = Path("/etc/systemd/system")
# The unit's config file (Environment=SETUI_CONFIG=): the agent's policy is found from it.
UNIT_CONFIG = Path("/etc/setui/config.toml")
# What the unit cannot see: PrivateTmp= gives it a /tmp and /var/tmp of its own. An
# interpreter, a setui, a policy or a hook there cannot be used by the unit.
_HIDDEN = tuple(PurePosixPath(top) for top in ("/tmp", "/var/tmp"))
# An ExecStart= word that systemd takes as it is: anything else is quoted.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9/._+,:@=%-]+")
_EXEC_LINE = re.compile(r"^ExecStart=(\S+) (-m setui\.cli .*)$", re.MULTILINE)


class UnitError(Exception):
    """The unit cannot be written for this installation; the message says why."""


def template() -> str:
    """The unit as shipped: ExecStart= names /usr/bin/python3."""
    return resources.files("setui.data").joinpath(AGENT_UNIT).read_text(encoding="utf-8")


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


def render_unit(python: str | None = None) -> str:
    """The unit with ExecStart= running ``python -m setui.cli agent`` (default: the
    interpreter running now)."""
    if os.name != "posix":
        raise UnitError(f"systemd units are for Linux; this is {sys.platform}. Run `setui "
                        "agent` under this system's own service manager instead")
    interpreter = sys.executable if python is None else python
    if not interpreter or not PurePosixPath(interpreter).is_absolute():
        raise UnitError(f"cannot tell which Python runs setui (sys.executable is "
                        f"{printable(interpreter or 'empty', 200)}): run setui with an "
                        "interpreter given by its absolute path")
    text = template()
    found = _EXEC_LINE.findall(text)
    if len(found) != 1:  # a packaging mistake, not the user's
        raise UnitError(f"the shipped {AGENT_UNIT} has {len(found)} ExecStart= lines of "
                        "the form 'ExecStart=PYTHON -m setui.cli ...'; expected exactly one")
    word = exec_start_word(interpreter)
    text = _EXEC_LINE.sub(lambda match: f"ExecStart={word} {match.group(2)}", text)
    note = (f"# ExecStart= below was written by setui {__version__} for the Python at\n"
            f"# {printable(interpreter)}. After moving or removing that installation, run\n"
            f"# `setui service install` again from the new one.\n\n")
    head, sep, rest = text.partition("[Unit]")
    return head + note + sep + rest if sep else note + text


def unit_problems(python: str | None = None, package: Path | None = None) -> list[str]:
    """Why the unit could not, or should not, run this installation: an interpreter or
    a setui package where the service cannot see it (/tmp), or one that someone but
    root could change (root would run their code)."""
    from setui.agent.trust import untrusted

    interpreter = sys.executable if python is None else python
    if package is None:
        import setui

        package = Path(setui.__file__).parent
    # The venv's own path and the interpreter it links to: both must be reachable.
    found = _hidden([("Python setui runs from", Path(interpreter)),
                     ("Python setui runs from", Path(interpreter).resolve()),
                     ("setui package", package.resolve())])
    if found:
        return found
    for what, path in (("Python setui runs from", Path(interpreter)),
                       ("setui package", package.resolve() / "__init__.py")):
        problem = untrusted(path, uid=0)
        if problem is not None:
            found.append(f"the {what} could be changed by someone but root, and the agent "
                         f"runs it as root: {printable(problem)}")
    return found


def policy_problems(config: Path = UNIT_CONFIG) -> list[str]:
    """What the unit could not see of the policy it would read (named in ``config``, else
    beside it) and of that policy's hooks."""
    return _hidden(_policy_files(config))


def _hidden(candidates: list[tuple[str, Path]]) -> list[str]:
    problems: list[str] = []
    seen: set[Path] = set()
    for what, path in candidates:
        top = next((top for top in _HIDDEN if PurePosixPath(path).is_relative_to(top)), None)
        if top is not None and path not in seen:
            seen.add(path)
            problems.append(f"the {what}, {printable(str(path))}, is under {top}, which the "
                            "service cannot see (PrivateTmp=: it has one of its own)")
    return problems


def _policy_files(config: Path) -> list[tuple[str, Path]]:
    """The policy the unit would read, and its hooks; none when it cannot be read (the
    agent itself says why when it starts)."""
    from setui.agent.policy import PolicyError, default_policy, load_policy
    from setui.settings.config import ConfigError, load_config

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
