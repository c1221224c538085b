"""The headless monitor, the one road every front end takes: polling, the service's clock,
the events' lives, recording, and the record read back. No textual.

* ``monitor``: Monitor, which polls, tracks, restates times in the service's clock and
  resumes the story and the lives of the events still there from the store; each
  MonitorUpdate is what ``setui watch`` prints, the dashboard draws and the agent acts on.
* ``state``: MonitorState, what is known at a moment: the document, each event's life,
  the health.
* ``recorder``: Recorder, the store's writes on a thread of its own (SQLite may wait for
  another writer; no event loop waits with it), the recording session from its first
  answer, which bounds the history's holes, and the boot it runs in.
* ``replay``: the state at a past moment, rebuilt from the record's changes and audit
  log, with what was measured, the holds and the hook runs folded into the lives; the
  Recording built from any Record, a store's or the agent's.
* ``report``: each event's facts, its notice, its holds and hook runs, and what it did
  to the VM, for ``setui report``.
* ``rehearse``: the record as an emulator scenario (``history export-scenario``).
"""

from setui.monitor.monitor import URGENT_WINDOW, Monitor, MonitorUpdate
from setui.monitor.recorder import Recorder, brief_store_problem
from setui.monitor.state import ANNOUNCED, EventLife, GoneEvent, MonitorState

__all__ = ["ANNOUNCED", "URGENT_WINDOW", "EventLife", "GoneEvent", "Monitor", "MonitorState",
           "MonitorUpdate", "Recorder", "brief_store_problem"]
