"""docs/architecture.md matches the code: every module under src/setui is in its tree
with its job, and its layers diagram is the ``[tool.importlinter]`` layers contracts."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from tests.support.docs_text import DOCS, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 reads TOML with tomli, a dependency there
    import tomli as tomllib

ARCHITECTURE = DOCS / "architecture.md"
PACKAGE = ROOT / "src" / "setui"


@dataclass
class Entry:
    """A name in the tree (``core/``, ``cli.py``) with what is said of it, and the names
    under it."""

    name: str
    indent: int
    text: str = ""
    children: dict[str, Entry] = field(default_factory=dict)


def _tree() -> Entry:
    """The first block of architecture.md: ``src/setui/`` and what is under it. A name
    begins a line, two columns deeper than its parent's; a deeper line continues what is
    said of the name above it."""
    raw = ARCHITECTURE.read_text(encoding="utf-8").splitlines()
    start = raw.index("src/setui/")
    root = Entry("src/setui/", 0)
    stack = [root]
    for line in raw[start + 1:]:
        if line.startswith("```"):
            break
        indent = len(line) - len(line.lstrip())
        named = re.match(r"([\w.]+/?)(?:\s+(.*)|$)", line.lstrip())
        if named and indent % 2 == 0 and 0 < indent <= stack[-1].indent + 2 <= 10:
            while stack[-1].indent >= indent:
                stack.pop()
            entry = Entry(named.group(1), indent, named.group(2) or "")
            stack[-1].children[entry.name] = entry
            stack.append(entry)
        elif indent == 0:
            break  # themes/, tests/...: beside src/setui, not in it
        else:
            stack[-1].text += " " + line.strip()
    return root


def _said(entry: Entry, module: str) -> bool:
    """Whether ``entry`` names ``module`` with its job: an entry of its own that says
    something, or the name followed by what it does in parentheses."""
    own = entry.children.get(module + ".py")
    if own is not None:
        return bool(own.text.strip())
    return re.search(rf"(?<![\w.]){re.escape(module)}\s*\(", entry.text) is not None


def test_every_module_is_named_with_its_job() -> None:
    tree = _tree()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        entry = tree
        for package in parts[:-1]:
            child = entry.children.get(package + "/")
            if child is None or not child.text.strip():
                missing.append(f"{'/'.join(parts[:-1])}/ (the package, with what it is)")
                break
            entry = child
        else:
            module = path.stem
            if module != "__init__" and not _said(entry, module):
                missing.append("/".join(parts))
    assert not missing, ("docs/architecture.md's tree does not name these with their "
                         "job, as `name (what it does)` or an entry of its own:\n"
                         + "\n".join(sorted(set(missing))))


Layers = list[list[str]]  # top first; each layer's modules, sorted


def _diagram() -> list[Layers]:
    """The layers block of architecture.md (the one that starts ``cli >``), as each
    contract's layers: a line's prefix (``ui:``) names the package of what follows."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = re.search(r"```\n(cli >.*?)```", text, re.DOTALL)
    assert block, "architecture.md has no layers diagram (a block starting `cli >`)"
    diagrams: dict[str, str] = {}
    current = "setui."
    for line in block.group(1).splitlines():
        prefixed = re.match(r"([\w.]+):\s+(.*)", line)
        if prefixed:
            current = f"setui.{prefixed.group(1)}."
            line = prefixed.group(2)
        diagrams[current] = diagrams.get(current, "") + " " + line
    return [[sorted(prefix + name.strip() for name in layer.split("|"))
             for layer in re.sub(r"\(.*?\)", "", layers).split(">")]
            for prefix, layers in diagrams.items()]


def test_the_layers_diagram_is_the_import_contracts() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracted = [[sorted(name.strip() for name in layer.split("|"))
                   for layer in contract["layers"]]
                  for contract in contracts["tool"]["importlinter"]["contracts"]
                  if contract["type"] == "layers"]
    declared = {layers[0][0]: layers for layers in contracted}  # keyed by the top layer
    drawn = {layers[0][0]: layers for layers in _diagram()}
    assert sorted(drawn) == sorted(declared), (
        f"layers contracts drawn {sorted(drawn)}, declared {sorted(declared)}")
    wrong = []
    for top, layers in declared.items():
        if len(drawn[top]) != len(layers):
            wrong.append(f"under {top}: {len(drawn[top])} layers drawn, {len(layers)} declared")
        wrong += [f"under {top}, layer {number}: drawn {mine}, declared {theirs}"
                  for number, (mine, theirs) in enumerate(zip(drawn[top], layers, strict=False), 1)
                  if mine != theirs]
    assert not wrong, ("docs/architecture.md's layers diagram is not pyproject.toml's layers "
                       "contracts:\n" + "\n".join(wrong))
