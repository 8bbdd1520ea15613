# pyro_dropout: `make demo` runs the demo, `make test` the tests; both set up .venv first.
PYTHON ?= python3
# Install torch before anything that depends on it. The pinned version takes a local CPU
# build where one is provided; for CUDA, set TORCH to the build you want (see DEVELOPERS.md).
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-slow test-all lint format docs docs-check bench uci uci-table uci-docs clean

$(STAMP): pyproject.toml experiments/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,lightning,docs,hf,graphs,lm]"
	# the paper reproductions and the pyro-dropout command: a second distribution (experiments/)
	$(BIN)/python -m pip install -q -e "./experiments[rl,lm]"
	# TyXe for the tests of its style (optional; without its torchvision pin, which pulls a CUDA torch)
	$(BIN)/python -m pip install -q --no-deps "tyxe==0.0.2"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/pyro-dropout demo --out results/demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n auto -m slow

test-all: test test-slow

lint: $(STAMP)
	$(BIN)/ruff check pyro_dropout experiments/pyro_dropout_experiments tests examples benchmarks tools
	$(BIN)/ruff format --check pyro_dropout experiments/pyro_dropout_experiments tests examples benchmarks tools
	$(BIN)/mypy

# every benchmark but benchmarks/cuda_graphs.py, which needs a GPU (benchmarks/gpu_check.sh runs it)
bench: $(STAMP)
	$(BIN)/python benchmarks/svi_step.py --threads 1
	$(BIN)/python benchmarks/bbalpha_step.py
	$(BIN)/python benchmarks/predictive.py
	$(BIN)/python benchmarks/skinny_product.py
	$(BIN)/python benchmarks/vectorised_runs.py
	$(BIN)/python benchmarks/allocator.py
	$(BIN)/python benchmarks/per_example_masks.py
	$(BIN)/python benchmarks/run_chunks.py
	$(BIN)/python benchmarks/evaluate_memory.py
	$(BIN)/python benchmarks/conv_particles.py
	$(BIN)/python benchmarks/converted_prediction.py
	$(BIN)/python benchmarks/shared_pass.py
	$(BIN)/python benchmarks/kfold_cost.py
	$(BIN)/python benchmarks/state_check.py --threads 1
	$(BIN)/python benchmarks/step_parts.py --threads 1
	$(BIN)/python benchmarks/wide_particles.py
	$(BIN)/python benchmarks/compile_cost.py
	$(BIN)/python benchmarks/process_dependence.py
	$(BIN)/python benchmarks/pool_scoring.py

# The UCI benchmark (hours on a 2-core CPU): every METHOD on every DATASET, resumable.
UCI_DATASETS ?= bostonHousing concrete wine-quality-red kin8nm power-plant naval-propulsion-plant protein-tertiary-structure
UCI_METHODS ?= mc-dropout concrete mfvi ensemble sgp bbalpha-0.5 bbalpha-1
UCI_OUT ?= results/uci
# training masks of the dropout methods: example (one per data point, as the published code) or
# draw (one per function draw; results labelled METHOD-per-draw); other methods ignore it
UCI_MASKS ?= example
uci: $(STAMP)
	for m in $(UCI_METHODS); do for d in $(UCI_DATASETS); do \
		$(BIN)/pyro-dropout uci --dataset $$d --method $$m --masks $(UCI_MASKS) --out $(UCI_OUT) --quiet || exit 1; done; done

uci-table: $(STAMP)
	$(BIN)/pyro-dropout uci-table $(UCI_OUT) --plot $(UCI_OUT)/uci_test_ll.png

uci-docs: $(STAMP)
	$(BIN)/python tools/update_uci_docs.py $(UCI_OUT)

format: $(STAMP)
	$(BIN)/ruff format pyro_dropout experiments/pyro_dropout_experiments tests examples benchmarks tools
	$(BIN)/ruff check --fix pyro_dropout experiments/pyro_dropout_experiments tests examples benchmarks tools

docs: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# the main pages in Chromium at 1280 and 390 px: screenshots in results/docs-layout, and an error
# for any block that runs past the text column unscrollable (needs Debian's chromium package)
docs-check: docs
	$(BIN)/python -m pip install -q playwright
	$(BIN)/python tools/docs_layout.py site --out results/docs-layout

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
