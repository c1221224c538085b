"""Every source folder is a declared package, so an install ships all of it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def test_every_source_package_is_listed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(path.parent.relative_to(ROOT / "src").parts)
        for path in (ROOT / "src").rglob("*.py")
    }
    assert found - listed == set()
    assert "setui.themes" in listed
    assert list((ROOT / "themes").glob("*.toml")), "no shipped themes"
