"""What the docs tests read: README.md and docs/*.md, their code, headings and links.

Markdown is read the way GitHub renders it, as far as the tests need: fenced blocks,
inline code (which may wrap across lines), headings and their anchors, and links."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def doc_files() -> list[Path]:
    """The README and every page under docs/: what a user reads."""
    return [README, *sorted(DOCS.glob("*.md"))]


def name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@dataclass(frozen=True)
class Code:
    """One piece of code in a page: an inline span, or one line of a fenced block (with
    its continuation lines joined), and the language its block names ("" for a span)."""

    path: Path
    line: int
    text: str
    language: str
    block: bool


_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def _prose_and_blocks(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """The lines outside fenced blocks, and those inside them with their block's language."""
    prose: list[tuple[int, str]] = []
    blocks: list[tuple[int, str, str]] = []
    fence: str | None = None
    language = ""
    for number, line in enumerate(text.splitlines(), 1):
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence, language = opened.group(1), opened.group(2)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is not None:
            blocks.append((number, line, language))
        else:
            prose.append((number, line))
    return prose, blocks


def code(path: Path) -> Iterator[Code]:
    """Every inline code span and every fenced line of ``path``. A block's line that starts
    with whitespace, or follows one ending in a backslash, continues the line before (a
    synopsis wrapped over several lines)."""
    prose, blocks = _prose_and_blocks(path.read_text(encoding="utf-8"))
    # Spans may wrap within a paragraph: read each paragraph whole.
    paragraph: list[tuple[int, str]] = []
    for number, line in [*prose, (0, "")]:
        if line.strip():
            paragraph.append((number, line))
            continue
        if paragraph:
            joined = "\n".join(text for _, text in paragraph)
            for match in _SPAN.finditer(joined):
                first = paragraph[0][0] + joined.count("\n", 0, match.start())
                yield Code(path, first, " ".join(match.group(2).split()), "", block=False)
        paragraph = []
    pending: tuple[int, str, str] | None = None
    for number, line, language in blocks:
        if pending is not None and (line[:1].isspace() or pending[1].endswith("\\")):
            pending = (pending[0], pending[1].rstrip("\\") + " " + line.strip(), language)
            continue
        if pending is not None:
            yield Code(path, pending[0], pending[1], pending[2], block=True)
        pending = (number, line.strip(), language)
    if pending is not None:
        yield Code(path, pending[0], pending[1], pending[2], block=True)


def prose(path: Path) -> str:
    """The page's text outside code: no fenced block, no inline span."""
    lines, _ = _prose_and_blocks(path.read_text(encoding="utf-8"))
    return _SPAN.sub(" ", "\n".join(line for _, line in lines))


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower case, spaces as
    hyphens, and no punctuation but hyphens and underscores."""
    text = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in ``path``; a repeated heading gets -1, -2... as on GitHub."""
    lines, _ = _prose_and_blocks(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in lines:
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = anchor(heading.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found
