# One entry point for people and CI. Only Python 3 and make are assumed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ifeq ($(OS),Windows_NT)
BIN    := $(VENV)/Scripts
endif
STAMP  := $(VENV)/.installed-dev
RUNSTAMP := $(VENV)/.installed

.PHONY: demo test lint bench screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUNSTAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@ $(RUNSTAMP)

demo: $(RUNSTAMP)
	$(BIN)/setui demo

test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

bench: $(STAMP)
	$(BIN)/python bench/run.py

screenshots: $(STAMP)
	$(BIN)/python -m setui.ui.screenshots screenshots

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
