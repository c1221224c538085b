"""TOML read one way: the parser's errors, and nesting it cannot follow, are TomlError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from setui.settings.tomlread import TomlError, parse_toml


def test_a_table_is_read() -> None:
    assert parse_toml('name = "x"\n[variables]\nsize = 3\n') == {
        "name": "x", "variables": {"size": 3}}


def test_text_that_is_not_toml_says_where() -> None:
    with pytest.raises(TomlError) as caught:
        parse_toml('name = "a"\nname = "b"\n')
    assert "line 2" in str(caught.value)
    assert isinstance(caught.value, ValueError)  # what callers that read JSON too catch


def test_nesting_deeper_than_the_parser_can_recurse_is_not_toml() -> None:
    with pytest.raises(TomlError, match="nested too deeply"):
        parse_toml("x = " + "[" * 100_000)


@pytest.mark.slow  # a fresh interpreter (docs/testing.md)
def test_no_parser_is_loaded_until_there_is_a_file_to_read(tmp_path: Path) -> None:
    code = ("import sys\n"
            "from setui.settings.config import load_config\n"
            f"load_config(None, environ={{'SETUI_CONFIG': {str(tmp_path / 'absent')!r}}})\n"
            "print(sorted(m for m in sys.modules if m in ('tomllib', 'tomli')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
