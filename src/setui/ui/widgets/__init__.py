"""The dashboard's widgets, each drawing one part of a screen and repainting only what
changed.

* ``status``: the status line: which VM and endpoint, the connection, how old the news
  is; its parts whole at any width.
* ``events``: the events table: only the cells that changed are updated, a tick's row
  line changed in place (setui.ui.compat says what that works around).
* ``summary``: two lines on the selected event, what the narrow table leaves out.
* ``timeline``: a time axis around now, a lane per event.
* ``lines``: lines of text that repaint only the cells that changed.
* ``keys``: the key bar: whole keys only, the essential ones always.
* ``notices``: the notice line above the keys: news pushes the screen up, never covers
  it, and waits while another screen is read.
* ``page``: prose wrapped to the view's width, raw JSON never wrapped.
* ``window``: the pane under the timeline: the agent's plan and the change log, folded
  to the lines left.
"""
