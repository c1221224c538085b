"""Links between the docs work: every relative link in README.md and docs/*.md reaches a
file that exists, and a heading that exists when it names one; and every docs/*.md that
the code, the build or the docs name exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.docs_text import ROOT, anchors, doc_files, name, prose

# [text](target) and ![alt](target), and the reference style's [label]: target.
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
_DOC_NAMED = re.compile(r"(?<![\w/.-])docs/[\w.-]+\.md\b")


def _links(path: Path) -> list[str]:
    text = prose(path)  # a link in code is no link
    return _INLINE.findall(text) + _REFERENCE.findall(text)


def _broken(path: Path, target: str) -> str | None:
    if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:
        return None
    file_part, _, heading = target.partition("#")
    place = (path.parent / file_part).resolve() if file_part else path
    if not place.exists():
        return f"{name(path)}: {target}: no {file_part}"
    if heading and place.suffix == ".md" and heading not in anchors(place):
        return f"{name(path)}: {target}: {name(place)} has no heading #{heading}"
    if heading and place.suffix != ".md":
        return f"{name(path)}: {target}: an anchor in a file that is not Markdown"
    return None


def _sources() -> list[Path]:
    """The project's own text: the build, the code, its tests and tools, the docs."""
    files = [ROOT / "pyproject.toml", ROOT / "Makefile", *doc_files()]
    for top in ("src", "tests", "tools", "bench", "contrib"):
        files += [path for path in (ROOT / top).rglob("*") if path.is_file()
                  and path.suffix in (".py", ".md", ".toml", ".yml", ".service", "")
                  and "__pycache__" not in path.parts and ".egg-info" not in str(path)]
    return files


def test_every_relative_link_reaches_a_file_and_a_heading() -> None:
    broken = [problem for path in doc_files() for target in _links(path)
              if (problem := _broken(path, target)) is not None]
    assert not broken, "\n".join(broken)


def test_every_doc_named_anywhere_exists() -> None:
    """pyproject.toml, the Makefile, the code, the tests and the docs name docs/*.md in
    words (a comment, a message, a docstring): each of them is there."""
    named: dict[str, list[str]] = {}
    for path in _sources():
        text = path.read_text(encoding="utf-8", errors="replace")
        for doc in set(_DOC_NAMED.findall(text)):
            named.setdefault(doc, []).append(name(path))
    missing = {doc: places for doc, places in named.items() if not (ROOT / doc).is_file()}
    assert not missing, "\n".join(f"{doc}, named in {', '.join(sorted(places))}"
                                  for doc, places in sorted(missing.items()))
