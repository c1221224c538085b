"""What the operating system says, and how setui asks it.

* ``identity``: who is acting (the OS account, who logged in, the SSH client), from the
  kernel, never from a variable the user can set.
* ``actor``: the one sentence for who did something, in the audit log and on screen.
* ``processes``: a process's ancestors and the SSH connection above it, from /proc.
* ``boot``: this boot's id and when it began.
* ``systemd``: readiness, status, the watchdog and the journal when systemd runs setui.
* ``logs``: the one logging set-up: stdlib ``logging``, rate-limited, journald's words.
* ``auditforward``: each audit record to the journal, syslog or a collector.
* ``atomicfile``: a file replaced whole or not at all.
* ``listening``: a listening socket made one way for the emulator and the agent.
* ``loopback``: whether a host is this machine's loopback.
* ``gctune``: the garbage collector kept off objects it can only waste time on.

Standard library only; nothing here imports textual or httpx.
"""
