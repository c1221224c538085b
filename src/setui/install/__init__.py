"""``setui service install``: the agent as the VM's one system service, put in place.

What it writes and makes, in order (each said in words as it is done): the group
``setui``, the store ``/var/lib/setui`` (root:setui 0700, files 0600, taken over from the
recorder's or a shared store, never while anything has it open), ``/etc/setui``, the
unit, and the recorder's unit retired. ``--root DIR`` does all of it inside DIR (the
group into ``DIR/etc/group``) and runs no systemctl: a test root, or an image being
built. No textual here.

* ``unit``: the shipped unit with this Python in ExecStart=, and what that Python could
  not see or should not run (root's alone to change, visible to the unit).
* ``layout``: every path under a root (``/`` or ``--root DIR``; SETUI_SYSTEM_ROOT for
  tests), and whether the service is installed, as front ends ask.
* ``group``: the group ``setui``, made with ``groupadd --system`` when missing.
* ``takeover``: the recorder's or a shared store moved whole and made the agent's,
  never while open, nothing followed (a symbolic link, a second name).
* ``loginhook``: the login line's /etc/profile.d hook, marked as setui's.
* ``installer``: the steps in order, each said; systemctl on the running system only.
* ``uninstaller``: ``setui service uninstall``: the unit and the hook, taken from the same
  layout; the store and the group left.
"""
