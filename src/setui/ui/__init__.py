"""The Textual front ends: the dashboard (``setui``, ``setui demo``), the replay and the
fleet view.

It never speaks HTTP itself (no httpx import): IMDS through core and approval, the agent
through its API client. Nothing waits on SQLite or the network on Textual's event loop.
The imports run one way, each part importing only those below it (the "ui-layers" import
contract): the apps, then the screens, then the widgets, then the pure parts; the
screens read the app through the small view in ``host`` and ask it for things with
messages, never importing it.

* ``shell``: TerminalApp, the base of every setui app: Ctrl+C quits, NO_COLOR sends no
  colour, a screen says the size needed when the terminal is too small, any theme works.
* ``app``: SetuiApp, the dashboard: a shell over the monitor's state that announces,
  rings the bell and answers what the screens ask.
* ``approving``: Approvals, the object the dashboard owns for approving: the dialog bound
  to what it showed, the approval in a worker, asking again, quitting while one is in
  flight.
* ``attached``: AttachedApp, the dashboard attached to the agent: its monitor, approver,
  record and hold are the agent's, through its API.
* ``replay_app``: ReplayApp, ``setui replay``: the main screen over the record.
* ``agentwindow``: the agent's plan per event and the ``H`` hold, read and written on
  threads.
* ``changelog``: the change log: what just happened, who approved, held and released.
* ``host``: DashboardHost, the small read-only view of the app a screen is given.
* ``messages``: the session (the monitor's state plus the approvals made here) and the
  messages between the monitor, the app and the screens.
* ``format``: pure formatting: countdowns, urgency, times, resources, the palette.
* ``themes``: the shipped and the user's themes, validated; the theme palette.
* ``nocolor``: NO_COLOR: attributes only, the mono theme's text styles for any theme.
* ``compat``: every use of Textual's private API, each with why.
* ``screens``: one module per screen: main, confirm (the approval dialog), details,
  history, audit, help, window, replay, small (the size needed); listing and offloop
  are what the lists share and their record queries on a thread.
* ``widgets``: the status line, events table, summary, timeline, key bar, notice line,
  the pane under the timeline and what they share (lines, page).
* ``fleet``: ``setui fleet``: every VM's events from Prometheus, read-only.
"""
