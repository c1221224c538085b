"""The dashboard's widgets: status line, events table, selected-event summary, timeline."""
