"""The dashboard says at start what an older api-version cannot show, as the commands do
on stderr (tests/commands/test_api_version_warning.py)."""

from __future__ import annotations

from tests.support.dashboard import WIDE, MakeDashboard, start


async def test_an_old_version_is_told_in_a_notice(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard(client_options={"api_version": "2019-01-01"})
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        assert [n for n in d.notices() if "api-version" in n] == [
            "api-version 2019-01-01 has no Description, EventSource or "
            "DurationInSeconds; 2020-07-01 has them all"]


async def test_the_newest_version_gets_no_such_notice(make_dashboard: MakeDashboard) -> None:
    d = make_dashboard()
    async with d.app.run_test(size=WIDE) as pilot:
        await start(d, pilot)
        assert not [n for n in d.notices() if "api-version" in n]
