"""setui agent: acts on scheduled events by a policy, says so, and is watched.

No textual; apprise and prometheus_client (the extra setui[agent]) only in notify and
metrics. The agent (``agent``) decides what is due for each event and when; its parts are
objects it makes and wires, each given what it uses, so each can be read and tested
alone: the steps taken and kept (``acting``), the budget's gate (``budgeting``), its
lines and messages (``telling``).

* ``policy``: the TOML policy, refused whole with line and reason; the default one.
* ``runas``: a rule's run_as, checked at load, looked up before each run.
* ``rules``: which rule an event falls under, and why one does not match.
* ``trust``: only what root or the agent's user could have written is read or run.
* ``hooks``: one hook run, the event in its environment and on stdin, a time limit.
* ``deadline``: a prepare's deadline, in its environment and as its time limit.
* ``plan``: what the agent plans and does for an event, in words.
* ``errors``: the agent's errors, said without flooding; a lasting one an error state.
* ``telling``: Teller, the agent's lines and its messages to people; VmIdentity.
* ``budget``: a group's unavailable VMs, counted from one answer of Prometheus.
* ``budgeting``: BudgetGate, before an early approval: count, claim, go, wait or skip.
* ``acting``: StepRunner (the rule checked again, a hook, an approval, a dry run's
  checks) and StepBook (each step kept: in the store before it acts, what was done
  written as soon as the store answers).
* ``agent``: Agent, the monitor's updates in, each event's steps out, each once.
* ``notify``: the messages through apprise, on a thread, each kept and sent once.
* ``metrics``: the Prometheus series, served and as a textfile.
* ``scrape``: the agent's bounded HTTP server, for the metrics and the probe.
* ``peers``: who a connection to that server is from.
* ``probe``: /readyz (out of rotation around this VM's events) and /healthz.
* ``lock``: one agent per store, an flock held for life.
* ``heartbeat``: a thread ticking every 100 ms that notes each stall.
* ``impact``: each stall and boot, tied to an event, kept, counted, said.
* ``notice``: the notice each event of this VM gave, counted, a short one told.
"""
