# autocomp developer commands. `make` or `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install demo test test-fast lint format bench clean images push constraints

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,eval,generate,pipelines,report]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install autocomp with its dev tools and model stack

demo: $(STAMP) ## the main job on the local default: both pipelines through kfp.local, tiny models
	HF_HUB_OFFLINE=1 $(BIN)/autocomp run --out runs/demo

LINTED := src tests benchmarks components pipelines

lint: $(STAMP) ## ruff check, ruff format --check and the import layering contracts
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/lint-imports

test: lint ## lint, then the whole test suite (what CI runs)
	HF_HUB_OFFLINE=1 $(BIN)/pytest

test-fast: $(STAMP) ## the fast lane: protocol, tables, analysis, CLI errors (no models, no servers)
	HF_HUB_OFFLINE=1 $(BIN)/pytest -m "not slow and not infra"

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

bench: $(STAMP) ## candidate-set throughput at paper scale (prints figures)
	$(BIN)/python benchmarks/negatives_throughput.py

# Images: names and tags come from autocomp.pipelines.components.image() (registry:
# $AUTOCOMP_IMAGE_REGISTRY, tag: the package version), the same rule the compiled pipelines use.
# Docker where an engine answers, else buildah (rootless-friendly, --isolation chroot).
# DRY_RUN=1 prints the commands.
IMAGE_KINDS := core generate caption eval
BASE_IMAGE  ?= python:3.11-slim-bookworm
BUILDER     ?= $(shell docker info >/dev/null 2>&1 && echo docker || echo buildah)
BUILD_FLAGS  = $(if $(filter buildah,$(BUILDER)),bud --isolation chroot,build)
RUN_OR_ECHO  = $(if $(DRY_RUN),echo,)

# The tag rule needs only the package source (no install): a light import of autocomp.
IMAGE_TAG = PYTHONPATH=src $(PYTHON) -c "from autocomp.pipelines.components import image; print(image('$$kind'))"

images: ## build the container images (docker or buildah; DRY_RUN=1 to print only)
	@for kind in $(IMAGE_KINDS); do \
	  tag=$$($(IMAGE_TAG)); \
	  $(RUN_OR_ECHO) $(BUILDER) $(BUILD_FLAGS) --build-arg BASE_IMAGE=$(BASE_IMAGE) \
	    -f images/$$kind/Dockerfile -t $$tag . || exit 1; \
	done

push: ## push the images built by `make images`
	@for kind in $(IMAGE_KINDS); do \
	  tag=$$($(IMAGE_TAG)); \
	  $(RUN_OR_ECHO) $(BUILDER) push $$tag || exit 1; \
	done

constraints: $(STAMP) ## re-pin images/constraints.txt from the tested environment
	{ head -2 images/constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^autocomp'; } > images/constraints.tmp
	mv images/constraints.tmp images/constraints.txt

clean: ## remove the venv, caches and demo outputs
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis build dist src/*.egg-info
