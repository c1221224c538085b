"""Once per event is once per VM, whichever endpoint reached it: real `setui approve`
processes against the emulator over loopback, the VM told apart by the vmId its compute
metadata serves (docs/approvals.md, "Once per event").

Two endpoints that reach one VM (the emulator itself and a loopback forwarder to it) make
one POST; two VMs behind one endpoint spelling (a store copied from another VM, an image
baked with a store in it: the emulator brought back on the same port as another VM) each
approve their own; and where this VM's id is not known, the endpoint's claims count, and
the refusal says whose they were.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.server import Emulator, ManualClock
from tests.support.emulated import freeze_announced, posts
from tests.support.forwarder import Forwarder, forwarder

__all__ = ["forwarder"]  # the fixture, used by name

pytestmark = pytest.mark.slow  # starts `setui approve` processes

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
VM_A = "5c2b5e3e-0d7a-4f5e-9a57-0f4c1c6b7a01"
VM_B = "9e1d7f42-38c4-4b1e-8d2f-3a6e5b4c2d02"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@contextlib.contextmanager
def vm(clock: ManualClock, vm_id: str | None, port: int = 0) -> Iterator[Emulator]:
    """A VM: the emulator with its vmId (None: it serves none), the Freeze announced."""
    with freeze_announced(clock, port=port,
                          identity={"vmId": vm_id} if vm_id else None) as emulator:
        yield emulator


@pytest.fixture
def vm_a(clock: ManualClock) -> Iterator[Emulator]:
    with vm(clock, VM_A) as emulator:
        yield emulator


def approve(endpoint: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "setui.cli", "approve", "--endpoint", endpoint, EVENT_ID,
         "--yes", "--allow-other-vms"], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, SETUI_DATA_DIR=str(data_dir)), stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def approved_then_replaced(first: Emulator, clock: ManualClock, data_dir: Path,
                           vm_id: str | None) -> Iterator[Emulator]:
    """The event approved on ``first`` into ``data_dir``; then ``first`` gone, and the VM
    ``vm_id`` in its place behind the same endpoint (a store that came with an image, or
    was copied), its event not approved."""
    done = approve(first.url, data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    first.stop()
    with vm(clock, vm_id, first.port) as replaced:
        yield replaced


def test_another_endpoint_that_reaches_the_same_vm_does_not_approve_again(
        vm_a: Emulator, forwarder: type[Forwarder], tmp_path: Path) -> None:
    proxy = forwarder(vm_a.url)
    first = approve(vm_a.url, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    again = approve(proxy.url, tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "already approved by" in again.stdout, again.stdout
    assert len(posts(vm_a)) == 1


def test_a_store_from_another_vm_does_not_block_this_vms_approval(
        vm_a: Emulator, clock: ManualClock, tmp_path: Path) -> None:
    with approved_then_replaced(vm_a, clock, tmp_path, VM_B) as vm_b:
        mine = approve(vm_b.url, tmp_path)
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert len(posts(vm_b)) == 1
    for words in ("already", "may already", "Approve again", VM_A):
        assert words not in mine.stdout + mine.stderr, mine.stdout + mine.stderr
    # And back on the first VM, its own claim still holds.
    with vm(clock, VM_A, vm_a.port) as vm_a_again:
        again = approve(vm_a_again.url, tmp_path)
    assert again.returncode == 1 and "already approved by" in again.stdout, again.stdout
    assert len(posts(vm_a_again)) == 0


def test_without_this_vms_id_the_endpoints_claims_count_and_say_whose_they_are(
        vm_a: Emulator, clock: ManualClock, tmp_path: Path) -> None:
    # Compute metadata without a vmId: this VM's id is not known.
    with approved_then_replaced(vm_a, clock, tmp_path, None) as unnamed:
        refused = approve(unnamed.url, tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert len(posts(unnamed)) == 0
    assert "already approved by" in refused.stdout, refused.stdout
    assert f"made on VM {VM_A}" in refused.stdout, refused.stdout
    assert "this VM's id is not known" in refused.stdout, refused.stdout
