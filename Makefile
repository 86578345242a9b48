# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= test,iris,zephyr,lint

.PHONY: install demo test test-fast lint dist bench clean dashboards observe

$(BIN)/.installed-$(EXTRAS): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@

install: $(BIN)/.installed-$(EXTRAS)

demo: install
	$(BIN)/zdebug demo

# Two test processes, one per core (a third was faster quiet, but beside two CPU burners it left a
# real job's shard 0.4 of a core and a rule misread it: docs/testing.md); each file runs in one of
# them, so its module fixtures start once, longest files first (tests/conftest.py).
# TEST_PROCESSES=0: one process.
# Tests marked `alone` (real pipelines whose shard durations a rule compares) run after, alone.
TEST_PROCESSES ?= 2
test: lint
	$(BIN)/pytest -q -ra --durations=20 -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder -m "not alone"
	$(BIN)/pytest -q -ra --durations=10 -m alone

# The edit-test loop: no `slow` test, so CPU-bound: one process per core.
FAST_PROCESSES ?= 2
test-fast: install
	$(BIN)/pytest -q -ra -n $(FAST_PROCESSES) -m "not slow"

# ruff (lint + format) over the tree, mypy over the package; `make test` runs this first.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy zephyr_debug

dist: install
	$(BIN)/python -m build --outdir dist

dashboards: install
	$(BIN)/python -m zephyr_debug.dashboards dashboards

observe: install
	$(BIN)/zdebug observe

bench: EXTRAS = test,bench
bench: install
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .zdebug .pytest_cache dist build
