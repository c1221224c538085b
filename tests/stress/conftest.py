"""The dashboard fixtures of tests/ui (``make_dashboard``), shared with these tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "setui_ui_conftest", Path(__file__).parent.parent / "ui" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_ui = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _ui  # dataclasses look their module up there
_spec.loader.exec_module(_ui)

_fixed_time_zone = _ui._fixed_time_zone
make_dashboard = _ui.make_dashboard
