"""Which boot this is: the kernel's boot id, read with care, and btime (setui.system.boot)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from setui.system.boot import TEST_VARIABLE, current_boot_id, read_boot_id, read_btime, this_boot


def test_the_kernels_boot_id_is_read_on_linux() -> None:
    path = Path("/proc/sys/kernel/random/boot_id")
    if not path.exists():
        pytest.skip("no /proc here")
    found = read_boot_id(path)
    assert found is not None and len(found) == 36
    assert this_boot(environ={}).boot_id == found


@pytest.mark.parametrize("text", ["", "x" * 65, "not a boot id", "\x1b[2J", "ab/cd"])
def test_anything_but_a_boot_id_is_none(tmp_path: Path, text: str) -> None:
    path = tmp_path / "boot_id"
    path.write_text(text)
    assert read_boot_id(path) is None
    assert read_boot_id(tmp_path / "absent") is None
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    assert read_boot_id(tmp_path / "binary") is None


def test_a_test_can_give_another_boot_id(tmp_path: Path) -> None:
    path = tmp_path / "boot_id"
    path.write_text("boot-b\n")
    assert current_boot_id({TEST_VARIABLE: str(path)}) == "boot-b"


def test_btime_is_read_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3\nintr 5\nbtime 1764098523\nprocesses 9\n")
    assert read_btime(stat) == datetime.fromtimestamp(1764098523, tz=timezone.utc)
    stat.write_text("cpu  1 2 3\nbtime soon\n")
    assert read_btime(stat) is None
    assert read_btime(tmp_path / "absent") is None
