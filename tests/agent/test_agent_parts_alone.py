"""The agent's parts, each alone on its narrow dependencies (the whole agent's behaviour
is in the other files, over the emulator): the teller says and tells, the step book keeps
what was done while the store refuses it, the budget gate waits or lets NotBefore pass.
A store, metrics and a policy are the real ones; the clock, the store's thread and the
Prometheus answer are given."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from setui.agent.acting import StepBook
from setui.agent.budget import GroupLabels, look_of
from setui.agent.budgeting import PLATFORM_STARTS, BudgetGate
from setui.agent.errors import AgentErrors
from setui.agent.metrics import AgentMetrics
from setui.agent.notify import Message
from setui.agent.policy import parse_policy
from setui.agent.telling import Teller, VmIdentity
from setui.core.model import Event, EventStatus, EventType
from setui.store import Store, StoreError
from setui.store.agent import DONE, SKIPPED, WAITING, AgentLog

T = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
ENDPOINT = "http://127.0.0.1:9"
RULE = ('[[rule]]\nname = "rolling"\napprove = "now"\nmax_unavailable = 1\n'
        'group = "scale-set"\nnotify = true\n')
COMPUTE = {"vmScaleSetName": "ss-web", "resourceGroupName": "rg-web",
           "subscriptionId": "sub-1"}


class Sent:
    """The notifier's one method the teller calls: what was handed over."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def submit(self, message: Message) -> None:
        self.messages.append(message)


def _teller(said: list[dict[str, Any]], *, notifier: Sent | None = None,
            errors: AgentErrors | None = None, dry_run: bool = False) -> Teller:
    policy = parse_policy(f'[notify]\nurls = ["json://127.0.0.1:9"]\n{RULE}')
    return Teller(policy, VmIdentity(ENDPOINT, "web-0", None), say=said.append,
                  errors=errors or AgentErrors(), notifier=notifier,  # type: ignore[arg-type]
                  dry_run=dry_run, clock=lambda: T, document=lambda: None)


def test_the_teller_tells_an_error_state_a_window_long_and_its_end() -> None:
    clock = [0.0]
    said: list[dict[str, Any]] = []
    sent = Sent()
    teller = _teller(said, notifier=sent, errors=AgentErrors(window=60, mono=lambda: clock[0]))
    teller.error("writing", "disk full")
    teller.error("writing", "disk full")  # within the window: counted, not said
    assert [r["detail"] for r in said] == ["disk full"]
    clock[0] = 61.0
    teller.errors_due()
    assert said[-1]["detail"].startswith("writing failing for ")
    assert said[-1]["detail"].endswith(" (2 errors): disk full; telling people")
    assert [m.title for m in sent.messages] == ["setui: agent error on web-0"]
    assert sent.messages[0].body.startswith("setui agent on web-0: writing failing for ")
    teller.fine("writing")
    assert said[-1]["agent"] == "recovered"
    assert [m.change for m in sent.messages] == ["agent error", "agent recovered"]


def test_a_dry_run_teller_says_each_message_once_and_sends_none() -> None:
    said: list[dict[str, Any]] = []
    teller = _teller(said, dry_run=True)
    event = Event("E1", EventType.REBOOT, EventStatus.SCHEDULED, ("web-0",), T)
    for _ in range(3):
        teller.notify(event, "E1", "rolling", "appeared", "Reboot for web-0")
    assert [(r["agent"], r["step"], r["detail"]) for r in said] == [
        ("would", "notify", "dry run: would notify: setui: Reboot appeared on web-0")]
    teller.notify(event, "E1", "none", "appeared", "no rule of the policy tells it")
    assert len(said) == 1  # a rule the policy does not have does not notify


async def test_the_step_book_keeps_what_was_done_until_the_store_takes_it(
        tmp_path: Path) -> None:
    rule = parse_policy(RULE).rules[0]
    refusing = [True]
    busy: list[bool] = []

    async def db(write: Callable[[], object]) -> object:  # the store's thread, refusing
        if refusing[0]:
            raise StoreError("the store is busy")
        return write()

    said: list[dict[str, Any]] = []
    with Store.open_dir(tmp_path) as store:
        log = AgentLog(store, ENDPOINT)
        book = StepBook(log, clock=lambda: T, db=db, teller=_teller(said),
                        on_change=lambda: None, busy=lambda: busy.append(True))
        try:
            await book.set("E1", "approve", rule, "running")
        except StoreError:
            pass
        else:
            raise AssertionError("a running state the store refused was taken")
        assert book.steps == {}  # not taken: nothing in memory either
        await book.set("E1", "prepare", rule, DONE, "prepare 'drain' exited 0")
        assert book.state("E1", "prepare") == DONE  # in memory at once
        assert log.steps(["E1"]) == [] and len(book.unsaved["E1"]) == 1
        assert busy == [True] and "the store is busy" in said[-1]["detail"]
        refusing[0] = False
        assert await book.flush("E1")
        assert [(s.step, s.state) for s in log.steps(["E1"])] == [("prepare", DONE)]
        assert book.unsaved == {}


class Answers:
    """BudgetClient's one method the gate calls: the group as Prometheus answers it."""

    def __init__(self, rows: list[dict[str, Any]], scraped: list[dict[str, Any]]) -> None:
        self.rows, self.scraped, self.asked = rows, scraped, 0

    def look(self, group: GroupLabels) -> object:
        self.asked += 1
        return look_of(self.rows, self.scraped, 1_800_000_000.0)


def _gate(answers: Answers, now: datetime) -> tuple[BudgetGate, StepBook, AgentMetrics,
                                                     list[dict[str, Any]], Sent]:
    said: list[dict[str, Any]] = []
    sent = Sent()
    teller = _teller(said, notifier=sent)
    metrics = AgentMetrics(vm_name="web-0", compute=COMPUTE, version="0")

    async def db(write: Callable[[], object]) -> object:
        return write()

    gates: list[BudgetGate] = []
    book = StepBook(None, clock=lambda: now, db=db, teller=teller,
                    on_change=lambda: gates[0].activity(), busy=lambda: None)
    gates.append(BudgetGate(answers, metrics=metrics, book=book,  # type: ignore[arg-type]
                            teller=teller, clock=lambda: now))
    return gates[0], book, metrics, said, sent


def _row(name: str, vm: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": name, "vm_scale_set": "ss-web", "resource_group": "rg-web",
                       "subscription_id": "sub-1", "vm_name": vm, **labels},
            "value": [1_800_000_000.0, str(value)]}


async def test_the_gate_waits_while_the_group_is_busy_and_never_past_not_before() -> None:
    rules = {"metric": {"__name__": "setui:vm_not_reported_since_timestamp_seconds"},
             "value": [1_800_000_000.0, "0"]}
    rows = [_row("setui_last_success_timestamp_seconds", vm, 1_799_999_999.0)
            for vm in ("web-0", "web-1")]
    rows += [_row("setui_agent_busy", "web-1", 1, reason="prepare"), rules]
    scraped = [_row("", vm, 1_799_999_999.0) for vm in ("web-0", "web-1")]
    answers = Answers(rows, scraped)
    rule = parse_policy(RULE).rules[0]
    # NotBefore 10 ms away: the wait before the next check ends there.
    soon = Event("E1", EventType.REBOOT, EventStatus.SCHEDULED, ("web-0",),
                 T + timedelta(milliseconds=10))
    gate, book, metrics, said, sent = _gate(answers, T)
    assert await gate.held_back(soon, rule)
    row = book.steps[("E1", "approve")]
    assert (row.state, row.detail) == (WAITING,
                                       "waiting: 1 of 1 in ss-web busy (web-1: prepare running)")
    assert gate.waits == {"E1": "budget"} and gate.claims == set() and gate.gating == set()
    assert metrics.waiting == frozenset({"budget"}) and metrics.busy == frozenset()
    assert [r["agent"] for r in said] == ["waiting"]
    assert [(m.change, m.key) for m in sent.messages] == [
        ("waiting", f"{ENDPOINT}|E1|waiting|budget")]
    # At NotBefore the platform starts it: skipped, and Prometheus is not asked.
    gate, book, metrics, said, sent = _gate(answers, T + timedelta(seconds=1))
    asked = answers.asked
    assert await gate.held_back(soon, rule)
    row = book.steps[("E1", "approve")]
    assert row.state == SKIPPED and row.detail.endswith(PLATFORM_STARTS)
    assert answers.asked == asked and [r["agent"] for r in said] == ["skipped"]
    assert sent.messages == []
