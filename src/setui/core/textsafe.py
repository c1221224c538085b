"""Make text from the network or the database safe to print on a terminal.

An EventId, a Description or an error body is input: an escape sequence in it could move
the cursor, retitle the window, hide a line or reverse the text around it (bidi controls).
``printable`` keeps every ordinary character and turns the dangerous ones into visible
escapes such as ``\\x1b`` or ``\\u202e``, so the operator sees that they were there.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

__all__ = ["ELLIPSIS", "masked", "needs_escape", "preview", "printable", "some_names"]

ELLIPSIS = "…"

# Categories never sent to a terminal as they are: controls (C0, DEL, C1), format
# characters (bidi overrides and isolates, zero-width characters, BOM), line and
# paragraph separators, and lone surrogates.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def needs_escape(char: str) -> bool:
    """Whether ``char`` is one that is never sent to a terminal as it is: the one rule,
    for :func:`printable` and for formats with escapes of their own (TOML, say)."""
    # Spaces other than " " (NBSP, ideographic space) print harmlessly; keep them.
    return not char.isprintable() and unicodedata.category(char) in _UNSAFE_CATEGORIES


def _safe_char(char: str) -> str:
    return _escape(char) if needs_escape(char) else char


def printable(text: object, limit: int | None = None) -> str:
    """``text`` on one line with every control shown as an escape, cut to ``limit`` chars.

    Tabs and newlines are escaped too: the result is meant for one line of output. When
    cut, the result ends with an ellipsis and is at most ``limit`` characters long; an
    escape is never cut in half.
    """
    if not isinstance(text, str):
        text = str(text)
    if limit is not None and limit < 1:
        return ""
    pieces: list[str] = []
    length = 0
    for index, char in enumerate(text):
        piece = _safe_char(char)
        if limit is not None and length + len(piece) > limit - 1:
            # Room for this piece only if it is the very last one and fits exactly.
            rest_fits = index == len(text) - 1 and length + len(piece) <= limit
            if not rest_fits:
                pieces.append(ELLIPSIS)
                return "".join(pieces)
        pieces.append(piece)
        length += len(piece)
    return "".join(pieces)


def masked(text: str) -> str:
    """``text`` with every character that is not printable as ``?``, one for one.

    For where an escape would not fit or would read as part of the text: a metric's
    label value, a notification's field, the emulator's request log. Stricter than
    :func:`printable`: odd spaces and line breaks go too."""
    return "".join(char if char.isprintable() else "?" for char in text)


def preview(value: object, limit: int = 40) -> str:
    """A bad value quoted in an error message: its ``repr`` (controls escaped), cut short;
    a number of thousands of digits is described instead, as its repr would fill the screen.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a number of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def some_names(names: Sequence[str], *, limit: int, width: int) -> str:
    """``web-1, web-2 and 7 more``: VM names from the network, printable and bounded to
    one line, however many the event lists."""
    shown = ", ".join(printable(n, width) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
