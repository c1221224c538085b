"""``setui service``: the agent as the VM's one system service (setui.install).

History exists only while something polls, and approvals, hooks and the API need the
agent: ``setui service print`` shows its unit and ``setui service install [--now]`` puts
it in place with what it needs (the group setui, /var/lib/setui, /etc/setui, the login
line's hook), retiring the recorder's unit of earlier versions into it; ``setui service
uninstall`` takes the unit and the hook away again and leaves the store.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from setui.commands.common import EXIT_FAILED, EXIT_OK
from setui.install.installer import install
from setui.install.layout import Layout
from setui.install.loginhook import LOGIN_HOOK
from setui.install.uninstaller import uninstall
from setui.install.unit import (
    AGENT_UNIT,
    UNIT_DIR,
    UnitError,
    policy_problems,
    render_unit,
    unit_problems,
)

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    print_parser = actions.add_parser(
        "print", help="write the unit to stdout",
        description=f"Write {AGENT_UNIT}, with ExecStart= naming this Python, to stdout.")
    install_parser = actions.add_parser(
        "install", help=f"install {AGENT_UNIT} (as root) and reload systemd",
        description=f"Make the group setui, /var/lib/setui (root:setui 0700, the store; an "
                    f"earlier recorder's or shared store taken over) and /etc/setui; write "
                    f"{UNIT_DIR / AGENT_UNIT} (mode 0644, replaced atomically); retire "
                    "setui-recorder.service; write {LOGIN_HOOK} (the login line: "
                    "this VM's events as an operator logs in); run `systemctl "
                    "daemon-reload`. Says each thing it does. Needs root.")
    install_parser.add_argument("--now", action="store_true",
                                help="also enable the unit and start it now "
                                     "(systemctl enable --now)")
    install_parser.add_argument("--root", type=Path, default=None, metavar="DIR",
                                help="install into the system whose root is DIR (an image, a "
                                     "test root): the group into DIR/etc/group, every path "
                                     "under DIR; no systemctl is run")
    uninstall_parser = actions.add_parser(
        "uninstall", help=f"remove {AGENT_UNIT} and the login line (as root); keep the store",
        description=f"Stop and disable {AGENT_UNIT} and remove its unit, remove "
                    f"{LOGIN_HOOK} (when setui wrote it) and /etc/setui when it is empty; "
                    "run `systemctl daemon-reload`. The store /var/lib/setui and the group "
                    "setui are left. Says each thing it does. Needs root.")
    uninstall_parser.add_argument("--root", type=Path, default=None, metavar="DIR",
                                  help="uninstall from the system whose root is DIR; no "
                                       "systemctl is run")
    for sub in (print_parser, install_parser):
        sub.add_argument("--agent", action="store_true",
                         help="no effect, kept for earlier scripts: the agent's unit is "
                              "the only one (it records as the recorder's did)")


def run(args: argparse.Namespace) -> int:
    if args.action == "print":
        try:
            text = render_unit()
        except UnitError as exc:
            print(f"setui: {exc}", file=sys.stderr)
            return EXIT_FAILED
        for problem in unit_problems() + policy_problems():
            print(f"setui: warning: {problem}", file=sys.stderr)
        sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_OK
    layout = Layout() if args.root is None else Layout(args.root.expanduser().absolute())
    if args.action == "uninstall":
        return uninstall(layout, out=sys.stdout, err=sys.stderr)
    return install(layout, now=args.now, out=sys.stdout, err=sys.stderr)
