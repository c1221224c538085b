"""setui: a terminal dashboard for Azure Scheduled Events.

docs/architecture.md maps its packages; each package's docstring says what lives there.
The modules at the top, and help.md (every key of the dashboard, shown by ``?``):

* ``cli``: argument parsing, dispatching to commands/, emulator/ and ui/; each command's
  imports deferred to it, so ``setui --version`` and ``setui watch`` load no Textual.
* ``session``: what every front end sets up the same way: the client; the store (the
  agent's for root, else the user's own; one it may only read, read-only); this VM's
  name (given, or asked of IMDS until it answers, never the host name) and its vmId
  (asked, never given: what claims and holds are keyed by).
* ``loginline``: the login line: this VM's events from the agent's socket as a login
  shell starts, run ``python -I -S`` by the profile.d hook: stdlib, textsafe and
  core.timefmt only, one hard deadline, silent on any failure.
"""

__version__ = "0.1.0"
