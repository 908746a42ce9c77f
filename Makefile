# The two commands a newcomer needs: `make run` and `make test`.
# Each creates .venv and installs the pinned dependencies on first use.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test lint unit faults bench clean debian-tools

# The kernel fault tests (tests/test_network_faults.py) inject partitions and packet loss with
# nftables inside network namespaces of their own, and tests/test_deploy.py checks the alert
# rules with promtool: Debian's nftables and prometheus packages, installed here when missing
# and we are root (CI is); elsewhere those tests say what they lack. The embedded Valkey runs on
# jemalloc (Debian's libjemalloc2, installed here the same way); without it, on the C library's
# allocator, and `fixgw up` says so. The gateway's send path is a C++ extension built at install
# (setup.py; g++ installed here the same way); without a compiler the gateway sends through
# QuickFIX's Python bindings (`[gateway] order_path`).
debian-tools:
	@if ! command -v nft >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -q nftables >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null && apt-get install -y -q nftables >/dev/null); fi
	@if ! command -v promtool >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends prometheus >/dev/null); fi
	@if ! command -v g++ >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -q --no-install-recommends g++ >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends g++ >/dev/null); fi
	@if ! ldconfig -p 2>/dev/null | grep -q libjemalloc.so.2 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -q --no-install-recommends libjemalloc2 >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends libjemalloc2 >/dev/null); fi
	@if ! command -v systemd-analyze >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -q --no-install-recommends systemd >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends systemd >/dev/null); fi

$(STAMP): pyproject.toml setup.py fixgw/_sendpath.cpp
	$(MAKE) debian-tools
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

# The linters first (ruff, mypy: seconds), then every test: four at a time (pytest-xdist: most
# tests wait on servers, failovers and timeouts rather than use a core, so four workers on two
# cores take about a third of the time one does), then the fault tests one at a time.
test: lint debian-tools
	$(VENV)/bin/python -m pytest -q -n 4 -m "not faults"
	$(VENV)/bin/python -m pytest -q -m faults

# Faults below the processes (network partitions, loss, latency, split brain, full memory and
# disk, clock steps), one at a time: about five minutes. Needs root, ip, nft and a C compiler.
faults: lint debian-tools
	$(VENV)/bin/python -m pytest -q -m faults

bench: $(STAMP)
	$(VENV)/bin/python bench/store_bench.py
	$(VENV)/bin/python bench/cell_bench.py --commands 10000 --events 10000
	$(VENV)/bin/python bench/gateway_bench.py --orders 3000
	$(VENV)/bin/python bench/e2e_bench.py
	$(VENV)/bin/python bench/multicell_bench.py
	$(VENV)/bin/python bench/longrun_bench.py --minutes 2

clean:
	rm -rf $(VENV) .pytest_cache
