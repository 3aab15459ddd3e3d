# Two entry points for a fresh machine (see README): `make demo` and `make test`.
# Each creates .venv with the machine's python3 and installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# pytest workers (pytest-xdist): one per core, at most 4 (each starts its own PostgreSQL).
JOBS   ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)

.PHONY: demo test lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(PIP) install -e .
	@touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[test]"
	@touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/jiyi demo

lint: $(VENV)/.test
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(VENV)/.test
	$(BIN)/mypy

pytest: $(VENV)/.test
	@scripts/ensure-chromium.sh  # the web page tests need /usr/bin/chromium
	$(BIN)/python -m pytest -q -n $(JOBS) --dist worksteal

test: lint typecheck pytest

bench: $(VENV)/.core
	$(BIN)/python bench/locomo.py --half-report

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
