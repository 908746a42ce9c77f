# The two commands a newcomer needs: `make run` and `make test`.
# Each creates .venv and installs the pinned dependencies on first use.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test lint unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/fixgw up

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The fast tier while editing: every test not marked slow (pure logic, no servers or processes:
# seconds). `make test` runs everything.
unit: lint
	$(VENV)/bin/python -m pytest -q -m "not slow"

# The linters first (ruff, mypy: seconds), then every test.
test: lint
	$(VENV)/bin/python -m pytest -q

bench: $(STAMP)
	$(VENV)/bin/python bench/store_bench.py
	$(VENV)/bin/python bench/cell_bench.py --commands 10000 --events 10000
	$(VENV)/bin/python bench/gateway_bench.py --orders 3000
	$(VENV)/bin/python bench/e2e_bench.py
	$(VENV)/bin/python bench/multicell_bench.py

clean:
	rm -rf $(VENV) .pytest_cache
