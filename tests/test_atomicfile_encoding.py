"""write_atomically(): text and bytes through one binary handle, line ends as asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setui.atomicfile import write_atomically


@pytest.mark.parametrize("newline", ["\n", "", "\r\n", "\r"])
# Each example writes the same two files over again: the shared tmp_path is harmless.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40))
def test_text_is_written_as_text_mode_would(tmp_path: Path, newline: str, text: str) -> None:
    ours, texts = tmp_path / "ours", tmp_path / "text-mode"
    write_atomically(ours, text, newline=newline, sync=False)
    with open(texts, "w", encoding="utf-8", newline=newline) as handle:
        handle.write(text)
    assert ours.read_bytes() == texts.read_bytes()


def test_bytes_are_written_as_given(tmp_path: Path) -> None:
    path = tmp_path / "data"
    write_atomically(path, b"a\nb\r\n\xff", newline="\r\n")
    assert path.read_bytes() == b"a\nb\r\n\xff"


def test_text_that_cannot_be_utf8_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "half \udc80 a surrogate")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]
