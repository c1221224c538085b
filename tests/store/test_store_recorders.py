"""Recording sessions: who recorded when, and the holes when nothing was recording."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

from setui.store import Store
from tests.support.store_helpers import ENDPOINT, T0, doc, event, play


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def test_sessions_are_kept_and_a_stopped_one_says_so(store: Store) -> None:
    first = store.sessions.start(endpoint=ENDPOINT, pid=41, host="vm-web-0",
                                 command="setui watch", at=T0)
    store.sessions.beat(first, T0 + minutes(1))
    store.sessions.beat(first, T0 + minutes(2), stopped=True)
    [span] = store.sessions.spans(endpoint=ENDPOINT)
    assert (span.pid, span.command, span.started, span.stopped) == (
        41, "setui watch", T0, T0 + minutes(2))
    assert span.end == T0 + minutes(2)
    assert store.sessions.spans(endpoint=ENDPOINT, since=T0 + minutes(3)) == []


def test_holes_are_the_times_no_session_covered(store: Store) -> None:
    a = store.sessions.start(endpoint=ENDPOINT, pid=1, host="h", command="watch", at=T0)
    store.sessions.beat(a, T0 + minutes(10), stopped=True)
    b = store.sessions.start(endpoint=ENDPOINT, pid=2, host="h", command="watch",
                             at=T0 + minutes(30))
    store.sessions.beat(b, T0 + minutes(40))  # then it died: no stop, no more beats
    holes = store.sessions.holes(endpoint=ENDPOINT, now=T0 + minutes(90))
    assert [(h.start, h.end, h.open) for h in holes] == [
        (T0 + minutes(10), T0 + minutes(30), False), (T0 + minutes(40), T0 + minutes(90), True)]
    # Before the first session nothing can be said either way: no hole is claimed there.
    assert holes[0].start == T0 + minutes(10)


def test_a_running_session_leaves_no_hole_at_the_end(store: Store) -> None:
    a = store.sessions.start(endpoint=ENDPOINT, pid=1, host="h", command="watch", at=T0)
    store.sessions.beat(a, T0 + minutes(59))
    assert store.sessions.holes(endpoint=ENDPOINT, now=T0 + minutes(60)) == []


def test_setui_history_lists_the_holes_between_incarnations(store: Store) -> None:
    _two_watches(store)
    lines = _history(store).splitlines()
    # Newest first: the hole since the last session stopped (nobody records now), #5,
    # the hole between the two sessions, #2, #1.
    assert "nothing has recorded since then" in lines[1]
    assert lines[1].startswith("2024-05-14 10:21")
    hole = next(i for i, line in enumerate(lines) if "until 2024-05-14 10:20:00" in line)
    assert "nothing was recording" in lines[hole] and "(48m 00s)" in lines[hole]
    assert " 5  " in lines[hole - 1] and " 2  " in lines[hole + 1]
    # Incarnation 5 follows 2 across that hole: its story is not told as certain.
    newest = store.history.incarnations(limit=1)[0]
    [gone] = [c for c in newest.changes if c.event_id == "A-1"]
    assert gone.kind == "gone" and not gone.certain
    assert "nothing was recording between 2024-05-14 09:31:00 UTC and" in gone.detail


def test_setui_history_json_lists_the_holes_in_the_same_order(store: Store) -> None:
    _two_watches(store)
    lines = _history_json(store)
    shape = [line.get("incarnation", "hole") for line in lines]
    assert shape == ["hole", 5, "hole", 2, 1]
    between = lines[2]
    assert set(between) == {"not_recording_from", "not_recording_until", "seconds", "open",
                            "endpoint"}
    assert (between["open"], lines[0]["open"]) == (False, True)
    assert between["not_recording_from"] == "2024-05-14T09:32:00Z"
    assert between["not_recording_until"] == "2024-05-14T10:20:00Z"
    assert between["seconds"] == 48 * 60
    assert lines[0]["not_recording_from"] == "2024-05-14T10:21:00Z"


def _history(store: Store, *extra: str) -> str:
    """What `setui history` prints of ``store``."""
    from setui.cli import build_parser
    from setui.commands.history import history_command

    args = build_parser().parse_args(["history", "--data-dir", str(store.path.parent),
                                      *extra])
    out, err = io.StringIO(), io.StringIO()
    assert history_command(args, out=out, err=err) == 0, err.getvalue()
    return out.getvalue()


def _history_json(store: Store, *extra: str) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in _history(store, "--json", *extra).splitlines()]


def _first_watch(store: Store) -> None:
    """A watch from T0 to T0 + 2 min that saw #1 and #2 (A-1 appears in #2)."""
    a = store.sessions.start(endpoint=ENDPOINT, pid=1, host="h", command="watch", at=T0)
    play(store, [doc(1), doc(2, event("A-1"))])  # at T0 and T0 + 1 min
    store.sessions.beat(a, T0 + minutes(2), stopped=True)


def _two_watches(store: Store) -> None:
    """The first watch, then a second from T0 + 50 to 51 min that saw #5 (A-1 gone): 48
    minutes that nothing recorded lie between."""
    _first_watch(store)
    b = store.sessions.start(endpoint=ENDPOINT, pid=2, host="h", command="watch",
                             at=T0 + minutes(50))
    store.history.record(doc(5), seen_at=T0 + minutes(50), endpoint=ENDPOINT)
    store.sessions.beat(b, T0 + minutes(51), stopped=True)


def _one_shot_reads(store: Store) -> None:
    """The first watch, then `events` and `approve` read #3 and #4 alone."""
    _first_watch(store)
    store.history.record(doc(3, event("A-1")), seen_at=T0 + minutes(10), endpoint=ENDPOINT)
    store.history.record(doc(4), seen_at=T0 + minutes(12), endpoint=ENDPOINT)


def test_the_holes_do_not_change_with_the_limit(store: Store) -> None:
    _one_shot_reads(store)
    listed = {limit: [(h["not_recording_from"], h["not_recording_until"])
                      for h in _history_json(store, "--limit", limit)
                      if "not_recording_from" in h]
              for limit in ("1", "2", "4")}
    # The open hole (nobody records now) starts with the last reading, however many
    # incarnations are listed; the one before it lies between the two readings.
    assert [h[0] for h in listed["1"]] == ["2024-05-14T09:42:00Z"]
    assert [h[0] for h in listed["2"]] == ["2024-05-14T09:42:00Z", "2024-05-14T09:40:00Z"]
    assert listed["4"][1:] == [("2024-05-14T09:40:00Z", "2024-05-14T09:42:00Z"),
                               ("2024-05-14T09:32:00Z", "2024-05-14T09:40:00Z")]
    assert listed["4"][0][0] == listed["1"][0][0]


def test_a_hole_never_covers_what_a_one_shot_reading_recorded(store: Store) -> None:
    _one_shot_reads(store)
    items = _history_json(store, "--limit", "10")
    holes = [(h["not_recording_from"], h["not_recording_until"]) for h in items
             if "not_recording_from" in h]
    for record in (i for i in items if "incarnation" in i):
        for start, end in holes:
            assert not (start < record["last_seen"] and record["first_seen"] < end), (
                record["incarnation"], start, end)


def test_a_pause_under_a_second_is_no_hole(store: Store) -> None:
    a = store.sessions.start(endpoint=ENDPOINT, pid=1, host="h", command="watch", at=T0)
    store.sessions.beat(a, T0 + minutes(2), stopped=True)
    b = store.sessions.start(endpoint=ENDPOINT, pid=2, host="h", command="watch",
                             at=T0 + minutes(2) + timedelta(seconds=0.4))
    store.sessions.beat(b, T0 + minutes(4), stopped=True)
    play(store, [doc(1), doc(2)], start=T0 + minutes(1), step=minutes(2))
    holes = [h for h in _history_json(store) if "not_recording_from" in h]
    # Only the open one: nobody records since the second session stopped.
    assert [h["not_recording_from"] for h in holes] == ["2024-05-14T09:34:00Z"]


def test_a_running_session_covers_the_time_since_its_last_beat(store: Store) -> None:
    # A dashboard beats once a minute: between two beats its own incarnations are no holes.
    store.sessions.start(endpoint=ENDPOINT, pid=1, host="h", command="setui", at=T0)
    play(store, [doc(1), doc(2), doc(3)], step=timedelta(seconds=10))
    assert store.sessions.holes(endpoint=ENDPOINT, now=T0 + timedelta(seconds=40)) == []
    # Silent for longer than a running session beats: it died at its last beat, and only
    # its sightings say what was seen after that.
    holes = store.sessions.holes(endpoint=ENDPOINT, now=T0 + minutes(10))
    assert [(h.start.second, h.end.second, h.open) for h in holes] == [
        (0, 10, False), (10, 20, False), (20, 0, True)]
