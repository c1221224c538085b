"""Settings from the config file, the environment and the command line.

Precedence, lowest first: built-in defaults, ``config.toml``, environment variables
(``SETUI_ENDPOINT``, ``SETUI_API_VERSION``, ``SETUI_DATA_DIR``,
``SETUI_AUDIT_FORWARD``; setui.settings.environment names each and holds the rule), command-line
options.
The file is optional; a bad one is an error with its path and the key named, never a
traceback and never silently ignored.

The fleet view's Prometheus (``prometheus``, env ``SETUI_PROMETHEUS_URL``) and its
credentials (``prometheus-token``, or ``prometheus-user`` and ``prometheus-password``; env
``SETUI_PROMETHEUS_TOKEN``, ``SETUI_PROMETHEUS_USER``, ``SETUI_PROMETHEUS_PASSWORD``) come
from here too, never from the command line, where every user of the machine could read
them in the process list; a config file that holds a secret must be readable by its
owner alone (``chmod 600``), or it is refused.

``history-days`` is how long the incarnation history is kept (default 90); ``0`` keeps
it forever. The audit log is never pruned, whatever it says.

``terminate-notice`` is the notice the scale set gives before a Terminate, in seconds (300
to 900, default 300): what a Terminate's notice is measured against.

``socket`` (env ``SETUI_SOCKET``) is where the agent answers its local API, and
``approvers`` (a list of user names and ``%group`` names) narrows who may approve through
it (docs/api.md).

What the root agent reads is held to more (``trust=``: setui.agent.trust, as its policy
is): a front end reads its user's own file as it is.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from setui.core.endpoint import (
    DEFAULT_API_VERSION,
    DEFAULT_ENDPOINT,
    check_api_version,
    check_endpoint,
)
from setui.core.notice import DEFAULT_TERMINATE_NOTICE
from setui.core.pace import check_interval
from setui.core.textsafe import printable
from setui.settings.environment import VARIABLES, from_environment
from setui.settings.tomlread import TomlError, parse_toml
from setui.system.atomicfile import write_atomically
from setui.system.auditforward import parse_target

__all__ = ["Config", "ConfigError", "config_dir", "config_source", "default_config_path",
           "load_config", "save_setting"]



# Azure lets a scale set give 5 to 15 minutes' notice before a Terminate.
MIN_TERMINATE_NOTICE, MAX_TERMINATE_NOTICE = 300, 900


class ConfigError(Exception):
    """A setting that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    """Every setting; ``history_days = 0`` means keep the history forever."""

    endpoint: str = DEFAULT_ENDPOINT
    api_version: str = DEFAULT_API_VERSION
    interval: float = 1.0
    theme: str = "setui-dark"
    vm_name: str | None = None
    bell: bool = True
    read_only: bool = False
    data_dir: Path | None = None
    history_days: int = 90  # 0: keep forever (the Store takes 0 or None as that)
    # Where audit records also go (setui.system.auditforward); None: auto.
    audit_forward: str | None = None
    # The fleet view's Prometheus; secrets are kept out of repr (and so out of tracebacks).
    prometheus: str | None = None
    prometheus_token: str | None = field(default=None, repr=False)
    prometheus_user: str | None = None
    prometheus_password: str | None = field(default=None, repr=False)
    policy: Path | None = None  # `setui agent`'s policy file (observe only without one)
    socket: Path | None = None  # the agent's API socket (setui.api); None: the default
    # Who may approve through the agent's API: user names and %groups; None: root and the
    # members of group setui (setui.api.peer).
    approvers: tuple[str, ...] | None = None
    # Never attach to the agent: poll IMDS and keep a store of this front end's own, as on
    # a machine without the agent (setui.session.attach).
    standalone: bool = False
    # The scale set's notice before a Terminate (its notBeforeTimeout), seconds: what a
    # Terminate's notice is held against (core.notice).
    terminate_notice: int = DEFAULT_TERMINATE_NOTICE

    def with_overrides(self, **values: Any) -> Config:
        """Apply command-line values; ``None`` means "not given" and keeps the setting."""
        given = {k: v for k, v in values.items() if v is not None}
        merged = replace(self, **given)
        _check(merged, "command line")
        return merged


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir("setui", appauthor=False))


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("SETUI_CONFIG") or config_dir() / "config.toml")


_TYPES: Mapping[str, tuple[type, ...]] = {
    "endpoint": (str,),
    "api_version": (str,),
    "interval": (int, float),
    "theme": (str,),
    "vm_name": (str,),
    "bell": (bool,),
    "read_only": (bool,),
    "data_dir": (str,),
    "history_days": (int,),
    "audit_forward": (str,),
    "prometheus": (str,),
    "prometheus_token": (str,),
    "prometheus_user": (str,),
    "prometheus_password": (str,),
    "policy": (str,),
    "socket": (str,),
    "approvers": (list,),
    "standalone": (bool,),
    "terminate_notice": (int,),
}


_WORDS = {str: "a string", int: "a number", bool: "true or false", list: "a list of names"}
# A user or %group name in `approvers`: what useradd and groupadd accept, and no more.
_APPROVER = re.compile(r"%?[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\$?")


def config_source(path: Path | None = None, environ: Mapping[str, str] | None = None
                  ) -> Path | None:
    """The file :func:`load_config` reads: ``path`` when given, else the default one when
    it is there; None when there is none to read."""
    if path is not None:
        return path
    file = default_config_path(environ)
    return file if _present(file) else None


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None, *,
                trust: Callable[[Path], str | None] | None = None) -> Config:
    """Read the config file (if any) and the environment into a Config. ``trust``: why
    the file (its absolute path) must not be read, or None; asked before it is read."""
    env = os.environ if environ is None else environ
    source = config_source(path, env)
    file = source or default_config_path(env)
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    if source is not None:
        problem = trust(source.absolute()) if trust is not None else None
        if problem is not None:
            raise ConfigError(f"the config file: {printable(problem, 600)}")
        values, lines = _read_file(source)
    # Each setting from the file is named at its line, as a policy's are.
    origins = {name: f"config file {file}:{line}" for name, line in lines.items()}
    for key, variable in VARIABLES.items():
        value = from_environment(key, env)
        if value is not None:
            values[key] = value
            origins[key] = f"environment variable {variable}"
    for key in ("data_dir", "policy", "socket"):
        if key in values:
            values[key] = Path(values[key]).expanduser()
    if "interval" in values:
        values["interval"] = float(values["interval"])
    if "approvers" in values:
        values["approvers"] = tuple(values["approvers"])
    config = Config(**values)
    _check(config, f"config file {file}", origins)
    return config


# A config file is a few lines: anything larger is not one (SETUI_CONFIG=/dev/zero once
# ended in MemoryError).
MAX_CONFIG_BYTES = 1024 * 1024


def _read_bytes(file: Path) -> bytes:
    return read_small_file(file)[0]


def read_small_file(file: Path, what: str = "config file") -> tuple[bytes, os.stat_result]:
    """The file's bytes, if it is a regular file of at most MAX_CONFIG_BYTES, and what
    fstat said of the file they were read from; ConfigError naming ``what`` otherwise.
    Opened without blocking, so a named pipe is refused instead of waiting for a writer;
    for every file of settings a person writes (the config, the agent's policy)."""
    fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    too_big = (f"{what} {printable(file, 200)} is larger than {MAX_CONFIG_BYTES // 1024} KB: "
               f"it is not a setui {what.split()[0]}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{what} {printable(file, 200)} is not a regular file "
                              "(a device, a pipe or a socket): name a file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(too_big)
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:  # it grew while we read
                raise ConfigError(too_big)
        return b"".join(chunks), info
    finally:
        os.close(fd)


# Settings that are secrets: a file holding one must be the owner's alone.
SECRETS = ("prometheus_token", "prometheus_password")


def _check_private(file: Path, info: os.stat_result, values: Mapping[str, Any]) -> None:
    """Refuse a config file holding a secret that group or others may open, as ssh refuses
    a private key they can read: anyone who can read it has the token, and anyone who can
    write it can point the fleet view at a server of theirs to be sent it."""
    held = [name.replace("_", "-") for name in SECRETS if name in values]
    mode = stat.S_IMODE(info.st_mode)
    if not held or os.name != "posix" or not mode & 0o077:
        return
    where = printable(file, 200)
    raise ConfigError(f"config file {where} holds {' and '.join(held)} and group or others "
                      f"can open it (mode {mode:04o}); make it yours alone: "
                      f"chmod 600 {shlex.quote(where)}")


def _present(file: Path) -> bool:
    """Whether the default config file is there; one that cannot even be looked for (a
    directory above it this user may not search) is said, not taken as absent: settings
    the operator wrote would otherwise be silently left out."""
    try:
        os.stat(file)  # not Path.exists(), whose answer to EACCES differs by Python
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise ConfigError(f"cannot look for the config file {printable(file, 200)}: "
                          f"{exc.strerror or exc}; set SETUI_CONFIG or --config to another "
                          "file, or make its directory readable") from None
    return True


_KEY = re.compile(r"""\s*(?:"([^"\\]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*=""")


def _key_lines(text: str) -> dict[str, int]:
    """The line (from 1) of each top-level key as written, for messages: the parser
    gives none. A setting is a top-level key, so the search stops at the first table."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if _TABLE.match(line):
            break
        key = _KEY.match(line)
        if key is not None:
            found.setdefault(key[1] or key[2] or key[3] or "", number)
    return found


def _read_file(file: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The file's settings, and the line of each (where it can be found)."""
    try:
        data, info = read_small_file(file)
        text = data.decode("utf-8")
        raw = parse_toml(text)
    except FileNotFoundError:
        raise ConfigError(f"config file {file} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {file} is a directory: name a file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {printable(file, 200)}: "
                          f"{exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {file} is not UTF-8 text") from None
    except TomlError as exc:
        raise ConfigError(f"config file {file} is not valid TOML: {exc}") from None
    known = {f.name for f in fields(Config)}
    at = _key_lines(text)
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        where = f"config file {file}:{at[key]}" if key in at else f"config file {file}"
        if name not in known:
            raise ConfigError(
                f"{where}: unknown setting {key!r} "
                f"(known: {', '.join(sorted(k.replace('_', '-') for k in known))})"
            )
        wanted = _TYPES[name]
        if (isinstance(value, bool) and bool not in wanted) or not isinstance(value, wanted):
            raise ConfigError(f"{where}: {key} must be {_WORDS[wanted[0]]}, got {value!r}")
        values[name] = value
        if key in at:
            lines[name] = at[key]
    _check_private(file, info, values)
    return values, lines


def _check(config: Config, source: str, origins: Mapping[str, str] | None = None) -> None:
    """Refuse values the client would refuse later, naming where each came from
    (``origins``: setting -> its source, where it is not ``source``)."""
    def where(name: str) -> str:
        return (origins or {}).get(name, source)

    try:
        check_interval(config.interval)
    except ValueError as exc:
        raise ConfigError(f"{where('interval')}: {exc}") from None
    for name, check in (("endpoint", check_endpoint), ("api_version", check_api_version)):
        try:
            check(getattr(config, name))
        except ValueError as exc:
            raise ConfigError(f"{where(name)}: {exc}") from None
    if config.audit_forward is not None:
        try:
            parse_target(config.audit_forward)
        except ValueError as exc:
            raise ConfigError(f"{where('audit_forward')}: {exc}") from None
    if config.prometheus_token and (config.prometheus_user or config.prometheus_password):
        raise ConfigError(f"{where('prometheus_token')}: prometheus-token and "
                          "prometheus-user/prometheus-password are two ways to log in to "
                          "Prometheus; give one")
    if bool(config.prometheus_user) != bool(config.prometheus_password):
        given, missing = (("prometheus-user", "prometheus-password") if config.prometheus_user
                          else ("prometheus-password", "prometheus-user"))
        raise ConfigError(f"{where(given.replace('-', '_'))}: {given} is set but "
                          f"{missing} is not; basic auth needs both")
    for name in config.approvers or ():
        if not isinstance(name, str) or not _APPROVER.fullmatch(name):
            raise ConfigError(f"{where('approvers')}: approvers must be user names and "
                              f"%group names, got {printable(repr(name), 80)}")
    if not MIN_TERMINATE_NOTICE <= config.terminate_notice <= MAX_TERMINATE_NOTICE:
        raise ConfigError(f"{where('terminate_notice')}: terminate-notice is the scale set's "
                          "notice before a Terminate, in seconds: 300 to 900 (5 to 15 minutes), "
                          f"got {config.terminate_notice}")
    if config.history_days < 0:
        raise ConfigError(f"{where('history_days')}: history-days must be a number of days, "
                          f"or 0 to keep the history forever; got {config.history_days}")


_TABLE = re.compile(r"^\s*\[")


def save_setting(file: Path, key: str, value: str) -> None:
    """Set one top-level string setting in the config file, keeping everything else as
    written: the other settings, comments, blank lines, a comment after the value. The
    file is replaced atomically (a crash leaves the old file or the new one) and keeps
    its permissions; a missing file is created. Raises :class:`ConfigError` in words when
    the file cannot be read, would not stay valid, or cannot be written."""
    if key.replace("-", "_") not in _TYPES:
        raise ConfigError(f"unknown setting {key!r}")
    literal = json.dumps(value, ensure_ascii=True)  # a JSON string is a TOML basic string
    try:
        text = _read_bytes(file).decode("utf-8")  # a regular file, and not a huge one
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {printable(file, 200)}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    before = _parse_for_save(text, file)
    lines = text.splitlines(keepends=True)
    assignment = re.compile(rf"^(\s*){re.escape(key)}(\s*=\s*)(\"(?:[^\"\\]|\\.)*\"|'[^']*')(.*)$",
                            re.DOTALL)
    first_table = next((i for i, line in enumerate(lines) if _TABLE.match(line)), len(lines))
    for index, line in enumerate(lines[:first_table]):
        found = assignment.match(line)
        if found:
            lines[index] = f"{found[1]}{key}{found[2]}{literal}{found[4]}"
            break
    else:
        if lines and not lines[-1].endswith("\n") and first_table == len(lines):
            lines[-1] += "\n"
        lines.insert(first_table, f"{key} = {literal}\n")
    new_text = "".join(lines)
    try:
        after: dict[str, Any] | None = parse_toml(new_text)
    except TomlError:
        after = None
    if after != {**before, key: value}:  # a layout this simple editor does not understand
        raise ConfigError(f"config file {file}: cannot set {key} without rewriting the file; "
                          f"add the line {key} = {literal} yourself")
    _replace_file(file, new_text)


def _parse_for_save(text: str, file: Path) -> dict[str, Any]:
    try:
        return parse_toml(text)
    except TomlError as exc:
        raise ConfigError(f"config file {file} is not valid TOML, so it is left alone: "
                          f"{exc}") from None


def _replace_file(file: Path, text: str) -> None:
    """The user's file replaced whole, its mode and line ends kept as they were."""
    try:
        mode = file.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = None
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(file, text, mode=mode, newline="")
    except OSError as exc:
        raise ConfigError(f"cannot write config file {file}: {exc.strerror or exc}") from None
