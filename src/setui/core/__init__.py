"""The protocol: documents, their changes, the client, the poller. No textual import.

httpx imports its own command line (click, rich, pygments) whenever click happens to be
installed: about 0.1 s of CPU at every start of ``setui watch``, and rich loaded in a
headless process. setui never runs it. A ``None`` entry in ``sys.modules`` makes that
optional import fail as if click were absent (httpx then defines a stub); set here,
before any module of this package can import httpx.
"""

import sys

# typeshed types sys.modules' values as modules; None is the documented "not importable".
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
