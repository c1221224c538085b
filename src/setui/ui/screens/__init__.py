"""The dashboard's screens, one module each. A screen never calls the app: it posts a
request up (setui.ui.messages) or runs one of its actions.

* ``main``: the dashboard: status line, events table, selected event, timeline, the
  agent's pane, filter, notices, keys; the filter and this-VM-only as reactives.
* ``confirm``: the one confirmation dialog, bound to what it showed, and what it says
  before an approval.
* ``details``: ``Enter`` / ``d``: everything about one event (its notice, what it did to
  the VM, its life so far, raw JSON), followed while open.
* ``history``: ``h``: the incarnations a page at a time, with the holes and what was
  measured among them.
* ``audit``: ``l``: attempts paired with outcomes, the chain's state on top.
* ``listing``: what the history and audit lists share: a table to move through and open.
* ``scrolled``: what the scrolled pages share (help, window, details, a record's page,
  the fleet's details): closing, and j/k/g/G over the page's one scroll.
* ``help``: ``?``: the packaged help.md in a modal.
* ``window``: ``w``: the agent's plan and the change log whole, scrollable.
* ``offloop``: record queries run on a thread and answered on the loop: the store's, or
  the agent's through the API.
* ``small``: what a terminal smaller than 60x20 shows: the size needed.
* ``replay``: the main screen drawn from a past moment: its host view's clock is the
  cursor, and it answers the requests itself (no approve, hold or poll).
"""
