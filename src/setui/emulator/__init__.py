"""The built-in emulator of the Azure Scheduled Events endpoint (no Textual, no httpx).

``server.Emulator`` serves a ``scenario.Scenario`` over loopback HTTP; ``faults`` breaks
it on purpose; ``command`` is ``setui emulator``. Import the submodules you need:
importing this package loads nothing else.
"""
