# The two Quickstart commands: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps, each touched last so that an interrupted install is run again: the runtime
# dependencies (all `make demo` needs), then the test extras on top (pytest, mypy, ruff,
# pyspark...: most of the download), for `make test`, `make lint` and the benchmarks.
STAMP := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-stamp

# uv where it is on the PATH (several times faster than pip; `make demo UV=` uses pip);
# otherwise pip, upgraded first (the pip that Python 3.11 bundles installs the same set
# about twice as slowly), without compiling every installed module up front: Python
# compiles what it imports, a few seconds of the demo against ten of the install.
UV ?= $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
INSTALL := $(BIN)/python -m pip install --quiet --no-compile
else
INSTALL := $(UV) pip install --quiet --python $(BIN)/python
endif

# `make` alone builds the development environment, test and lint tools included.
.DEFAULT_GOAL := $(TEST_STAMP)

.PHONY: demo test lint docs bench mutants clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(if $(UV),,$(BIN)/python -m pip install --quiet --upgrade pip)
	$(INSTALL) -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(INSTALL) -e '.[test]'
	touch $(TEST_STAMP)

DEMO := demo-out

# The main job, on the embedded simulated endpoints: two arms that differ in one declared
# variable, through preflight, thinking control, capacity at three context targets,
# endurance and context quality, with GPU telemetry and reserve stages (unavailable here:
# no GPU); then derive, decide under the default policy, publish, open the follow-up
# ticket, render the report and verify the publication (`ledger demo`, runners/demo.py).
# Then the deployment gate refuses the promotion (exit 1 expected) and writes its decision as
# a verification summary attestation (sign it with `ledger sign FILE` where an identity is),
# and evidence/ verifies, its report also as SARIF for code scanning.
demo: $(STAMP)
	rm -rf $(DEMO)
	$(BIN)/ledger demo --out $(DEMO)
	$(BIN)/ledger gate $(DEMO)/public/2026-11-29-simulated-example --attest $(DEMO)/gate.intoto.json > $(DEMO)/gate.txt; test $$? -eq 1
	$(BIN)/ledger verify --public evidence/ --format sarif --output $(DEMO)/verify-evidence.sarif
	@echo "deployment gate (expected to refuse): $(DEMO)/gate.txt, its verification summary: $(DEMO)/gate.intoto.json; evidence/ verified: $(DEMO)/verify-evidence.sarif"

lint: $(TEST_STAMP)
	$(BIN)/ruff check ledger runners tests benchmarks docs
	$(BIN)/ruff format --check ledger runners tests benchmarks docs
	$(BIN)/mypy
	$(BIN)/lint-imports

# The accuracy tests compare the client's clock with the server's to 1 ms, so they run on
# their own before the parallel suite rather than beside it.
test: lint
	$(BIN)/python -m pytest -m accuracy
	$(BIN)/python -m pytest -n auto --dist loadgroup -m "not accuracy"

DOCS_STAMP := $(VENV)/.docs-stamp

$(DOCS_STAMP): $(STAMP)
	$(INSTALL) -e '.[docs]'
	touch $(DOCS_STAMP)

# The documentation site in docs/_build/html, warnings as errors (a link to a page or
# heading that does not exist is one), then Sphinx's link check of every external URL the
# pages link to (none yet: it guards the ones to come); the CLI reference, the finding codes and the exit statuses are generated from the
# code as it builds.
docs: $(DOCS_STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	$(BIN)/sphinx-build -W --keep-going -q -b linkcheck docs docs/_build/linkcheck

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/verify_bench.py
	$(BIN)/python benchmarks/client_bench.py
	$(BIN)/python benchmarks/derive_bench.py
	$(BIN)/python benchmarks/sanitize_bench.py
	$(BIN)/python benchmarks/publish_bench.py
	$(BIN)/python benchmarks/bounds_bench.py

# The mutation score of the core (docs/method/mutation-score.md); about 40 minutes on 2 cores,
# so not part of `make test`.
mutants: $(TEST_STAMP)
	$(BIN)/python benchmarks/mutation_score.py

clean:
	rm -rf $(VENV) $(DEMO) test-output .pytest_cache .mypy_cache .ruff_cache build dist docs/_build docs/_generated
