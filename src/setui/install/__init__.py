"""``setui service install``: the agent as the VM's one system service, put in place.

What it writes and makes, in order (each said in words as it is done): the group
``setui``, the store ``/var/lib/setui`` (root:setui 0700, files 0600, taken over from the
recorder's or a shared store, never while anything has it open), ``/etc/setui``, the
unit, and the recorder's unit retired. ``--root DIR`` does all of it inside DIR (the
group into ``DIR/etc/group``) and runs no systemctl: a test root, or an image being
built. No textual here.
"""
