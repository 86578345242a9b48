# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= test,iris,zephyr

.PHONY: install demo test test-fast lint dist bench clean dashboards observe

$(BIN)/.installed-$(EXTRAS): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@

install: $(BIN)/.installed-$(EXTRAS)

demo: install
	$(BIN)/zdebug demo

test: install
	$(BIN)/pytest -q -ra --durations=20

test-fast: install
	$(BIN)/pytest -q -ra -m "not slow"

# Files already clean; the lead widens LINT_PATHS to the whole tree.
LINT_PATHS ?= zephyr_debug/cli.py zephyr_debug/__init__.py zephyr_debug/errors.py zephyr_debug/jobstore.py \
	zephyr_debug/playbooks zephyr_debug/commands tests/test_cli_foundation.py tests/test_packaging.py \
	benchmarks/bench_startup.py
lint: EXTRAS = test,lint
lint: install
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/mypy $(LINT_PATHS)

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
