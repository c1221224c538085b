"""The agent's local API: one JSON object per line over a Unix socket (docs/api.md). No
textual.

* ``protocol``: JSON-line frames, their limits, the error codes, the version; pure.
* ``shapes``: each value's fields declared once, as a Shape of kinds with their bounds in
  the order a decode checks them; encode and decode made from it as one function each,
  as written by hand, refusing in Fields' words (docs/decisions/wire-codec.md: why not
  msgspec).
* ``codec``: setui's values on the wire and back, from their Shapes, every decode
  checking every field; what a shape cannot say (ages, the version, a confirmed
  snapshot) written out.
* ``peer``: the kernel's word on a client (SO_PEERCRED, SO_PEERGROUPS, the login uid and
  session from /proc), and who may approve.
* ``server``: an asyncio.Protocol per connection, every bound, the pushes and ticks,
  what clients do wrong logged through system.logs.
* ``connection``: one client's frames, rate and output.
* ``queries``: the read-only ops, on a thread of their own with a read-only store.
* ``writes``: approve, dismiss, hold and release, as the identity the kernel gives,
  through the Approver and the agent's log.
* ``source``: what the server reads of the running agent.
* ``socketfile``: where the socket goes, made 0660 and never over a live one.
* ``serve``: the API started and stopped, what ``setui agent`` calls.
* ``client``: what front ends attach with: connect, requests, a subscription, and every
  question of the record as a Store answers it, paged; a lost connection opened again
  and a query on it asked again.
* ``attach``: the first thing a front end does: the agent's API when its socket answers,
  else standalone, and the words that say which; where the agent should answer and does
  not, approving from there is refused; a state held while the link is down said so.
* ``attached``: AttachedMonitor, the agent's pushes as the Monitor's interface for the
  dashboard: stale as of its last frame, reconnecting with backoff, what changed
  meanwhile announced across a gap.
* ``approving``: AgentApprover, the Approver's interface over the API: the same refusal
  rule before sending, the claim as the agent keys it (its vmId), each approval on a
  connection of its own, the agent's progress and outcomes; a connection lost
  mid-approval is an outcome unknown, looked up in its audit log once the agent is back.

The client side (client, protocol, codec, shapes, peer, attach, attached, approving)
imports neither the store's write paths, the approver, the agent, httpx nor sqlite3: the
"api-client" import contract in pyproject.toml keeps it so.
"""
