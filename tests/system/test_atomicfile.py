"""A file replaced whole: the old file or the new, never half; owner-only unless asked."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setui.system.atomicfile import write_atomically


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_owner_only_unless_a_mode_is_given(tmp_path: Path) -> None:
    previous = os.umask(0)  # the umask does not widen it
    try:
        write_atomically(tmp_path / "private", "who approved\n")
        write_atomically(tmp_path / "shared", "a unit\n", mode=0o644)
    finally:
        os.umask(previous)
    assert mode_of(tmp_path / "private") == 0o600
    assert mode_of(tmp_path / "shared") == 0o644


def test_text_line_ends_as_asked_and_bytes_as_given(tmp_path: Path) -> None:
    write_atomically(tmp_path / "kept", "a\r\nb\n", newline="")
    write_atomically(tmp_path / "raw", b"\x00\xff")
    assert (tmp_path / "kept").read_bytes() == b"a\r\nb\n"
    assert (tmp_path / "raw").read_bytes() == b"\x00\xff"


@pytest.mark.parametrize("newline", ["\n", "", "\r\n", "\r"])
# Each example writes the same two files over again: the shared tmp_path is harmless.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
# exclude_categories: hypothesis's Literal names, which mypy does not infer from a tuple
@given(text=st.text(alphabet=st.characters(exclude_categories=("Cs",)),  # type: ignore[arg-type]
                    max_size=40))
def test_text_is_written_as_text_mode_would(tmp_path: Path, newline: str, text: str) -> None:
    ours, texts = tmp_path / "ours", tmp_path / "text-mode"
    write_atomically(ours, text, newline=newline, sync=False)
    with open(texts, "w", encoding="utf-8", newline=newline) as handle:
        handle.write(text)
    assert ours.read_bytes() == texts.read_bytes()


def test_text_that_cannot_be_utf8_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "half \udc80 a surrogate")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]


def test_a_write_that_fails_leaves_the_old_file_and_no_litter(tmp_path: Path) -> None:
    target = tmp_path / "witness"
    write_atomically(target, "old\n")

    def refuse(fd: int) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_atomically(target, "new\n", made=refuse)
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["witness"]


def test_made_sees_the_file_before_it_takes_the_name(tmp_path: Path) -> None:
    target = tmp_path / "textfile"
    seen: list[bool] = []
    write_atomically(target, "x 1\n", made=lambda fd: seen.append(target.exists()),
                     sync=False)
    assert seen == [False] and target.read_text(encoding="utf-8") == "x 1\n"
