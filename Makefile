# lakesdk: `make demo` runs the demo, `make test` runs the test suite.
# `make demo` needs Python 3.11+ and Java 17 only: it creates .venv and installs lakesdk with its
# dependencies. `make setup` (and test, lint, bench) also installs the development tools
# (JupyterLab among them, to open the notebooks) and, on Debian/Ubuntu as root, the system
# packages the tests use (scripts/system-deps.sh).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
STAMP      := $(VENV)/.installed

.PHONY: setup demo test test-fast test-pandas3 lint bench binder notebooks clean java

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The demo: lakesdk and its dependencies (pyproject.toml's ranges), nothing else.
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	@touch $(DEMO_STAMP)

java:
	@command -v java >/dev/null 2>&1 || { echo "The demo needs Java 17 (Spark's runtime): install a JDK or JRE 17+" \
	  "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) and run make demo again." >&2; exit 1; }

demo: $(DEMO_STAMP) java
	$(BIN)/lakesdk demo

# The tests: system packages, then every extra and the `dev` dependency group at the versions
# and hashes of uv.lock (uv is installed into .venv from PyPI), lakesdk itself in editable mode.
# --locked stops when uv.lock does not match pyproject.toml (run `uv lock` after editing it);
# --inexact keeps pip and uv in .venv.
$(BIN)/uv: | $(BIN)/python
	$(BIN)/python -m pip install -q "uv>=0.8"

# the C part (lakesdk/format/*.c) is built again when it changes (uv's cache-keys name it too)
$(STAMP): pyproject.toml uv.lock $(wildcard lakesdk/format/*.c) | $(BIN)/uv
	@bash scripts/system-deps.sh
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/uv sync -q --locked --inexact --active --all-extras --group dev
	@touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not cluster and not notebooks"

# lakesdk's pandas paths on pandas 3. uv.lock keeps pandas 2 (pyspark 4 warns that it does not fully
# support pandas 3, and the tests run Spark); users may have either. This layers the newest pandas 3
# over .venv (uv run --with, nothing in .venv changes) and runs the tests of pandas input and output.
PANDAS3_TESTS := tests/write/test_input.py tests/write/test_writes.py tests/read/test_read_api.py tests/write/test_merge_local.py \
                 tests/api/test_trust_acceptance.py tests/api/test_cli.py
PANDAS3_RUN   := VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/uv run -q --active --no-sync --with 'pandas>=3,<4'
test-pandas3: $(STAMP)
	$(PANDAS3_RUN) python -c 'import pandas; assert pandas.__version__ >= "3", pandas.__version__; print("pandas", pandas.__version__)'
	$(PANDAS3_RUN) python -m pytest -m "not cluster and not notebooks" $(PANDAS3_TESTS)

lint: $(STAMP)
	$(BIN)/ruff check lakesdk tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/write.py --quick

# Binder's environment: the notebooks' packages at uv.lock's versions and hashes (lakesdk with the
# notebook and kafka extras, the `tutorials` group; binder/postBuild installs lakesdk itself).
# tests/project/test_packaging.py checks that binder/requirements.txt equals this export.
BINDER_EXPORT := export --frozen --format requirements-txt --no-default-groups --group tutorials \
                 --extra notebook --extra kafka --no-emit-project
binder: | $(BIN)/uv
	$(BIN)/uv $(BINDER_EXPORT) > binder/requirements.txt

# The tutorials' stored outputs (what the documentation site shows): run every notebook again.
notebooks: $(STAMP)
	$(BIN)/python scripts/run_notebooks.py

clean:
	rm -rf $(VENV) demo-lake .pytest_cache
