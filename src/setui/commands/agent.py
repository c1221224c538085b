"""``setui agent``: ``setui watch`` that also acts, by a policy, and is watched itself.

It records the history like ``setui watch`` (it can replace it in the systemd unit),
prints the same change lines plus one line per thing the agent decides or does, serves
Prometheus metrics and/or writes a node_exporter textfile, and sends notifications. The
policy is checked whole before anything starts; without one it only observes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from setui import __version__
from setui.commands.common import EXIT_FAILED, EXIT_USAGE, when
from setui.commands.watch import change_record, connection_record, format_record
from setui.core.textsafe import printable
from setui.core.timefmt import iso
from setui.core.vmid import vm_id_of
from setui.session import ThisVm, run_until_stopped, until_answered
from setui.settings.config import Config
from setui.system.logs import configure as configure_logs
from setui.system.systemd import ERR, INFO, NOTICE, WARNING, Notifier, for_journal, under_journal

if TYPE_CHECKING:
    from setui.agent.agent import Agent
    from setui.agent.metrics import AgentMetrics
    from setui.agent.policy import Policy
    from setui.api.serve import Api
    from setui.core.client import ImdsClient
    from setui.fleet.prometheus import PrometheusAuth

__all__ = ["add_arguments", "agent_line", "run"]

EXTRA_HINT = ("setui agent needs the optional extra: pip install 'setui[agent]' "
              "(apprise for notifications, prometheus_client for metrics)")
TEXTFILE_EVERY = 15.0  # seconds between textfile rewrites when nothing changed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", metavar="FILE", type=Path, default=None,
                        help="the policy (TOML); default: `policy` in the config file, else "
                             "policy.toml beside the config file; without one the agent "
                             "only observes")
    parser.add_argument("--dry-run", action="store_true",
                        help="decide and say what would be done; post nothing, run no hook, "
                             "send nothing")
    parser.add_argument("--metrics", metavar="ADDR:PORT", default=None,
                        help="serve Prometheus metrics there (PORT alone: on 127.0.0.1; "
                             "port 0 picks a free one); off by default")
    parser.add_argument("--health", metavar="ADDR:PORT", default=None,
                        help="serve the load balancer's probe there: /readyz (503 around "
                             "this VM's events, as the policy says) and /healthz (503 when "
                             "IMDS does not answer); PORT alone: on 127.0.0.1")
    parser.add_argument("--metrics-file", metavar="PATH", type=Path, default=None,
                        help="also write the metrics to this node_exporter textfile (*.prom)")
    parser.add_argument("--stop-grace", metavar="SECONDS", type=float, default=None,
                        help="how long a clean stop (SIGTERM) waits for a hook or an "
                             "approval under way before it interrupts it (default 20; keep "
                             "it under the unit's TimeoutStopSec)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per line: watch's change records, and agent "
                             "records with the key \"agent\"")


def agent_line(record: dict[str, Any], *, with_time: bool = True) -> str:
    """An agent record as one human line; every value made printable."""
    parts = [when(record["time"])] if with_time else []
    parts.append("agent")
    parts.append(f"{printable(record['agent'], 20):<11}")
    if record["event_id"]:
        parts.append(printable(record["event_id"], 64))
    if record["rule"]:
        parts.append(f"rule {printable(record['rule'], 64)}")
    if record["step"]:
        parts.append(printable(record["step"], 20))
    if record["detail"]:
        parts.append(f"- {printable(record['detail'], 400)}")
    return "  ".join(parts)


class _Output:
    def __init__(self, out: IO[str], as_json: bool, journal: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.journal = journal

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def change(self, record: dict[str, Any]) -> None:
        if self.as_json:
            self._write(json.dumps(record, ensure_ascii=True))
        elif self.journal:
            self._write(for_journal(format_record(record, with_time=False), INFO))
        else:
            self._write(format_record(record))

    def agent(self, record: dict[str, Any]) -> None:
        if self.as_json:
            self._write(json.dumps({**record, "time": iso(record["time"])}, ensure_ascii=True))
        elif self.journal:
            priority = WARNING if record["agent"] in ("failed", "unknown", "interrupted",
                                                      "error", "unmatched") else NOTICE
            self._write(for_journal(agent_line(record, with_time=False), priority))
        else:
            self._write(agent_line(record))


def _say(err: IO[str], line: str, journal: bool, priority: int) -> None:
    err.write((for_journal(line, priority) if journal else line) + "\n")
    err.flush()


async def agent(config: Config, policy: Policy, *, dry_run: bool,
                metrics_at: tuple[str, int] | None, metrics_file: Path | None,
                as_json: bool, out: IO[str], err: IO[str], policy_path: Path | None = None,
                config_file: Path | None = None, stop_grace: float | None = None,
                health_at: tuple[str, int] | None = None,
                budget_from: tuple[str, PrometheusAuth] | None = None) -> int:
    from setui.agent.agent import STOP_GRACE, Agent
    from setui.agent.budget import TIMEOUT, BudgetClient
    from setui.agent.impact import ImpactWatch
    from setui.agent.lock import AgentLock, Held, LockError
    from setui.agent.metrics import AgentMetrics
    from setui.agent.notice import NoticeWatch
    from setui.agent.notify import Notifier as Sender
    from setui.agent.probe import Probe
    from setui.api.serve import open_socket, start_api
    from setui.api.socketfile import SocketError, check_socket, choose_socket
    from setui.core.clock import utc_now
    from setui.fleet.prometheus import PrometheusClient
    from setui.monitor import Monitor
    from setui.session import make_client, open_store
    from setui.store import default_data_dir
    from setui.store.agent import AgentLog

    systemd = Notifier.from_env()
    journal = under_journal(err)
    configure_logs(err, journal)  # the API's complaints, the poller's own errors
    output = _Output(out, as_json, under_journal(out))
    data_dir = config.data_dir or default_data_dir()
    socket_path, no_socket = choose_socket(config.socket)
    # The store first, before anything is served or sent: an agent that cannot lock,
    # make or open it does not run (it would poll, serve and notify beside the one that
    # does, recording nothing). A socket it could not serve stops it before it writes.
    try:
        lock = AgentLock.take(data_dir, since=utc_now(), socket=socket_path)
    except (Held, LockError) as exc:
        what = "" if isinstance(exc, Held) else "cannot take the agent's lock: "
        _say(err, f"setui agent: {what}{exc}; not running", journal, ERR)
        return EXIT_USAGE
    try:
        if socket_path is not None:
            await asyncio.to_thread(check_socket, socket_path)
    except SocketError as exc:
        _say(err, f"setui agent: {exc}", journal, ERR)
        lock.release()
        return EXIT_USAGE
    for made in lock.made_private:
        _say(err, f"setui agent: made the store private: {made}", journal, NOTICE)
    for opener in lock.still_open:
        _say(err, f"setui agent: {opener} from before it was private: it may still lock "
                  "it and stall the agent; stop that process", journal, WARNING)
    store, problem = open_store(config)
    if store is None:
        lock.release()
        _say(err, f"setui agent: cannot open the store: {problem}; not running", journal,
             ERR)
        return EXIT_USAGE
    try:
        bound = await asyncio.to_thread(open_socket, socket_path, data_dir) \
            if socket_path is not None else None
    except SocketError as exc:
        _say(err, f"setui agent: {exc}", journal, ERR)
        store.close()
        lock.release()
        return EXIT_USAGE
    if no_socket:
        _say(err, f"setui agent: {no_socket}", journal, NOTICE)
    client = make_client(config)
    metrics: AgentMetrics | None = None
    probe: Probe | None = None
    budget = BudgetClient(PrometheusClient(*budget_from, timeout=TIMEOUT)) \
        if budget_from is not None else None
    api: Api | None = None
    this_vm = ThisVm(config.vm_name)
    try:
        await this_vm.learn(client, tries=1)  # then again off the polling's path
        vm_name = this_vm.name
        if this_vm.source == "IMDS":
            _say(err, f"setui agent: {this_vm}", journal, INFO)
        # The rest of its identity, for the metrics' labels and its vmId (what claims and
        # holds are keyed by): asked again later if need be.
        compute = await client.compute()
        metrics = AgentMetrics(vm_name=vm_name, compute=compute, version=__version__)
        if metrics_at is not None and not await _listen(
                metrics.serve, metrics_at, "metrics", "/metrics", err, journal):
            return EXIT_FAILED

        def store_problem(brief: str | None, full: str | None) -> None:
            if full is not None:
                _say(err, f"setui agent: cannot record history: {full}", journal, ERR)
                systemd.status(f"NOT recording history: {brief}")
                worker.error("recording the history", full, quiet=True)
            else:
                _say(err, "setui agent: recording history again", journal, NOTICE)
                worker.fine("recording the history")

        monitor = Monitor(client, endpoint=config.endpoint, interval=config.interval,
                          store=store, vm_name=vm_name, command="setui agent",
                          on_store_problem=store_problem,
                          # Quiet polls while nothing waits for an unchanged answer.
                          quiet_ok=lambda: worker.idle and impacts.idle)
        metrics.count_answers(monitor.poller.answers, monitor.poller.newest_answer)
        sender = None
        if policy.urls and not dry_run:
            log = AgentLog(store, config.endpoint, vm_id=vm_id_of(compute)) \
                if store is not None else None
            counted = metrics
            sender = Sender(policy.urls, log, retries=policy.retries,
                            on_outcome=lambda m, sent, error: counted.count_notification(sent))
        worker = Agent(policy=policy, monitor=monitor, client=client,
                       store=store, vm_id=vm_id_of(compute),
                       vm_name=vm_name, dry_run=dry_run, say=output.agent, notifier=sender,
                       metrics=metrics, budget=budget)
        if health_at is not None:
            probe = Probe(worker)
            if not await _listen(probe.serve, health_at, "health probe",
                                 "/readyz (and /healthz)", err, journal):
                return EXIT_FAILED
        # What events did to this VM (a heartbeat, boots) and the notice they gave.
        impacts = ImpactWatch(worker, metrics=metrics)
        notices = NoticeWatch(worker, metrics=metrics, terminate=config.terminate_notice)
        learning = asyncio.ensure_future(_learn_identity(
            this_vm, compute, client, worker, metrics,
            lambda line, priority: _say(err, line, journal, priority), systemd))
        output.change(connection_record(monitor.health(), monitor.now()))
        systemd.ready(f"agent: {len(policy.rules)} rule(s){' (dry run)' if dry_run else ''}"
                      + ("" if vm_name else "; waiting for this VM's name"))
        pinger = asyncio.ensure_future(systemd.keep_alive())
        await worker.start()
        impacts.start()
        # What the event loop itself reports (a server that cannot accept, a callback that
        # failed) joins the agent's errors: once a minute with a count, not a traceback
        # each time.
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: worker.error("the event loop", _loop_error(context)))
        if bound is not None:
            api = await start_api(bound, worker, config=config, config_file=config_file,
                                  policy_path=policy_path, store_problem=problem,
                                  since=lock.since,
                                  say=lambda line: _say(err, line, journal, NOTICE))
            bound = None  # the API owns it now
        updates = monitor.updates()
        last_state = monitor.health().state
        written_at = 0.0
        try:
            async for update in updates:
                result = update.result
                if result.health.state != last_state:
                    last_state = result.health.state
                    output.change(connection_record(result.health, monitor.now()))
                    systemd.status(f"connection {last_state.value}")
                for change in result.changes:
                    output.change(change_record(change, this_vm.name))
                await worker.handle(update)
                notices.handle(update)
                await impacts.handle(update)
                if api is not None:
                    api.publish(update)
                if metrics_file is not None and (
                        result.changes or time.monotonic() - written_at >= TEXTFILE_EVERY):
                    written_at = time.monotonic()
                    await _write_textfile(metrics, metrics_file, worker)
        finally:
            impacts.stop()
            pinger.cancel()
            learning.cancel()
            systemd.stopping()
            grace = STOP_GRACE if stop_grace is None else stop_grace
            if api is not None:  # each client hears what the stop waits for
                await api.aclose(worker.stop_words(grace))
            await worker.stop(grace)
            await updates.aclose()
            await monitor.aclose()
            if metrics_file is not None:  # the last state, not one up to 15 s old
                await _write_textfile(metrics, metrics_file, worker)
            systemd.close()
    finally:
        if bound is not None:  # made, never served
            bound.remove()
            bound.sock.close()
        if metrics is not None:
            await metrics.aclose()
        if probe is not None:
            await probe.aclose()
        if budget is not None:
            budget.close()
        await client.aclose()
        if store is not None:
            store.close()
        lock.release()
    return 0


async def _listen(serve: Callable[[str, int], Awaitable[tuple[str, int]]],
                  at: tuple[str, int], what: str, paths: str, err: IO[str], journal: bool
                  ) -> bool:
    """Serve ``what`` at ``at`` and say where (port 0: the one picked); False when it
    cannot listen there (said)."""
    try:
        host, port = await serve(*at)
    except OSError as exc:
        _say(err, f"setui agent: cannot serve {what} at {at[0]}:{at[1]}: "
                  f"{exc.strerror or exc}", journal, ERR)
        return False
    shown = f"[{host}]" if ":" in host else host
    _say(err, f"setui agent: {what} at http://{shown}:{port}{paths}", journal, INFO)
    return True


async def _learn_identity(this_vm: ThisVm, compute: dict[str, str] | None,
                          client: ImdsClient, worker: Agent, metrics: AgentMetrics,
                          say: Callable[[str, int], None], systemd: Notifier) -> None:
    """Off the polling's path: this VM's name until IMDS gives it (the rules that name this
    VM wait for it), then the rest of its identity for the metrics' labels and its vmId
    for the claims and holds, if the first question did not get it (``compute``)."""
    if this_vm.name is None:
        say("setui agent: this VM's name is not known yet (IMDS did not give it): rules "
            "that name this VM wait, and no step starts, until it is; asking again", WARNING)
        systemd.status("waiting for this VM's name")
        name = await this_vm.learn(client)
        assert name is not None
        worker.name_learned(name)
        say(f"setui agent: {this_vm}", NOTICE)
        systemd.status(f"this VM is {name}")
    if compute is None:
        compute = await until_answered(client.compute)
        vm_id = vm_id_of(compute)
        if vm_id is not None:
            worker.id_learned(vm_id)
    metrics.set_identity(this_vm.name, compute)


async def _write_textfile(metrics: AgentMetrics, path: Path, worker: Agent) -> None:
    try:
        await asyncio.to_thread(metrics.write_textfile, path)
    except OSError as exc:
        worker.error("writing the metrics textfile",
                     f"cannot write {printable(str(path))}: {exc.strerror or exc}")
    else:
        worker.fine("writing the metrics textfile")


def _loop_error(context: dict[str, Any]) -> str:
    """What the event loop reports, in one line: its message and the exception's."""
    exc = context.get("exception")
    text = str(context.get("message") or "unexpected error")
    return f"{text}: {type(exc).__name__}: {exc}" if exc is not None else text


def _config_refused(args: argparse.Namespace, err: IO[str]) -> bool:
    """Whether the config file read could have been written by someone but root or this
    agent's user (said on ``err``): it decides who may approve, where the store, the
    socket and IMDS are and where audit records go. A dry run is held to it too: it
    still serves the socket and writes the store the file names."""
    from setui.agent.trust import untrusted
    from setui.settings.config import ConfigError, config_source

    try:
        file = config_source(getattr(args, "config", None))
    except ConfigError as exc:
        print(f"setui agent: {exc}", file=err)
        return True
    problem = untrusted(file.absolute()) if file is not None else None
    if problem is None:
        return False
    print(f"setui agent: refusing to start: the config file: {printable(problem, 600)}; "
          "make it and each directory above it root's, not writable by group or others",
          file=err)
    return True


def _load(args: argparse.Namespace, config: Config, err: IO[str]
          ) -> tuple[Policy, Path | None] | None:
    """The policy, checked whole, with every file it depends on written only by root or
    this agent's user, and where it was read (None: there was none); None when it is
    refused (said on ``err``). A policy that was named
    must exist; the default one (beside the config file) may be absent: then the agent
    only observes. (The config file that names it was checked before: _config_refused.)"""
    from setui.agent.policy import Policy, PolicyError, default_policy, load_policy
    from setui.agent.trust import untrusted, untrusted_command
    from setui.settings.config import default_config_path

    config_file = Path(getattr(args, "config", None) or default_config_path()).absolute()
    path = args.policy if args.policy is not None else config.policy
    if path is None:
        path = default_policy(config_file)
        if not path.exists() and not path.is_symlink():
            print(f"setui agent: no policy ({printable(str(path), 300)} does not exist): "
                  "observing only", file=err)
            return Policy(), None
    path = Path(path).expanduser().absolute()

    def refuse(problems: list[str]) -> bool:
        """Say why each file could be someone else's; True when the run must stop."""
        for problem in problems:
            head = "a real run would refuse to start" if args.dry_run else \
                "refusing to start"
            print(f"setui agent: {head}: {printable(problem, 600)}", file=err)
        return bool(problems) and not args.dry_run

    # A policy that is not there is said by the reading below, in plainer words.
    policy_problem = untrusted(path) if path.exists() else None
    if refuse([f"the policy: {policy_problem}"] if policy_problem is not None else []):
        return None
    try:
        policy = load_policy(path)
    except PolicyError as exc:
        print(f"setui agent: policy refused: {printable(str(exc), 600)}", file=err)
        return None
    # Each hook's program and the files its arguments name (a script behind an
    # interpreter), at the hook's line in the policy.
    if refuse([str(PolicyError(str(path), hook.line,
                               f"the {step} hook of rule {rule.name}: {problem}"))
               for rule, step, hook in policy.hooks()
               if (problem := untrusted_command(hook.argv)) is not None]):
        return None
    print(f"setui agent: policy {printable(str(path), 300)}: {_rules_said(policy)}", file=err)
    for note in policy.notes:
        print(f"setui agent: note: {note}", file=err)
    return policy, path


def _rules_said(policy: Policy) -> str:
    """The policy's rules in a few words: how many and their names, in order."""
    if not policy.rules:
        return "no rules: observing only"
    count = len(policy.rules)
    names = printable(", ".join(rule.name for rule in policy.rules), 300)
    return f"{count} rule{'s' if count != 1 else ''} ({names})" + \
        ("" if policy.acts else "; none acts: watching and telling only")


def _budget_prometheus(policy: Policy, config: Config, *, metrics: bool, err: IO[str]
                       ) -> tuple[str, PrometheusAuth] | None:
    """The Prometheus a disruption budget is counted through (``setui fleet``'s settings),
    checked; None when it cannot be (said on ``err``)."""
    from setui.fleet.prometheus import auth_from, check_credentials_safe, check_prometheus_url

    rules = ", ".join(rule.name for rule in policy.budgeted)
    head = f"setui agent: rule {rules} says max_unavailable"
    if not config.prometheus:
        print(f"{head}: which Prometheus counts the group? prometheus in the config file, "
              "or SETUI_PROMETHEUS_URL (the one that scrapes the group's agents)", file=err)
        return None
    if not metrics:
        print(f"{head}: the group's other agents see this one through its metrics: give "
              "--metrics ADDR:PORT, scraped by that Prometheus", file=err)
        return None
    auth = auth_from(config)
    try:
        url = check_prometheus_url(config.prometheus)
        check_credentials_safe(url, auth)
    except ValueError as exc:
        print(f"setui agent: prometheus: {exc}", file=err)
        return None
    return url, auth


def run(args: argparse.Namespace) -> int:
    import importlib.util

    try:  # found, not imported: apprise loads only when there is something to send
        missing = [m for m in ("apprise", "prometheus_client")
                   if importlib.util.find_spec(m) is None]
    except (ImportError, ValueError):
        missing = ["apprise"]
    if missing:
        print(f"setui agent: {EXTRA_HINT}", file=sys.stderr)
        return EXIT_USAGE
    from setui.agent.metrics import parse_listen

    config: Config = args.config_resolved
    if getattr(args, "standalone", None):
        # A config file's `standalone = true` is the front ends' (they share the file).
        print("setui agent: --standalone is for the other commands: the agent is what they "
              "attach to", file=sys.stderr)
        return EXIT_USAGE
    if _config_refused(args, sys.stderr):
        return EXIT_USAGE
    loaded = _load(args, config, sys.stderr)
    if loaded is None:
        return EXIT_USAGE
    policy, policy_path = loaded
    if args.stop_grace is not None and not (0 <= args.stop_grace <= 3600):
        print("setui agent: --stop-grace must be seconds from 0 to 3600", file=sys.stderr)
        return EXIT_USAGE
    listen: dict[str, tuple[str, int] | None] = {"metrics": None, "health": None}
    for option in listen:
        given = getattr(args, option)
        if given is not None:
            try:
                listen[option] = parse_listen(given)
            except ValueError as exc:
                print(f"setui agent: --{option}: {exc}", file=sys.stderr)
                return EXIT_USAGE
    budget_from = _budget_prometheus(policy, config, metrics=args.metrics is not None,
                                     err=sys.stderr) if policy.budgeted else None
    if policy.budgeted and budget_from is None:
        return EXIT_USAGE
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")
    try:
        return run_until_stopped(agent(
            config, policy, dry_run=args.dry_run, metrics_at=listen["metrics"],
            health_at=listen["health"], budget_from=budget_from,
            metrics_file=args.metrics_file, as_json=args.json, out=sys.stdout,
            err=sys.stderr, policy_path=policy_path,
            config_file=getattr(args, "config", None), stop_grace=args.stop_grace))
    except KeyboardInterrupt:
        return 0
