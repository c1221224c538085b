"""The built-in emulator of the Azure Scheduled Events endpoint (docs/emulator.md): the
client's test server, so it imports neither textual, httpx nor core's protocol.

* ``scenario``: the scenario format, a data file people write, read and checked.
* ``timeline``: the events document as a pure function of scenario time and the
  approvals received.
* ``service``: what the service answers: requests checked as IMDS checks them, the
  documents, approvals, and the faults that replace a good answer with a bad one.
* ``documents``: each api-version served what it carries (core.apiversions' table).
* ``wire``: HTTP/1.1 on asyncio streams, by hand so that faults can break it on purpose
  (a lying Content-Length, a trickling body, no answer at all); keep-alive as real
  clients expect.
* ``faults``: the spec of the ways the service (or what stands in front of it)
  misbehaves.
* ``server``: Emulator, the HTTP server on loopback, on a thread and loop of its own.
* ``clock``: ManualClock, time that tests move by hand.
* ``command``: ``setui emulator``, a scenario served until interrupted.
* ``__main__``: ``python -m setui.emulator``, the same without the rest of setui.
* ``scenarios``: the built-in scenarios as data files; README.md there is their format.

Import the submodules you need: importing this package loads nothing else.
"""
