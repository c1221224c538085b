"""The protocol: documents, their changes, the client, the poller. No textual import.

* ``model``: the events document as typed, immutable values, parsed once.
* ``tracker``: successive documents as each event's story, and what a gap (failed
  polls, a long silence, skipped incarnations) makes uncertain: an event that left
  across one is "gone", never "cancelled".
* ``client``: ImdsClient, the service's requests over httpx and their errors: one
  kept-alive connection, never a proxy; which failures may be tried again, and whether
  a POST may have reached the service.
* ``wire``: the rules of one HTTP/1.1 exchange without I/O, one set for both drivers:
  h11's request bytes and events, the bounded head, a close before or within an answer,
  when a kept connection may carry the next request (no stale bytes, not expired), each
  failure as httpx names it.
* ``transport``: the lean httpx transport for plain-http IMDS: a Wire on asyncio streams,
  one kept-alive connection, httpx's timeouts; the client reads its answers without an
  httpx.Response; https keeps httpx's own.
* ``poller``: one request in flight, fixed-grid ticks, backoff capped near an event of
  this VM, the service's clock, the gap before each answer.
* ``quiet``: the agent's steady poll on a thread of its own, a Wire on a blocking socket:
  the loop hears of news at once, and of answers that say nothing new once a QUIET_SPAN.
* ``pace``: the polling interval's one rule.
* ``backoff``: capped exponential with jitter, so VMs that lost the service do not come
  back in lock-step.
* ``ratelimit``: a token bucket every request takes from, under IMDS's ~5 a second.
* ``clock``: the service's time, from its Date header, carried on a monotonic clock.
* ``health``: the connection's health and the poller's results; live turns stale by
  itself (``Health.at``).
* ``holes``: the record's holes, computed once from its recording sessions and
  sightings, and where they go in a list (``setui history``, its screen, replay, report).
* ``diff``: two stored documents side by side, field by field (``history show --diff``,
  the history screen).
* ``errors``: what can go wrong with the service, as types with messages for people.
* ``timefmt``: the one way every front end writes countdowns, clock times and durations
  for people, and ISO 8601 UTC for machines.
* ``order``: events most urgent first, for the dashboard's table and ``setui events``.
* ``eventids``: an EventId typed as a unique prefix of at least six characters.
* ``endpoint``: the defaults and their checks, and endpoint_key, the one spelling of an
  endpoint wherever it is a key.
* ``vmid``: this VM's vmId from compute metadata, read as a GUID or not at all.
* ``notice``: the notice an event gave against the documented minimum for its type, or
  why it is not known.
* ``impact``: a stall or a boot the agent measured, the rule that ties it to an event,
  its words.
* ``textsafe``: network text made printable: control, C1 and bidi characters escaped,
  or masked, each unprintable character a ``?`` (labels, notifications).
* ``apiversions``: what each api-version carries (event types, fields), the one table:
  read by the client's warning, the emulator and docs/configuration.md.
* ``metricnames``: the metric contract's names and labels, shared by the agent and the
  fleet view (docs/metrics.md says what each means), the budget's busy and waiting
  series among them.

httpx imports its own command line (click, rich, pygments) whenever click happens to be
installed: about 0.1 s of CPU at every start of ``setui watch``, and rich loaded in a
headless process. setui never runs it. A ``None`` entry in ``sys.modules`` makes that
optional import fail as if click were absent (httpx then defines a stub); set here,
before any module of this package can import httpx.
"""

import sys

# typeshed types sys.modules' values as modules; None is the documented "not importable".
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
