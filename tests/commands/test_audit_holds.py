"""The audit log holds up: real `setui` processes, the real emulator over loopback.

What the issue's "how it is checked" asks: a deleted database beside its witness fails,
a data directory that is a file fails, a symlinked database refuses an approval and
leaves the link's target alone, a forwarded record reaches a UDP collector, and a forged
chain that `audit verify` accepts is caught by `--against` an export taken before. Then
the refusals of a damaged or altered store, and the checks on the data directory.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from setui.emulator.server import Emulator
from setui.store import Store
from setui.store.audit import GENESIS, _content, _row_values, chain_hash
from tests.support.emulated import freeze_announced, posts
from tests.support.install_helpers import installation

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
POSIX = os.name == "posix"


def setui(*args: str, data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, SETUI_DATA_DIR=str(data_dir), **env)
    return subprocess.run([sys.executable, "-m", "setui.cli", *args], capture_output=True,
                          text=True, env=full, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with freeze_announced() as emu:
        yield emu


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def approve(emulator: Emulator, data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return setui("approve", "--endpoint", emulator.url, EVENT_ID, "--yes", "--allow-other-vms",
                 data_dir=data_dir, **env)


def forge(db: Path, witness: Path, new_user: str) -> None:
    """What anyone who can write the data dir can do with sqlite3 and hashlib: rename
    every actor and recompute the chain, the head and the witness."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute("DROP TRIGGER audit_no_delete")
    conn.execute("UPDATE audit SET os_user = ?", (new_user,))
    prev = GENESIS
    rows = conn.execute("SELECT seq, time, action, os_user, ssh_client, host, endpoint, "
                        "event_id, event_json, incarnation, attempt_seq, status, error, "
                        "latency_ms, details_json, prev_hash, hash FROM audit ORDER BY seq"
                        ).fetchall()
    for row in rows:
        digest = chain_hash(prev, _content(row[0], _row_values(row)))
        conn.execute("UPDATE audit SET prev_hash = ?, hash = ? WHERE seq = ?",
                     (prev, digest, row[0]))
        prev = digest
    conn.execute("UPDATE audit_head SET hash = ? WHERE id = 1", (prev,))
    conn.close()
    witness.write_text(json.dumps({"seq": rows[-1][0], "hash": prev}) + "\n")


# -- records leave the VM; a forgery is caught against the copy ------------------------------
@pytest.mark.slow
def test_forwarded_to_udp_and_a_forgery_caught_against_the_export(
        emulator: Emulator, data_dir: Path, tmp_path: Path) -> None:
    collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    collector.bind(("127.0.0.1", 0))
    collector.settimeout(10)
    with collector:
        port = collector.getsockname()[1]
        done = approve(emulator, data_dir, SETUI_AUDIT_FORWARD=f"udp://127.0.0.1:{port}")
        assert done.returncode == 0, done.stdout + done.stderr
        attempt = collector.recv(65536).decode()
        outcome = collector.recv(65536).decode()
    assert f'event_id="{EVENT_ID}"' in attempt and 'action="approve-attempt"' in attempt
    assert f"EventId={EVENT_ID}" in attempt
    assert 'action="approve-outcome"' in outcome and 'outcome="accepted: HTTP 200"' in outcome

    export = tmp_path / "before.jsonl"
    assert setui("audit", "export", str(export), data_dir=data_dir).returncode == 0
    forge(data_dir / "setui.db", data_dir / "setui.db.audit-head", "mallory")

    verify = setui("audit", "verify", data_dir=data_dir)
    assert verify.returncode == 0, verify.stdout  # the limit the README states
    assert "only a copy kept off this VM" in verify.stdout
    against = setui("audit", "verify", "--against", str(export), data_dir=data_dir)
    assert against.returncode == 1, against.stdout + against.stderr
    assert "record 1 differs: actor" in against.stdout and "'mallory" in against.stdout
    assert "record 2 differs" in against.stdout

    # The forwarded copy works as well: the two datagrams a collector wrote to a file.
    copy = tmp_path / "collector.log"
    copy.write_text(attempt + "\n" + outcome + "\n")
    caught = setui("audit", "verify", "--against", str(copy), data_dir=data_dir)
    assert caught.returncode == 1 and "record 1 differs" in caught.stdout
    # And the messages, as Log Analytics' Syslog table keeps them (SyslogMessage: what
    # journald or /dev/log got, the structured data first), without the syslog header.
    messages = tmp_path / "syslogmessage.txt"
    messages.write_text("".join(line[line.index("[setui@32473 "):] + "\n"
                                for line in (attempt, outcome)))
    caught = setui("audit", "verify", "--against", str(messages), data_dir=data_dir)
    assert caught.returncode == 1 and "record 1 differs: actor" in caught.stdout


@pytest.mark.slow
def test_against_an_untouched_log_matches(emulator: Emulator, data_dir: Path,
                                          tmp_path: Path) -> None:
    assert approve(emulator, data_dir).returncode == 0
    export = tmp_path / "copy.jsonl"
    assert setui("audit", "export", str(export), data_dir=data_dir).returncode == 0
    done = setui("audit", "verify", "--against", str(export), data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the 2 records of the copy match the log" in done.stdout
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    refused = setui("audit", "verify", "--against", str(junk), data_dir=data_dir)
    assert refused.returncode == 1 and "holds no setui audit record" in refused.stderr


@pytest.mark.slow
def test_a_failed_forward_blocks_nothing_and_is_shown(emulator: Emulator,
                                                      data_dir: Path) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    done = approve(emulator, data_dir, SETUI_AUDIT_FORWARD=f"tcp://127.0.0.1:{port}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(posts(emulator)) == 1
    # The operator hears of it at once, not only from `setui audit` later.
    assert "its copy did not leave it: cannot send to tcp://127.0.0.1" in done.stderr, \
        done.stderr
    listing = setui("audit", data_dir=data_dir)
    assert "[NOT FORWARDED]" in listing.stdout
    assert "not forwarded off this VM: records 1, 2" in listing.stdout
    as_json = [json.loads(line) for line in
               setui("audit", "--json", data_dir=data_dir).stdout.splitlines()]
    assert all("cannot send to tcp://127.0.0.1" in r["not_forwarded"] for r in as_json)


NOWHERE = "no copy leaves this VM (no journald, no /dev/log): set audit-forward"


@pytest.mark.slow
@pytest.mark.skipif(any(os.path.exists(p) for p in ("/run/systemd/journal/socket", "/dev/log")),
                    reason="journald or /dev/log is here: auto finds somewhere to send")
def test_auto_with_nowhere_to_send_says_so_and_marks_the_records(emulator: Emulator,
                                                                 data_dir: Path) -> None:
    done = approve(emulator, data_dir, SETUI_AUDIT_FORWARD="auto")
    assert done.returncode == 0, done.stdout + done.stderr
    assert NOWHERE in done.stderr, done.stderr
    listing = setui("audit", data_dir=data_dir)
    assert listing.returncode == 0
    assert listing.stdout.count("[NOT FORWARDED]") == 2, listing.stdout
    assert NOWHERE in listing.stdout
    verify = setui("audit", "verify", data_dir=data_dir)
    assert verify.returncode == 0 and verify.stdout.startswith("ok, 2 records")
    assert NOWHERE in verify.stdout and "records 1, 2" in verify.stdout, verify.stdout
    records = [json.loads(line) for line in
               setui("audit", "--json", data_dir=data_dir).stdout.splitlines()]
    assert [r["not_forwarded"] for r in records] == [NOWHERE, NOWHERE]


@pytest.mark.slow
def test_a_bad_forward_setting_is_a_usage_error(data_dir: Path) -> None:
    done = setui("audit", data_dir=data_dir, SETUI_AUDIT_FORWARD="udp://nowhere")
    assert done.returncode == 2 and "SETUI_AUDIT_FORWARD" in done.stderr


# -- a missing store is loud -----------------------------------------------------------------
@pytest.mark.slow
def test_deleting_the_database_beside_its_witness_fails(emulator: Emulator,
                                                         data_dir: Path) -> None:
    assert approve(emulator, data_dir).returncode == 0
    for name in ("setui.db", "setui.db-wal", "setui.db-shm"):
        (data_dir / name).unlink(missing_ok=True)
    for command in (("audit", "verify"), ("audit",), ("history",)):
        done = setui(*command, data_dir=data_dir)
        assert done.returncode == 1, (command, done.stdout)
        assert "the audit log is missing" in done.stderr and "names record 2" in done.stderr
    # An approval does not start a new log beside the evidence either.
    refused = approve(emulator, data_dir)
    assert refused.returncode == 1 and "the audit log is missing" in refused.stdout
    assert len(posts(emulator)) == 1 and not (data_dir / "setui.db").exists()


@pytest.mark.slow
def test_an_emptied_database_beside_its_witness_fails(emulator: Emulator,
                                                      data_dir: Path) -> None:
    assert approve(emulator, data_dir).returncode == 0
    for name in ("setui.db-wal", "setui.db-shm"):
        (data_dir / name).unlink(missing_ok=True)
    (data_dir / "setui.db").write_bytes(b"")
    done = setui("audit", "verify", data_dir=data_dir)
    assert done.returncode == 1 and "is empty" in done.stderr


@pytest.mark.slow
def test_a_database_with_fewer_records_than_its_witness_fails(emulator: Emulator,
                                                              data_dir: Path,
                                                              tmp_path: Path) -> None:
    with Store.open_dir(data_dir):
        pass  # an empty log, schema and all
    kept = tmp_path / "empty.db"
    kept.write_bytes((data_dir / "setui.db").read_bytes())
    assert approve(emulator, data_dir).returncode == 0
    for name in ("setui.db-wal", "setui.db-shm"):
        (data_dir / name).unlink(missing_ok=True)
    (data_dir / "setui.db").write_bytes(kept.read_bytes())  # the older, emptier copy
    verify = setui("audit", "verify", data_dir=data_dir)
    assert verify.returncode == 1 and "removed from the end" in verify.stdout
    assert setui("audit", data_dir=data_dir).returncode == 1
    history = setui("history", data_dir=data_dir)
    assert history.returncode == 1 and "its witness" in history.stderr
    assert "names record 2" in history.stderr


@pytest.mark.slow
def test_the_actor_is_listed_as_the_dialog_shows_it(emulator: Emulator,
                                                    data_dir: Path) -> None:
    done = approve(emulator, data_dir, SSH_CONNECTION="10.9.8.7 50022 10.0.0.4 22")
    assert done.returncode == 0
    listing = setui("audit", data_dir=data_dir)
    assert "from 10.9.8.7 (claimed) on" in listing.stdout
    records = [json.loads(line) for line in
               setui("audit", "--json", data_dir=data_dir).stdout.splitlines()]
    assert all(r["details"]["ssh_claimed"] is True for r in records)


@pytest.mark.slow
@pytest.mark.parametrize("command", [("audit",), ("audit", "verify"), ("history",)])
def test_a_data_dir_that_is_a_file_fails(tmp_path: Path, command: tuple[str, ...]) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    done = setui(*command, data_dir=file)
    assert done.returncode == 1 and "is not a directory" in done.stderr


@pytest.mark.slow
def test_a_data_dir_of_other_files_is_not_an_empty_log() -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    done = setui("audit", "verify", data_dir=Path("/proc/self"))
    assert done.returncode == 1 and "not a setui data directory" in done.stderr


# -- the store cannot be pointed elsewhere ---------------------------------------------------
@pytest.mark.slow
def test_a_symlinked_database_refuses_and_leaves_the_target_alone(
        emulator: Emulator, data_dir: Path, tmp_path: Path) -> None:
    data_dir.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.db"
    (data_dir / "setui.db").symlink_to(target)
    done = approve(emulator, data_dir)
    assert done.returncode == 1 and "symbolic link" in done.stdout
    assert posts(emulator) == [] and not target.exists()
    # A link to an existing file: left byte for byte as it was.
    target.write_bytes(b"precious")
    assert approve(emulator, data_dir).returncode == 1
    assert target.read_bytes() == b"precious" and posts(emulator) == []


@pytest.mark.slow
def test_a_symlinked_witness_is_refused(emulator: Emulator, data_dir: Path,
                                        tmp_path: Path) -> None:
    data_dir.mkdir(mode=0o700)
    (data_dir / "setui.db.audit-head").symlink_to(tmp_path / "w")
    done = approve(emulator, data_dir)
    assert done.returncode == 1 and posts(emulator) == []
    assert not (tmp_path / "w").exists()


def test_another_programs_database_is_not_switched_to_wal(data_dir: Path) -> None:
    data_dir.mkdir(mode=0o700)
    conn = sqlite3.connect(data_dir / "setui.db")
    conn.execute("CREATE TABLE mine (x)")
    conn.commit()
    conn.close()
    before = (data_dir / "setui.db").read_bytes()
    with pytest.raises(Exception, match="not setui's"):
        Store.open_dir(data_dir)
    assert (data_dir / "setui.db").read_bytes() == before  # bytes 18-19: still not WAL
    assert before[18:20] == b"\x01\x01"


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="POSIX modes")
def test_modes_whatever_the_umask(tmp_path: Path) -> None:
    data = tmp_path / "a" / "b" / "data"
    code = ("import os, sys; os.umask(0); from setui.store import Store; "
            "Store.open_dir(sys.argv[1]).close()")
    done = subprocess.run([sys.executable, "-c", code, str(data)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for path in (tmp_path / "a", tmp_path / "a" / "b", data):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    assert stat.S_IMODE((data / "setui.db").stat().st_mode) == 0o600


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="POSIX modes")
@pytest.mark.parametrize("mode", [0o770, 0o777, 0o757])
def test_a_data_dir_others_can_write_refuses(emulator: Emulator, data_dir: Path,
                                             mode: int) -> None:
    data_dir.mkdir()
    data_dir.chmod(mode)
    done = approve(emulator, data_dir)
    assert done.returncode == 1 and "anyone who can write it" in done.stdout
    assert posts(emulator) == []


@pytest.mark.slow
@pytest.mark.skipif(not POSIX or os.geteuid() != 0, reason="needs root to chown")
def test_a_data_dir_owned_by_another_user_refuses(emulator: Emulator,
                                                  data_dir: Path) -> None:
    data_dir.mkdir(mode=0o700)
    os.chown(data_dir, 65534, 65534)
    done = approve(emulator, data_dir)
    assert done.returncode == 1 and "belongs to nobody" in done.stdout
    assert posts(emulator) == []


# -- a damaged store refuses -----------------------------------------------------------------
@pytest.mark.slow
def test_a_planted_trigger_refuses_and_nothing_is_posted(emulator: Emulator,
                                                         data_dir: Path) -> None:
    assert approve(emulator, data_dir).returncode == 0
    conn = sqlite3.connect(data_dir / "setui.db", isolation_level=None)
    conn.execute("CREATE TRIGGER swallow BEFORE INSERT ON audit BEGIN "
                 "SELECT RAISE(IGNORE); END")
    conn.close()
    done = approve(emulator, data_dir)
    assert done.returncode == 1 and "trigger setui did not create ('swallow')" in done.stdout
    assert len(posts(emulator)) == 1


@pytest.mark.slow
def test_an_altered_guard_refuses(emulator: Emulator, data_dir: Path) -> None:
    assert approve(emulator, data_dir).returncode == 0
    conn = sqlite3.connect(data_dir / "setui.db", isolation_level=None)
    conn.execute("DROP TRIGGER audit_no_delete")
    conn.execute("CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN "
                 "SELECT 1; END")
    conn.close()
    done = approve(emulator, data_dir)
    assert done.returncode == 1 and "'audit_no_delete'" in done.stdout
    assert "was altered" in done.stdout and len(posts(emulator)) == 1


@pytest.mark.slow
def test_a_damaged_audit_table_refuses(emulator: Emulator, data_dir: Path) -> None:
    assert approve(emulator, data_dir).returncode == 0
    db = data_dir / "setui.db"
    conn = sqlite3.connect(db)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'audit'").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with db.open("r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(b"\xa5" * size)
    done = approve(emulator, data_dir)
    assert done.returncode == 1, done.stdout
    assert "damaged" in done.stdout or "malformed" in done.stdout
    assert len(posts(emulator)) == 1


@pytest.mark.slow
def test_a_rewritten_head_refuses(emulator: Emulator, data_dir: Path) -> None:
    assert approve(emulator, data_dir).returncode == 0
    conn = sqlite3.connect(data_dir / "setui.db", isolation_level=None)
    conn.execute("UPDATE audit_head SET seq = 1")
    conn.close()
    done = approve(emulator, data_dir)
    assert done.returncode == 1 and "is broken" in done.stdout
    assert len(posts(emulator)) == 1


@pytest.mark.slow
@pytest.mark.skipif(not POSIX or os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
                    reason="needs root and setpriv to run as an ordinary user")
def test_an_unreadable_data_dir_fails_in_words() -> None:
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="setui-unreadable-", dir="/tmp"))
    try:
        base.chmod(0o755)
        data = base / "data"
        data.mkdir(mode=0o700)  # root's: nobody may not look inside
        env = {"PATH": os.environ.get("PATH", ""), "SETUI_CONFIG": "/nonexistent/config.toml",
               "SETUI_AUDIT_FORWARD": "none", "SETUI_DATA_DIR": str(data)}
        for command in (("audit",), ("audit", "verify"), ("history",)):
            done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                                   "--clear-groups", installation().python, "-m", "setui.cli",
                                   *command], env=env, capture_output=True, text=True,
                                  timeout=60, cwd="/")
            assert done.returncode == 1, (command, done.stdout, done.stderr)
            assert "cannot read the data directory" in done.stderr
            assert "Traceback" not in done.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)
