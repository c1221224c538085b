"""Where the service's files go on a system whose root is ``root`` (``/``, or a test root
or an image given with ``--root``): every path the installer touches is one of these, and
what a front end looks at to tell whether the agent is installed as the service.

``SETUI_SYSTEM_ROOT`` is for tests only: front ends look for the service (its unit, its
runtime directory and the socket there) under that directory instead of ``/``, so a test
can show an installed service without touching the real /etc or /run. Never set it on a
real machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from setui.api.client import DEFAULT_SOCKET
from setui.api.peer import DEFAULT_GROUP
from setui.core.textsafe import printable
from setui.install.loginhook import LOGIN_HOOK
from setui.install.unit import AGENT_UNIT, RECORDER_UNIT, UNIT_CONFIG, UNIT_DIR
from setui.store.place import AGENT_STORE

__all__ = ["GROUP", "PRIVATE_STORE", "TEST_VARIABLE", "Layout", "shown", "system_layout"]

TEST_VARIABLE = "SETUI_SYSTEM_ROOT"

GROUP = DEFAULT_GROUP  # the agent's group: who reads the store and may reach the socket
# Where a DynamicUser= unit with StateDirectory=setui (the recorder, the agent before it
# ran as root) kept its store; /var/lib/setui was a link to it.
PRIVATE_STORE = Path("/var/lib/private/setui")


def shown(path: Path) -> str:
    """A path as the installer says it (made printable: a path is anyone's text)."""
    return printable(str(path), 300)


@dataclass(frozen=True)
class Layout:
    root: Path = Path("/")

    @property
    def host(self) -> bool:
        """Whether this is the running system (systemctl and the group database apply)."""
        return self.root == Path("/")

    def within(self, path: Path) -> Path:
        """The system's absolute ``path`` as it is under this root."""
        return self.root.joinpath(*PurePosixPath(path).parts[1:])

    @property
    def unit_dir(self) -> Path:
        return self.within(UNIT_DIR)

    @property
    def agent_unit(self) -> Path:
        return self.unit_dir / AGENT_UNIT

    @property
    def recorder_unit(self) -> Path:
        return self.unit_dir / RECORDER_UNIT

    @property
    def login_hook(self) -> Path:
        return self.within(LOGIN_HOOK)

    @property
    def config_file(self) -> Path:
        return self.within(UNIT_CONFIG)

    @property
    def config_dir(self) -> Path:
        return self.config_file.parent

    @property
    def store(self) -> Path:
        return self.within(AGENT_STORE)

    @property
    def private_store(self) -> Path:
        return self.within(PRIVATE_STORE)

    @property
    def group_file(self) -> Path:
        return self.within(Path("/etc/group"))

    @property
    def runtime_dir(self) -> Path:
        """The unit's RuntimeDirectory (/run/setui): there while the service runs."""
        return self.within(DEFAULT_SOCKET.parent)

    @property
    def socket(self) -> Path:
        """Where the service's agent answers unless told otherwise."""
        return self.within(DEFAULT_SOCKET)

    def service_installed(self) -> Path | None:
        """What shows the agent is installed as this system's service (its unit, else its
        runtime directory), or None. Whatever this user may not look at counts as there."""
        for path in (self.agent_unit, self.runtime_dir):
            try:
                os.lstat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                return path
            return path
        return None


def system_layout(environ: Mapping[str, str] | None = None) -> Layout:
    """The running system as front ends see it: ``/``, or SETUI_SYSTEM_ROOT in tests."""
    env = os.environ if environ is None else environ
    injected = env.get(TEST_VARIABLE)
    return Layout(Path(injected)) if injected else Layout()
