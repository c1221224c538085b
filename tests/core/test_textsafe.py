"""printable(): network text can never drive the terminal, and stays readable."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from setui.core.textsafe import ELLIPSIS, masked, preview, printable


def test_controls_become_visible_escapes() -> None:
    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
    assert printable("tab\there\nnew\rline") == "tab\\x09here\\x0anew\\x0dline"
    assert printable("\x00\x07\x7f\x85\x9b") == "\\x00\\x07\\x7f\\x85\\x9b"
    assert printable("\u202eevil\u2066\u200b\ufeff") == "\\u202eevil\\u2066\\u200b\\ufeff"
    assert printable("a\u2028b") == "a\\u2028b"


def test_ordinary_text_is_kept() -> None:
    for text in ("Freeze", "Virtual machine is being paused.", "café ÅÄÖ 東京 ✓",
                 "non\u00a0breaking", "[bold]markup[/bold] stays literal", ""):
        assert printable(text) == text


def test_limit_cuts_with_an_ellipsis_and_never_splits_an_escape() -> None:
    assert printable("abcdef", 5) == "abcd" + ELLIPSIS
    assert printable("abcde", 5) == "abcde"
    assert printable("abcd\x1b", 5) == "abcd" + ELLIPSIS
    assert printable("ab\x1bcd", 5) == "ab" + ELLIPSIS
    assert printable("ab", 1) == ELLIPSIS
    assert printable("ab", 0) == ""
    assert printable(12345, 3) == "12" + ELLIPSIS


@given(st.text(), st.one_of(st.none(), st.integers(1, 50)))
def test_never_a_control_and_never_too_long(text: str, limit: int | None) -> None:
    out = printable(text, limit)
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in out)
    if limit is not None:
        assert len(out) <= limit
    else:
        assert ELLIPSIS not in out or ELLIPSIS in text


def test_preview_quotes_a_bad_value_short_and_escaped() -> None:
    assert preview("x" * 100) == repr("x" * 100)[:37] + "..."
    assert preview("\x1b[2J") == repr("\x1b[2J")
    assert preview(10**400) == "a number of 401 digits"
    assert preview(True) == "True"


def test_masked_turns_every_unprintable_character_into_one_question_mark() -> None:
    hostile = "a\x1b[31mb\u202ec\nd\u00a0e\x00"
    assert masked(hostile) == "a?[31mb?c?d?e?"
    assert len(masked(hostile)) == len(hostile)  # one for one: a cut before or after agrees
    assert masked("web-0 Ünïcödé 名前") == "web-0 Ünïcödé 名前"
