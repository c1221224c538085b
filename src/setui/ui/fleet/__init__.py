"""``setui fleet``: every VM's scheduled events from Prometheus, read-only.

view (pure lines from a fleet) < table and status widgets < screens (details, help) < app.
It never speaks HTTP itself: :class:`setui.fleet.FleetWatcher` does, in a thread worker.
"""
