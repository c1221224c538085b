"""One way to write an actor: the dialog, the audit listing, the event's story and the copy
that leaves the VM say the same words for the same record.

A real store writes each record and forwards it to a UDP collector on loopback; `setui
audit` and `setui history --event` run as real processes.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from setui.store import AuditEntry, Store
from setui.system.identity import Identity

T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)


def setui(*args: str, data_dir: Path) -> str:
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    done = subprocess.run([sys.executable, "-m", "setui.cli", *args], capture_output=True,
                          text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize(("user", "ssh_client", "details", "words"), [
    # The login is the account itself: nothing to add (the copy used to say "login root").
    ("root", None, {"login_user": "root", "session": 3}, "root (session 3) on vm-web-0"),
    ("root", "10.1.2.3", {"login_user": "alice", "sudo_user": "alice", "session": 7,
                          "ssh_claimed": True},
     "root (login alice, sudo by alice, session 7) from 10.1.2.3 (claimed) on vm-web-0"),
    ("alice", "10.1.2.3", {}, "alice from 10.1.2.3 on vm-web-0"),
    ("policy:drain (setui agent, uid 0)", None, {},
     "policy:drain (setui agent, uid 0) on vm-web-0"),
])
@pytest.mark.slow
def test_every_front_end_writes_the_actor_the_same_way(
        tmp_path: Path, user: str, ssh_client: str | None, details: dict[str, Any],
        words: str) -> None:
    identity = Identity(user=user, ssh_client=ssh_client, host="vm-web-0",
                        sudo_user=details.get("sudo_user"),
                        login_user=details.get("login_user"), session=details.get("session"),
                        ssh_claimed=bool(details.get("ssh_claimed")))
    assert identity.label == words  # what the confirmation dialog shows

    data_dir = tmp_path / "data"
    collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    collector.bind(("127.0.0.1", 0))
    collector.settimeout(10)
    with collector, Store.open_dir(
            data_dir, forward=f"udp://127.0.0.1:{collector.getsockname()[1]}") as store:
        store.audit_log.append(AuditEntry(action="approve-attempt", time=T0, user=user,
                                          host="vm-web-0", endpoint="http://169.254.169.254",
                                          ssh_client=ssh_client, event_id="EV-1",
                                          details=details))
        forwarded = collector.recv(65536).decode()
    assert f'actor="{words}"' in forwarded  # the copy's structured field
    assert f" by {words}: sent" in forwarded  # and its message

    listing = setui("audit", data_dir=data_dir)
    assert f"by {words}" in listing, listing
    story = setui("history", "--event", "EV-1", data_dir=data_dir)
    assert re.search(rf"operator {re.escape(words)} approved it", story), story
