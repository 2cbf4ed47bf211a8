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

DEMO := demo-out

DEMO_CAMPAIGN := $(DEMO)/raw/2026-11-29-simulated-example

# The main job, on the embedded simulated endpoints: measure a two-arm plan into a raw
# campaign (with GPU telemetry and reserve stages), derive the A/B comparison in DuckDB,
# decide under the default promotion policy (no promotion: no GPU reserve reading here) and
# show that the deployment gate refuses it, verify (recomputing the comparison), show the
# cells, publish (sanitized, re-hashed, with an in-toto statement), verify the public tree,
# then verify the published evidence tree.
demo: $(STAMP)
	rm -rf $(DEMO)
	$(BIN)/ledger run examples/simulated.toml --raw-dir $(DEMO)/raw
	$(BIN)/ledger derive $(DEMO_CAMPAIGN) --baseline baseline --candidate candidate --kind ab \
		--differs engine --differs simulated_profile
	$(BIN)/ledger decide $(DEMO_CAMPAIGN)
	$(BIN)/ledger gate $(DEMO_CAMPAIGN); test $$? -eq 1
	$(BIN)/ledger verify $(DEMO_CAMPAIGN)
	$(BIN)/ledger sql --from $(DEMO_CAMPAIGN) "SELECT arm, stage, cell, n, failed, \
		round(ttft_ms_p50, 2) AS ttft_p50_ms, round(decode_tok_s_p50, 1) AS decode_p50 \
		FROM cells ORDER BY stage, cell, arm"
	$(BIN)/ledger publish $(DEMO_CAMPAIGN) --out $(DEMO)/public --map $(DEMO)/private/publish-map.json
	$(BIN)/ledger verify $(DEMO)/public
	$(BIN)/ledger verify evidence/

lint: $(STAMP)
	$(BIN)/ruff check ledger runners tests benchmarks
	$(BIN)/ruff format --check ledger runners tests benchmarks
	$(BIN)/mypy

# The accuracy tests compare the client's clock with the server's to 2 ms, so they run on
# their own before the parallel suite rather than beside it.
test: lint
	$(BIN)/python -m pytest -m accuracy
	$(BIN)/python -m pytest -n auto -m "not accuracy"

bench: $(STAMP)
	$(BIN)/python benchmarks/verify_bench.py
	$(BIN)/python benchmarks/client_bench.py
	$(BIN)/python benchmarks/derive_bench.py
	$(BIN)/python benchmarks/sanitize_bench.py

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .mypy_cache .ruff_cache build dist
