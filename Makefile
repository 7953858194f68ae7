# Two commands do all the set-up on a fresh machine:
#   make demo   - venv + install, generate the sample documents, ingest them, ask a question
#   make test   - venv + install, run the whole test suite
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	# torch first: the CPU build; any other torch request pulls gigabytes of CUDA.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	touch $@

install: $(BIN)/.installed

samples: install
	$(BIN)/python -m chunker.eval.samples samples

demo: samples
	$(BIN)/python -m jobs.ingest --config configs/local.yaml --input samples --output output/demo
	$(BIN)/python -m jobs.query --config configs/local.yaml "How many days do I have to file a warranty claim?"

test: install
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

.PHONY: install samples demo test
