"""setui's one logging path: stdlib ``logging``, said once a window, in journald's words.

What goes wrong again and again (a client sending garbage, a store that cannot be
written) would otherwise print a line each time: thousands of lines that bury the first.
:class:`Limiter` is the one rule for it: each kind is said at once the first time, then
at most once a ``window`` (a minute), with how many more there were. The agent's errors
(agent.errors) keep their lines with it; :class:`OncePerWindow` is the same rule as a
``logging.Filter`` for the records that carry a ``kind``, and :class:`KindLog` a logger
whose owner flushes the counts at its own pace (a sweep, a turn of the loop).

:func:`configure` is the set-up: the ``setui`` logger, and with it every module's own
(``logging.getLogger(__name__)``), writes ``%(message)s`` lines to one stream; with that
stream on the journal (systemd.under_journal) each line starts with journald's ``<N>``
priority (:class:`JournalFormatter`), and journald adds the time. Text that came from the
network or a socket client is made printable (textsafe) and bounded by whoever logs it,
on one line; the formatter escapes any control left (in a traceback, say), so none
reaches a terminal or the journal as it is.

The agent's decisions and its error lines are not log records: they are its output
(``setui agent``'s lines, ``--json``), on stdout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Generic, TypeVar

from setui.core.textsafe import printable
from setui.system.systemd import DEBUG, ERR, INFO, NOTICE, WARNING, for_journal

__all__ = ["LOGGER", "NOTICE_LEVEL", "WINDOW", "JournalFormatter", "KindLog", "Limiter",
           "OncePerWindow", "configure", "priority"]

LOGGER = "setui"
WINDOW = 60.0  # seconds between two lines of one kind
# journald's notice (normal, but worth a look) has no level of its own in logging.
NOTICE_LEVEL = 25
logging.addLevelName(NOTICE_LEVEL, "NOTICE")

T = TypeVar("T")


@dataclass
class _Kind(Generic[T]):
    said_at: float
    held: int = 0  # since the line said at said_at
    last: T | None = None  # the last one held


class Limiter(Generic[T]):
    """Once a window per kind, with a count; plain state on an injected clock, no I/O.

    :meth:`offer` each one as it happens: it is to be said now (with how many were held
    back since the last line of its kind), or held. :meth:`due` at the owner's pace: the
    last one held of each kind whose window is over, with how many were held.
    """

    def __init__(self, *, window: float = WINDOW,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.mono = mono
        self._kinds: dict[str, _Kind[T]] = {}

    def offer(self, kind: str, item: T) -> int | None:
        """None: held (counted, kept as the last of its kind). Else say ``item`` now; the
        number is how many were held back before it since the last line (0: none)."""
        now = self.mono()
        entry = self._kinds.get(kind)
        if entry is None:
            self._kinds[kind] = _Kind(now)
            return 0
        if now - entry.said_at >= self.window:
            held = entry.held
            entry.said_at, entry.held, entry.last = now, 0, None
            return held
        entry.held += 1
        entry.last = item
        return None

    def due(self) -> list[tuple[T, int]]:
        """The last one held of each kind whose window is over, and how many were held
        (it among them), oldest kind first. A kind with nothing held whose window is over
        is forgotten: its next one is said at once, as it would be anyway."""
        now = self.mono()
        lines: list[tuple[T, int]] = []
        for kind, entry in list(self._kinds.items()):
            if now - entry.said_at < self.window:
                continue
            if entry.held and entry.last is not None:
                lines.append((entry.last, entry.held))
                entry.said_at, entry.held, entry.last = now, 0, None
            else:
                del self._kinds[kind]
        return lines

    def owed(self) -> bool:
        """Whether some kind has one held, not said yet."""
        return any(entry.held for entry in self._kinds.values())

    def forget(self, kind: str) -> None:
        """``kind`` is over: what was held of it is not said, and its next one is said at
        once."""
        self._kinds.pop(kind, None)


def _more_like_it(held: int, window: float) -> str:
    span = "minute" if window == 60 else f"{window:g} seconds"
    return f" (and {held} more like it in the last {span})"


class OncePerWindow(logging.Filter):
    """A record with a ``kind`` (``extra={"kind": ...}``) said once a window per kind:
    the first at once; those held back are counted, and the next line of the kind says
    how many more there were ("... (and 3 more like it in the last minute)"). Records
    without a kind pass. :meth:`due` gives the lines owed for the kinds whose window is
    over; they pass this filter, and the owner hands them to its logger."""

    def __init__(self, *, window: float = WINDOW,
                 mono: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.limiter: Limiter[logging.LogRecord] = Limiter(window=window, mono=mono)

    def filter(self, record: logging.LogRecord) -> bool:
        kind = getattr(record, "kind", None)
        if not isinstance(kind, str) or getattr(record, "counted", False):
            return True
        held = self.limiter.offer(kind, record)
        if held is None:
            return False
        if held:
            self._count(record, held)
        return True

    def owed(self) -> bool:
        return self.limiter.owed()

    def due(self) -> list[logging.LogRecord]:
        """For each kind whose window is over, its last record held, with the count of
        the others: each passes this filter."""
        lines = []
        for record, held in self.limiter.due():
            self._count(record, held - 1)
            lines.append(record)
        return lines

    def _count(self, record: logging.LogRecord, more: int) -> None:
        if more:
            record.msg = record.getMessage() + _more_like_it(more, self.limiter.window)
            record.args = ()
        record.__dict__["counted"] = True  # passes this filter from now on


def priority(level: int) -> int:
    """journald's priority for a logging level (sd-daemon(3)): ERROR and above an error,
    WARNING a warning, NOTICE_LEVEL a notice, INFO information, below that debugging."""
    if level >= logging.ERROR:
        return ERR
    if level >= logging.WARNING:
        return WARNING
    if level >= NOTICE_LEVEL:
        return NOTICE
    return INFO if level >= logging.INFO else DEBUG


class JournalFormatter(logging.Formatter):
    """``%(message)s`` (and a traceback below it, if any), every line made printable;
    under the journal each line with journald's ``<N>`` priority in front."""

    def __init__(self, journal: bool) -> None:
        super().__init__("%(message)s")
        self.journal = journal

    def format(self, record: logging.LogRecord) -> str:
        text = "\n".join(printable(line) for line in super().format(record).split("\n"))
        return for_journal(text, priority(record.levelno)) if self.journal else text


class _SetUp(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure` puts on the ``setui`` logger."""


def configure(stream: IO[str], journal: bool, *, level: int = logging.INFO
              ) -> logging.Handler:
    """The one set-up: records of ``setui`` and the modules below it at ``level`` or
    above, one line each on ``stream``, journald's priorities when ``journal`` (the
    stream is the journal: systemd.under_journal). Called again, it replaces its handler.
    Returns the handler."""
    logger = logging.getLogger(LOGGER)
    for old in [h for h in logger.handlers if isinstance(h, _SetUp)]:
        logger.removeHandler(old)
    handler = _SetUp(stream)
    handler.setFormatter(JournalFormatter(journal))
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler


class _Say(logging.Handler):
    """Each record's line handed to ``say`` (a caller with a sink of its own)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        super().__init__()
        self.say = say
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.say(self.format(record))


class KindLog:
    """A logger's lines said once a window per kind (:class:`OncePerWindow`), the
    counts owed said by :meth:`flush`, which its owner calls at its own pace.

    ``name`` is a logger under ``setui`` (the set-up's handler writes it); ``say``,
    when given, is where the lines go instead (a logger of this object's own)."""

    def __init__(self, name: str, *, say: Callable[[str], None] | None = None,
                 window: float = WINDOW, mono: Callable[[], float] = time.monotonic) -> None:
        if say is None:
            self.logger = logging.getLogger(name)
        else:
            self.logger = logging.Logger(name)  # not in the registry: this object's own
            self.logger.addHandler(_Say(say))
        self.limit = OncePerWindow(window=window, mono=mono)

    def note(self, kind: str, message: str, level: int = NOTICE_LEVEL) -> None:
        """``message`` of ``kind``: said now, or counted and said with the count later."""
        if not self.logger.isEnabledFor(level):
            return
        record = self.logger.makeRecord(self.logger.name, level, "(unknown file)", 0,
                                        message, (), None, extra={"kind": kind})
        if self.limit.filter(record):
            self.logger.handle(record)

    def owed(self) -> bool:
        """Whether some line was held and not said yet."""
        return self.limit.owed()

    def flush(self) -> None:
        """The lines owed for the kinds whose window is over, each with its count."""
        for record in self.limit.due():
            self.logger.handle(record)
