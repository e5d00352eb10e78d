# Two commands for a fresh machine: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test demo bench lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: install
	$(BIN)/python -m pytest -q

demo: install
	$(BIN)/python -m examples.demo

bench: install
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m benchmarks.rip_sequential
	$(BIN)/python -m benchmarks.numpy_reference
	$(BIN)/python -m benchmarks.peers --rows 20000
	$(BIN)/python -m benchmarks.matchregex
	$(BIN)/python -m benchmarks.spark_strategies
	$(BIN)/python -m benchmarks.spark_scale
	$(BIN)/python -m benchmarks.rip_batches
	$(BIN)/python -m benchmarks.sase
	$(BIN)/python -m benchmarks.trex
	$(BIN)/python -m benchmarks.stream
	$(BIN)/python -m benchmarks.thesis
	$(BIN)/python -m benchmarks.rip_sb

lint: install
	$(BIN)/ruff check sparkcep tests examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
