"""setui's one logging path: each kind said once a window with how many more there were
(the clock injected, never waited on), lines in journald's priorities under the journal,
and the set-up that the agent's modules log through."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from setui.system.logs import (
    LOGGER,
    NOTICE_LEVEL,
    JournalFormatter,
    KindLog,
    Limiter,
    OncePerWindow,
    configure,
    priority,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setui_logger() -> Iterator[logging.Logger]:
    """The ``setui`` logger, given back as it was: configure() changes a process-wide
    object."""
    logger = logging.getLogger(LOGGER)
    handlers, level = list(logger.handlers), logger.level
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)


def test_the_limiter_says_a_kind_at_once_then_once_a_window_with_a_count() -> None:
    clock = Clock()
    limiter: Limiter[str] = Limiter(window=60, mono=clock)
    assert limiter.offer("disk", "full 0") == 0  # the first: at once, none held
    assert [limiter.offer("disk", f"full {n}") for n in range(1, 4)] == [None] * 3
    assert limiter.offer("busy", "turned away") == 0  # another kind has its own window
    assert limiter.owed() and limiter.due() == []  # held, and the window not over
    clock.now += 59.9
    assert limiter.due() == []
    clock.now += 0.1
    assert limiter.due() == [("full 3", 3)]  # the last held, and how many were held
    assert not limiter.owed() and limiter.due() == []
    # One held, then one after the window: said at once, with the one held before it.
    assert limiter.offer("disk", "full 4") is None
    clock.now += 60
    assert limiter.offer("disk", "full 5") == 1
    # A kind that is over: what it held is not said, and its next one is said at once.
    assert limiter.offer("disk", "full 6") is None
    limiter.forget("disk")
    assert not limiter.owed() and limiter.offer("disk", "full 7") == 0


def test_a_quiet_kind_is_forgotten_and_its_next_one_said_at_once() -> None:
    clock = Clock()
    limiter: Limiter[str] = Limiter(window=60, mono=clock)
    for kind in ("a", "b"):
        limiter.offer(kind, "first")
    clock.now += 60
    assert limiter.due() == []
    assert limiter._kinds == {}  # the table stays as small as what is under way
    assert limiter.offer("a", "again") == 0


def _logger(name: str, *filters: logging.Filter) -> tuple[logging.Logger, list[str]]:
    """A logger of the test's own (not in the registry) that keeps its lines."""
    lines: list[str] = []
    logger = logging.Logger(name)
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    for each in filters:
        handler.addFilter(each)
    logger.addHandler(handler)
    return logger, lines


def test_the_filter_holds_records_of_a_kind_and_counts_them_in_the_next_line() -> None:
    clock = Clock()
    limit = OncePerWindow(mono=clock)
    logger, lines = _logger("setui.test", limit)
    for n in range(5):
        logger.warning("bad frame %d from uid %d", n, 1000, extra={"kind": "bad-client"})
    logger.warning("no kind: never held")
    logger.warning("no kind: never held")
    assert lines == ["bad frame 0 from uid 1000", "no kind: never held",
                     "no kind: never held"]
    assert limit.owed() and limit.due() == []
    clock.now += 60
    for record in limit.due():
        logger.handle(record)  # what the owner does at its own pace
    assert lines[-1] == "bad frame 4 from uid 1000 (and 3 more like it in the last minute)"
    assert not limit.owed()
    # Two held (the window starts again at the line owed), then one after the window:
    # said at once, with the two held before it.
    logger.warning("bad frame 5", extra={"kind": "bad-client"})
    logger.warning("bad frame 6", extra={"kind": "bad-client"})
    clock.now += 60
    logger.warning("bad frame 7", extra={"kind": "bad-client"})
    assert lines[-1] == "bad frame 7 (and 2 more like it in the last minute)"
    assert len(lines) == 5


def test_another_window_is_said_in_seconds() -> None:
    clock = Clock()
    limit = OncePerWindow(window=5, mono=clock)
    logger, lines = _logger("setui.test", limit)
    for _ in range(3):
        logger.warning("late", extra={"kind": "k"})
    clock.now += 5
    logger.warning("late", extra={"kind": "k"})
    assert lines == ["late", "late (and 2 more like it in the last 5 seconds)"]


def test_journald_priorities_of_the_logging_levels() -> None:
    assert [priority(level) for level in (
        logging.CRITICAL, logging.ERROR, logging.WARNING, NOTICE_LEVEL, logging.INFO,
        logging.DEBUG)] == [3, 3, 4, 5, 6, 7]


def _record(level: int, message: str, *, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("bad \x1b[2Jvalue")
        except ValueError as error:
            exc_info = (type(error), error, error.__traceback__)
    return logging.LogRecord("setui.test", level, __file__, 1, message, (), exc_info)


def test_the_formatter_prefixes_every_line_under_the_journal_and_escapes_controls() -> None:
    journal, plain = JournalFormatter(journal=True), JournalFormatter(journal=False)
    assert journal.format(_record(NOTICE_LEVEL, "api: bad frame")) == "<5>api: bad frame"
    assert plain.format(_record(NOTICE_LEVEL, "api: bad frame")) == "api: bad frame"
    assert journal.format(_record(logging.WARNING, "tab\there")) == "<4>tab\\x09here"
    lines = journal.format(_record(logging.ERROR, "polling failed", exc=True)).split("\n")
    assert lines[0] == "<3>polling failed" and lines[1] == "<3>Traceback (most recent call last):"
    assert all(line.startswith("<3>") for line in lines), lines
    assert lines[-1] == "<3>ValueError: bad \\x1b[2Jvalue"  # no control reaches the journal
    assert "\x1b" not in plain.format(_record(logging.ERROR, "failed", exc=True))


def test_the_set_up_writes_the_modules_below_setui_on_one_stream(
        setui_logger: logging.Logger) -> None:
    first, stream = io.StringIO(), io.StringIO()
    configure(first, journal=False)
    configure(stream, journal=True)  # again: its handler replaced, not added
    assert len(setui_logger.handlers) == 1
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        logging.getLogger("setui.core.poller").exception("unexpected error while polling")
    logging.getLogger("setui.api").debug("below the level: not written")
    logging.getLogger("elsewhere").error("not setui's: not written here")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "<3>unexpected error while polling"
    assert lines[-1] == "<3>RuntimeError: a bug"
    assert first.getvalue() == ""


def test_a_kind_log_through_the_set_up_is_flushed_by_its_owner(
        setui_logger: logging.Logger) -> None:
    stream, clock = io.StringIO(), Clock()
    configure(stream, journal=True)
    log = KindLog("setui.api", mono=clock)
    for n in range(3):
        log.note("busy", f"setui agent: api: turned away {n}")
    log.note("warned", "setui agent: api: a warning", logging.WARNING)
    log.flush()
    assert stream.getvalue().splitlines() == ["<5>setui agent: api: turned away 0",
                                              "<4>setui agent: api: a warning"]
    clock.now += 60
    assert log.owed()
    log.flush()
    assert stream.getvalue().splitlines()[-1] == \
        "<5>setui agent: api: turned away 2 (and 1 more like it in the last minute)"
    assert not log.owed()


def test_a_kind_log_with_a_sink_of_its_own_says_only_there(
        setui_logger: logging.Logger) -> None:
    stream, said = io.StringIO(), list[str]()
    configure(stream, journal=False)
    log = KindLog("setui.api", say=said.append, mono=Clock())
    log.note("busy", "turned away")
    log.note("busy", "turned away")
    assert said == ["turned away"] and stream.getvalue() == ""
