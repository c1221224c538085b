"""An answer the client cannot read is not a refusal: the request had left, so what the
agent did with it is not known. For an approval, that is an outcome unknown (it was
reported "refused: nothing was sent")."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from setui.api.client import AgentClient, ConnectionLost
from setui.api.codec import AgentInfo, CallerAccess, Hello, encode_hello
from setui.api.protocol import API_VERSION
from setui.approval.snapshot import Confirmed
from tests.support.api_helpers import stand_in_agent

EVENT = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"
HELLO = encode_hello(Hello(API_VERSION, "0", AgentInfo(
    pid=1, since=datetime(2026, 11, 26, tzinfo=timezone.utc), vm_name="web-0", vm_id=None,
    endpoint="http://127.0.0.1:1", data_dir=None, policy=None, dry_run=False),
    CallerAccess(uid=0, user="root", may_approve=True, why_not=None)))


@pytest.mark.parametrize("answer", [
    b"this is not json\n",
    b'{"id": 1, "ok": {"outcomes": "not a list"}}\n',
    b'{"id": 1, "hello": {}}\n',
], ids=["garbage", "a body of the wrong shape", "a frame of the wrong kind"])
def test_an_unreadable_answer_to_an_approval_is_a_lost_one(tmp_path: Path,
                                                           answer: bytes) -> None:
    path = tmp_path / "api.sock"
    with stand_in_agent(path, HELLO, answer), \
            AgentClient.connect(path, timeout=30) as client, \
            pytest.raises(ConnectionLost) as caught:
        client.approve([EVENT], {EVENT: Confirmed(EVENT, {"EventId": EVENT}, 1)})
    assert "the agent sent" in caught.value.message, caught.value.message
