# Switchboard: `make run` starts the stack, `make test` runs everything CI runs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := router_core app switchboard tests examples

.PHONY: venv lint typecheck test run bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

lint: venv
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

typecheck: venv
	$(BIN)/mypy router_core app switchboard examples

test: lint typecheck
	$(BIN)/python -m pytest $(PYTEST_ARGS)

run: venv
	$(BIN)/switchboard up $(RUN_ARGS)

bench: venv
	$(BIN)/switchboard bench router $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
