"""The headless monitor: polling, the service's clock, the events' lives, recording."""

from setui.monitor.monitor import URGENT_WINDOW, Monitor, MonitorUpdate
from setui.monitor.recorder import Recorder, brief_store_problem
from setui.monitor.state import ANNOUNCED, EventLife, GoneEvent, MonitorState

__all__ = ["ANNOUNCED", "URGENT_WINDOW", "EventLife", "GoneEvent", "Monitor", "MonitorState",
           "MonitorUpdate", "Recorder", "brief_store_problem"]
