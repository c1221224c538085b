"""What the headless commands share: exit codes, times in UTC, the record (the agent's,
or a store), number options.

One home for each, so ``setui history``, ``setui audit`` and ``setui approve`` print a
time, read a count, attach to the agent or find the data directory the same way. Nothing
here imports the store or the API's client at module level: sqlite3 loads only when a
command runs, not for ``setui --version``.
"""

from __future__ import annotations

import argparse
import os
import re
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

from setui.core.model import MAX_INCARNATION, Document
from setui.core.textsafe import printable
from setui.core.timefmt import stamp

if TYPE_CHECKING:
    from setui.api.attach import Reach
    from setui.api.client import AgentClient
    from setui.session import ThisVm
    from setui.settings.config import Config
    from setui.store.reading import Record
    from setui.store.stored import StoredRecord

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "READS_THE_AGENT", "add_json_option",
           "agent_for", "agent_vm", "data_dir", "open_readonly", "positive_int",
           "reach_agent", "read_record", "record_reading", "when", "whole_number",
           "would_overwrite"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def when(moment: datetime | None) -> str:
    """``2024-05-14 09:30:00 UTC``: UTC alone, to the second, at a fixed width for the
    lists (:func:`setui.core.timefmt.stamp`)."""
    return stamp(moment, local=False)


def data_dir(args: argparse.Namespace) -> Path | None:
    """The ``--data-dir`` given (``~`` expanded), or None for the default."""
    value = getattr(args, "data_dir", None)
    return Path(value).expanduser() if value is not None else None


def agent_for(args: argparse.Namespace, err: IO[str], command: str) -> AgentClient | None:
    """The agent's API when its socket answers (setui.api.attach), so the command asks
    IMDS nothing and keeps no store of its own; None to run standalone: told so, or no
    agent. Where one should answer (a socket given on purpose, or the agent installed as
    the service) and none does, or this user may not reach it, that is said in one line
    on ``err``: the command then works on its own, which is not what the machine's agent
    records. For the readers: ``setui approve``, for which that is an error, asks
    :func:`reach_agent` itself."""
    from setui.settings.config import Config

    config = getattr(args, "config_resolved", None) or Config()
    if config.standalone or os.name != "posix":  # no Unix socket API off POSIX
        return None
    found = reach_agent(config)
    if found.line is not None:
        err.write(f"{command}: {printable(found.line, 400)}\n")
    return found.client


def reach_agent(config: Config) -> Reach:
    """Where this front end stands with the agent (setui.api.attach.reach), the service's
    socket and whether it is installed looked for on this system (setui.install.layout)."""
    from setui.api.attach import reach
    from setui.install.layout import system_layout

    layout = system_layout()
    return reach(config, default=layout.socket, service=layout.service_installed())


# What --help says of a reader where the agent answers (history, audit, report, replay).
READS_THE_AGENT = (
    "Where the agent answers on its socket (setui agent, the VM's service), this reads the "
    "record the agent keeps, through it. A --data-dir given on the command line is read "
    "as it is instead; --standalone reads your own store (root: the agent's; no one else "
    "may read it).")


def agent_vm(agent: AgentClient, given: str | None) -> ThisVm:
    """This VM's name for a command attached to the agent: the agent's, which it decides
    by (it asked IMDS), else the one given (``--vm-name``), else not known; and its vmId
    as the agent knows it (what the agent keys its claims by)."""
    from setui.session import ThisVm

    known = agent.hello.agent.vm_name
    this_vm = ThisVm(known or given)
    if known:
        this_vm.source = "the agent"
    this_vm.vm_id = agent.hello.agent.vm_id
    return this_vm


def read_record(args: argparse.Namespace, err: IO[str], command: str) -> Record | None:
    """The record to read: the agent's, through its API; else the store, read-only
    (:func:`open_readonly`: None when nothing has been recorded). A ``--data-dir`` given
    on the command line is read as it is, agent or not: an auditor reads a copy so."""
    if getattr(args, "data_dir_given", None) is None:
        client = agent_for(args, err, command)
        if client is not None:
            return client
    return open_readonly(args)


def open_readonly(args: argparse.Namespace) -> StoredRecord | None:
    """The store's record for reading, or None when nothing has been recorded yet (no database, or
    an empty file left by a setui stopped before it wrote the schema)."""
    from setui.store import NothingRecorded, Store, default_data_dir

    directory = data_dir(args) or default_data_dir()
    try:
        return Store.open_dir(directory, readonly=True).record
    except NothingRecorded:
        return None


def record_reading(args: argparse.Namespace, document: Document, *, seen_at: datetime,
                   endpoint: str, vm_name: str | None) -> str | None:
    """Keep what a one-shot command read in the history: its sighting is a recording
    session of one moment (core.holes), so no hole is claimed where it looked. Returns
    why it could not, in words; never raises (the command's own work is done)."""
    from setui.store import Store, StoreError

    config = getattr(args, "config_resolved", None)
    try:
        with Store.open_dir(data_dir(args), history_days=getattr(config, "history_days", 90),
                            forward=getattr(config, "audit_forward", None)) as store:
            store.history.record(document, seen_at=seen_at, endpoint=endpoint,
                                 vm_name=vm_name)
    except StoreError as exc:
        return exc.message
    return None


def would_overwrite(args: argparse.Namespace, err: IO[str], command: str) -> bool:
    """An export replaces its file (``args.file``) whole: a wrong name must not silently
    destroy another export, or anything else, already there; ``--force`` says it may.
    Says why when it refuses (``command``: who says it)."""
    target = args.file
    if target == "-" or getattr(args, "force", False) or not os.path.lexists(target):
        return False
    err.write(f"{command}: {printable(target, 300)} already exists; nothing was written "
              "(--force replaces it)\n")
    return True


def whole_number(text: str) -> int:
    """A whole number from the command line, refused before int() when it has more digits
    than the largest SQLite stores (int() of a huge one takes seconds; a query crashes)."""
    value = text.strip()
    if not re.fullmatch(r"[+-]?\d+", value):
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    if len(value.lstrip("+-").lstrip("0")) > len(str(MAX_INCARNATION)):
        raise argparse.ArgumentTypeError(
            f"too large: {printable(text, 40)} (at most {MAX_INCARNATION})")
    return int(value)


def positive_int(text: str) -> int:
    """A count from the command line: 1 to 2**63-1 (what the database can compare)."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > MAX_INCARNATION:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_INCARNATION}, got {value}")
    return value


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """The command's ``--json`` again on a sub-command that writes JSON too, so it may
    follow it; SUPPRESS keeps one given before the sub-command. The options every
    command takes follow every sub-command already (cli.build_parser)."""
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="JSON with stable keys")
