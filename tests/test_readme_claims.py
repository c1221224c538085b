"""The README's table of what setui does that no other tool does names, on each line, the
test that shows it: each named test must exist, so a claim cannot outlive its proof."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## What no other tool here does")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_every_claim_names_a_test_that_exists() -> None:
    rows = [line for line in _section().splitlines()
            if line.startswith("| ") and not line.startswith(("| setui", "|---"))]
    assert len(rows) >= 5, rows
    for row in rows:
        found = NAMED.search(row)
        assert found, f"no test named on: {row}"
        path, name = found.groups()
        source = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{path} has no {name}"
