"""The database file: where, who may read it, pragmas, and every failure in words."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from datetime import timedelta
from pathlib import Path

import platformdirs
import pytest

from setui.store import DB_NAME, Store, StoreError, default_data_dir
from tests.support.store_helpers import ENDPOINT, STORY, T0, entry, play

POSIX = os.name == "posix"


def test_default_data_dir_env_then_platformdirs(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setenv("SETUI_DATA_DIR", str(tmp_path / "x"))
    assert default_data_dir() == tmp_path / "x"
    monkeypatch.delenv("SETUI_DATA_DIR")
    assert default_data_dir() == Path(platformdirs.user_data_dir("setui", appauthor=False))


def test_open_dir_uses_the_env_dir_when_none_given(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("SETUI_DATA_DIR", str(tmp_path / "env"))
    with Store.open_dir() as store:
        assert store.path == tmp_path / "env" / DB_NAME


@pytest.mark.skipif(not POSIX, reason="POSIX permission bits")
def test_created_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "a" / "b"
    with Store.open_dir(data) as store:
        store.audit_log.append(entry())
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        for suffix in ("", "-wal", "-shm"):
            path = Path(str(store.path) + suffix)
            assert path.exists(), path
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_wal_and_full_sync(store: Store) -> None:
    assert store.database._conn is not None
    assert store.database._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.database._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_closed_store_says_so(store: Store) -> None:
    store.close()
    store.close()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        store.history.incarnations()


def test_data_dir_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError) as caught:
        Store.open_dir(blocker / "data")
    assert "cannot create" in str(caught.value) and str(blocker) in str(caught.value)


@pytest.mark.parametrize("content", [b"garbage " * 600, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_a_damaged_file_is_a_clear_error(data_dir: Path, content: bytes) -> None:
    data_dir.mkdir()
    (data_dir / DB_NAME).write_bytes(content)
    for readonly in (False, True):
        with pytest.raises(StoreError) as caught:
            Store.open_dir(data_dir, readonly=readonly)
        message = str(caught.value)
        assert "damaged or is not a setui database" in message
        assert str(data_dir / DB_NAME) in message and "Move it aside" in message


def test_someone_elses_database_is_left_alone(data_dir: Path) -> None:
    data_dir.mkdir()
    conn = sqlite3.connect(data_dir / DB_NAME)
    conn.execute("CREATE TABLE theirs (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not setui's"):
        Store.open_dir(data_dir)


def test_a_newer_schema_is_refused(data_dir: Path) -> None:
    Store.open_dir(data_dir).close()
    conn = sqlite3.connect(data_dir / DB_NAME)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="newer setui"):
        Store.open_dir(data_dir)


def test_readonly_store(data_dir: Path) -> None:
    with pytest.raises(StoreError, match="nothing was recorded"):
        Store.open_dir(data_dir, readonly=True)
    with Store.open_dir(data_dir) as writer:
        writer.audit_log.append(entry())
    with Store.open_dir(data_dir, readonly=True) as reader:
        assert reader.audit_log.verify().ok and len(reader.audit_log.records()) == 1
        with pytest.raises(StoreError, match="read-only"):
            reader.audit_log.append(entry())
        with pytest.raises(StoreError, match="read-only"):
            reader.history.record(STORY[0], seen_at=T0, endpoint=ENDPOINT)


def test_locked_database_gives_up_after_the_timeout(data_dir: Path) -> None:
    Store.open_dir(data_dir).close()
    holder = sqlite3.connect(data_dir / DB_NAME, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, for too long
    try:
        with Store.open_dir(data_dir, timeout=0.3) as store:
            started = time.monotonic()
            with pytest.raises(StoreError) as caught:
                store.audit_log.append(entry())
            assert time.monotonic() - started >= 0.25  # it did wait for the lock
            assert "locked by another process" in str(caught.value)
            assert "0.3 s" in str(caught.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store.open_dir(data_dir) as store:
        assert store.audit_log.records() == []  # nothing half-written


def test_full_disk_is_a_clear_error(store: Store) -> None:
    """SQLITE_FULL, as a full disk gives it (a page-count cap stands in for the disk)."""
    store.audit_log.append(entry())
    assert store.database._conn is not None
    pages = store.database._conn.execute("PRAGMA page_count").fetchone()[0]
    store.database._conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreError) as caught:
        store.audit_log.extend([entry(details={"pad": "x" * 5000}) for _ in range(20)])
    assert "is full" in str(caught.value)
    assert [r.seq for r in store.audit_log.records()] == [1]
    assert store.audit_log.verify().ok


def test_a_number_too_large_for_sqlite_is_a_store_error(store: Store) -> None:
    """The parser refuses such incarnations; the store still answers in words, not with
    an OverflowError, and is left usable (nothing half-written)."""
    from setui.core.model import Document

    huge = 99999999999999999999999
    with pytest.raises(StoreError, match="larger than the database can hold"):
        store.history.record(Document(incarnation=huge, events=(), raw={}), seen_at=T0,
                             endpoint=ENDPOINT)
    with pytest.raises(StoreError, match="larger than the database can hold"):
        store.audit_log.append(entry(incarnation=huge))
    with pytest.raises(StoreError, match="larger than the database can hold"):
        store.history.incarnation(huge)
    assert store.history.incarnations() == [] and store.audit_log.records() == []
    store.audit_log.append(entry())
    assert store.history.record(STORY[0], seen_at=T0, endpoint=ENDPOINT)
    assert store.audit_log.verify().ok


@pytest.mark.parametrize("readonly", [False, True])
def test_a_directory_where_the_database_should_be(data_dir: Path, readonly: bool) -> None:
    (data_dir / DB_NAME).mkdir(parents=True)
    with pytest.raises(StoreError) as caught:
        Store.open_dir(data_dir, readonly=readonly)
    message = str(caught.value)
    assert "it is a directory, not a setui database" in message and "disk" not in message
    assert str(data_dir / DB_NAME) in message


def test_an_empty_file_is_nothing_recorded_to_a_reader(data_dir: Path) -> None:
    """setui stopped between creating the file and writing the schema."""
    from setui.store import NothingRecorded

    data_dir.mkdir()
    (data_dir / DB_NAME).write_bytes(b"")
    with pytest.raises(NothingRecorded, match="nothing was recorded"):
        Store.open_dir(data_dir, readonly=True)
    with Store.open_dir(data_dir) as writer:  # and a writer just carries on
        writer.audit_log.append(entry())
    with Store.open_dir(data_dir, readonly=True) as reader:
        assert len(reader.audit_log.records()) == 1


def test_someone_elses_database_is_not_read_as_empty(data_dir: Path) -> None:
    from setui.store import NothingRecorded

    data_dir.mkdir()
    conn = sqlite3.connect(data_dir / DB_NAME)
    conn.execute("CREATE TABLE theirs (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not setui's") as caught:
        Store.open_dir(data_dir, readonly=True)
    assert not isinstance(caught.value, NothingRecorded)


def test_history_days_zero_keeps_everything(data_dir: Path) -> None:
    with Store.open_dir(data_dir, history_days=0) as store:
        assert store.history.history_days is None
        play(store, STORY, step=timedelta(days=400))
        assert store.history.prune(now=T0 + timedelta(days=10_000)) == 0
        assert len(store.history.incarnations()) == 4


# -- reading where SQLite cannot create the -shm file ------------------------------------------
# The real thing (a directory the reader cannot write) is in tests/commands/test_audit_cmd.py,
# run as another user. Here the first, plain read-only open is made to fail the way it
# does there (SQLITE_READONLY_DIRECTORY), to check each fallback on its own, quickly.
@pytest.fixture
def shm_refused(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every plain ``mode=ro`` open fails as in a read-only directory; returns the URIs
    that were opened."""
    from setui.store import connection

    opened: list[str] = []
    real = connection._reader

    def reader(target: str, *args: object, **kw: object) -> sqlite3.Connection:
        opened.append(target)
        if target.endswith("mode=ro") and "setui-read-" not in target:
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(target, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(connection, "_reader", reader)
    return opened


def test_without_a_wal_the_file_is_read_as_immutable(data_dir: Path,
                                                     shm_refused: list[str]) -> None:
    with Store.open_dir(data_dir) as writer:
        writer.audit_log.append(entry())
    assert not Path(f"{data_dir / DB_NAME}-wal").exists()  # closed cleanly: merged
    with Store.open_dir(data_dir, readonly=True) as reader:
        assert reader.audit_log.verify().ok and len(reader.audit_log.records()) == 1
    assert shm_refused[-1].endswith("mode=ro&immutable=1")
    assert sorted(p.name for p in data_dir.iterdir()) == [DB_NAME, f"{DB_NAME}.audit-head"]


def test_with_a_wal_a_private_copy_is_read_and_removed(data_dir: Path,
                                                       shm_refused: list[str]) -> None:
    """immutable=1 would ignore the -wal, where the newest records are: they must show."""
    with Store.open_dir(data_dir) as writer:
        writer.audit_log.extend([entry(minute=i) for i in range(3)])
        play(writer, STORY)
        wal = Path(f"{writer.path}-wal")
        assert wal.stat().st_size > 0  # not yet merged into the database file
        reader = Store.open_dir(data_dir, readonly=True)
        copied = Path(shm_refused[-1].split("?")[0].removeprefix("file:")).parent
        assert copied.name.startswith("setui-read-") and copied.is_dir()
        if POSIX:
            assert stat.S_IMODE(copied.stat().st_mode) == 0o700
        with reader:
            assert len(reader.audit_log.records()) == 3 and reader.audit_log.verify().ok
            assert [r.incarnation for r in reader.history.incarnations()] == [4, 3, 2, 1]
            assert reader.path == data_dir / DB_NAME  # the witness is looked for there
        assert not copied.exists()


def test_when_every_fallback_fails_the_error_says_why(data_dir: Path,
                                                      shm_refused: list[str]) -> None:
    data_dir.mkdir()
    (data_dir / DB_NAME).write_bytes(b"garbage " * 600)
    with pytest.raises(StoreError, match="damaged or is not a setui database"):
        Store.open_dir(data_dir, readonly=True)
