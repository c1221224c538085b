"""``RecordingSessions``: who recorded which endpoint when, what the agent measured while
it did (stalls and boots: store.impacts), and the holes where nothing recorded
(core.holes): how far the record can be trusted, kept beside the history.

When a session ended. A session stops in its row (``stopped``) when its process stops
cleanly; one that died says nothing, so its last beat bounds it, and a session counts as
running while its last beat is under :data:`RUNNING_WITHIN` old. An agent's session is
told at once: the agent holds the store's lock (``<data-dir>/agent.lock``) for life and
the kernel lets go of it the moment the process dies, however it dies, so an agent's
session on this host whose process does not hold that lock now is over at its last beat.
The kernel's list of locks says who holds it (store.flocks), read without taking the
lock, so a reader never keeps a starting agent out. That serves every reader alike: a
standalone ``setui history`` while no agent runs (or an agent just restarted), and the
new agent itself, which holds the lock with another pid than the dead session's.

Nothing is written for it: ``stopped`` says the process stopped cleanly there (a boot
after it was a shutdown, store.impacts), which a crash is not, and the lock tells the
same thing to whoever asks. Sessions of another host (a store copied here, another
host name) are judged by their beats alone: the lock here says nothing of their
processes. (A reader in another pid namespace under the same host name would see the
holder's pid as another number, or not at all, and take a running agent's session for
over: readers of the agent's store run beside it, as root.) A session that holds no
lock (``setui watch``, the dashboard) keeps the rule of the beats: whether its pid still
runs cannot be told safely (pids are reused, and another pid namespace sees other
numbers).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta

from setui.core.clock import utc_now
from setui.core.holes import Hole, find_holes
from setui.core.impact import Impact
from setui.store import impacts
from setui.store.connection import Database
from setui.store.endpoints import endpoint_column
from setui.store.flocks import flock_holders
from setui.store.impacts import BootGap
from setui.store.place import AGENT_LOCK
from setui.store.records import RecorderSpan, clean_text, from_db_time, to_db_time, utc

__all__ = ["AGENT_COMMAND", "RECORDER_BEAT", "RUNNING_WITHIN", "RecordingSessions"]

# A recording session notes that it still runs this often (monitor.recorder.BEAT_SECONDS);
# one whose last beat is older than RUNNING_WITHIN has stopped (or died) as far as anyone
# can tell.
RECORDER_BEAT = timedelta(seconds=60)
RUNNING_WITHIN = 2.5 * RECORDER_BEAT
# The command an agent's session is opened with (commands.agent): its process holds the
# store's lock for as long as it runs.
AGENT_COMMAND = "setui agent"


class RecordingSessions:
    """The recording sessions, the impacts measured and the holes in ``database``."""

    def __init__(self, database: Database) -> None:
        self.database = database

    # -- sessions -------------------------------------------------------------------------
    def start(self, *, endpoint: str, pid: int, host: str, command: str,
              at: datetime, boot_id: str | None = None, measures: bool = False) -> int:
        """Say that a process records ``endpoint`` from ``at`` on, in the boot ``boot_id``
        (setui.system.boot), and whether its heartbeat already runs (see :meth:`measures`);
        returns its id."""
        when = to_db_time(at)
        with self.database.using("note the recording session", write=True) as conn:
            cursor = conn.execute(
                "INSERT INTO recorders (endpoint, pid, host, command, started, last_beat, "
                "boot_id, measures) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (endpoint_column(endpoint), pid, clean_text(host)[:200],
                 clean_text(command)[:200], when, when,
                 clean_text(boot_id)[:200] if boot_id else None, int(measures)))
            return int(cursor.lastrowid or 0)

    def measures(self, recorder_id: int) -> None:
        """The session keeps the agent's heartbeat: what it saw of stalls and boots is in
        the record, and a stretch it covered with none had none."""
        with self.database.using("note the recording session", write=True) as conn:
            conn.execute("UPDATE recorders SET measures = 1 WHERE id = ?", (recorder_id,))

    def beat(self, recorder_id: int, at: datetime, *, stopped: bool = False,
             begins: bool = False) -> None:
        """The session was still recording at ``at`` (and stops there, if ``stopped``).
        ``begins``: its first answer came at ``at``, which is where it starts; it was
        opened before the service told its time, in this machine's clock, which may not
        be the record's."""
        when = to_db_time(at)
        with self.database.using("note the recording session", write=True) as conn:
            if begins:
                conn.execute("UPDATE recorders SET started = ?, last_beat = ? WHERE id = ?",
                             (when, when, recorder_id))
                return
            conn.execute(
                "UPDATE recorders SET last_beat = max(last_beat, ?), stopped = "
                "CASE WHEN ? THEN ? ELSE stopped END WHERE id = ?",
                (when, stopped, when, recorder_id))

    def spans(self, *, endpoint: str | None = None, since: datetime | None = None,
              ) -> list[RecorderSpan]:
        """Recording sessions that reached ``since`` or later, oldest first."""
        where, args = [], []
        if endpoint is not None:
            where.append("endpoint = ?")
            args.append(endpoint_column(endpoint))
        if since is not None:
            where.append("coalesce(stopped, last_beat) >= ?")
            args.append(to_db_time(since))
        sql = ("SELECT id, endpoint, pid, host, command, started, last_beat, stopped, boot_id, "
               "measures FROM recorders" + (f" WHERE {' AND '.join(where)}" if where else "")
               + " ORDER BY started, id")
        with self.database.using("read the recording sessions") as conn:
            return [RecorderSpan(int(r[0]), r[1], int(r[2]), r[3], r[4], from_db_time(r[5]),
                                 from_db_time(r[6]), from_db_time(r[7]) if r[7] else None,
                                 r[8], bool(r[9]))
                    for r in conn.execute(sql, args)]

    def running(self, *, endpoint: str, at: datetime) -> list[RecorderSpan]:
        """The sessions recording ``endpoint`` at ``at`` as far as the store can tell
        (see the module), oldest first."""
        spans = self.spans(endpoint=endpoint, since=at - RUNNING_WITHIN)
        ended = self.ended(spans)
        return [s for s in spans if s.stopped is None and s.id not in ended]

    def ended(self, spans: Iterable[RecorderSpan]) -> set[int]:
        """The ids of the sessions in ``spans`` that did not stop in their row and are
        known to be over: an agent's on this host whose process does not hold the store's
        lock now. Empty when that cannot be told (the lock's file cannot be looked at, or
        the kernel's list of locks cannot be read)."""
        here = clean_text(socket.gethostname())[:200]
        agents = [s for s in spans
                  if s.stopped is None and s.command == AGENT_COMMAND and s.host == here]
        if not agents:
            return set()
        holders = flock_holders(self.database.path.parent / AGENT_LOCK)
        if holders is None:
            return set()
        return {s.id for s in agents if s.pid not in holders}

    # -- what events did to the VM (core.impact) -----------------------------------------
    def record_impact(self, impact: Impact) -> Impact | None:
        """Keep a stall or a boot the agent measured; None for a boot told already."""
        endpoint = endpoint_column(impact.endpoint)
        with self.database.using("record what an event did to the VM", write=True) as conn:
            row_id = impacts.insert(conn, impact, endpoint)
        return None if row_id is None else replace(impact, id=row_id, endpoint=endpoint)

    def impacts(self, *, endpoint: str, since: datetime | None = None,
                until: datetime | None = None, newest: int | None = None) -> list[Impact]:
        """The stalls and boots measured for ``endpoint`` (the ``newest`` N), oldest first."""
        with self.database.using("read what events did to the VM") as conn:
            return impacts.listing(conn, endpoint_column(endpoint), since=since, until=until,
                                   newest=newest)

    def boot_gap(self, *, endpoint: str, boot_id: str,
                 booted_at: datetime | None) -> BootGap | None:
        """The polls around this boot, if the record holds another boot and this one was
        not told yet (store.impacts)."""
        with self.database.using("read the recording sessions") as conn:
            return impacts.boot_gap(conn, endpoint_column(endpoint), boot_id, booted_at)

    # -- where nothing recorded -----------------------------------------------------------
    def holes(self, *, endpoint: str, now: datetime | None = None) -> list[Hole]:
        """When nothing recorded ``endpoint``, oldest first, each hole whole: a property
        of the record (core.holes), the same whoever asks about which stretch of it.

        An open hole (nothing records now) runs to ``now``, by default this machine's
        clock restated in the record's (the newest incarnation's clock skew)."""
        endpoint = clean_text(endpoint)
        spans = self.spans(endpoint=endpoint)
        with self.database.using("read the history") as conn:
            sightings = [(from_db_time(a), from_db_time(b)) for a, b in conn.execute(
                "SELECT first_seen, last_seen FROM incarnations WHERE endpoint = ?",
                (endpoint,))]
            if now is None:
                row = conn.execute(
                    "SELECT clock_skew FROM incarnations WHERE endpoint = ? "
                    "ORDER BY first_seen DESC, id DESC LIMIT 1", (endpoint,)).fetchone()
                skew = row[0] if row is not None and isinstance(row[0], (int, float)) else 0
                now = utc_now() + timedelta(seconds=skew)
        now = utc(now)
        # A session still running covers up to now: it beats only once a RECORDER_BEAT.
        # One known to be over (an agent's that no longer holds the lock) ends at its
        # last beat at once.
        ended = self.ended(spans)
        covered = [(s.started, max(s.end, now) if s.stopped is None and s.id not in ended
                    and s.end >= now - RUNNING_WITHIN else s.end) for s in spans]
        return find_holes(covered, sightings, now=now, endpoint=endpoint)
