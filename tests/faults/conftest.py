"""The dashboard fixture of tests/ui, shared with the fault matrix: loaded from there, not
copied. The matrix's own helpers are in faultmatrix.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def _load_ui_conftest() -> ModuleType:
    # tests/ has no packages: load the dashboard fixture's module by path, under a name of
    # its own, so tests/ui and tests/faults share one make_dashboard.
    path = Path(__file__).resolve().parent.parent / "ui" / "conftest.py"
    spec = importlib.util.spec_from_file_location("setui_tests_ui_conftest", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_ui = _load_ui_conftest()
make_dashboard = _ui.make_dashboard
_fixed_time_zone = _ui._fixed_time_zone
