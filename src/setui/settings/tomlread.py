"""TOML read one way, on every Python setui runs on, for every file it reads as TOML.

The config file, the agent's policy, the emulator's scenarios and theme files are TOML.
The standard library reads it from 3.11 (``tomllib``); on 3.10 the same parser is the
``tomli`` package, a dependency there only. It is imported at the first read, not with
this module: most VMs have no config file, and a recorder started at boot need not load a
parser (5 ms of CPU) to read nothing.

The parser recurses once per level of nesting, so a line of ``[[[[…`` a few kilobytes
long ends in its RecursionError; here that is a :class:`TomlError` like any other file
that is not TOML, not a traceback.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

__all__ = ["TomlError", "parse_toml"]


class TomlError(ValueError):
    """The text is not TOML; the message says why and where, in the parser's words."""


def parse_toml(text: str) -> dict[str, Any]:
    """``text`` as TOML's top-level table; :class:`TomlError` when it is not TOML."""
    parser = _parser()
    try:
        table: dict[str, Any] = parser.loads(text)
    except parser.TOMLDecodeError as exc:
        raise TomlError(str(exc)) from None
    except RecursionError:
        raise TomlError("nested too deeply") from None
    return table


def _parser() -> ModuleType:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # pragma: no cover - Python 3.10

    return tomli  # pragma: no cover - Python 3.10
