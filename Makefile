# The README's commands. `make demo` (set up + run the trim DAG on a demo store), `make test` (the suite).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast lint airflow soak clean

setup: $(STAMP)

$(STAMP): requirements.txt constraints.txt pyproject.toml scripts/system-deps.sh
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required")'
	@java -version >/dev/null 2>&1 || { echo "Java 17 is required for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	bash scripts/system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -r requirements.txt -c constraints.txt
	@# Bytecode for every installed module, as pip would write it, but on every core (pip compiles one file at a
	@# time). Compiled here, not at first import: where PYTHONDONTWRITEBYTECODE is set nothing would ever cache it.
	@# Not the packages' own test suites, nor sympy and networkx, which only moto[server]'s cfn-lint needs (a
	@# CloudFormation linter the S3 server never starts).
	$(PY) -m compileall -q -j 0 -x '/(tests|sympy|networkx|cfnlint)/' "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) scripts/check_install.py
	@touch $(STAMP)

demo: setup
	@bash scripts/demo.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

# Three workers on CI's two cores: a worker waiting on a process, a server or a browser leaves its core to the
# others; four oversubscribe them (benchmarks/README.md, "The test suite"). PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 3

# --no-loadscope-reorder: xdist hands files out in collection order (tests/conftest.py puts the longest first), not
# sorted by how many tests a file has (its default, which started the 7-test live Airflow file last and made it the
# run's tail).
XDIST := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: lint
	@source scripts/env.sh && $(PY) -m pytest $(XDIST)

# The fast lane while working: pure rules and the Spark transforms on the one SparkSession per worker; no Airflow
# run, no process of the test's own (spark-submit, PostgreSQL, browser), no gate (`runs`). Nothing in it waits on
# another process, so one worker per core. The full suite (`make test`) stays what CI runs.
FAST_WORKERS ?= 2

test-fast: lint
	@source scripts/env.sh && $(PY) -m pytest -n $(FAST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "(unit or spark) and not airflow and not processes and not runs"

airflow: setup
	@bash scripts/airflow-standalone.sh

# The soak (docs/RELIABILITY.md, "The soak"): a live Airflow, the load generator and injected faults for DURATION
# (the test suite runs 5m); its figures in test-output/soak/summary.json.
DURATION ?= 60m
soak: setup
	@source scripts/env.sh && HOUSEKEEPING_SOAK_DURATION=$(DURATION) $(PY) -m pytest -p no:xdist -s \
		tests/soak/test_soak.py

clean:
	rm -rf $(VENV) .airflow demo-store
