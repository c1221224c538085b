"""Claims, holds and the agent's steps are keyed by the VM: its vmId when known, else its
endpoint's key (docs/approvals.md, "Once per event").

The edges of the rule, on real store files: a row with a vmId is that VM's alone,
whatever endpoint wrote it; a row without one (written before the vmId was known, or by
an older setui) is the endpoint's, and once the vmId is known it is still found at that
endpoint (and is keyed by the vmId when next written); without the vmId every row of the
endpoint counts, and a claim says whose it was. The agent's hook runs and messages follow
the same rule. A store of schema 6 keeps every claim, hold and step when upgraded, one of
schema 7 every hook run and message, and each is read so without being written.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from setui.store import AuditEntry, Store
from setui.store.agent import AgentLog
from setui.store.schema import SCHEMA_VERSION
from tests.support.oldstores import back_to
from tests.support.store_helpers import ENDPOINT, T0, entry

VM_A = "5c2b5e3e-0d7a-4f5e-9a57-0f4c1c6b7a01"
VM_B = "9e1d7f42-38c4-4b1e-8d2f-3a6e5b4c2d02"
PROXY = "http://127.0.0.1:8080"  # another endpoint that reaches the same VM


def attempt(store: Store, event_id: str, *, endpoint: str = ENDPOINT,
            vm_id: str | None = None) -> int:
    """An approval attempt as the approver writes it (its vmId in the details)."""
    details = {"vm_id": vm_id} if vm_id is not None else {}
    return store.audit_log.append(entry("approve-attempt", event_id=event_id, endpoint=endpoint,
                                    details=details)).seq


def hold_entry(event_id: str) -> AuditEntry:
    return AuditEntry(action="agent-hold", time=T0, user="alice", host="vm",
                      endpoint=ENDPOINT, event_id=event_id)


@contextlib.contextmanager
def upgraded(path: Path, old: int, kept: Callable[[Store], None]) -> Iterator[Store]:
    """The store at ``path`` (schema ``old``): ``kept`` holds of it read as upgraded
    without being written, then of it upgraded by a writer, which is yielded; the file
    says the current schema after."""
    with Store(path, readonly=True) as reader:
        kept(reader)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == old
    conn.close()
    with Store(path) as store:
        kept(store)
        yield store
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 8
    conn.close()


# -- claims -------------------------------------------------------------------------------------
def test_a_claim_with_a_vm_id_is_that_vms_through_any_endpoint(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        seq = attempt(store, "A-1", vm_id=VM_A)
        for endpoint in (ENDPOINT, PROXY):
            claim = store.audit_log.claim("A-1", endpoint, vm_id=VM_A)
            assert claim is not None and claim.attempt_seq == seq, endpoint
        # Another VM behind the same endpoint (the store was copied there): not its claim.
        assert store.audit_log.claim("A-1", ENDPOINT, vm_id=VM_B) is None
        # The vmId is compared as the GUID it is, in any case.
        assert store.audit_log.claim("a-1", PROXY, vm_id=VM_A.upper()) is not None


def test_a_claim_without_a_vm_id_is_the_endpoints(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        seq = attempt(store, "A-1")  # made while the vmId was not known
        claim = store.audit_log.claim("A-1", ENDPOINT, vm_id=VM_A)  # known now: the same VM
        assert claim is not None and claim.attempt_seq == seq
        assert "VM" not in claim.describe()
        # nothing says it was this VM
        assert store.audit_log.claim("A-1", PROXY, vm_id=VM_A) is None
        assert store.audit_log.claim("A-1", ENDPOINT) is not None


def test_without_the_vm_id_every_claim_of_the_endpoint_counts_and_says_whose(
        tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        attempt(store, "A-1", vm_id=VM_A)
        claim = store.audit_log.claim("A-1", ENDPOINT)
        assert claim is not None
        assert "sent by alice from 10.1.2.3 on vm-web-0" in claim.describe()
        assert f"made on VM {VM_A}, and this VM's id is not known" in claim.describe()
        assert store.audit_log.claim("A-1", PROXY) is None


def test_two_processes_claim_once_whatever_endpoint_each_was_given(tmp_path: Path) -> None:
    from setui.store.claims import AlreadyClaimed

    with Store.open_dir(tmp_path) as first, Store.open_dir(tmp_path) as second:
        first.audit_log.extend_claiming(
            [entry("approve-attempt", event_id="A-1", details={"vm_id": VM_A})],
            ["A-1"], ENDPOINT, vm_id=VM_A)
        try:
            second.audit_log.extend_claiming(
                [entry("approve-attempt", event_id="A-1", endpoint=PROXY)],
                ["A-1"], PROXY, vm_id=VM_A)
        except AlreadyClaimed as exc:
            assert [c.attempt_seq for c in exc.claims] == [1]
        else:
            raise AssertionError("a second approval of a claimed event was recorded")
        # Another VM on a copy of the store: its own approval is recorded.
        second.audit_log.extend_claiming([entry("approve-attempt", event_id="A-1")], ["A-1"],
                                         ENDPOINT, vm_id=VM_B)


# -- holds and steps ----------------------------------------------------------------------------
def test_a_hold_is_the_vms_whatever_endpoint_set_it(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        AgentLog(store, PROXY, vm_id=VM_A).set_hold("A-1", held=True, entry=hold_entry("A-1"))
        assert AgentLog(store, ENDPOINT, vm_id=VM_A).held(["A-1"]) == {"A-1"}
        assert AgentLog(store, PROXY, vm_id=VM_B).held(["A-1"]) == set()
        assert AgentLog(store, PROXY).held(["A-1"]) == {"A-1"}  # the endpoint's, unknown VM
        assert AgentLog(store, ENDPOINT).held(["A-1"]) == set()
        # The hold's record says on which VM it was set.
        assert store.audit_log.records()[0].details["vm_id"] == VM_A


def test_a_row_from_before_the_vm_id_is_found_then_keyed_by_it(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        early = AgentLog(store, ENDPOINT)  # the vmId not known yet
        early.set_step("A-1", "prepare", rule="r", state="running", at=T0)
        early.set_hold("A-1", held=True, entry=hold_entry("A-1"))
        log = AgentLog(store, ENDPOINT)
        log.vm_id = VM_A  # learned
        assert [(s.step, s.state) for s in log.steps(["A-1"])] == [("prepare", "running")]
        assert log.held(["A-1"]) == {"A-1"}
        assert AgentLog(store, PROXY, vm_id=VM_A).steps() == []  # not known to be VM_A's yet
        log.set_step("A-1", "prepare", rule="r", state="done", at=T0)
        log.set_hold("A-1", held=False, entry=hold_entry("A-1"))
        # Written again, they are VM_A's: one row each, found through any endpoint.
        other = AgentLog(store, PROXY, vm_id=VM_A)
        assert [(s.step, s.state) for s in other.steps()] == [("prepare", "done")]
        assert other.held(["A-1"]) == set()
        assert AgentLog(store, ENDPOINT, vm_id=VM_B).steps() == []
        # Written without the vmId, a step of VM_A's at this endpoint is that row, not a
        # second one.
        early.set_step("A-1", "prepare", rule="r", state="failed", at=T0)
        assert [(s.step, s.state) for s in other.steps()] == [("prepare", "failed")]
        assert len(log.steps()) == 1


def test_interrupting_what_ran_keeps_to_this_vm(tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        AgentLog(store, PROXY, vm_id=VM_A).set_step("A-1", "prepare", rule="r",
                                                    state="running", at=T0)
        AgentLog(store, ENDPOINT, vm_id=VM_B).set_step("B-1", "prepare", rule="r",
                                                       state="running", at=T0)
        left = AgentLog(store, ENDPOINT, vm_id=VM_A).interrupt_running(T0)
        assert [s.event_id for s in left] == ["A-1"]
        assert [s.state for s in AgentLog(store, ENDPOINT, vm_id=VM_B).steps()] == ["running"]


# -- the upgrade from schema 6 ------------------------------------------------------------------
def test_the_upgrade_keeps_every_claim_hold_and_step(tmp_path: Path) -> None:
    path = tmp_path / "setui.db"
    with Store(path) as store:
        attempt(store, "A-3", endpoint="HTTP://169.254.169.254/")
    conn = sqlite3.connect(path, isolation_level=None)
    back_to(conn, 6)
    conn.execute("INSERT INTO agent_steps (endpoint, event_id, step, rule, state, updated) "
                 "VALUES (?, 'A-1', 'approve', 'r', 'done', '2024-05-14T09:40:00.000000Z')",
                 (ENDPOINT,))
    conn.execute("INSERT INTO agent_holds VALUES (?, 'A-2', 1, 'alice', "
                 "'2024-05-14T09:50:00.000000Z')", (ENDPOINT,))
    conn.close()

    def kept(store: Store) -> None:
        for vm_id in (VM_A, None):  # the VM's id known or not: the endpoint's rows count
            log = AgentLog(store, ENDPOINT, vm_id=vm_id)
            assert [(s.event_id, s.step, s.state) for s in log.steps()] == \
                [("A-1", "approve", "done")]
            assert log.held(["A-2"]) == {"A-2"}
            claim = store.audit_log.claim("A-3", ENDPOINT, vm_id=vm_id)
            assert claim is not None and claim.attempt_seq == 1
        # Old rows keep their endpoint key: another endpoint does not find them.
        assert AgentLog(store, PROXY, vm_id=VM_A).held(["A-2"]) == set()
        assert store.audit_log.claim("A-3", PROXY, vm_id=VM_A) is None

    with upgraded(path, 6, kept) as store:
        assert store.audit_log.verify().ok
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT vm, endpoint FROM agent_steps").fetchall() == \
        [(ENDPOINT, ENDPOINT)]
    conn.close()


# -- hook runs and messages ----------------------------------------------------------------------
def test_hook_runs_and_messages_are_the_vms_whatever_endpoint_wrote_them(
        tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        log = AgentLog(store, PROXY, vm_id=VM_A)
        run = log.hook_started("A-1", "prepare", rule="r", command="drain", at=T0)
        log.hook_ended(run, at=T0, exit_status=0, timed_out=False, output="drained")
        assert log.queue_notification(f"{VM_A}|A-1|appeared|", event_id="A-1",
                                      change="appeared", title="t", body="b", at=T0)
        mine = AgentLog(store, ENDPOINT, vm_id=VM_A)  # the same VM, polled elsewhere
        assert [(r.step, r.output) for r in mine.hook_runs("A-1")] == [("prepare", "drained")]
        assert [n.key for n in mine.notifications(pending_only=True)] == [f"{VM_A}|A-1|appeared|"]
        # Another VM behind this endpoint: none of them.
        assert AgentLog(store, ENDPOINT, vm_id=VM_B).hook_runs() == []
        assert AgentLog(store, ENDPOINT, vm_id=VM_B).notifications() == []


def test_a_message_queued_before_the_vm_id_was_known_is_not_queued_again(
        tmp_path: Path) -> None:
    with Store.open_dir(tmp_path) as store:
        early = AgentLog(store, ENDPOINT)  # the vmId not known yet: keyed by the endpoint
        assert early.queue_notification(f"{ENDPOINT}|A-1|started|", event_id="A-1",
                                        change="started", title="t", body="b", at=T0)
        log = AgentLog(store, ENDPOINT, vm_id=VM_A)
        assert not log.queue_notification(f"{VM_A}|A-1|started|", event_id="A-1",
                                           change="started", title="t", body="b", at=T0)
        assert [n.key for n in log.notifications()] == [f"{ENDPOINT}|A-1|started|"]
        # Another endpoint does not know the early one is this VM's: its own, once.
        other = AgentLog(store, PROXY, vm_id=VM_A)
        assert [n.key for n in other.notifications()] == []
        assert log.queue_notification(f"{VM_A}|A-1|completed|", event_id="A-1",
                                      change="completed", title="t", body="b", at=T0)
        assert not other.queue_notification(f"{VM_A}|A-1|completed|", event_id="A-1",
                                            change="completed", title="t", body="b", at=T0)


# -- the upgrade from schema 7 ------------------------------------------------------------------
def test_the_upgrade_keeps_every_hook_run_and_message_as_the_endpoints(tmp_path: Path) -> None:
    path = tmp_path / "setui.db"
    Store(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    back_to(conn, 7)
    conn.execute("INSERT INTO agent_hook_runs (endpoint, event_id, step, rule, command, "
                 "started) VALUES (?, 'A-1', 'prepare', 'r', 'drain', "
                 "'2024-05-14T09:35:00.000000Z')", (ENDPOINT,))
    conn.execute("INSERT INTO agent_notifications (key, endpoint, event_id, change, title, "
                 "body, state, created) VALUES (?, ?, 'A-1', 'appeared', 't', 'b', "
                 "'pending', '2024-05-14T09:30:00.000000Z')",
                 (f"{ENDPOINT}|A-1|appeared|", ENDPOINT))
    conn.close()

    def kept(store: Store) -> None:
        for vm_id in (VM_A, None):  # the VM's id known or not: the endpoint's rows count
            log = AgentLog(store, ENDPOINT, vm_id=vm_id)
            assert [r.command for r in log.hook_runs("A-1")] == ["drain"]
            assert [n.key for n in log.notifications(pending_only=True)] == \
                [f"{ENDPOINT}|A-1|appeared|"]
        assert AgentLog(store, PROXY, vm_id=VM_A).hook_runs() == []

    with upgraded(path, 7, kept) as store:
        # Told again once the vmId is known: the same message, not queued twice.
        assert not AgentLog(store, ENDPOINT, vm_id=VM_A).queue_notification(
            f"{VM_A}|A-1|appeared|", event_id="A-1", change="appeared", title="t",
            body="b", at=T0)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT vm FROM agent_hook_runs UNION ALL "
                        "SELECT vm FROM agent_notifications").fetchall() == \
        [(ENDPOINT,), (ENDPOINT,)]
    conn.close()
