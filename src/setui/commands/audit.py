"""``setui audit``: list the audit log, verify its hash chain, export it as JSON lines.

``verify`` exits 1 and names the first record altered, inserted or removed (see
``setui.store.audit`` for exactly what can and cannot be found); it prints the head hash
too, so an auditor can note it elsewhere and notice a rewritten chain later. A missing,
unreadable or lagging head witness file is a warning, not tampering: exit 0. ``export``
writes every field, hashes included, oldest first: enough to check the chain without
setui (see ``setui.store.audit`` for the hash).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

from setui.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    READS_THE_AGENT,
    add_json_option,
    positive_int,
    read_record,
    when,
    would_overwrite,
)
from setui.core.textsafe import printable

if TYPE_CHECKING:  # sqlite3 loads only when a command runs, not for `setui --version`
    from setui.store import AuditRecord, VerifyResult
    from setui.store.reading import Record

__all__ = ["add_arguments", "describe", "run", "who"]


# What the chain proves, and what it cannot: said the same in --help and by verify (one
# wording; docs/audit.md says it at length).
PROVES = (
    "What the hash chain proves: accidental damage, records removed from the end (against "
    "the witness file beside the database), and edits by anyone who cannot write the data "
    "directory are detected: in the agent's store (/var/lib/setui), everyone but root, "
    "since group setui only reads it. Someone who can write the data directory can rewrite the "
    "whole log, chain, head and witness included, and verify will say ok: only a copy that "
    "left the VM (the forward to the journal, syslog or a collector, or an export kept "
    "elsewhere) proves otherwise, with `setui audit verify --against COPY`.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = f"{READS_THE_AGENT} {PROVES}"
    parser.add_argument("--limit", type=positive_int, default=None, metavar="N",
                        help="only the N newest records")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per line, with stable keys")
    sub = parser.add_subparsers(dest="audit_command", metavar="{verify,export}")
    verify = sub.add_parser("verify", help="recompute the hash chain; exit 1 if it is broken",
                            description="Recompute the audit log's hash chain and report "
                                        "the first record altered, inserted or removed; "
                                        "with --against, also name every record that "
                                        "differs from a copy kept off this VM.",
                            epilog=PROVES)
    verify.add_argument("--against", metavar="FILE", type=Path, default=None,
                        help="a copy of the log from off this VM, JSON lines (`audit "
                             "export`, `journalctl -o json`) or lines holding setui's "
                             "[setui@32473 ...] element (a collector's, syslog's): name "
                             "every record that differs (see docs/audit.md)")
    add_json_option(verify)
    export = sub.add_parser("export", help="write the whole log as JSON lines",
                            description="Write every audit record, oldest first, as one "
                                        "JSON object per line (- for standard output), "
                                        "with or without --json.")
    export.add_argument("file", metavar="FILE", help="where to write; - for standard output")
    export.add_argument("--force", action="store_true",
                        help="replace FILE if it exists (without it, an existing file is "
                             "left alone and the export refused)")
    # Accepted rather than refused: whoever passes it asks for JSON and gets it, and a
    # script that passes --json to every command keeps working. The help says so.
    export.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="changes nothing: the export is always JSON lines")


def run(args: argparse.Namespace) -> int:
    return audit_command(args, out=sys.stdout, err=sys.stderr)


def audit_command(args: argparse.Namespace, *, out: IO[str], err: IO[str]) -> int:
    from setui.store.errors import RecordError

    command = getattr(args, "audit_command", None)
    try:
        store = read_record(args, err, "setui audit")
    except RecordError as exc:
        err.write(f"setui audit: {exc}\n")
        return EXIT_FAILED
    try:
        if store is None:
            return _empty(command, args, out, err)
        with contextlib.closing(store):
            if command == "verify":
                code = _verify(store.verify_audit(), bool(getattr(args, "json", False)), out,
                               store.unforwarded())
                against = getattr(args, "against", None)
                if against is not None:
                    code = max(code, _against(store, against, out, err))
                return code
            if command == "export":
                if would_overwrite(args, err, "setui audit export"):
                    return EXIT_FAILED
                return _export(store.audit(oldest_first=True), store.verify_audit(),
                               args.file, out, err)
            return _list(store.audit(limit=args.limit), store.verify_audit(),
                         bool(getattr(args, "json", False)), out, store.unforwarded())
    except RecordError as exc:
        err.write(f"setui audit: {exc}\n")
        return EXIT_FAILED


def _empty(command: str | None, args: argparse.Namespace, out: IO[str],
           err: IO[str]) -> int:
    from setui.store import VerifyResult

    if command == "verify":
        if getattr(args, "against", None) is not None:
            err.write("setui audit verify: there is no audit log here to check against "
                      f"{printable(str(args.against), 200)}: nothing was recorded\n")
            return EXIT_FAILED
        return _verify(VerifyResult(ok=True, count=0), bool(getattr(args, "json", False)), out)
    if command == "export":
        if would_overwrite(args, err, "setui audit export"):
            return EXIT_FAILED
        return _export([], VerifyResult(ok=True, count=0), args.file, out, err)
    if not getattr(args, "json", False):
        out.write("The audit log is empty: no approval has been attempted here yet.\n")
    return EXIT_OK


# -- words -----------------------------------------------------------------------------------
def who(record: AuditRecord) -> str:
    """``alice from 10.0.0.5 on vm-web-0``, as the dialog showed it, safe to print."""
    from setui.system.actor import describe_actor

    details = record.details if isinstance(record.details, dict) else {}
    safe: dict[str, object] = {
        key: printable(str(value), 64) for key, value in details.items()
        if key in ("sudo_user", "login_user", "session") and value is not None}
    if details.get("ssh_claimed"):
        safe["ssh_claimed"] = True
    return describe_actor(printable(record.user, 64),
                          printable(record.ssh_client, 64) if record.ssh_client else None,
                          printable(record.host, 64), safe)


def describe(record: AuditRecord) -> str:
    """What the record says happened, in words."""
    from setui.store import APPROVE_ATTEMPT, APPROVE_OUTCOME, DISMISSALS, REFUSED, UNKNOWN

    if record.action == APPROVE_ATTEMPT:
        text = "approval sent"
        if record.outcome_unknown:
            text += "; outcome unknown (setui stopped before recording it)"
        return text
    if record.action == APPROVE_OUTCOME:
        latency = "" if record.latency_ms is None else f" in {record.latency_ms:.0f} ms"
        ref = f" (attempt #{record.attempt_seq})" if record.attempt_seq else ""
        if record.result == UNKNOWN:
            said = (record.error or "").removeprefix("outcome unknown: ")
            return f"OUTCOME UNKNOWN: {printable(said, 300)}{ref}"
        if record.error:
            status = f"HTTP {record.status}: " if record.status else ""
            return f"FAILED {status}{printable(record.error, 300)}{latency}{ref}"
        return f"approved, HTTP {record.status}{latency}{ref}"
    if record.action in DISMISSALS:
        return "dismissed by the operator: nothing was sent"
    if record.action == REFUSED:
        return f"refused by setui: {printable(record.error or '', 300)}"
    if record.error:  # the agent's own records say why in it (agent-unmatched)
        return f"{printable(record.action, 40)}: {printable(record.error, 300)}"
    return printable(record.action, 40)


def _event_text(record: AuditRecord) -> str:
    event = record.event or {}
    parts = [printable(str(event.get("EventType") or ""), 20),
             printable(record.event_id or "-", 64)]
    if record.incarnation is not None:
        parts.append(f"#{record.incarnation}")
    return " ".join(p for p in parts if p)


def _chain_line(result: VerifyResult) -> str:
    if result.ok:
        if result.warning:
            return f"chain: {result} (warning: {printable(result.warning, 300)})"
        return f"chain: {result}"
    return f"chain: BROKEN: {printable(result.problem, 300)} (run `setui audit verify`)"


# -- commands --------------------------------------------------------------------------------
def _list(records: list[AuditRecord], result: VerifyResult, as_json: bool,
          out: IO[str], unsent: dict[int, str] | None = None) -> int:
    from setui.store import action_word

    unsent = unsent or {}
    if as_json:
        for record in records:
            data = record.to_json()
            data["outcome_unknown"] = record.outcome_unknown
            data["not_forwarded"] = unsent.get(record.seq)
            out.write(json.dumps(data, ensure_ascii=True) + "\n")
        return EXIT_OK
    if not records:
        out.write("The audit log is empty: no approval has been attempted here yet.\n")
    for record in records:
        mark = "  [NOT FORWARDED]" if record.seq in unsent else ""
        out.write(f"#{record.seq:<5} {when(record.time)}  "
                  f"{printable(action_word(record.action), 20):<16} "
                  f"{_event_text(record)}  {describe(record)}  by {who(record)}{mark}\n")
    out.write(_chain_line(result) + "\n")
    if unsent:
        out.write(_unsent_line(unsent))
    return EXIT_OK if result.ok else EXIT_FAILED


def _unsent_line(unsent: dict[int, str]) -> str:
    """Which records never left the VM, and why (the newest reason): a log with no copy
    elsewhere proves no more than its chain."""
    seqs = sorted(unsent)
    listed = ", ".join(str(s) for s in seqs[:20]) + (", ..." if len(seqs) > 20 else "")
    return (f"not forwarded off this VM: record{'s' if len(seqs) != 1 else ''} {listed} "
            f"({printable(unsent[seqs[-1]], 300)}); setui sends them again with the next "
            "record\n")


def _verify(result: VerifyResult, as_json: bool, out: IO[str],
            unsent: dict[int, str] | None = None) -> int:
    unsent = unsent or {}
    if as_json:
        out.write(json.dumps({
            "ok": result.ok, "count": result.count, "first_bad": result.first_bad,
            "problem": result.problem or None, "head_seq": result.head_seq,
            "head_hash": result.head_hash, "warning": result.warning or None,
            "not_forwarded": {str(seq): why for seq, why in sorted(unsent.items())}}) + "\n")
    elif result.ok:
        out.write(f"{result}\n")
        if result.head_seq is not None:
            out.write(f"head: record {result.head_seq}, sha256 {result.head_hash}\n")
        if result.warning:
            out.write(f"WARNING: {printable(result.warning, 500)}\n")
        if unsent:
            out.write(_unsent_line(unsent))
    else:
        out.write(f"TAMPERED: {printable(result.problem, 500)}\n")
        if result.first_bad is not None:
            out.write(f"Records from {result.first_bad} on cannot be trusted.\n")
    if not as_json:
        out.write("(ok means no accident and no edit by anyone who cannot write the data "
                  "directory; only a copy kept off this VM, checked with --against, proves "
                  "more: see `setui audit --help`)\n")
    return EXIT_OK if result.ok else EXIT_FAILED


# A copy bigger than this is not an audit log of approvals: refuse rather than read it all.
_AGAINST_LIMIT = 256 * 1024 * 1024


def _against(store: Record, path: Path, out: IO[str], err: IO[str]) -> int:
    from setui.store.against import compare

    name = printable(str(path), 200)
    try:
        if not path.is_file():
            raise OSError(0, "not a regular file")
        if path.stat().st_size > _AGAINST_LIMIT:
            raise OSError(0, f"larger than {_AGAINST_LIMIT // 2**20} MB")
        with path.open(encoding="utf-8", errors="replace") as handle:
            result = compare(store.audit(oldest_first=True), handle)
    except OSError as exc:
        err.write(f"setui audit verify: cannot read {name}: {exc.strerror or exc}\n")
        return EXIT_FAILED
    if not result.checked:
        err.write(f"setui audit verify: {name} holds no setui audit record (expected JSON "
                  "lines from `setui audit export` or `journalctl -o json`, or lines holding "
                  "the [setui@32473 ...] element; the message text alone is never read)\n")
        return EXIT_FAILED
    if result.ok:
        out.write(f"against {name}: the {result.checked} records of the copy match the log")
    else:
        out.write(f"against {name}: {len(result.differences)} of the records differ "
                  f"(the copy has {result.checked}):\n")
        for difference in result.differences:
            out.write(f"  {printable(difference.text, 600)}\n")
            for version in difference.versions:
                out.write(f"    {printable(version, 600)}\n")
        out.write("The log was changed after the copy was taken, or the copy is not this "
                  "log's")
    if result.newer:
        out.write(f"; {result.newer} newer record{'s' if result.newer != 1 else ''} "
                  "not in the copy (not checked)")
    out.write("\n")
    if result.unreadable:
        out.write(f"({result.unreadable} line{'s' if result.unreadable != 1 else ''} of the "
                  "copy hold no setui record and were skipped)\n")
    return EXIT_OK if result.ok else EXIT_FAILED


def _export(records: list[AuditRecord], result: VerifyResult, target: str, out: IO[str],
            err: IO[str]) -> int:
    lines = "".join(json.dumps(r.to_json(), ensure_ascii=True) + "\n" for r in records)
    if target == "-":
        out.write(lines)
    else:
        from setui.system.atomicfile import write_atomically

        try:
            # Owner-only, as the log: it names people and the addresses they came from.
            write_atomically(Path(target), lines)
        except OSError as exc:
            err.write(f"setui audit export: cannot write {target}: {exc.strerror or exc}\n")
            return EXIT_FAILED
        err.write(f"exported {len(records)} record{'s' if len(records) != 1 else ''} "
                  f"to {target}\n")
    if not result.ok:
        err.write(f"setui audit export: WARNING: the chain is broken: "
                  f"{printable(result.problem, 300)}\n")
        return EXIT_FAILED
    if result.warning:
        err.write(f"setui audit export: warning: {printable(result.warning, 300)}\n")
    return EXIT_OK


