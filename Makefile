# One entry point for people and CI. Only Python 3 and GNU make are assumed, on Linux,
# macOS or Windows: every file operation below is done by Python, not by POSIX tools.
VENV   := .venv
ifeq ($(OS),Windows_NT)
# The python.org installer and the Store put "python" (and "py") on PATH, not "python3".
PYTHON ?= python
BIN    := $(VENV)/Scripts
else
PYTHON ?= python3
BIN    := $(VENV)/bin
endif
# No ".exe" needed: it is found either way, and the rules below never name it as a target.
PY     := $(BIN)/python
# pyvenv.cfg, not bin/python, marks the venv: it has the same name on every platform
# (Scripts/python.exe never matched a "python" target, so the venv was remade each run).
VENV_CFG := $(VENV)/pyvenv.cfg
STAMP  := $(VENV)/.installed-dev
RUNSTAMP := $(VENV)/.installed
# import-linter has no `python -m` form: its console script, beside python in the venv.
LINT_IMPORTS := $(BIN)/lint-imports
# touch(1) is POSIX; this is the same thing in the venv's own Python.
TOUCH  = $(PY) -c "import pathlib, sys; [pathlib.Path(p).touch() for p in sys.argv[1:]]"

.PHONY: demo test test-fast test-hogs test-pythons test-textual-latest lint bench screenshots clean

$(VENV_CFG):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUNSTAMP): pyproject.toml | $(VENV_CFG)
	$(PY) -m pip install --quiet -e .
	@$(TOUCH) $@

$(STAMP): pyproject.toml | $(VENV_CFG)
	$(PY) -m pip install --quiet -e ".[dev,agent]"
	@$(TOUCH) $@ $(RUNSTAMP)

# Modules rather than the console scripts: no dependence on how the platform names them.
demo: $(RUNSTAMP)
	$(PY) -m setui.cli demo

# pytest-xdist workers. Most of a test's time is a wait on a process, a socket, a timer
# or a repaint, which the other workers fill: on 2 cores the fast tier took 126 s with 2
# and 80 s with 4 (docs/testing.md). WORKERS=0 runs in this one process.
WORKERS ?= 4

# The test runs keep their compiled modules even where PYTHONDONTWRITEBYTECODE is set (an
# empty value is no value to Python): else every worker compiles src and rewrites the
# asserts of each test module anew, each run (about 5 s of a core per worker). bench/run.py
# compiles setui itself before it measures.
test test-fast: export PYTHONDONTWRITEBYTECODE :=

# The architecture's contracts ([tool.importlinter] in pyproject.toml) and the types
# ([tool.mypy]: src/setui and tests, strict) before the tests. Everything, both tiers.
test: $(STAMP)
	$(PY) -m ruff check src tests bench tools
	$(LINT_IMPORTS)
	$(PY) -m mypy
	$(PY) -m pytest -n $(WORKERS)

# Between edits: the tests that start no process and need no real time (the tier's rule,
# and how a test is marked, in docs/testing.md).
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" -n $(WORKERS) -q --hypothesis-profile=fast

# `make test` N times (default 3) with a busy loop on every core, the hogs stopped after;
# stops at the first failing run (tools/hogs.py).
test-hogs: $(STAMP)
	$(PY) tools/hogs.py --runs $(or $(RUNS),3) -- $(MAKE) --no-print-directory test

# The fast tier under each Python the package claims (3.10 to 3.13), each in a venv of its
# own (.venv-3.X); a version with no interpreter here is reported untested. Not in `test`.
test-pythons:
	$(PYTHON) tools/pythons.py

# The UI tests against the newest Textual on the index, past the pin in pyproject.toml, in
# a venv of its own (.venv-textual-latest): what a Textual upgrade would break. Not in `test`.
test-textual-latest:
	$(PYTHON) tools/textual_latest.py

lint: $(STAMP)
	$(PY) -m ruff check src tests bench tools
	$(LINT_IMPORTS)
	$(PY) -m mypy

bench: $(STAMP)
	$(PY) bench/run.py

# A developer's tool, not shipped: tools/ is outside the package.
screenshots: $(STAMP)
	$(PY) tools/screenshots.py screenshots

# The system Python, not the venv's: on Windows a running python.exe cannot delete itself.
clean:
	$(PYTHON) -c "import shutil, sys; [shutil.rmtree(p, ignore_errors=True) for p in sys.argv[1:]]" $(VENV) $(wildcard .venv-*) build dist $(wildcard src/*.egg-info) .pytest_cache .ruff_cache .import_linter_cache .mypy_cache
