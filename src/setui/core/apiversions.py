"""What each api-version of Scheduled Events carries: the one table of it.

An older version is not a smaller copy of the newest: it never shows a Preempt or a
Terminate, and events reach it without EventSource, Description or DurationInSeconds, so a
front end asking with it sees less than there is. The client side says so at start
(:func:`limits`, :func:`help_line`), the emulator serves each version only what it carries
(:func:`carries`), and docs/configuration.md prints this table (a test compares them).

It lives below both core and the emulator, which share nothing else: the versions are a
fact about the service that the client and the service's stand-in both need.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["API_VERSIONS", "KNOWN_API_VERSIONS", "NEWEST_API_VERSION", "PREVIEW_API_VERSION",
           "ApiVersion", "carries", "help_line", "limits", "since"]


@dataclass(frozen=True)
class ApiVersion:
    """One version and what it first carried: event types, and fields of an event."""

    name: str
    event_types: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    note: str = ""


API_VERSIONS: tuple[ApiVersion, ...] = (
    ApiVersion("2017-03-01", event_types=("Freeze", "Reboot", "Redeploy"),
               note="preview: NotBefore in ISO 8601, IaaS names with a leading underscore; "
                    "an approval also carries DocumentIncarnation"),
    ApiVersion("2017-08-01", note="generally available; the Metadata header required"),
    ApiVersion("2017-11-01", event_types=("Preempt",), note="spot eviction"),
    ApiVersion("2019-01-01", event_types=("Terminate",), note="scale-set delete"),
    ApiVersion("2019-04-01", fields=("Description",)),
    ApiVersion("2019-08-01", fields=("EventSource",), note="Platform or User"),
    ApiVersion("2020-07-01", fields=("DurationInSeconds",), note="current"),
)
KNOWN_API_VERSIONS: tuple[str, ...] = tuple(version.name for version in API_VERSIONS)
PREVIEW_API_VERSION = API_VERSIONS[0].name
NEWEST_API_VERSION = API_VERSIONS[-1].name
# The first version to carry each event type and field the first version did not.
_SINCE: dict[str, str] = {name: version.name for version in API_VERSIONS[1:]
                          for name in (*version.event_types, *version.fields)}
_EVENT_TYPES = frozenset(t for version in API_VERSIONS for t in version.event_types)
# Only a dated version (the shape core.endpoint accepts) is compared: any other word is the
# service's to refuse.
_DATED = re.compile(r"\d{4}-\d\d-\d\d[0-9A-Za-z.\-]{0,22}")


def since(name: str) -> str | None:
    """The first version that carries event type or field ``name``; None for what every
    version has (Freeze, EventId, NotBefore...) and for a word setui does not know."""
    return _SINCE.get(name)


def carries(api_version: str, name: str) -> bool:
    """Whether ``api_version`` can carry event type or field ``name`` (ISO dates compare as
    text; a version newer than setui knows carries everything it knows)."""
    first = since(name)
    return first is None or not _DATED.fullmatch(api_version) or api_version >= first


def limits(api_version: str) -> str | None:
    """One sentence saying what ``api_version`` cannot show, or None when it shows all."""
    types = [t for t in _SINCE if t in _EVENT_TYPES and not carries(api_version, t)]
    fields = [f for f in _SINCE if f not in _EVENT_TYPES and not carries(api_version, f)]
    if not types and not fields:
        return None
    said = []
    if types:
        said.append(f"cannot show {_listed(types, 'or')} events")
    if fields:
        said.append(f"has no {_listed(fields, 'or')}")
    return f"api-version {api_version} {' and '.join(said)}; {NEWEST_API_VERSION} has them all"


def help_line() -> str:
    """What each older version lacks, for ``--help``."""
    lacks = [f"before {v.name} no {_listed([*v.event_types, *v.fields], 'or')}"
             for v in API_VERSIONS[1:] if v.event_types or v.fields]
    return "; ".join(lacks)


def _listed(names: list[str], word: str) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"
