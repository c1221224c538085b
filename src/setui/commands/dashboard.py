"""``setui`` and ``setui replay``: the two doors to the dashboard."""

from __future__ import annotations

import argparse
from datetime import datetime

from setui.config import Config

__all__ = ["open_dashboard", "open_replay", "run"]


def open_dashboard(config: Config, *, demo: bool = False, zoom: int | None = None) -> int:
    from setui.config import config_dir
    from setui.session import make_client, open_store
    from setui.ui.app import SetuiApp

    store, problem = open_store(config)
    app = SetuiApp(client=make_client(config), config=config, store=store,
                   store_problem=problem, demo=demo, user_themes=config_dir() / "themes",
                   zoom=zoom)
    try:
        app.run()
    finally:
        if store is not None:
            store.close()
    return app.return_code or 0


def run(args: argparse.Namespace) -> int:
    return open_dashboard(args.config_resolved)


def open_replay(config: Config, *, since: datetime | None = None,
                until: datetime | None = None) -> int:
    """``setui replay``: the dashboard over the store; the other door to the UI."""
    from setui.config import config_dir
    from setui.store import NothingRecorded, Store, StoreError
    from setui.ui.replay_app import ReplayApp

    store: Store | None = None
    problem: str | None = None
    try:  # read-only: reviewing never changes the record
        store = Store.open_dir(config.data_dir, readonly=True)
    except NothingRecorded:
        problem = "nothing has been recorded yet"
    except StoreError as exc:
        problem = str(exc)
    app = ReplayApp(config=config, store=store, store_problem=problem, since=since,
                    until=until, user_themes=config_dir() / "themes")
    try:
        app.run()
    finally:
        if store is not None:
            store.close()
    return app.return_code or 0
