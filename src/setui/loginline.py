"""The login line: this VM's scheduled events, said as an operator logs in.

``setui service install`` puts a hook in /etc/profile.d that runs, in an interactive login
shell and as the user logging in::

    PYTHON -I -S -c 'import sys; sys.path.append(sys.argv[1]); ...' SITE

and this module asks the agent over its socket what the dashboard would show: one line
per event of this VM (type, status, the countdown to its NotBefore, who holds it or
approved it) and one naming ``setui``; nothing at all when there is no event.

A login must never wait on it. ``-I -S`` skips site-packages and the environment;
this module imports the standard library's socket and json, setui.core.textsafe (the one
rule for what reaches a terminal) and setui.core.timefmt (the one way a countdown is
written), nothing else of setui (an import contract in pyproject.toml keeps it so). Its
whole run has a hard budget (:data:`BUDGET`), counted from the moment the kernel
started the process, so Python's own start-up is inside it: a timer ends the process,
silently, when it is spent; any failure (no socket, no permission, a socket someone
else serves, a frame that is not what docs/api.md says) prints nothing. Whoever may not
reach the socket (the agent's group decides) gets nothing, as they would from the
dashboard.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Mapping
from datetime import datetime

from setui.core.textsafe import printable, some_names
from setui.core.timefmt import signed_countdown, utc_time

# typing costs milliseconds at every login; its names are for the type checker alone.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["BUDGET", "DEFAULT_SOCKET", "lines", "main", "this_vm"]

# The agent's socket as the service makes it (setui.api.client.DEFAULT_SOCKET; a test
# keeps the two the same); SETUI_SOCKET names another, as for every front end.
DEFAULT_SOCKET = "/run/setui/api.sock"
# Seconds from the process's start to the last byte written: what a login may be kept
# waiting. Python's start-up with these imports takes 20 to 30 of them (bench/RESULTS.md).
BUDGET = 0.1
_MAX_BUDGET = 10.0
_MAX_FRAME = 8 * 1024 * 1024  # an agent frame's bound (docs/api.md)
_STATE_ID, _AUDIT_ID = 1, 2
_HOLD = "agent-hold"  # the audit action of a person's hold (setui.store.agent.HOLD)
_RELEASE = "agent-release"
_AUDIT_LOOKBACK = 200  # newest audit records searched for who set a hold
_TEXT = 60  # a type, status or name from the agent: bounded on the line


class _Silent(Exception):
    """Nothing is to be said: no agent, no access, or not an answer this module reads."""


class _Frames:
    """JSON-line frames from ``sock``, each bounded, every wait within ``deadline``."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.buffer = bytearray()
        self.scanned = 0  # the buffer's bytes already searched for an end of line

    def _wait(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _Silent("out of time")
        self.sock.settimeout(left)

    def send(self, frame: Mapping[str, Any]) -> None:
        self._wait()
        self.sock.sendall(json.dumps(frame).encode("ascii") + b"\n")

    def next(self) -> dict[str, Any]:
        while (end := self.buffer.find(b"\n", self.scanned)) < 0:
            self.scanned = len(self.buffer)
            if self.scanned > _MAX_FRAME:
                raise _Silent("a frame past its bound")
            self._wait()
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise _Silent("the agent closed the connection")
            self.buffer += chunk
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        self.scanned = 0
        frame = json.loads(line)
        if not isinstance(frame, dict):
            raise _Silent("a frame that is not an object")
        return frame

    def answer(self, request_id: int) -> dict[str, Any]:
        """The ``ok`` answer to ``request_id`` (frames without it are passed over)."""
        while True:
            frame = self.next()
            if "error" in frame and frame.get("id") is None:
                raise _Silent("the agent turned the connection away")
            if frame.get("id") == request_id:
                ok = frame.get("ok")
                if not isinstance(ok, dict):
                    raise _Silent("the agent refused the request")
                return ok


def _served_by_root_or_me(sock: socket.socket) -> bool:
    """The kernel's word on who serves the socket: root (the agent) or this user, as
    setui's client requires; a socket another user put in the way is not the agent."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid in (0, os.getuid())


def _vm_key(name: str) -> str:
    # setui.core.model's rule for "this VM" (is_this_vm), which this module may not import
    # (its parser costs what a login cannot spare); a test holds the two to one answer.
    return name.lstrip("_").casefold()


def this_vm(resources: object, vm_name: str | None) -> bool:
    """Whether an event whose Resources are ``resources`` touches the VM ``vm_name``."""
    if not vm_name or not isinstance(resources, list):
        return False
    return any(isinstance(r, str) and _vm_key(r) == _vm_key(vm_name) for r in resources)


def _time(value: object) -> datetime | None:
    """An ISO 8601 time of the API (``...Z``), or None."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _text(value: object) -> str:
    return printable(value, _TEXT) if isinstance(value, str) and value else "?"


def lines(hello: Mapping[str, Any], answer: Mapping[str, Any],
          holders: Mapping[str, str]) -> list[str]:
    """What the login says, from the agent's hello and its ``state`` answer; ``holders``:
    who set each hold, where known. No line at all when no event touches this VM."""
    agent = hello.get("agent")
    vm_name = agent.get("vm_name") if isinstance(agent, dict) else None
    vm_name = vm_name if isinstance(vm_name, str) and vm_name else None
    state = answer.get("state")
    plan = answer.get("plan")
    if not isinstance(state, dict):
        return []
    document = state.get("document")
    events = document.get("Events") if isinstance(document, dict) else None
    if not isinstance(events, list):
        return []
    now = _time(state.get("now"))
    found = state.get("lives")
    lives = {life["event_id"]: life for life in found if isinstance(life, dict)
             and isinstance(life.get("event_id"), str)} if isinstance(found, list) else {}
    approvals = state.get("approvals")
    approvals = approvals if isinstance(approvals, dict) else {}
    held = plan.get("held") if isinstance(plan, dict) else None
    held = {h for h in held if isinstance(h, str)} if isinstance(held, list) else set()
    said: list[str] = []
    for event in events:
        if not isinstance(event, dict):
            continue
        resources = event.get("Resources")
        if vm_name is not None and not this_vm(resources, vm_name):
            continue
        event_id = event.get("EventId")
        event_id = event_id if isinstance(event_id, str) else ""
        parts = [f"{_text(event.get('EventType'))} {_text(event.get('EventStatus'))}"]
        life = lives.get(event_id)
        not_before = _time(life.get("not_before")) if isinstance(life, dict) else None
        if event.get("EventStatus") == "Scheduled" and not_before is not None \
                and now is not None:
            parts.append(f"NotBefore {signed_countdown((not_before - now).total_seconds())}"
                         f" ({utc_time(not_before)} UTC)")
        if vm_name is None and isinstance(resources, list):
            names = [r for r in resources if isinstance(r, str)]
            parts.append(f"for {some_names(names, limit=3, width=_TEXT)}")
        if event_id in held:
            holder = holders.get(event_id)
            parts.append(f"held by {_text(holder)}" if holder else "held")
        approval = approvals.get(event_id)
        if isinstance(approval, dict):
            parts.append(f"approved by {_text(approval.get('user'))}")
        said.append("setui: " + ", ".join(parts))
    if said:
        said.append("setui: `setui` shows them, with the agent's plan and the history")
    return said


def _holders(frames: _Frames, held: set[str]) -> dict[str, str]:
    """Who set each of ``held``: the newest hold in the audit log's newest records."""
    frames.send({"id": _AUDIT_ID, "op": "audit", "limit": _AUDIT_LOOKBACK})
    records = frames.answer(_AUDIT_ID).get("records")
    found: dict[str, str] = {}
    for record in records if isinstance(records, list) else []:  # newest first
        if not isinstance(record, dict):
            continue
        event_id, action = record.get("event_id"), record.get("action")
        if not isinstance(event_id, str) or event_id in found:
            continue
        if event_id in held and action in (_HOLD, _RELEASE):
            user = record.get("user")
            if action == _HOLD and isinstance(user, str):
                found[event_id] = user
            else:
                found[event_id] = ""  # released since: its holder is not this record's
    return {k: v for k, v in found.items() if v}


def gather(path: str, deadline: float) -> list[str]:
    """The lines, asked of the agent at ``path``; raises on anything but an answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.connect(path)
        if not _served_by_root_or_me(sock):
            raise _Silent("the socket is not served by root or this user")
        frames = _Frames(sock, deadline)
        hello = frames.next().get("hello")
        if not isinstance(hello, dict) or hello.get("api") != 1:
            raise _Silent("no hello of API version 1")
        frames.send({"id": _STATE_ID, "op": "state"})
        answer = frames.answer(_STATE_ID)
        said = lines(hello, answer, {})
        plan = answer.get("plan")
        held = plan.get("held") if isinstance(plan, dict) else None
        if not said or not isinstance(held, list) or not held:
            return said
        try:
            holders = _holders(frames, {h for h in held if isinstance(h, str)})
        except Exception:  # any failure here costs the name alone
            return said  # "held" without a name rather than nothing
        return lines(hello, answer, holders)


def _budget(environ: Mapping[str, str]) -> float:
    """SETUI_LOGIN_BUDGET (seconds, up to 10: a slow machine, a test), else :data:`BUDGET`."""
    try:
        value = float(environ.get("SETUI_LOGIN_BUDGET", ""))
    except ValueError:
        return BUDGET
    return value if 0 < value <= _MAX_BUDGET else BUDGET


def _started() -> float:
    """When the kernel started this process, on time.monotonic's clock, to a clock tick
    (/proc/self/stat counts it on CLOCK_BOOTTIME: how long ago is asked of that clock);
    now when that cannot be read."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        # Field 22, counted after the command's closing parenthesis (field 2) as 20th.
        ticks = int(fields[19])
        since_boot = ticks / os.sysconf("SC_CLK_TCK")
        up = time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, IndexError):
        return now
    return min(now, now - (up - since_boot))


def main() -> int:
    """Print the login line; always exit 0, printing nothing on any failure."""
    # A Ctrl+C at the login ends it quietly, as the default action does, with no trace.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    budget = _budget(os.environ)
    deadline = _started() + budget
    left = deadline - time.monotonic()
    if left <= 0:
        return 0  # start-up alone took the budget: nothing more is asked
    # The backstop: whatever blocks (a name lookup, a slow disk, a stopped agent), the
    # process is gone when the budget is spent, having said nothing.
    signal.signal(signal.SIGALRM, lambda _signum, _frame: os._exit(0))
    signal.setitimer(signal.ITIMER_REAL, left + 0.01)
    path = os.environ.get("SETUI_SOCKET") or DEFAULT_SOCKET
    try:
        said = gather(path, deadline)
    except Exception:  # any failure says nothing: the login goes on
        said = []
    signal.setitimer(signal.ITIMER_REAL, 0)
    if said:
        try:
            sys.stdout.write("\n".join(said) + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    return 0
