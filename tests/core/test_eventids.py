"""EventIds typed by people: the full id, or a unique prefix of at least six characters."""

from __future__ import annotations

from setui.core.eventids import MIN_PREFIX, resolve

A = "F02C2EDE-3B1C-4D5E-9F00-0123456789AB"
B = "F02C2EDF-0000-4000-8000-00000000BEEF"
OLD = "0A1B2C3D-0000-4000-8000-000000000001"


def test_the_full_id_in_any_case() -> None:
    assert resolve(A.lower(), [A, B]).event_id == A
    assert resolve(f"  {A}  ", [A]).event_id == A


def test_a_unique_prefix_from_the_document_or_the_history() -> None:
    assert resolve("f02c2ede", [A, B]).event_id == A
    assert resolve("0A1B2C", [A], [OLD]).event_id == OLD  # known to the history only
    assert resolve("F02C2EDE", [A], [A.lower()]).event_id == A  # one event, two spellings


def test_ambiguous_short_and_unknown_are_refused_with_suggestions() -> None:
    ambiguous = resolve("F02C2ED", [A, B])
    assert ambiguous.event_id is None and ambiguous.problem is not None
    assert "is the start of 2 EventIds" in ambiguous.problem
    assert A in ambiguous.problem and B in ambiguous.problem
    short = resolve("F02C", [A])
    assert short.event_id is None and short.problem is not None
    assert f"at least {MIN_PREFIX}" in short.problem and f"did you mean {A}?" in short.problem
    typo = resolve("F02C2EDD", [A], [OLD])
    assert typo.event_id is None and typo.problem is not None
    assert "no event with an EventId starting 'F02C2EDD'" in typo.problem
    assert f"did you mean {A}?" in typo.problem
    nothing = resolve("ZZZZZZZZ", [A])
    assert nothing.event_id is None and "did you mean" not in (nothing.problem or "")
    # Each problem is whole sentences, ready for more words after it.
    for problem in (ambiguous.problem, short.problem, typo.problem, nothing.problem):
        assert problem is not None and problem[-1] in ".?" and "?." not in problem
