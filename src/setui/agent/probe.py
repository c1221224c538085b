"""The load balancer's probe: ``/readyz`` takes this VM out of rotation around its
events, ``/healthz`` says whether the agent hears from IMDS and can record and act.

An Azure Load Balancer or Application Gateway health probe on ``/readyz`` needs no
script: it gets 503 (with the reason in a line of text) from a rule's ``drain_before``
seconds before this VM's event, or from the moment its ``prepare`` starts, or from its
approval, whichever comes first, and while any event of this VM has started; and 200 again
once the event is over and its ``recover`` has finished (whatever its outcome: a failed
recover is told, and a person decides). The rule of an event in the current document is
the one the agent decided, or else the policy's for it now: an event whose rule the
store could not keep yet is inside its drain window all the same. ``/healthz`` is 200
while the agent's polls of IMDS are answered and nothing keeps it from recording the
history or acting (agent.Agent.faults); 503 with the reasons otherwise. Both are
computed when asked, from what the agent holds in memory: no I/O, a few microseconds on
the agent's loop. The server is agent.scrape's, bounded the same way as the metrics'.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from setui.agent.scrape import BoundedServer, http_response, request_of
from setui.core.health import ConnectionState, Health
from setui.core.model import Event
from setui.core.textsafe import printable
from setui.core.timefmt import countdown, iso
from setui.store.records import DONE, FINISHED, RUNNING, SKIPPED

if TYPE_CHECKING:
    from setui.agent.agent import Agent
    from setui.agent.policy import Rule

__all__ = ["Probe", "drain_reason", "health_verdict", "work_verdict"]

MAX_BODY = 2000  # characters of reasons: a probe reads the status, people the first line


def _named(event: Event) -> str:
    return f"{event.event_type.value} {printable(event.event_id, 64)}"


def drain_reason(event: Event, rule: Rule | None, states: Mapping[str, str], *,
                 ended: bool, now: datetime) -> str | None:
    """Why ``event`` (this VM's) keeps this VM out of rotation now; None when it does not.
    ``states`` are the agent's steps for it (step -> state), ``ended`` whether it is
    over (it completed or left the document)."""
    prepare = states.get("prepare")
    prepared = prepare not in (None, SKIPPED)  # started, whatever came of it
    window = rule is not None and rule.drain_before is not None \
        and event.not_before is not None \
        and now >= event.not_before - timedelta(seconds=rule.drain_before)
    if not ended:
        if event.is_started:
            return f"{_named(event)} has started"
        if rule is None:
            return None
        if prepared:
            return f"{_named(event)}: prepare '{_hook(rule, 'prepare')}' {prepare}"
        if states.get("approve") == DONE:
            return f"{_named(event)}: approved"
        if window:
            assert event.not_before is not None and rule.drain_before is not None
            left = (event.not_before - now).total_seconds()
            when = countdown(left) if left > 0 else "NotBefore passed"
            return f"{_named(event)}: {when} (drain_before {rule.drain_before:g} s)"
        return None
    # Over: out of rotation until its recover has finished, if it took the VM out at all.
    if rule is None or rule.recover is None or states.get("match") == SKIPPED:
        return None  # no recover will run
    recover = states.get("recover")
    if recover in FINISHED:
        return None
    took_out = prepared or states.get("approve") == DONE or event.is_started \
        or window
    if not took_out:
        return None
    doing = "running" if recover == RUNNING else "not finished yet"
    return f"{_named(event)} is over; recover '{_hook(rule, 'recover')}' {doing}"


def _hook(rule: Rule, step: str) -> str:
    hook = rule.prepare if step == "prepare" else rule.recover
    return hook.name if hook is not None else step


def health_verdict(health: Health) -> tuple[bool, str]:
    """Whether the agent hears from IMDS (``health`` as it stands now), and in words."""
    last = f"; last good answer at {iso(health.last_success)}" if health.last_success else ""
    if health.state is ConnectionState.LIVE:
        return True, f"polling IMDS{last}"
    if health.state is ConnectionState.ENABLING:
        return False, "no answer from IMDS yet"
    if health.state is ConnectionState.STALE:
        # Not answered, or not asked: polls wait while the agent waits for its store.
        return False, f"the last good answer from IMDS is too old{last}"
    error = printable(health.last_error or "no reason given", 300)
    return False, f"IMDS {health.state.value}: {error}{last}"


def work_verdict(imds: tuple[bool, str], faults: list[str]) -> tuple[bool, str]:
    """``/healthz``: IMDS's verdict (:func:`health_verdict`), and what keeps the agent
    from recording or acting (``faults``, in words), each said."""
    ok, text = imds
    if not faults:
        return ok, text
    said = "; ".join(printable(f, 300) for f in faults)
    return False, f"cannot record or act: {said}; {text}"


class Probe:
    """Answers ``/readyz`` and ``/healthz`` for ``agent``."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self._server: BoundedServer | None = None

    def readiness(self) -> tuple[bool, list[str]]:
        """Whether this VM may take traffic, and why not (one reason per event)."""
        agent = self.agent
        vm = agent.vm_name
        if vm is None:
            return True, []
        now = agent.monitor.now()
        document = agent.monitor.state.document
        current = {e.event_id: e for e in document.events} if document is not None else {}
        states: dict[str, dict[str, str]] = {}
        for (event_id, step), row in list(agent.steps.items()):
            states.setdefault(event_id, {})[step] = row.state
        reasons = []
        for event_id in dict.fromkeys([*current, *agent.rule_of]):
            event = current.get(event_id) or agent.last_seen.get(event_id)
            if event is None or not event.affects(vm):
                continue
            rule = agent.rule_of.get(event_id)
            if rule is None and event_id in current:
                rule = agent.rule_now(event)  # the store has not kept its rule (yet)
            why = drain_reason(event, rule, states.get(event_id, {}),
                               ended=event_id in agent.ended or event_id not in current,
                               now=now)
            if why is not None:
                reasons.append(why)
        return not reasons, reasons

    def answer(self, head: bytes) -> bytes:
        """The whole HTTP response to a request's head."""
        method, path, _ = request_of(head)
        if method not in ("GET", "HEAD"):
            return http_response(405, b"the probe answers GET and HEAD\n", method=method)
        if path == "/healthz":
            ok, text = work_verdict(health_verdict(self.agent.monitor.health()),
                                    self.agent.faults())
        elif path == "/readyz":
            ok, reasons = self.readiness()
            if self.agent.vm_name is None:
                text = "ready: this VM's name is not known yet, so no event is known to be its"
            else:
                text = "ready" if ok else "not ready: " + "; ".join(reasons)
            if not ok and self.agent.dry_run:  # a dry run takes nothing out of rotation
                ok, text = True, f"dry run, would answer 503: {text}"
        else:
            return http_response(404, b"the probe answers /readyz (take this VM out of "
                                      b"rotation) and /healthz (the agent hears from IMDS "
                                      b"and can record and act)\n",
                                 method=method)
        body = (text[:MAX_BODY] + "\n").encode("utf-8", "replace")
        return http_response(200 if ok else 503, body, method=method)

    async def serve(self, host: str, port: int) -> tuple[str, int]:
        """Answer on ``host:port`` (0: a free port); the address it listens on."""
        self._server = BoundedServer(self.answer)
        return await self._server.start(host, port)

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.aclose()
