"""The policy file: which events the agent acts on, and how.

A policy that cannot be read whole is refused at start with the line and the reason: an
agent that half-understood its policy would act at 3 a.m. on a guess. Every key is known;
a misspelt one (``aprove``) is an error, never silently ignored.
"""

from __future__ import annotations

import os
import re
import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from setui.agent.runas import RunAs, parse_run_as, refusal
from setui.settings.config import ConfigError, read_small_file
from setui.settings.tomlread import TomlError, parse_toml

__all__ = ["APPROVE_MODES", "BUDGET_GROUPS", "DEFAULT_DEADLINE_MARGIN", "DEFAULT_NAME",
           "TEMPLATE_FIELDS", "Hook", "Policy", "PolicyError", "Rule", "default_policy",
           "load_policy", "parse_policy"]

APPROVE_MODES = ("never", "now", "after-prepare", "before-not-before")
# What a disruption budget counts across (group = ...): the identity label each names.
BUDGET_GROUPS = ("scale-set", "placement-group", "resource-group")
EVENT_TYPES = ("Freeze", "Reboot", "Redeploy", "Preempt", "Terminate")
EVENT_SOURCES = ("Platform", "User")
# What a notification's title and body may name ($event_id ...).
TEMPLATE_FIELDS = ("change", "event_id", "event_type", "status", "not_before", "resources",
                   "this_vm", "vm_name", "rule", "detail", "source", "duration", "incarnation")
DEFAULT_TITLE = "setui: $event_type $change on $vm_name"
DEFAULT_BODY = ("Event $event_id ($event_type, $status, source $source) $change: $detail. "
                "NotBefore $not_before; resources $resources; rule $rule.")
DEFAULT_TIMEOUT = 300.0
DEFAULT_DEADLINE_MARGIN = 10.0  # seconds a prepare hook must end before NotBefore
DEFAULT_NAME = "policy.toml"  # the policy used when none is named: beside the config file
MAX_TIMEOUT = 24 * 3600.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TOP = {"rule", "notify", "hooks"}
_NOTIFY = {"urls", "title", "body", "retries", "short_notice"}
_HOOKS = {"timeout"}
_RULE = {"name", "event_type", "event_source", "this_vm", "other_vms", "min_duration",
         "max_duration", "not_before_within", "resource", "notify", "prepare", "approve",
         "approve_before", "recover", "timeout", "drain_before", "deadline_margin",
         "max_unavailable", "group", "run_as"}


class PolicyError(Exception):
    """The policy is refused; ``str()`` says where and why."""

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class Hook:
    """A command run for an event, with a time limit, as its rule's ``run_as`` (None:
    as the agent's own user)."""

    argv: tuple[str, ...]
    timeout: float
    run_as: RunAs | None = None
    # Its line in the policy, for what is said of it (a file it names refused at start).
    line: int | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        """What people call it: the command's file name (``drain``)."""
        return Path(self.argv[0]).name

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class Rule:
    """One ``[[rule]]``: what it matches (None: anything) and what it does."""

    name: str
    event_types: frozenset[str] | None = None
    event_sources: frozenset[str] | None = None
    this_vm: bool | None = None
    other_vms: bool | None = None
    min_duration: int | None = None
    max_duration: int | None = None
    not_before_within: float | None = None
    resource: str | None = None
    notify: bool = False
    prepare: Hook | None = None
    approve: str = "never"
    approve_before: float = 0.0
    recover: Hook | None = None
    # The load balancer's probe answers 503 from this many seconds before NotBefore.
    drain_before: float | None = None
    deadline_margin: float = DEFAULT_DEADLINE_MARGIN
    # The disruption budget: at most this many VMs of the group unavailable when the
    # agent approves early (None: no budget).
    max_unavailable: int | None = None
    group: str | None = None
    run_as: RunAs | None = None

    @property
    def acts(self) -> bool:
        """Whether the rule does anything but watch and tell."""
        return self.prepare is not None or self.recover is not None or self.approve != "never"


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    urls: tuple[str, ...] = ()
    title: str = DEFAULT_TITLE
    body: str = DEFAULT_BODY
    retries: int = 5
    # Tell when an event of this VM appears with less notice than documented, whatever
    # its rule (agent.notice).
    short_notice: bool = True
    source: str = "(no policy: observe only)"
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def acts(self) -> bool:
        return any(rule.acts for rule in self.rules)

    @property
    def budgeted(self) -> tuple[Rule, ...]:
        """The rules whose early approvals are held to a disruption budget."""
        return tuple(rule for rule in self.rules if rule.max_unavailable is not None)

    def hooks(self) -> list[tuple[Rule, str, Hook]]:
        """Every hook the policy runs: (its rule, its step, the hook)."""
        return [(rule, step, hook) for rule in self.rules
                for step, hook in (("prepare", rule.prepare), ("recover", rule.recover))
                if hook is not None]


class _Lines:
    """Finds the line of a key in the file, for messages (tomllib gives none)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def table(self, header: str, index: int = 0) -> int | None:
        pattern = re.compile(rf"^\s*\[{{1,2}}\s*{re.escape(header)}\s*\]{{1,2}}")
        seen = -1
        for number, line in enumerate(self.lines, 1):
            if pattern.match(line):
                seen += 1
                if seen == index:
                    return number
        return None

    def key(self, key: str, header: str | None = None, index: int = 0) -> int | None:
        start = (self.table(header, index) or 0) if header else 0
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        for number, line in enumerate(self.lines[start:], start + 1):
            if header and number > start + 1 and re.match(r"^\s*\[", line):
                break
            if header is None and re.match(r"^\s*\[", line):
                break
            if pattern.match(line):
                return number
        return self.table(header, index) if header else None


def default_policy(config_file: Path) -> Path:
    """The policy read when neither ``--policy`` nor ``policy =`` names one: beside the
    config file (``/etc/setui/policy.toml`` under the units, whose config is
    ``/etc/setui/config.toml``). It may be absent: then the agent only observes."""
    return config_file.parent / DEFAULT_NAME


def load_policy(path: Path) -> Policy:
    """Read and check ``path``; PolicyError with the line and the reason otherwise."""
    try:
        # Bounded as the config file is: /dev/zero or a huge file is refused in words,
        # not read until memory runs out.
        text = read_small_file(path, "policy file")[0].decode("utf-8")
    except ConfigError as exc:
        raise PolicyError(str(path), None, f"cannot read the policy: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PolicyError(str(path), None, f"cannot read the policy: {reason}") from None
    return parse_policy(text, str(path))


def parse_policy(text: str, source: str = "policy") -> Policy:
    try:
        data = parse_toml(text)
    except TomlError as exc:
        message = str(exc)
        found = re.search(r"line (\d+)", message)
        raise PolicyError(source, int(found.group(1)) if found else None,
                          f"not valid TOML: {message}") from None
    return _Parser(source, _Lines(text)).policy(data)


class _Parser:
    def __init__(self, source: str, lines: _Lines) -> None:
        self.source = source
        self.lines = lines

    def fail(self, line: int | None, reason: str) -> PolicyError:
        return PolicyError(self.source, line, reason)

    def policy(self, data: Mapping[str, Any]) -> Policy:
        for key in data:
            if key not in _TOP:
                raise self.fail(self.lines.key(key) or self.lines.table(key),
                                f"unknown table or key {key!r} (known: {', '.join(sorted(_TOP))})")
        notify = self.table(data, "notify", _NOTIFY)
        hooks = self.table(data, "hooks", _HOOKS)
        default_timeout = self.seconds(hooks, "timeout", "hooks", 0, DEFAULT_TIMEOUT)
        urls = notify.get("urls", [])
        if not isinstance(urls, list) or not all(isinstance(u, str) and u for u in urls):
            raise self.fail(self.lines.key("urls", "notify"),
                            "notify.urls must be a list of apprise URLs (strings)")
        title = self.template(notify, "title", DEFAULT_TITLE)
        body = self.template(notify, "body", DEFAULT_BODY)
        retries = notify.get("retries", 5)
        if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 20:
            raise self.fail(self.lines.key("retries", "notify"),
                            "notify.retries must be a whole number from 0 to 20")
        short_notice = notify.get("short_notice", True)
        if not isinstance(short_notice, bool):
            raise self.fail(self.lines.key("short_notice", "notify"),
                            "notify.short_notice must be true or false")
        raw_rules = data.get("rule", [])
        if not isinstance(raw_rules, list):
            raise self.fail(self.lines.key("rule"), "rule must be an array of tables: [[rule]]")
        rules = tuple(self.rule(raw, index, default_timeout)
                      for index, raw in enumerate(raw_rules))
        names = [rule.name for rule in rules]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise self.fail(self.lines.key("name", "rule", index),
                                f"two rules are named {name!r}: names must be unique")
        notes: tuple[str, ...] = ()
        if any(rule.notify for rule in rules) and not urls:
            notes = ("rules say notify but notify.urls is empty: nothing will be sent",)
        return Policy(rules=rules, urls=tuple(urls), title=title, body=body, retries=retries,
                      short_notice=short_notice, source=self.source, notes=notes)

    def table(self, data: Mapping[str, Any], name: str, known: set[str]) -> Mapping[str, Any]:
        value = data.get(name, {})
        if not isinstance(value, dict):
            raise self.fail(self.lines.key(name), f"{name} must be a table: [{name}]")
        for key in value:
            if key not in known:
                raise self.fail(self.lines.key(key, name),
                                f"unknown key {key!r} in [{name}] "
                                f"(known: {', '.join(sorted(known))})")
        return value

    def template(self, data: Mapping[str, Any], key: str, default: str) -> str:
        value = data.get(key, default)
        line = self.lines.key(key, "notify")
        if not isinstance(value, str):
            raise self.fail(line, f"notify.{key} must be a string")
        template = string.Template(value)
        for match in template.pattern.finditer(value):
            named = match.group("named") or match.group("braced")
            if match.group("invalid") is not None:
                raise self.fail(line, f"notify.{key}: a lone $ (write $$ for a dollar sign)")
            if named and named not in TEMPLATE_FIELDS:
                raise self.fail(line, f"notify.{key}: unknown field ${named} (known: "
                                      f"{', '.join('$' + f for f in TEMPLATE_FIELDS)})")
        return value

    def seconds(self, data: Mapping[str, Any], key: str, header: str, index: int,
                default: float) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 < value <= MAX_TIMEOUT:
            raise self.fail(self.lines.key(key, header, index),
                            f"{key} must be a number of seconds above 0 and at most "
                            f"{MAX_TIMEOUT:g}")
        return float(value)

    def run_as(self, raw: Mapping[str, Any], name: str, line: int | None) -> RunAs | None:
        """``run_as``: well formed, a user (and group) this machine knows, and an agent
        that can become them (root)."""
        value = raw.get("run_as")
        if value is None:
            return None
        run_as = parse_run_as(value)
        if run_as is None:
            raise self.fail(line, f"rule {name!r}: run_as must be \"USER\" or "
                                  "\"USER:GROUP\" (names, as useradd takes them)")
        problem = refusal(run_as)
        if problem is not None:
            raise self.fail(line, f"rule {name!r}: {problem}")
        return run_as

    def rule(self, raw: object, index: int, default_timeout: float) -> Rule:
        line = self.lines.table("rule", index)

        def at(key: str) -> int | None:
            return self.lines.key(key, "rule", index)

        if not isinstance(raw, dict):
            raise self.fail(line, "each rule must be a table: [[rule]]")
        for key in raw:
            if key not in _RULE:
                raise self.fail(at(key), f"unknown key {key!r} in rule {index + 1} "
                                         f"(known: {', '.join(sorted(_RULE))})")
        name = raw.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise self.fail(at("name") or line, "every rule needs a name: letters, digits, "
                                                 "'_', '.', '-', at most 64")
        timeout = self.seconds(raw, "timeout", "rule", index, default_timeout)
        run_as = self.run_as(raw, name, at("run_as"))

        def choice(key: str, allowed: tuple[str, ...]) -> frozenset[str] | None:
            value = raw.get(key)
            if value is None:
                return None
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not values or any(
                    v not in allowed for v in values):
                raise self.fail(at(key), f"rule {name!r}: {key} must be one of "
                                         f"{', '.join(allowed)} (or a list of them)")
            return frozenset(values)

        def flag(key: str) -> bool | None:
            value = raw.get(key)
            if value is not None and not isinstance(value, bool):
                raise self.fail(at(key), f"rule {name!r}: {key} must be true or false")
            return value

        def count(key: str) -> int | None:
            value = raw.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise self.fail(at(key), f"rule {name!r}: {key} must be a whole number of "
                                         "seconds, 0 or more")
            return value

        def hook(key: str) -> Hook | None:
            value = raw.get(key)
            if value is None:
                return None
            try:
                argv = shlex.split(value) if isinstance(value, str) else value
            except ValueError as exc:
                raise self.fail(at(key), f"rule {name!r}: {key}: {exc}") from None
            if not isinstance(argv, list) or not argv or not all(
                    isinstance(a, str) and a for a in argv):
                raise self.fail(at(key), f"rule {name!r}: {key} must be a command: a string "
                                         "or a list of strings")
            if not os.path.isabs(argv[0]):
                # Found through PATH, it could be anyone's: the agent checks what it runs.
                raise self.fail(at(key), f"rule {name!r}: {key} must name its command by "
                                         f"its absolute path, not {argv[0]!r}")
            return Hook(tuple(argv), timeout, run_as, line=at(key))

        resource = raw.get("resource")
        if resource is not None and (not isinstance(resource, str) or not resource):
            raise self.fail(at("resource"), f"rule {name!r}: resource must be a glob string")
        approve = raw.get("approve", "never")
        if approve not in APPROVE_MODES:
            raise self.fail(at("approve"), f"rule {name!r}: approve must be one of "
                                           f"{', '.join(APPROVE_MODES)}")
        within = raw.get("not_before_within")
        if within is not None:
            within = float(self.seconds(raw, "not_before_within", "rule", index, 1.0))
        approve_before = raw.get("approve_before", 0)
        if isinstance(approve_before, bool) or not isinstance(approve_before, (int, float)) \
                or approve_before < 0:
            raise self.fail(at("approve_before"),
                            f"rule {name!r}: approve_before must be seconds, 0 or more")
        drain_before, deadline_margin, max_unavailable, group = self.timing_and_budget(
            raw, index, name, approve)
        prepare, recover = hook("prepare"), hook("recover")
        if run_as is not None and prepare is None and recover is None:
            raise self.fail(at("run_as"), f"rule {name!r}: run_as names who runs its hooks, "
                                          "and it has none (prepare, recover)")
        if approve == "after-prepare" and prepare is None:
            raise self.fail(at("approve"), f"rule {name!r}: approve = \"after-prepare\" "
                                           "needs a prepare hook")
        if approve == "before-not-before" and "approve_before" not in raw:
            raise self.fail(at("approve"), f"rule {name!r}: approve = \"before-not-before\" "
                                           "needs approve_before (seconds)")
        notify = flag("notify")
        rule = Rule(name=name, event_types=choice("event_type", EVENT_TYPES),
                    event_sources=choice("event_source", EVENT_SOURCES),
                    this_vm=flag("this_vm"), other_vms=flag("other_vms"),
                    min_duration=count("min_duration"), max_duration=count("max_duration"),
                    not_before_within=within, resource=resource, notify=bool(notify),
                    prepare=prepare, approve=approve, approve_before=float(approve_before),
                    recover=recover, drain_before=drain_before,
                    deadline_margin=deadline_margin, max_unavailable=max_unavailable,
                    group=group, run_as=run_as)
        if rule.min_duration is not None and rule.max_duration is not None \
                and rule.min_duration > rule.max_duration:
            raise self.fail(at("max_duration"),
                            f"rule {name!r}: max_duration is below min_duration")
        return rule

    def timing_and_budget(self, raw: Mapping[str, Any], index: int, name: str, approve: str
                          ) -> tuple[float | None, float, int | None, str | None]:
        """``drain_before``, ``deadline_margin``, ``max_unavailable`` and ``group``, checked
        together: a budget names its group, and holds back only approvals."""
        def at(key: str) -> int | None:
            return self.lines.key(key, "rule", index)

        def seconds(key: str, default: float | None) -> float | None:
            value = raw.get(key, default)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0 <= value <= MAX_TIMEOUT:
                raise self.fail(at(key), f"rule {name!r}: {key} must be a number of "
                                         f"seconds from 0 to {MAX_TIMEOUT:g}")
            return float(value)

        drain_before = seconds("drain_before", None)
        margin = seconds("deadline_margin", DEFAULT_DEADLINE_MARGIN)
        assert margin is not None
        budget, group = raw.get("max_unavailable"), raw.get("group")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                                   or budget < 1):
            raise self.fail(at("max_unavailable"), f"rule {name!r}: max_unavailable must be "
                                                   "a whole number of VMs, 1 or more")
        if group is not None and group not in BUDGET_GROUPS:
            raise self.fail(at("group"), f"rule {name!r}: group must be one of "
                                         f"{', '.join(BUDGET_GROUPS)}")
        if (budget is None) != (group is None):
            given, missing = ("max_unavailable", "group") if group is None \
                else ("group", "max_unavailable")
            raise self.fail(at(given), f"rule {name!r}: {given} needs {missing} (a budget "
                                       "is a number of VMs of a group)")
        if budget is not None and approve == "never":
            raise self.fail(at("max_unavailable"), f"rule {name!r}: max_unavailable holds "
                                                   "back approvals, and the rule approves never")
        return drain_before, margin, budget, group
