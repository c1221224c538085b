"""``setui fleet``: every VM's scheduled events from Prometheus, read-only.

It never speaks HTTP itself: :class:`setui.fleet.FleetWatcher` does, in a thread worker.
The layers (the "fleet-ui-layers" contract): app > details | status | table > view; it
also uses the dashboard's shell, format, themes, lines and help.

* ``app``: FleetApp: the refresh timer (at most every 5 s) and the watcher's refresh in a
  thread worker, one at a time, and what came back drawn.
* ``details``: Enter: every series behind an event or a VM, and for an event the command
  that approves it on one of its VMs (nothing is approved from here).
* ``status``: which Prometheus, how the link is, how old the news is, how many VMs and
  events, what the filter hides.
* ``table``: the fleet's lines in a scrolling list that draws only the visible ones.
* ``view``: the view as pure functions: which lines, their order, each line's text.

help.md (``?``) and fleet.tcss are its data.
"""
