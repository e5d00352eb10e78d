# Two commands for a fresh machine: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test test-all demo docs bench lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The fast tier: every module's tests, property tests with a tenth of their examples, a
# sample of the conformance corpus on Spark; no standalone-cluster test.
test: install
	$(BIN)/python -m pytest -q -m "not slow and not cluster"

# The full tier (what CI runs): every example, every case, the slow and cluster tests.
test-all: install
	SPARKCEP_TEST_TIER=full $(BIN)/python -m pytest -q

demo: install
	$(BIN)/python -m examples.demo

# The documentation site, into site/ (strict: a warning fails the build).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: install
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	$(BIN)/sparkcep warm  # a warm machine: the kernels compiled, as the first queries' background compile leaves it
	$(BIN)/python -m benchmarks.rip_sequential
	$(BIN)/python -m benchmarks.keys
	$(BIN)/python -m benchmarks.numpy_reference
	$(BIN)/python -m benchmarks.peers --rows 20000
	$(BIN)/python -m benchmarks.matchregex
	$(BIN)/python -m benchmarks.spark_strategies
	$(BIN)/python -m benchmarks.spark_scale
	$(BIN)/python -m benchmarks.rule_stream
	$(BIN)/python -m benchmarks.rip_batches
	$(BIN)/python -m benchmarks.sase
	$(BIN)/python -m benchmarks.trex
	$(BIN)/python -m benchmarks.stream
	$(BIN)/python -m benchmarks.thesis
	$(BIN)/python -m benchmarks.tasks_speculative
	$(BIN)/python -m benchmarks.rip_sb
	$(BIN)/python -m benchmarks.first_answer
	$(BIN)/python -m benchmarks.rules --spark

lint: install
	$(BIN)/ruff check sparkcep tests examples

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache
