"""Fault injection: the ways the real endpoint (or what stands in front of it) misbehaves.

A spec is comma-separated ``key=value`` pairs, for example
``first-delay=5,500=0.1,429=0.05,retry-after=2,seed=7``:

``first-delay=S``  the first scheduled-events GET is answered only after S real seconds
                   (the documented "enabling" delay of up to two minutes)
``429=P`` ``500=P`` ``503=P`` ``410=P`` ``400=P`` ``404=P``
                   a GET answers that status instead, with probability P (0..1; ``500=1``
                   is always)
``notjson=P``      200 with a body that is not JSON (a proxy's HTML page)
``notdoc=P``       200 with JSON that is not a scheduled-events document
``truncate=P``     Content-Length promises more than is sent; the connection is closed
``hang=P``         the request is read and never answered (until the emulator stops)
``approve-CODE=P`` a POST (approval) answers CODE instead, with probability P
``compute-CODE=P`` a GET of the compute metadata (the VM's name and identity) answers
                   CODE instead, with probability P (``compute-503=1``: this VM's name
                   cannot be learned until the faults change)
``retry-after=S``  sent as ``Retry-After`` with 429 and 503
``slow=S``         every answer waits S real seconds
``big=MB``         every GET answers a valid-looking JSON document of MB megabytes (10^6 B)
``trickle=S``      bodies are sent one byte every S real seconds
``idle-close=S``   a kept-alive connection idle for S real seconds is closed by the server,
                   as servers and proxies do; a client must notice and connect again
``idle-drop=S``    a request that arrives on a connection idle for S real seconds or more is
                   read and dropped unanswered, and the connection closed: what a client
                   sees when the server's idle timeout fires just as it sends
``skew=S``         the service's clock runs S seconds ahead (negative: behind) of the
                   emulator's: the ``Date`` header and every NotBefore move together, as
                   they would if the VM's own clock were off by -S
``seed=N``         makes the random choices repeatable
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, fields

__all__ = ["FAULT_STATUSES", "Faults", "parse_faults"]

FAULT_STATUSES = (400, 404, 410, 429, 500, 503)
# GET outcomes drawn from one random number, in this order.
_OUTCOMES = ("status", "notjson", "notdoc", "truncate", "hang")


@dataclass(frozen=True)
class Faults:
    """What to break. Shares are probabilities 0..1; times are real seconds."""

    first_delay: float = 0.0
    statuses: dict[int, float] = field(default_factory=dict)  # GET status -> share
    approve_statuses: dict[int, float] = field(default_factory=dict)  # POST status -> share
    compute_statuses: dict[int, float] = field(default_factory=dict)  # compute GET -> share
    notjson: float = 0.0
    notdoc: float = 0.0
    truncate: float = 0.0
    hang: float = 0.0
    retry_after: float | None = None
    slow: float = 0.0
    big_mb: float = 0.0
    trickle: float = 0.0
    idle_close: float = 0.0  # 0: never
    idle_drop: float = 0.0  # 0: never
    skew: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        for name, table in (("", self.statuses), ("approve-", self.approve_statuses),
                            ("compute-", self.compute_statuses)):
            for code, share in table.items():
                if code not in FAULT_STATUSES:
                    raise ValueError(f"{name}{code}: cannot inject status {code} (choose from "
                                     f"{', '.join(map(str, FAULT_STATUSES))})")
                _check_share(f"{name}{code}", share)
        for key in ("notjson", "notdoc", "truncate", "hang"):
            _check_share(key, getattr(self, key))
        for key in ("first_delay", "slow", "big_mb", "trickle", "idle_close", "idle_drop"):
            value = getattr(self, key)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{key.replace('_', '-')}: must be 0 or more seconds, "
                                 f"got {value}")
        if self.retry_after is not None and (not math.isfinite(self.retry_after)
                                             or self.retry_after < 0):
            raise ValueError(f"retry-after: must be 0 or more seconds, got {self.retry_after}")
        if not math.isfinite(self.skew):
            raise ValueError("skew: must be a finite number of seconds")
        total = sum(self.statuses.values()) + self.notjson + self.notdoc + self.truncate \
            + self.hang
        if total > 1 + 1e-9:
            raise ValueError(f"the GET fault shares add up to {total:g}; they are chances of "
                             "one answer, so together they must be at most 1")
        if sum(self.approve_statuses.values()) > 1 + 1e-9:
            raise ValueError("the approve-CODE shares add up to more than 1")
        if sum(self.compute_statuses.values()) > 1 + 1e-9:
            raise ValueError("the compute-CODE shares add up to more than 1")

    def rng(self) -> random.Random:
        return random.Random(self.seed)

    def draw_get(self, rng: random.Random) -> tuple[str, int] | None:
        """The fault for one GET: ("status", code), ("notjson", 0), ... or None."""
        shares: list[tuple[str, int, float]] = [
            ("status", code, share) for code, share in sorted(self.statuses.items())]
        shares += [(kind, 0, getattr(self, kind)) for kind in _OUTCOMES[1:]]
        return _pick(rng, shares)

    def draw_post(self, rng: random.Random) -> int | None:
        return _draw_status(rng, self.approve_statuses)

    def draw_compute(self, rng: random.Random) -> int | None:
        return _draw_status(rng, self.compute_statuses)

    def describe(self) -> str:
        """The spec back, for logs."""
        parts: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default or value == {} or value is None:
                continue
            if f.name == "statuses":
                parts += [f"{code}={share:g}" for code, share in sorted(value.items())]
            elif f.name in ("approve_statuses", "compute_statuses"):
                prefix = f.name.split("_")[0]
                parts += [f"{prefix}-{code}={share:g}" for code, share in sorted(value.items())]
            else:
                key = "big" if f.name == "big_mb" else f.name.replace("_", "-")
                parts.append(f"{key}={value:g}")
        return ",".join(parts) or "none"


def _check_share(name: str, share: float) -> None:
    if not (isinstance(share, int | float) and 0 <= share <= 1):
        raise ValueError(f"{name}: a share is a probability from 0 to 1, got {share}")


def _draw_status(rng: random.Random, shares: dict[int, float]) -> int | None:
    picked = _pick(rng, [("status", code, share) for code, share in sorted(shares.items())])
    return None if picked is None else picked[1]


def _pick(rng: random.Random, shares: list[tuple[str, int, float]]) -> tuple[str, int] | None:
    if not any(share for _, _, share in shares):
        return None  # no draw: keeps the sequence of other draws unchanged
    roll = rng.random()
    for kind, code, share in shares:
        if roll < share:
            return kind, code
        roll -= share
    return None


_SECONDS = {"first-delay": "first_delay", "retry-after": "retry_after", "slow": "slow",
            "big": "big_mb", "trickle": "trickle", "skew": "skew", "idle-close": "idle_close",
            "idle-drop": "idle_drop"}
_SHARES = {"notjson", "notdoc", "truncate", "hang"}


def parse_faults(spec: str) -> Faults:
    """``"500=0.1,first-delay=3"`` -> Faults; ValueError with a readable message if bad."""
    values: dict[str, object] = {}
    statuses: dict[int, float] = {}
    approve: dict[int, float] = {}
    compute: dict[int, float] = {}
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        key, sep, text = item.partition("=")
        key, text = key.strip().lower(), text.strip()
        if not sep or not text:
            raise ValueError(f"{item!r}: expected key=value, like 500=0.1 or first-delay=5")
        if key in _SECONDS or key in _SHARES or key == "seed" or key.isdigit() \
                or key.startswith(("approve-", "compute-")):
            pass
        else:
            raise ValueError(f"{key!r}: unknown fault (known: first-delay, 400, 404, 410, 429, "
                             "500, 503, approve-CODE, compute-CODE, notjson, notdoc, truncate, "
                             "hang, retry-after, slow, big, trickle, idle-close, idle-drop, skew, "
                             "seed)")
        if key == "seed":
            try:
                values["seed"] = int(text)
            except ValueError:
                raise ValueError(f"seed: expected a whole number, got {text!r}") from None
            continue
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{key}: expected a number, got {text!r}") from None
        if key.isdigit():
            statuses[int(key)] = number
        elif key.startswith(("approve-", "compute-")):
            prefix, _, code = key.partition("-")
            if not code.isdigit():
                raise ValueError(f"{key!r}: expected {prefix}-CODE, like {prefix}-500=0.5")
            (approve if prefix == "approve" else compute)[int(code)] = number
        elif key in _SHARES:
            values[key] = number
        else:
            values[_SECONDS[key]] = number
    # values' keys are Faults' own fields (seed, _SHARES, _SECONDS), chosen by the text:
    # mypy cannot follow keys chosen by data.
    return Faults(statuses=statuses, approve_statuses=approve, compute_statuses=compute,
                  **values)  # type: ignore[arg-type]
