"""What `--against` takes from a line of the copy, and what it refuses to: lines written by
setui's own forwarder from records of a real store, then bent as an attacker would."""

from __future__ import annotations

import json
from pathlib import Path

from setui.store import AuditRecord, Store
from setui.store.against import compare
from setui.system.auditforward import fields, rfc5424
from tests.support.store_helpers import entry


def records(tmp_path: Path, *users: str) -> list[AuditRecord]:
    with Store.open_dir(tmp_path / "-".join(users)) as store:
        for user in users:
            store.audit_log.append(entry(user=user))
        return store.audit_log.records(oldest_first=True)


def line(record: AuditRecord) -> str:
    return rfc5424(record.to_json()).decode()


def test_many_versions_of_one_record_are_one_finding_shown_in_part(tmp_path: Path) -> None:
    genuine = records(tmp_path, "alice")[0]
    forged = [line(records(tmp_path, f"mallory{i}")[0]) for i in range(12)]
    result = compare([genuine], [line(genuine), *forged])
    assert not result.ok and result.checked == 1 and len(result.differences) == 1
    versions = result.differences[0].versions
    assert len(versions) == 12 and versions[-2] == "and 3 more"
    assert versions[-1] == "the log matches line 1"


def test_bent_elements_are_not_records(tmp_path: Path) -> None:
    genuine = records(tmp_path, "alice")[0]
    text = line(genuine)
    bent = [
        text.replace('seq="1"', 'seq="\u0661"'),  # an Arabic-Indic one
        text.replace('seq="1"', 'seq="1" seq="1"'),  # a name twice
        text.replace('action="', 'action="]'),  # an unescaped ]
        text.replace('action="', 'action="x" "'),  # a stray quote
        text[:text.index(' hash="')],  # cut short
        text[text.index("] setui audit record") + 2:],  # the message alone
    ]
    result = compare([genuine], bent)
    assert result.checked == 0 and result.unreadable == len(bent)


def test_a_journal_entry_says_who_sent_it(tmp_path: Path) -> None:
    genuine = records(tmp_path, "alice")[0]
    forged = records(tmp_path, "mallory")[0]
    entries = [{**fields(r.to_json()), "_UID": uid, "_COMM": comm}
               for r, uid, comm in ((genuine, "0", "setui"), (forged, "1000", "python3"))]
    result = compare([genuine], [json.dumps(e) for e in entries])
    shown = result.differences[0].versions
    assert shown[0].endswith("(sent by uid 0, command setui)")
    assert shown[1].endswith("(sent by uid 1000, command python3)")
