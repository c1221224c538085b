"""The one document diff that `setui history show --diff` and the history screen print."""

from __future__ import annotations

from typing import Any

from setui.core.diff import ABSENT, diff_documents
from setui.core.model import parse_document


def doc(incarnation: int, *events: dict[str, Any]) -> Any:
    return parse_document({"DocumentIncarnation": incarnation, "Events": list(events)})


def event(event_id: str, **fields: Any) -> dict[str, Any]:
    base = {"EventId": event_id, "EventType": "Reboot", "EventStatus": "Scheduled",
            "Resources": ["web-0"], "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ABSENT}


def test_added_changed_in_document_order_then_removed() -> None:
    before = doc(1, event("A"), event("B"), event("C"))
    after = doc(2, event("D"), event("B", EventStatus="Started", NotBefore=""), event("C"))
    diff = diff_documents(after, before)
    assert [(e.change, e.event_id) for e in diff.events] == [
        ("added", "D"), ("changed", "B"), ("removed", "A")]
    assert diff.of("changed")[0].fields == {"EventStatus": ("Scheduled", "Started"),
                                            "NotBefore": ("Mon, 19 Sep 2016 18:29:47 GMT", "")}
    assert [e.event_id for e in diff.unchanged] == ["C"]
    assert diff.of("removed")[0].event.event_id == "A"


def test_a_field_sent_as_null_is_not_an_absent_field() -> None:
    before = doc(1, event("A", Description=None))
    after = doc(2, event("A", Description=ABSENT))
    (changed,) = diff_documents(after, before).events
    assert changed.fields == {"Description": (None, ABSENT)}


def test_without_a_previous_document_every_event_is_added() -> None:
    diff = diff_documents(doc(1, event("A"), event("B")), None)
    assert [e.change for e in diff.events] == ["added", "added"]


def test_duplicate_event_ids_compare_the_first_and_are_counted() -> None:
    before = doc(1, event("A"))
    after = doc(2, event("A"), event("A", EventStatus="Started"))
    diff = diff_documents(after, before)
    assert diff.events == ()
    assert diff.duplicates == 1
