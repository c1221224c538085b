"""docs/architecture.md and the packages' docstrings say what lives where: the map names
every package with what it is, each package's ``__init__`` docstring names each of its
modules with what it holds (and no module that is not there), and the layers diagram is
the ``[tool.importlinter]`` layers contracts."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.support.docs_text import DOCS, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 reads TOML with tomli, a dependency there
    import tomli as tomllib

ARCHITECTURE = DOCS / "architecture.md"
PACKAGE = ROOT / "src" / "setui"
THEMES = ROOT / "themes"


def _packages() -> list[Path]:
    """Every package of the distribution: src/setui and each directory under it with an
    ``__init__.py``, and themes/ (installed as setui.themes)."""
    return [PACKAGE, *sorted(init.parent for init in PACKAGE.rglob("__init__.py")
                             if init.parent != PACKAGE), THEMES]


def _map() -> dict[str, str]:
    """The map: the first fenced block of architecture.md, from ``src/setui/`` on. A name
    (``core/``, ``cli.py``) begins a line, two columns deeper than the package it is in; a
    deeper line goes on with what is said of the name above it. Each name is keyed by
    its path from the repository's root (``src/setui/ui/screens``)."""
    lines = ARCHITECTURE.read_text(encoding="utf-8").splitlines()
    said: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, path) of the names above this line
    for line in lines[lines.index("src/setui/"):]:
        if line.startswith("```"):
            break
        indent = len(line) - len(line.lstrip())
        named = re.match(r"([\w./]+/|[\w.]+\.py)(?:\s+(.*)|$)", line.lstrip())
        deeper = stack[-1][0] + 2 if stack else 0
        if named and indent % 2 == 0 and indent <= deeper:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            path = "/".join([*(p for _, p in stack[-1:]), named.group(1).rstrip("/")])
            stack.append((indent, path))
            said[path] = named.group(2) or ""
        elif stack:
            said[stack[-1][1]] += " " + line.strip()
    return said


def test_the_map_names_every_package_with_what_it_is() -> None:
    said = _map()
    missing = [str(package.relative_to(ROOT)) for package in _packages()
               if package != PACKAGE and not said.get(str(package.relative_to(ROOT)), "").strip()]
    assert not missing, ("docs/architecture.md's map does not name these packages with what "
                         "lives there (`name/  what it is`, under its parent):\n"
                         + "\n".join(missing))


def _contents(package: Path) -> set[str]:
    """The modules of ``package`` and its subpackages, as its docstring names them."""
    return ({path.stem for path in package.glob("*.py") if path.stem != "__init__"}
            | {path.parent.name for path in package.glob("*/__init__.py")})


_NAMED = re.compile(r"^\s*[*-] ``([\w.]+)``:", re.MULTILINE)


def test_every_package_docstring_names_its_modules() -> None:
    wrong = []
    for package in _packages():
        contents = _contents(package)
        if package == PACKAGE:
            contents -= {path.parent.name for path in package.glob("*/__init__.py")}
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text("utf-8")))
        where = package.relative_to(ROOT)
        if not docstring:
            wrong.append(f"{where}: no docstring")
            continue
        named = set(_NAMED.findall(docstring))
        wrong += [f"{where}: ``{name}`` is not named (`* ``{name}``: what it holds`)"
                  for name in sorted(contents - named)]
        wrong += [f"{where}: names ``{name}``, which is not there"
                  for name in sorted(named - contents)]
    assert not wrong, ("each package's __init__ docstring names each of its modules and "
                       "subpackages, as a list `* ``name``: what it holds and why`:\n"
                       + "\n".join(wrong))


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
