"""Time end to end: a skew from the Date header is shown and counted against; a step of
the system clock does not move the countdown (monotonic between answers)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from setui.emulator.faults import Faults
from setui.ui.widgets.status import StatusBar

WIDE = (140, 40)
DEADLINE = 20.0


async def test_skew_is_shown_and_countdowns_use_the_service_time(make_dashboard: Any) -> None:
    d = make_dashboard("busy", at=300)
    d.emulator.set_faults(Faults(skew=30))
    jump = {"by": timedelta(0)}
    # The app's wall clock: the emulator's manual clock, plus a step we control.
    d.app._clock = lambda: datetime.fromtimestamp(d.clock(), timezone.utc) + jump["by"]
    async with d.app.run_test(size=WIDE) as pilot:
        status = d.app.main_screen.query_one(StatusBar)
        await d.wait_for(pilot, lambda: "30 s behind the service's" in status.plain(),
                         timeout=DEADLINE)
        # Counted against the service: NotBefore minus the service's now, as the emulator
        # (whose Date header is 30 s ahead) means it.
        service_now = d.now() + timedelta(seconds=30)
        assert abs((d.app.now() - service_now).total_seconds()) < 2
        event = next(e for e in d.app.session.document.events if e.not_before)
        left = (event.not_before - d.app.now()).total_seconds()
        assert abs(left - (event.not_before - service_now).total_seconds()) < 2
        # Someone sets the VM's clock an hour ahead; the monotonic clock runs on.
        before = d.app.now()
        jump["by"] = timedelta(hours=1)
        assert abs((d.app.now() - before).total_seconds()) < 2
        polls = len(d.gets())
        await d.wait_for(pilot, lambda: len(d.gets()) >= polls + 3, timeout=DEADLINE)
        await pilot.pause()
        # Answers since the step: the skew is now an hour, the countdown did not jump.
        assert abs((d.app.now() - before).total_seconds()) < 5
        assert abs((d.app.now() - service_now).total_seconds()) < 5
