"""This VM's vmId: read from compute metadata as a GUID or not at all (it is a key, and
text from the network); learned by the front ends over the wire from the emulator."""

from __future__ import annotations

import pytest

from setui.core.client import ImdsClient
from setui.core.vmid import vm_id_key, vm_id_of
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from setui.session import ThisVm

VM_ID = "5c2b5e3e-0d7a-4f5e-9a57-0f4c1c6b7a01"


@pytest.mark.parametrize(("value", "key"), [
    (VM_ID, VM_ID), (VM_ID.upper(), VM_ID), (f" {VM_ID}\n", VM_ID),
    ("", None), (None, None), (42, None), ("not-a-guid", None), (f"{{{VM_ID}}}", None),
    ("http://169.254.169.254", None), (VM_ID + "0", None), (VM_ID * 20, None),
])
def test_only_a_guid_is_a_vm_id(value: object, key: str | None) -> None:
    assert vm_id_key(value) == key
    assert vm_id_of({"vmId": value}) == key


def test_no_compute_metadata_no_vm_id() -> None:
    assert vm_id_of(None) is None and vm_id_of({"name": "vm"}) is None


async def test_a_front_end_learns_it_from_the_service() -> None:
    for identity, expected in (({"vmId": VM_ID.upper()}, VM_ID), (None, None)):
        with Emulator(load_scenario("quiet"), identity=identity) as emulator:
            async with ImdsClient(emulator.url) as client:
                this_vm = ThisVm("given-name")  # a given name does not stop it asking
                assert await this_vm.learn_id(client, tries=1) == expected
                assert this_vm.vm_id == expected


async def test_no_answer_is_not_known() -> None:
    from setui.emulator.faults import parse_faults

    with Emulator(load_scenario("quiet"), identity={"vmId": VM_ID},
                  faults=parse_faults("compute-503=1")) as emulator:
        async with ImdsClient(emulator.url) as client:
            naps: list[float] = []

            async def nap(seconds: float) -> None:
                naps.append(seconds)

            assert await ThisVm(None).learn_id(client, tries=2, sleep=nap) is None
            assert len(naps) == 1  # asked twice, with a pause between
