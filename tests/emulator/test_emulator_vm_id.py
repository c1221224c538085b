"""The emulator serves a vmId when given one (``--vm-id``), so tests can put two VMs
behind one endpoint, or one VM behind two; without one it serves none, as an emulator
that setui cannot tell apart from another."""

from __future__ import annotations

import argparse
import io
import threading

import httpx

from setui.emulator.command import add_arguments, run
from setui.emulator.scenario import load_scenario
from setui.emulator.server import Emulator
from tests.support.emulator_helpers import HEADERS

VM_ID = "5c2b5e3e-0d7a-4f5e-9a57-0f4c1c6b7a01"
COMPUTE = "/metadata/instance/compute"
VERSION = {"api-version": "2021-02-01"}


def test_a_vm_id_is_served_with_the_compute_metadata_and_none_when_not_given() -> None:
    for identity, expected in (({"vmId": VM_ID}, VM_ID), (None, None)):
        with Emulator(load_scenario("quiet"), identity=identity) as emulator, \
                httpx.Client(trust_env=False, timeout=5) as http:
            whole = http.get(emulator.url + COMPUTE, headers=HEADERS, params=VERSION).json()
            alone = http.get(emulator.url + COMPUTE + "/vmId", headers=HEADERS,
                             params={**VERSION, "format": "text"})
        assert whole.get("vmId") == expected
        if expected is None:
            assert alone.status_code == 404
        else:
            assert alone.text == expected


def test_the_command_takes_vm_id() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--scenario", "quiet", "--vm-id", VM_ID])
    out, err, stop = io.StringIO(), io.StringIO(), threading.Event()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(run(args, out=out, err=err,
                                                               stop=stop)))
    thread.start()
    try:
        for _ in range(250):
            if out.getvalue().endswith("\n"):
                break
            threading.Event().wait(0.02)
        url = out.getvalue().splitlines()[0]
        with httpx.Client(trust_env=False, timeout=5) as http:
            whole = http.get(url + COMPUTE, headers=HEADERS, params=VERSION).json()
    finally:
        stop.set()
        thread.join(10)
    assert result == [0]
    assert whole["vmId"] == VM_ID
