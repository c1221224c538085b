"""Countdown time: the service's clock, carried forward monotonically."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from setui.core.clock import ServiceClock

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)


class Fake:
    def __init__(self) -> None:
        self.wall = T0
        self.mono = 1000.0

    def tick(self, seconds: float) -> None:
        self.wall += timedelta(seconds=seconds)
        self.mono += seconds


def make() -> tuple[Fake, ServiceClock]:
    fake = Fake()
    return fake, ServiceClock(wall=lambda: fake.wall, mono=lambda: fake.mono)


def test_follows_the_vm_clock_when_it_agrees_with_the_service() -> None:
    fake, clock = make()
    fake.tick(5)
    clock.observe(fake.wall + timedelta(seconds=1), fake.mono)
    assert not clock.skewed and clock.skew is not None and abs(clock.skew) <= 2
    assert clock.now() == fake.wall


def test_skew_over_two_seconds_counts_against_the_service() -> None:
    fake, clock = make()
    clock.observe(T0 + timedelta(seconds=30), fake.mono)
    assert clock.skewed and clock.skew == 30
    fake.tick(10)
    assert clock.now() == T0 + timedelta(seconds=40)


def test_system_clock_step_does_not_move_the_countdown() -> None:
    fake, clock = make()
    fake.tick(3)
    before = clock.now()
    fake.wall += timedelta(hours=1)  # someone sets the clock; monotonic time does not move
    assert clock.now() == before
    fake.tick(2)
    assert clock.now() == before + timedelta(seconds=2)


def test_system_clock_stepped_back_does_not_stall() -> None:
    fake, clock = make()
    fake.wall -= timedelta(minutes=10)
    fake.tick(1)
    assert clock.now() == T0 + timedelta(seconds=1)


def test_clock_corrected_again_is_followed() -> None:
    fake, clock = make()
    clock.observe(T0 + timedelta(seconds=60), fake.mono)  # VM 60 s behind
    assert clock.skewed
    fake.wall += timedelta(seconds=60)  # NTP fixes the VM clock
    fake.tick(1)
    clock.observe(fake.wall, fake.mono)
    assert not clock.skewed
    assert clock.now() == fake.wall


def test_an_answer_taken_in_later_measures_the_skew_when_it_arrived() -> None:
    """A Date read some seconds after its answer arrived (the quiet thread's answers are
    taken in when the health is next read): the VM's clock then, not now, is what it is
    held against. Same clock on both sides: no skew, however late it is taken in."""
    fake, clock = make()
    arrived = fake.mono
    date = fake.wall
    fake.tick(3.0)
    clock.observe(date, arrived)
    assert clock.skew == 0 and not clock.skewed
    # The service 30 s behind, its answer taken in 1.5 s after it arrived.
    arrived, date = fake.mono, fake.wall - timedelta(seconds=30)
    fake.tick(1.5)
    clock.observe(date, arrived)
    assert clock.skew == -30.0
