"""Audit records leave the VM as they are written: real sockets on loopback and in tmp.

A UDP and a TCP collector on 127.0.0.1 and a Unix datagram socket standing in for
journald's receive what the store sends; a collector that is not there never stops a
record from being written, and the failure is kept and shown until it is sent.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.store import AuditEntry, Store
from setui.system.auditforward import parse_target
from tests.support.store_helpers import ENDPOINT, T0

EVENT_ID = "EV-\u202e-1"


def entry(action: str = "approve-attempt", event_id: str = EVENT_ID) -> AuditEntry:
    return AuditEntry(action=action, time=T0, user="alice", host="vm-web-0",
                      endpoint=ENDPOINT, ssh_client="10.1.2.3", event_id=event_id,
                      details={"sudo_user": "bob", "ssh_claimed": True})


@pytest.fixture
def udp() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(10)
    yield sock
    sock.close()


def test_a_record_reaches_a_udp_collector_as_rfc5424(data_dir: Path,
                                                     udp: socket.socket) -> None:
    port = udp.getsockname()[1]
    with Store.open_dir(data_dir, forward=f"udp://127.0.0.1:{port}") as store:
        record = store.audit_log.append(entry())
        assert store.audit_log.forward_problem is None and store.audit_log.unforwarded() == {}
    text = udp.recv(65536).decode()
    assert text.startswith("<85>1 2024-05-14T09:30:00.000000Z ")  # authpriv.notice
    assert " setui " in text and "[setui@32473 " in text
    assert 'seq="1"' in text and f'hash="{record.hash}"' in text
    assert 'action="approve-attempt"' in text and 'outcome="sent"' in text
    assert 'actor="alice (sudo by bob) from 10.1.2.3 (claimed) on vm-web-0"' in text
    # The EventId is there, and escaped: no bidi override reaches a collector's terminal.
    assert "EV-\\u202e-1" in text and "\u202e" not in text


def test_records_reach_a_tcp_collector_octet_counted(data_dir: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    received: list[bytes] = []

    def collect() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(65536):
                received.append(chunk)

    thread = threading.Thread(target=collect)
    thread.start()
    port = server.getsockname()[1]
    with Store.open_dir(data_dir, forward=f"tcp://127.0.0.1:{port}") as store:
        store.audit_log.extend([entry(), entry("refused")])
    thread.join(10)
    server.close()
    data = b"".join(received)
    messages = []
    while data:
        length, _, rest = data.partition(b" ")
        messages.append(rest[:int(length)].decode())
        data = rest[int(length):]
    assert len(messages) == 2
    assert 'seq="1"' in messages[0] and "EventId=EV-\\u202e-1" in messages[0]
    assert messages[1].startswith("<84>1 ")  # a refusal is a warning
    assert 'action="refused"' in messages[1]


def test_the_journal_receives_structured_fields(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "journal.sock"
    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    journal.bind(str(path))
    journal.settimeout(10)
    try:
        with Store.open_dir(data_dir, forward=f"journal:{path}") as store:
            record = store.audit_log.append(entry())
        datagram = journal.recv(65536)
    finally:
        journal.close()
    fields = {}
    for line in datagram.decode().splitlines():
        key, _, value = line.partition("=")
        fields[key] = value
    assert fields["SYSLOG_IDENTIFIER"] == "setui" and fields["PRIORITY"] == "5"
    assert fields["SETUI_EVENT_ID"] == "EV-\\u202e-1"
    assert fields["SETUI_ACTION"] == "approve-attempt" and fields["SETUI_OUTCOME"] == "sent"
    assert fields["SETUI_HASH"] == record.hash and fields["SETUI_SEQ"] == "1"
    assert fields["SETUI_ACTOR"].startswith("alice (sudo by bob)")
    assert "setui audit record 1: approve-attempt" in fields["MESSAGE"]


def test_the_journal_binary_form_for_a_value_with_a_newline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from setui.system import auditforward

    monkeypatch.setattr(auditforward, "_line", lambda record: "two\nlines")
    raw = auditforward._journal({"seq": 1})
    assert b"MESSAGE\n" + struct.pack("<Q", 9) + b"two\nlines\n" in raw
    assert b"SYSLOG_IDENTIFIER=setui\n" in raw


def test_a_collector_that_is_not_there_blocks_nothing_and_shows(data_dir: Path) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: the connection is refused
    with Store.open_dir(data_dir, forward=f"tcp://127.0.0.1:{port}") as store:
        first = store.audit_log.append(entry())
        assert first.seq == 1 and store.audit_log.records()[0].seq == 1  # written all the same
        assert store.audit_log.forward_problem and "cannot send to tcp://127.0.0.1" in \
            store.audit_log.forward_problem
        assert set(store.audit_log.unforwarded()) == {1}
    # Another process sees it too.
    with Store.open_dir(data_dir, readonly=True) as reader:
        assert set(reader.audit_log.unforwarded()) == {1}
    # Once the collector is back, the next record takes the missed one with it.
    server = socket.create_server(("127.0.0.1", port))
    server.settimeout(10)
    got: list[bytes] = []

    def collect() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(65536):
                got.append(chunk)

    thread = threading.Thread(target=collect)
    thread.start()
    with Store.open_dir(data_dir, forward=f"tcp://127.0.0.1:{port}") as store:
        store.audit_log.append(entry("cancelled"))
        assert store.audit_log.unforwarded() == {}
    thread.join(10)
    server.close()
    seqs = re.findall(rb'seq="(\d+)"', b"".join(got))
    assert seqs == [b"1", b"2"]


@pytest.mark.parametrize(("text", "kind"), [
    ("none", "none"), ("udp://127.0.0.1:514", "udp"), ("tcp://[::1]:6514", "tcp"),
    ("journal", "journal"), ("syslog:/dev/log", "syslog")])
def test_settings(text: str, kind: str) -> None:
    assert parse_target(text).kind == kind


@pytest.mark.parametrize("text", ["udp://host", "tcp://h:0", "http://x:1", "journal:rel",
                                  "udp://h:99999", "smtp"])
def test_bad_settings_in_words(text: str) -> None:
    with pytest.raises(ValueError, match="audit-forward"):
        parse_target(text)


def test_auto_is_nothing_where_neither_socket_exists(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    from setui.system import auditforward

    monkeypatch.setattr(auditforward, "JOURNAL_SOCKET", str(tmp_path / "none1"))
    monkeypatch.setattr(auditforward, "SYSLOG_SOCKET", str(tmp_path / "none2"))
    assert parse_target("auto").kind == "none"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "none2"))
    try:
        assert parse_target(None) == auditforward.Target("syslog", str(tmp_path / "none2"))
    finally:
        sock.close()


def test_auto_with_nowhere_to_send_marks_each_record_and_none_is_quiet(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from setui.system import auditforward

    monkeypatch.setattr(auditforward, "JOURNAL_SOCKET", str(tmp_path / "none1"))
    monkeypatch.setattr(auditforward, "SYSLOG_SOCKET", str(tmp_path / "none2"))
    nowhere = "no copy leaves this VM (no journald, no /dev/log): set audit-forward"
    with Store.open_dir(tmp_path / "auto", forward="auto") as store:
        store.audit_log.append(entry())
        assert store.audit_log.forward_problem == nowhere
        store.audit_log.append(entry("cancelled"))
        assert store.audit_log.unforwarded() == {1: nowhere, 2: nowhere}
    # Once there is somewhere to send, the next record takes the marked ones with it.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "none2"))
    sock.settimeout(10)
    with sock, Store.open_dir(tmp_path / "auto", forward="auto") as store:
        store.audit_log.append(entry("refused"))
        assert store.audit_log.unforwarded() == {}
        assert [re.search(rb'seq="(\d+)"', sock.recv(65536)).group(1)
                for _ in range(3)] == [b"1", b"2", b"3"]
    # Told to send nowhere, nothing is marked: that was the setting's choice.
    with Store.open_dir(tmp_path / "none", forward="none") as store:
        store.audit_log.append(entry())
        assert store.audit_log.forward_problem is None and store.audit_log.unforwarded() == {}
