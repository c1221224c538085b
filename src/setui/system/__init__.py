"""What the operating system says, and how setui asks it.

* ``identity``: who is acting (the real uid, the login uid and session, sudo only when it
  ran, the SSH client confirmed by root's sshd above it or "claimed", the host), from the
  kernel, never from a variable the user can set.
* ``actor``: the one sentence for who did something: the dialog, ``setui audit``, the
  event's story and the forwarded copy.
* ``processes``: any process's ancestors (/proc/PID/stat) and the TCP connections root's
  sshd among them holds (its fds); which processes hold given files open.
* ``boot``: this boot's id (SETUI_BOOT_ID_FILE for tests only) and when it began: how
  the agent finds a reboot.
* ``systemd``: sd_notify (readiness, status, the watchdog) and the journal's priorities
  when systemd runs setui.
* ``logs``: the one logging path: stdlib ``logging`` set up once (the ``setui`` logger on
  one stream, journald's priority on each line under the journal), and the one rule
  against floods: each kind said at once, then once a minute with how many more
  (Limiter; OncePerWindow, its logging.Filter; KindLog, flushed by its owner).
* ``auditforward``: each audit record, as it is written, to the journal, syslog or an
  RFC 5424 collector.
* ``atomicfile``: a file replaced whole or not at all (temporary file, fsync, rename),
  owner-only unless the caller says: the witness, the units, exported scenarios and
  audit logs, the config file, the metrics textfile.
* ``listening``: a listening socket made one way for the emulator and the agent.
* ``loopback``: whether a host is this machine's loopback (secrets in clear go only
  there).
* ``gctune``: the garbage collector kept off objects it can only waste time on: paused
  for a burst of objects in no cycle (start-up, a fleet's answer), start-up's heap frozen
  once it is done (the dashboard, ``setui watch``).

Standard library only; nothing here imports textual or httpx.
"""
