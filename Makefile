# autocomp developer commands. `make` or `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install demo test unit lint format bench clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,eval,generate,pipelines]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install autocomp with its dev tools and model stack

demo: $(STAMP) ## the main job on the local default: both pipelines through kfp.local, tiny models
	HF_HUB_OFFLINE=1 $(BIN)/autocomp run --out runs/demo

lint: $(STAMP) ## ruff check and ruff format --check
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

test: lint ## lint, then the whole test suite
	HF_HUB_OFFLINE=1 $(BIN)/pytest

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

bench: $(STAMP) ## candidate-set throughput at paper scale (prints figures)
	$(BIN)/python benchmarks/negatives_throughput.py

clean: ## remove the venv, caches and demo outputs
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis build dist src/*.egg-info
