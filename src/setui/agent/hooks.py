"""Running a hook: one command, the event in its environment and on its stdin, a time limit.

The command is checked first (agent.trust: only what root or the agent's user could have
written is run, its program and every argument that names a file), then run without a
shell (the policy gives its words), in ``/`` (where relative arguments were checked, as
under the unit), in a process group of its own so that a timeout ends the whole tree it
started, with a bounded share of its output kept (the last ``MAX_OUTPUT`` characters:
where the error usually is).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, TypedDict

from setui.agent.policy import Hook
from setui.agent.runas import resolve
from setui.agent.trust import HOOK_DIRECTORY, untrusted_command
from setui.core.model import Event
from setui.core.timefmt import iso
from setui.store.agent import MAX_OUTPUT
from setui.store.records import event_snapshot

__all__ = ["HookFacts", "HookResult", "hook_environment", "hook_input", "run_hook"]

_CHUNK = 4096
_KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL after a timeout


class HookFacts(TypedDict):
    """What a hook is told besides the event: the same to hook_environment and hook_input."""

    step: str
    rule: str
    incarnation: int
    vm_name: str


@dataclass(frozen=True)
class HookResult:
    exit_status: int | None  # None: it could not be started, or was killed at its timeout
    timed_out: bool
    output: str
    error: str | None = None  # why it could not be started
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out

    def describe(self) -> str:
        if self.error is not None:
            return f"could not start: {self.error}"
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        return f"exited {self.exit_status}" if self.exit_status else "exited 0"


def hook_environment(event: Event, *, step: str, rule: str, incarnation: int,
                     vm_name: str) -> dict[str, str]:
    """The event in ``SETUI_*`` variables (on top of the agent's own environment)."""
    return {
        "SETUI_HOOK": step,
        "SETUI_RULE": rule,
        "SETUI_EVENT_ID": event.event_id,
        "SETUI_EVENT_TYPE": event.event_type.value,
        "SETUI_EVENT_STATUS": event.status.value,
        "SETUI_EVENT_SOURCE": event.source.value if event.source is not None else "",
        "SETUI_NOT_BEFORE": iso(event.not_before) or "",
        "SETUI_RESOURCES": " ".join(event.resources),
        "SETUI_THIS_VM": "true" if event.affects(vm_name) else "false",
        "SETUI_VM_NAME": vm_name,
        "SETUI_DURATION": "" if event.duration is None else str(event.duration),
        "SETUI_INCARNATION": str(incarnation),
    }


def hook_input(event: Event, *, step: str, rule: str, incarnation: int,
               vm_name: str) -> bytes:
    """The same as JSON on stdin, under the service's own field names."""
    data: dict[str, Any] = {"hook": step, "rule": rule, "incarnation": incarnation,
                            "vm_name": vm_name, "this_vm": event.affects(vm_name),
                            "event": event_snapshot(event)}
    return json.dumps(data).encode("utf-8")


def _nul_escaped_truncated(values: dict[str, str]) -> dict[str, str]:
    """Each value with NUL escaped (an environment value cannot hold one; network text
    could) and cut at 4096 characters."""
    return {k: v.replace("\0", "\\0")[:4096] for k, v in values.items()}


async def run_hook(hook: Hook, *, env: dict[str, str], stdin: bytes,
                   timeout: float | None = None) -> HookResult:
    """Run ``hook`` to its end or its timeout (``timeout``, else the hook's own); never
    raises but CancelledError (then the process group is killed too)."""
    started = time.monotonic()
    # Checked again now, not only at start: a file or a directory above it may have
    # changed hands since, or a name been made.
    problem = untrusted_command(hook.argv)
    if problem is not None:
        return HookResult(None, False, "", error=f"refused: {problem}")
    environment = {**os.environ, **_nul_escaped_truncated(env)}
    spawning: dict[str, Any] = {"cwd": HOOK_DIRECTORY}
    if hook.run_as is not None:  # who the name means now, not when the policy was read
        try:
            account = await asyncio.to_thread(resolve, hook.run_as)
        except LookupError as exc:
            return HookResult(None, False, "", error=str(exc))
        environment.update(account.environment())
        spawning = account.spawn_arguments()
    try:
        process = await asyncio.create_subprocess_exec(
            *hook.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=environment, start_new_session=True,
            **spawning)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:  # ValueError: a NUL
        return HookResult(None, False, "", error=_start_error(exc, hook))
    kept = bytearray()

    async def feed() -> None:
        assert process.stdin is not None
        with contextlib.suppress(OSError, ConnectionError):  # a hook that ignores stdin
            process.stdin.write(stdin)
            await process.stdin.drain()
        with contextlib.suppress(OSError, ConnectionError):
            process.stdin.close()

    async def drain() -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(_CHUNK):
            kept.extend(chunk)
            if len(kept) > 4 * MAX_OUTPUT:  # keep the tail, bounded
                del kept[:-2 * MAX_OUTPUT]

    async def finish() -> int:
        await asyncio.gather(feed(), drain())
        return await process.wait()

    timed_out = False
    status: int | None = None
    try:
        status = await asyncio.wait_for(finish(), hook.timeout if timeout is None else timeout)
    except asyncio.TimeoutError:
        timed_out = True
        await _stop(process)
    except asyncio.CancelledError:
        await asyncio.shield(_stop(process))
        raise
    text = kept.decode("utf-8", "replace")[-MAX_OUTPUT:]
    return HookResult(status, timed_out, text, seconds=time.monotonic() - started)


def _start_error(exc: BaseException, hook: Hook) -> str:
    """Why the hook did not start, in words (as its ``run_as`` user, if it has one)."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if hook.run_as is not None:
        return f"{reason} (as {hook.run_as.text})"
    return reason


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the hook's process group, then SIGKILL if it lingers."""
    for sig, grace in ((signal.SIGTERM, _KILL_GRACE), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        if grace is None:
            break
        try:
            await asyncio.wait_for(process.wait(), grace)
            return
        except asyncio.TimeoutError:
            continue
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.wait(), 5.0)
