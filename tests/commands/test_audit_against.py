"""`setui audit verify --against` cannot be talked into "ok": real forwarding and a real
`setui` process.

Each copy here is what a collector really received: records written by a real store and
sent by its forwarder to a UDP or TCP socket on loopback, or to Unix datagram sockets
standing in for /dev/log and journald's. The forged log is a real store too, written with
the content an attacker wants: they can write anything on the VM and send anything to the
collector, but cannot take back what the collector already holds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from setui.store import AuditEntry, Store
from tests.support.waiting import wait_until

T0 = datetime(2024, 5, 14, 9, 30, tzinfo=timezone.utc)
ENDPOINT = "http://169.254.169.254"
EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
PATIENCE = 10.0


def setui(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SETUI_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "-m", "setui.cli", *args], capture_output=True,
                          text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


def approval(user: str = "alice", ssh_client: str | None = "10.1.2.3",
             **changes: object) -> list[AuditEntry]:
    """An approval as the approver records it: the attempt, then its outcome."""
    attempt = AuditEntry(action="approve-attempt", time=T0, user=user, host="vm-web-0",
                         endpoint=ENDPOINT, ssh_client=ssh_client, event_id=EVENT_ID,
                         incarnation=2, event={"EventId": EVENT_ID, "EventType": "Freeze"},
                         details={"login_user": "alice", "session": 7})
    attempt = replace(attempt, **changes)  # type: ignore[arg-type]
    outcome = replace(attempt, action="approve-outcome", time=T0 + timedelta(seconds=1),
                      attempt_seq=1, status=200, latency=0.04)
    return [attempt, outcome]


def write_log(data_dir: Path, entries: Sequence[AuditEntry], forward: str = "none") -> Store:
    """A real store with these records, each written (and forwarded) on its own."""
    store = Store.open_dir(data_dir, forward=forward)
    for one in entries:
        store.audit_log.append(one)
        assert store.audit_log.forward_problem is None, store.audit_log.forward_problem
    store.close()
    return store


@pytest.fixture
def udp() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(PATIENCE)
    yield sock
    sock.close()


def udp_target(sock: socket.socket) -> str:
    return f"udp://127.0.0.1:{sock.getsockname()[1]}"


def received(sock: socket.socket, count: int) -> list[str]:
    """``count`` datagrams, each as one line of the collector's file."""
    return [sock.recv(65536).decode() for _ in range(count)]


def copy_file(tmp_path: Path, lines: Sequence[str], name: str = "copy.log") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# -- a copy holding two versions of a record -------------------------------------------------
@pytest.mark.slow
def test_forged_records_sent_again_do_not_replace_the_genuine_ones(
        tmp_path: Path, udp: socket.socket) -> None:
    genuine_dir, forged_dir = tmp_path / "genuine", tmp_path / "forged"
    write_log(genuine_dir, approval("alice"), forward=udp_target(udp))
    genuine = received(udp, 2)
    # The attacker rewrites the log (here: writes it anew, as mallory) and sends the forged
    # records to the collector as well, after the genuine ones.
    write_log(forged_dir, approval("mallory"), forward=udp_target(udp))
    forged = received(udp, 2)
    copy = copy_file(tmp_path, genuine + forged)

    done = setui("audit", "verify", "--against", str(copy), data_dir=forged_dir)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "record 1: the copy holds 2 versions that disagree" in done.stdout, done.stdout
    assert "record 2: the copy holds 2 versions that disagree" in done.stdout
    # Both are shown, with where they are in the copy and which the log matches.
    assert "'alice (session 7) from 10.1.2.3 on vm-web-0'" in done.stdout
    assert "'mallory (login alice, session 7) from 10.1.2.3 on vm-web-0'" in done.stdout
    assert "line 1:" in done.stdout and "line 3:" in done.stdout
    assert "the log matches line 3" in done.stdout
    # Against the genuine log the same copy is a finding too: the copy is not one story.
    done = setui("audit", "verify", "--against", str(copy), data_dir=genuine_dir)
    assert done.returncode == 1 and "2 versions that disagree" in done.stdout
    assert "the log matches line 1" in done.stdout


@pytest.mark.slow
def test_a_record_forwarded_twice_unchanged_is_one_record(tmp_path: Path,
                                                           udp: socket.socket) -> None:
    data_dir = tmp_path / "data"
    write_log(data_dir, approval(), forward=udp_target(udp))
    lines = received(udp, 2)
    done = setui("audit", "verify", "--against", str(copy_file(tmp_path, lines * 2)),
                 data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the 2 records of the copy match the log" in done.stdout


# -- the genuine hash with other values --------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("name", "genuine", "other"), [
    ("event_id", f'event_id="{EVENT_ID}"', 'event_id="F020BA2E-3BC0-4C40-A10B-86575A9EABD5"'),
    ("time", 'time="2024-05-14T09:30:00.000000Z"', 'time="2024-05-14T09:10:00.000000Z"'),
])
def test_a_line_with_the_records_hash_but_other_values_differs(
        tmp_path: Path, udp: socket.socket, name: str, genuine: str, other: str) -> None:
    """A collector's line that carries the log's hash for record 1 but another EventId or
    time was not written by setui from that record: the hash alone is no match."""
    data_dir = tmp_path / "data"
    write_log(data_dir, approval(), forward=udp_target(udp))
    first, second = received(udp, 2)
    assert genuine in first, first
    copy = copy_file(tmp_path, [first.replace(genuine, other), second])
    done = setui("audit", "verify", "--against", str(copy), data_dir=data_dir)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("ok, 2 records")  # the chain itself is sound
    assert f"record 1 differs under the same hash: {name} " in done.stdout, done.stdout
    assert "the copy's line was not written by setui from this record" in done.stdout


# -- a hash planted in free text -------------------------------------------------------------
@pytest.mark.slow
def test_a_hash_planted_in_ssh_connection_is_not_the_records_hash(
        tmp_path: Path, udp: socket.socket) -> None:
    """The attacker prepares the forgery first (its hash is known before the genuine record
    is written), then approves with SSH_CONNECTION carrying ``hash="<the forgery's>"`` and
    ``seq="1"``, so that the copy's line, if its free text were read, names the forgery."""
    forged_dir = tmp_path / "forged"
    forged = write_log(forged_dir, approval("mallory", ssh_client="10.0.0.1")[:1])
    with Store.open_dir(forged_dir, readonly=True) as reader:
        forged_hash = reader.audit_log.records()[0].hash
    assert forged.path.exists()
    planted = f'10.0.0.1"seq="1"hash="{forged_hash}"'
    write_log(tmp_path / "genuine", approval("alice", ssh_client=planted)[:1],
              forward=udp_target(udp))
    line = received(udp, 1)[0]
    assert f'hash="{forged_hash}"' in line  # the text is there, in the message
    done = setui("audit", "verify", "--against", str(copy_file(tmp_path, [line])),
                 data_dir=forged_dir)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "record 1 differs" in done.stdout and "'mallory" in done.stdout


# -- hostile values, every forwarded form, and back ------------------------------------------
HOSTILE = [
    'a"b', "a]b", "a\\b", "trailing\\", '\\"', "\\]", "\\\\", 'x"] [setui@32473 seq="9"',
    f'[setui@32473 seq="1" hash="{"0" * 64}"]', "key=\"value\" hash='1'", "EV-\u202e-1",
    "two\nlines", "tab\there", "=", "",
]


def hostile_log(data_dir: Path, forward: str) -> int:
    """Records whose every free-text field holds hostile text; how many were written."""
    entries = []
    for index, text in enumerate(HOSTILE):
        entries.append(AuditEntry(
            action="refused" if index % 2 else "approve-outcome",
            time=T0 + timedelta(seconds=index), user=f"u{text}", host=f"h{text}",
            endpoint=f"{ENDPOINT}/{text}", ssh_client=text or None, event_id=text,
            incarnation=index, attempt_seq=None, status=None if index % 2 else 503,
            error=f"e{text}", details={"login_user": text, "sudo_user": text,
                                       "session": text, "ssh_claimed": True}))
    write_log(data_dir, entries, forward=forward)
    return len(entries)


def journal_json(datagram: bytes) -> str:
    """What `journalctl -o json` prints for one entry sent to journald's native socket."""
    fields: dict[str, str] = {}
    rest = datagram
    while rest:
        line, _, rest = rest.partition(b"\n")
        if b"=" in line:
            key, _, value = line.partition(b"=")
            fields[key.decode()] = value.decode()
        else:  # the binary form: the name, a newline, a 64-bit length, the value
            size = int.from_bytes(rest[:8], "little")
            fields[line.decode()] = rest[8:8 + size].decode()
            rest = rest[8 + size + 1:]
    return json.dumps({"__REALTIME_TIMESTAMP": "1715679000000000", **fields})


def unix_socket(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(PATIENCE)
    return sock


def tcp_collector() -> tuple[socket.socket, list[bytes], threading.Thread]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(PATIENCE)
    got: list[bytes] = []

    def collect() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while chunk := conn.recv(65536):
                    got.append(chunk)

    thread = threading.Thread(target=collect, daemon=True)
    thread.start()
    return server, got, thread


def frames(data: bytes) -> int:
    """How many whole octet-counted frames ``data`` begins with (the rest may be on its
    way)."""
    whole = 0
    while data:
        length, space, rest = data.partition(b" ")
        if not space or not length.isdigit() or len(rest) < int(length):
            break
        whole += 1
        data = rest[int(length):]
    return whole


def octet_counted(data: bytes) -> list[str]:
    out = []
    while data:
        length, _, rest = data.partition(b" ")
        out.append(rest[:int(length)].decode())
        data = rest[int(length):]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("form", ["udp", "tcp", "syslog", "journal"])
def test_hostile_values_round_trip_through_every_forwarded_form(
        tmp_path: Path, udp: socket.socket, form: str) -> None:
    """Backslashes, quotes and brackets in every field, planted elements and fields, a bidi
    override, a newline: forwarded, written to the collector's file, read back by
    `--against`, every record matches the log it came from. Without RFC 5424's escaping
    of ``\\``, ``"`` and ``]`` in the structured data, records do not come back whole."""
    data_dir = tmp_path / "data"
    if form == "udp":
        count = hostile_log(data_dir, udp_target(udp))
        lines = received(udp, count)
    elif form == "tcp":
        server, got, thread = tcp_collector()
        try:
            count = hostile_log(data_dir, f"tcp://127.0.0.1:{server.getsockname()[1]}")
            # Every record read before the collector stops listening: closing it drops
            # the connections it has not accepted yet (a loaded machine's collector lags).
            wait_until(lambda: frames(b"".join(got)) >= count, 60, "every record collected")
        finally:
            server.close()
            thread.join(PATIENCE)
        lines = octet_counted(b"".join(got))
    else:
        # A Unix datagram socket queues only a few datagrams: read them as they come.
        sock = unix_socket(tmp_path / f"{form}.sock")
        datagrams: list[bytes] = []
        reader = threading.Thread(target=lambda: datagrams.extend(
            sock.recv(65536) for _ in HOSTILE), daemon=True)
        reader.start()
        with sock:
            count = hostile_log(data_dir, f"{form}:{tmp_path / f'{form}.sock'}")
            reader.join(PATIENCE)
        lines = [journal_json(d) if form == "journal" else d.decode() for d in datagrams]
    assert len(lines) == count
    if form != "journal":
        assert all("\n" not in line and "\u202e" not in line for line in lines)
    done = setui("audit", "verify", "--against", str(copy_file(tmp_path, lines)),
                 data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"the {count} records of the copy match the log" in done.stdout
    assert "skipped" not in done.stdout


@pytest.mark.slow
def test_message_text_alone_never_reads_as_a_record(tmp_path: Path,
                                                     udp: socket.socket) -> None:
    """A collector that keeps the message and drops the structured data: whatever the
    EventId and SSH_CONNECTION planted in the text, no field is read from it."""
    data_dir = tmp_path / "data"
    planted = f'[setui@32473 seq="1" hash="{"0" * 64}"]'
    write_log(data_dir, approval(ssh_client=f'hash="{"1" * 64}"', event_id=planted),
              forward=udp_target(udp))
    lines = received(udp, 2)
    messages = [line[line.index("] setui audit record ") + 2:] for line in lines]
    assert all(m.startswith("setui audit record ") for m in messages)
    done = setui("audit", "verify", "--against", str(copy_file(tmp_path, messages)),
                 data_dir=data_dir)
    assert done.returncode == 1 and "holds no setui audit record" in done.stderr, \
        done.stdout + done.stderr
