"""A recorded store made from a scenario, second by second, with no wall clock.

The emulator's service answers for any moment (its state is a pure function of the
scenario time and the approvals), so polling it once a scenario second through the real
tracker and the real store gives the record a ``setui watch`` would have written, the
same every run: what the replay, report and export tests read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from setui.core.model import parse_document
from setui.core.tracker import Tracker
from setui.emulator.clock import ManualClock
from setui.emulator.scenario import parse_scenario
from setui.emulator.service import Service
from setui.store import Store
from setui.store.history import content_hash
from setui.store.records import APPROVE_ATTEMPT, APPROVE_OUTCOME, REFUSED, AuditEntry

__all__ = ["ENDPOINT", "START", "Approval", "heartbeat", "record_scenario"]

ENDPOINT = "http://127.0.0.1:8099"
START = datetime(2026, 11, 24, 3, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Approval:
    """An operator's act at scenario second ``at``: approved (sent, accepted) or
    refused by setui (nothing sent)."""

    at: float
    event_index: int
    user: str = "alice"
    refused: str | None = None


def record_scenario(path: Path, scenario_toml: str, *, seconds: int,
                    holes: Iterable[tuple[int, int]] = (),
                    approvals: Iterable[Approval] = ()) -> Store:
    """Play ``scenario_toml`` from :data:`START` for ``seconds`` scenario seconds, one poll
    a second, into a new store at ``path``; nothing records during ``holes`` (from, to)."""
    scenario = parse_scenario(scenario_toml, source="recorded")
    clock = ManualClock(START.timestamp())
    service = Service(scenario, clock=clock, speed=1.0, vm_name=None, faults=None,
                      etag=False)
    store = Store(path, history_days=None)
    gaps = list(holes)
    acts = sorted(approvals, key=lambda a: a.at)
    tracker: Tracker | None = None
    session: int | None = None
    after: tuple[int, str] | None = None
    for second in range(seconds + 1):
        at = START + timedelta(seconds=second)
        posix = START.timestamp() + second
        clock.set(posix)
        for act in [a for a in acts if a.at == second]:
            _act(store, service, act, at, posix)
        if any(a <= second < b for a, b in gaps):
            if session is not None:
                store.sessions.beat(session, at, stopped=True)
                session, tracker, after = None, None, None
            continue
        if session is None:
            session = store.sessions.start(endpoint=ENDPOINT, pid=4242, host="test",
                                           command="setui watch", at=at)
            newest = store.history.newest_document(ENDPOINT)
            tracker = Tracker(newest[0] if newest else None)
        assert tracker is not None
        document = parse_document(service.document(now=posix))
        changes = tracker.update(document, at)
        store.history.record(document, seen_at=at, endpoint=ENDPOINT, changes=changes,
                             vm_name=scenario.vm_name,
                             after=after)
        after = (document.incarnation, content_hash(document))
        store.sessions.beat(session, at)
    if session is not None:
        store.sessions.beat(session, START + timedelta(seconds=seconds), stopped=True)
    return store


def _act(store: Store, service: Service, act: Approval, at: datetime, posix: float) -> None:
    state = service.timeline.state(service.scenario_time(posix))
    event_id = state[act.event_index].event_id
    base: dict[str, Any] = dict(time=at, user=act.user, host="test", endpoint=ENDPOINT,
                                event_id=event_id, ssh_client="10.0.0.9")
    if act.refused is not None:
        store.audit_log.append(AuditEntry(action=REFUSED, error=act.refused, **base))
        return
    attempt = store.audit_log.append(AuditEntry(action=APPROVE_ATTEMPT, **base))
    service.timeline.approve([event_id], service.scenario_time(posix))
    store.audit_log.append(AuditEntry(action=APPROVE_OUTCOME, status=200, latency=0.012,
                                      attempt_seq=attempt.seq, **base))


def heartbeat(store: Store, seconds: float) -> None:
    """An agent's session that kept its heartbeat for the first ``seconds`` of the record:
    a stall or a boot then would be in it."""
    agent = store.sessions.start(endpoint=ENDPOINT, pid=1, host="test", command="setui agent",
                                 at=START)
    store.sessions.measures(agent)
    store.sessions.beat(agent, START + timedelta(seconds=seconds), stopped=True)
