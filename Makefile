# lakesdk: `make demo` runs the demo, `make test` runs the test suite.
# Both create .venv and install everything on first use (Python 3.10+ and Java 17).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-fast lint bench clean

$(STAMP): pyproject.toml requirements-dev.txt
	@bash scripts/system-deps.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/lakesdk demo

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not cluster and not notebooks"

lint: $(STAMP)
	$(BIN)/ruff check lakesdk tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/write.py --quick

clean:
	rm -rf $(VENV) demo-lake .pytest_cache
