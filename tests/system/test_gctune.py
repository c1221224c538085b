"""The garbage collector's tuning: paused for a burst and back as it was; start-up's heap
frozen once, with the garbage collected first."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from setui.system.gctune import collector_paused


@pytest.fixture
def collecting() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:  # as it was, whatever the test left
        gc.enable()
    else:
        gc.disable()


def test_paused_for_the_block_and_back_on_after(collecting: None) -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # an inner pause does not end the outer one
    assert gc.isenabled()


def test_back_on_after_the_block_raised(collecting: None) -> None:
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()  # type: ignore[unreachable]  # pytest.raises caught it


def test_left_off_when_it_was_off(collecting: None) -> None:
    gc.disable()
    with collector_paused(freeze=True):
        pass
    assert not gc.isenabled()


def run(code: str) -> str:
    """In a fresh interpreter: freezing is for the life of the process."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


@pytest.mark.slow  # a fresh interpreter (docs/testing.md)
def test_a_paused_start_up_is_frozen_when_it_ends() -> None:
    assert run("""
        import gc
        from setui.system.gctune import collector_paused
        before = gc.get_freeze_count()
        with collector_paused(freeze=True):
            kept = [[n] for n in range(1000)]
        print(gc.isenabled(), gc.get_freeze_count() >= before + 1000)
        """) == "True True"


@pytest.mark.slow  # a fresh interpreter (docs/testing.md)
def test_the_heap_is_frozen_once_and_its_garbage_collected_first() -> None:
    assert run("""
        import gc, weakref
        from setui.system.gctune import freeze_heap_once

        class Node:
            pass

        cycle = Node()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        del cycle
        freeze_heap_once()
        first = gc.get_freeze_count()
        made_later = [[n] for n in range(1000)]
        freeze_heap_once()
        print(gone() is None, first > 0, gc.get_freeze_count() == first)
        """) == "True True True"
