"""``setui``: the dashboard against the configured endpoint."""

from __future__ import annotations

import argparse

from setui.config import Config

__all__ = ["open_dashboard", "run"]


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
