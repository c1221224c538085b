"""Every test runs with its own data and config directories, never the user's; and a
data directory the tests' children cannot write (``unwritable``); emulators on a manual
clock (``clock``, ``make_emulator``). A test that starts a process is in the slow tier,
or it fails saying so (docs/testing.md)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from setui.emulator.clock import ManualClock
from setui.emulator.scenario import Scenario, load_scenario
from setui.emulator.server import Emulator
from tests.support.permissions import obey_permissions
from tests.support.scripted import scripted

__all__ = ["scripted"]  # the scripted metadata service (tests/support/scripted.py), for every test


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("SETUI_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("SETUI_CONFIG", str(home / "config.toml"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "share"))
    # Audit records never reach this machine's journal or syslog from a test; the tests
    # of forwarding name their own listener.
    monkeypatch.setenv("SETUI_AUDIT_FORWARD", "none")
    for var in ("SETUI_ENDPOINT", "SETUI_API_VERSION", "SETUI_PROMETHEUS_URL", "SETUI_SOCKET",
                "SETUI_PROMETHEUS_TOKEN", "SETUI_PROMETHEUS_USER", "SETUI_PROMETHEUS_PASSWORD",
                "HTTP_PROXY", "HTTPS_PROXY",
                "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


# `make test-fast` runs with --hypothesis-profile=fast: a quarter of each property test's
# examples (tests/support/examples.py), every one of them in `make test`.
settings.register_profile("fast", max_examples=25)


class StartsAProcess(RuntimeError):
    """A test of the fast tier tried to start a process."""


_OUTCOME = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None],
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep whether the test's body passed: the fixture below fails a passing test that
    tried to start a process, and leaves a failing one its own, better, traceback."""
    report = yield
    if report.when == "call":
        item.stash[_OUTCOME] = report.passed
    return report


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest,
                                 monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The tiers' one rule, kept by the suite rather than by memory: a test that starts a
    process (a `setui` command, the agent, Prometheus, a hook) is marked slow. Every
    process goes through ``subprocess.Popen`` (asyncio's too), so a test without the mark
    that starts one fails, in words, even if the code under test swallowed the error."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    tried: list[str] = []

    def refuse(self: subprocess.Popen[Any], args: Any, *more: Any, **kwargs: Any) -> None:
        tried.append(repr(args)[:200])
        raise StartsAProcess(f"{request.node.nodeid} starts a process ({tried[-1]}) but is "
                             "not marked slow: add @pytest.mark.slow, or test it in-process "
                             "(docs/testing.md)")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    yield
    if tried and request.node.stash.get(_OUTCOME, False):  # the code under test hid it
        pytest.fail(f"this test starts a process ({tried[0]}) but is not marked slow: add "
                    "@pytest.mark.slow, or test it in-process (docs/testing.md)",
                    pytrace=False)


_SETTING_UP: list[pytest.Item] = []  # the test whose fixtures are being set up


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    _SETTING_UP.append(item)
    try:
        return (yield)
    finally:
        _SETTING_UP.pop()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any],
                         request: pytest.FixtureRequest,
                         ) -> Generator[None, object, object]:
    """The same rule for the wider fixtures a fast test needs: a module- or session-scoped
    one is set up before any function-scoped fixture (so before the guard above), and one
    that started a process slipped a process-starting module into the fast tier unseen.
    Only such a fixture's own setting up is watched: what pytest tears down meanwhile was
    set up for another test."""
    item = _SETTING_UP[-1] if _SETTING_UP else None
    if item is None or fixturedef.scope == "function" \
            or item.get_closest_marker("slow") is not None:
        return (yield)  # a function's fixtures: the guard above sees them
    original = subprocess.Popen.__init__

    def refuse(self: subprocess.Popen[Any], args: Any, *more: Any, **kwargs: Any) -> None:
        raise StartsAProcess(f"the fixture {fixturedef.argname} of {item.nodeid} starts a "
                             f"process ({repr(args)[:200]}) but the test is not marked slow: "
                             "add @pytest.mark.slow, or set it up in-process (docs/testing.md)")

    subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a suite that collected nothing: CI must never pass by accident."""
    if not items:
        raise pytest.UsageError("no tests were collected")


ROOT = Path(__file__).parent.parent


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], Any] | None]]:
    """A data directory made 0555, and how to start a process that must obey that.

    Root ignores permission bits, and tests run as root here: then setui runs with those
    capabilities dropped (still uid 0, owning the files, so it may read them). First a
    probe shows that such a process really cannot create a file there, or the test is
    skipped. A read-only filesystem fails the same way in SQLite (it cannot create the
    -shm file) but cannot be mounted in a test.
    """
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    data = tmp_path / "data"
    how = obey_permissions if os.geteuid() == 0 else None
    yield data, how
    if data.exists():
        data.chmod(0o700)  # so pytest can remove it


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make_emulator(clock: ManualClock) -> Iterator[Callable[..., Emulator]]:
    """Start emulators on loopback (the manual clock unless ``clock=`` is given, high
    speed where asked); all are stopped at the end of the test."""
    started: list[Emulator] = []

    def make(scenario: Scenario | str = "live-migration", **kwargs: Any) -> Emulator:
        if isinstance(scenario, str):
            scenario = load_scenario(scenario)
        kwargs.setdefault("clock", clock)
        emulator = Emulator(scenario, **kwargs)
        emulator.start()
        started.append(emulator)
        return emulator

    yield make
    for emulator in started:
        emulator.stop()
