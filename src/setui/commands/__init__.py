"""The commands; each module has ``add_arguments(parser)`` and ``run(args) -> int``.

Headless but for one door: only ``dashboard`` imports the UI (textual, rich,
setui.ui), so every other command starts without them.

* ``watch``: one line per change, for a terminal, a log or a pipe.
* ``events``: the current events once, most urgent first (``--json``).
* ``agent``: ``setui agent``: the policy checked, the metrics, probe and API started,
  the agent run.
* ``approve``: ``setui approve``: show, confirm, record, post, report.
* ``approveroutes``: the two routes of ``setui approve``, standalone and attached, under
  one dialogue.
* ``history``: the list, ``show``, an event's story, ``export-scenario``.
* ``audit``: list, verify (``--against`` a copy), export as JSON lines.
* ``report``: Markdown or JSON for a postmortem.
* ``service``: print, install and uninstall the agent's unit, over setui.install.
* ``demo``: the emulator on loopback, a temporary store, the dashboard.
* ``replay``: the record read, then the door.
* ``fleet``: the Prometheus URL and credentials checked (exit 2 if bad), then the door.
* ``dashboard``: the one door to the UI, for ``setui``, ``demo``, ``replay`` and
  ``fleet``; ``setui`` attaches to the agent when its socket answers (ui.attached).
* ``common``: what they share: exit codes, times in UTC, number options, the agent when
  it answers, else standalone (said when its socket is there but does not answer), the
  record to read, the agent's or a store.

Attached, a command asks IMDS nothing and keeps no store: events and approve go through
the agent's state and its approve, history, audit, report and replay through the
Record, watch from the subscription's pushes; one code path each (docs/api.md).
"""
