"""A crash is a hole at once: a real agent against the emulator, killed with SIGKILL,
leaves a hole from its session's last beat that every reader shows right away, with no
agent running and after a new one started on the same store (store.sessions: an agent's
session whose process no longer holds the store's lock is over at its last beat), well
within the 2.5 beats a session counts as running by its beats alone: a postmortem
written right after a crash is true."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from setui.core.model import parse_iso
from setui.emulator.server import Emulator
from setui.store import NothingRecorded, Store
from setui.store.records import RecorderSpan
from tests.support.agent_helpers import agent_env, more_polls, start_agent
from tests.support.children import SETUI, wait_until
from tests.support.waiting import PATIENCE

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="the kernel's list of locks is Linux's")]


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    return agent_env(tmp_path, SETUI_SOCKET=str(tmp_path / "run" / "api.sock"))


def _sessions(tmp_path: Path, endpoint: str) -> list[RecorderSpan]:
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        return store.sessions.spans(endpoint=endpoint)


def _first_seen(tmp_path: Path) -> datetime | None:
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        newest = store.history.incarnations(limit=1)
    return newest[0].first_seen if newest else None


def _last_seen(tmp_path: Path) -> datetime:
    with Store.open_dir(tmp_path / "data", readonly=True) as store:
        return store.history.incarnations(limit=1)[0].last_seen


def _setui(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``setui ARGS`` as root. Attached (no --standalone), its own data directory is one
    that holds nothing: what it shows came through the agent's API."""
    env = _env(tmp_path)
    if "--standalone" not in args:
        env["SETUI_DATA_DIR"] = str(tmp_path / "nothing-here")
    done = subprocess.run([*SETUI, *args], capture_output=True, text=True, timeout=120,
                          env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done


def _time(text: str) -> datetime:
    moment = parse_iso(text)
    assert moment is not None, text
    return moment


def _history_holes(tmp_path: Path, *how: str) -> list[tuple[datetime, datetime, bool]]:
    done = _setui(tmp_path, "history", *how, "--json", "--limit", "100")
    items: list[dict[str, Any]] = [json.loads(line) for line in done.stdout.splitlines()]
    return [(_time(i["not_recording_from"]), _time(i["not_recording_until"]), i["open"])
            for i in items if "not_recording_from" in i]


def _report_holes(tmp_path: Path, *how: str) -> list[tuple[datetime, datetime, bool]]:
    done = _setui(tmp_path, "report", *how, "--format", "json")
    return [(_time(h["from"]), _time(h["to"]), h["open"])
            for h in json.loads(done.stdout)["holes"]]


def test_a_killed_agent_leaves_a_hole_from_its_last_beat_at_once(
        tmp_path: Path, emulator: Emulator) -> None:
    env = _env(tmp_path)
    proc, _ = start_agent(emulator.url, tmp_path, env=env)
    try:
        # Its session has begun: the start is its first answer, the one the first
        # incarnation was stored with.
        def begun() -> bool:
            try:
                seen = _first_seen(tmp_path)
                return seen is not None and [
                    s.started for s in _sessions(tmp_path, emulator.url)] == [seen]
            except NothingRecorded:
                return False

        wait_until(begun, PATIENCE, "the agent's session to begin with its first answer")
        more_polls(emulator)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    [dead] = _sessions(tmp_path, emulator.url)
    assert dead.stopped is None and dead.command == "setui agent", dead
    # The record reaches the last beat (or a later sighting of the document, if any).
    last = max(dead.last_beat, _last_seen(tmp_path))
    # A hole under a second is none; the record's clock is the emulator's (its Date, to
    # the second, is how readers restate this machine's): a few seconds of it since.
    wait_until(lambda: emulator.clock() >= (last + timedelta(seconds=3)).timestamp(),
               PATIENCE, "three seconds of the emulator's clock after the last beat")

    # (a) No agent runs: root reads the store itself, and the hole is there at once,
    # open, from the dead session's last beat.
    for holes in (_history_holes(tmp_path, "--standalone"),
                  _report_holes(tmp_path, "--standalone")):
        assert [(start, is_open) for start, _, is_open in holes] == [(last, True)], holes

    # (b) The document changes while no agent runs (a document seen on both sides of the
    # gap would cover it: it was there all along), and a new agent starts on the same
    # store: the hole runs from the dead session's last beat to the new session's start,
    # read through the new agent's API and standalone alike.
    document = emulator.document()
    emulator.pin_document({**document,
                           "DocumentIncarnation": document["DocumentIncarnation"] + 1})
    proc, _ = start_agent(emulator.url, tmp_path, env=env)
    try:
        wait_until(lambda: len(_sessions(tmp_path, emulator.url)) == 2, PATIENCE,
                   "the new agent's session")
        more_polls(emulator)

        def hole_to_the_new_start() -> bool:
            _, new = _sessions(tmp_path, emulator.url)
            want = [(last, new.started, False)]
            return all(holes == want for holes in (
                _history_holes(tmp_path), _history_holes(tmp_path, "--standalone"),
                _report_holes(tmp_path), _report_holes(tmp_path, "--standalone")))

        wait_until(hole_to_the_new_start, PATIENCE,
                   "the hole from the dead session's last beat to the new one's start")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
