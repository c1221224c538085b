"""The database file: where, who may read it, pragmas, and every failure in words."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path

import platformdirs
import pytest
from store_helpers import ENDPOINT, STORY, T0, entry

from setui.store import DB_NAME, Store, StoreError, default_data_dir

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
        store.audit_append(entry())
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        for suffix in ("", "-wal", "-shm"):
            path = Path(str(store.path) + suffix)
            assert path.exists(), path
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_wal_and_full_sync(store: Store) -> None:
    assert store._conn is not None
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_closed_store_says_so(store: Store) -> None:
    store.close()
    store.close()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        store.history()


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
        writer.audit_append(entry())
    with Store.open_dir(data_dir, readonly=True) as reader:
        assert reader.verify_audit().ok and len(reader.audit()) == 1
        with pytest.raises(StoreError, match="read-only"):
            reader.audit_append(entry())
        with pytest.raises(StoreError, match="read-only"):
            reader.record_document(STORY[0], seen_at=T0, endpoint=ENDPOINT)


def test_locked_database_gives_up_after_the_timeout(data_dir: Path) -> None:
    Store.open_dir(data_dir).close()
    holder = sqlite3.connect(data_dir / DB_NAME, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, for too long
    try:
        with Store.open_dir(data_dir, timeout=0.3) as store:
            started = time.monotonic()
            with pytest.raises(StoreError) as caught:
                store.audit_append(entry())
            assert 0.25 <= time.monotonic() - started < 3
            assert "locked by another process" in str(caught.value)
            assert "0.3 s" in str(caught.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store.open_dir(data_dir) as store:
        assert store.audit() == []  # nothing half-written


def test_full_disk_is_a_clear_error(store: Store) -> None:
    """SQLITE_FULL, as a full disk gives it (a page-count cap stands in for the disk)."""
    store.audit_append(entry())
    assert store._conn is not None
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreError) as caught:
        store.audit_extend([entry(details={"pad": "x" * 5000}) for _ in range(20)])
    assert "is full" in str(caught.value)
    assert [r.seq for r in store.audit()] == [1]
    assert store.verify_audit().ok
