# chessjax: the two commands of the README contract, plus helpers.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WORK ?= runs/demo

.PHONY: venv test lint demo bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest -q tests

demo: $(STAMP)
	$(BIN)/python -m chessjax.demo --workdir $(WORK)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_data_prep

clean:
	rm -rf $(VENV) runs build *.egg-info
