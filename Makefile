# The two Quickstart commands: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The main job. For now: verify the published evidence tree.
demo: $(STAMP)
	$(BIN)/ledger verify evidence/

lint: $(STAMP)
	$(BIN)/ruff check ledger runners tests benchmarks
	$(BIN)/ruff format --check ledger runners tests benchmarks
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -n auto

bench: $(STAMP)
	$(BIN)/python benchmarks/verify_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist
