# autocomp developer commands. `make` or `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install demo test test-fast lint format bench clean images push base-image constraints

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,eval,generate,pipelines,report]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install autocomp with its dev tools and model stack

demo: $(STAMP) ## both pipelines through kfp.local, tiny models: live task view, logs and report in runs/demo
	HF_HUB_OFFLINE=1 $(BIN)/autocomp run --out runs/demo

LINTED := src tests benchmarks components pipelines images

lint: $(STAMP) ## ruff check, ruff format --check, the import contracts, dead code (vulture), mypy, the plumbing table, the architecture bar
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/lint-imports
	$(BIN)/vulture
	$(BIN)/mypy src/autocomp
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q -p no:cacheprovider tests/pipelines/test_plumbing.py tests/test_architecture.py

test: lint ## lint, then the whole test suite (what CI runs), listing its 25 slowest tests
	HF_HUB_OFFLINE=1 $(BIN)/pytest --durations=25

test-fast: $(STAMP) ## the fast lane: protocol, tables, analysis, CLI errors (no models, no servers), 2 workers
	HF_HUB_OFFLINE=1 $(BIN)/pytest -m "not slow and not infra" -n 2

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

bench: $(STAMP) ## candidate sets at paper scale: the stage before and now, the release's generator, peak memory
	$(BIN)/python benchmarks/negatives_throughput.py

# Images: one Dockerfile (images/Dockerfile) builds each image from its extras
# (images/imagetool.py) and its pins (images/constraints/<image>.txt). Names and tags come from
# autocomp.pipelines.cluster.images.image() (registry $AUTOCOMP_IMAGE_REGISTRY, tag = package version +
# git commit), the rule the compiled pipelines use. Docker where an engine answers, else buildah
# (chroot isolation, vfs storage: no daemon, no overlay mounts). DRY_RUN=1 prints the commands.
IMAGES         ?= core gpu caption
BUILDER        ?= $(shell docker info >/dev/null 2>&1 && echo docker || echo buildah)
STORAGE_DRIVER ?= vfs
ENGINE          = $(if $(filter buildah,$(BUILDER)),buildah --storage-driver $(STORAGE_DRIVER),docker)
BUILD_CMD       = $(if $(filter buildah,$(BUILDER)),$(ENGINE) bud --isolation chroot,docker build)
# Where no registry is reachable, `make base-image` bootstraps a local base from Debian packages;
# once it exists it is the default base.
LOCAL_BASE     := localhost/autocomp-base:bookworm
BASE_IMAGE     ?= $(shell $(ENGINE) inspect --type image $(LOCAL_BASE) >/dev/null 2>&1 \
                    && echo $(LOCAL_BASE) || echo docker.io/library/python:3.11-slim-bookworm)
RUN_OR_ECHO     = $(if $(DRY_RUN),echo,)
IMAGE_WORK     := $(CURDIR)/build/images

# The tag rule needs only the package source (no install): a light import of autocomp.
COMPONENTS  = PYTHONPATH=src $(PYTHON) -c "from autocomp.pipelines.cluster.images import
IMAGE_TAG   = $(COMPONENTS) image_tag; print(image_tag())"
IMAGE_NAME  = $(COMPONENTS) image; import warnings; warnings.simplefilter('ignore'); \
              print(image('$$kind').split('@')[0])"

images: ## build the images, print their sizes (IMAGES="core" picks; DRY_RUN=1 prints only)
	@flags=$$($(PYTHON) images/imagetool.py pip-flags $(BUILDER) $(IMAGE_WORK)/pip) || exit 1; \
	commit=$$($(COMPONENTS) git_commit; print(git_commit() or '')"); \
	for kind in $(IMAGES); do \
	  tag=$$(AUTOCOMP_IMAGE_LOCK=/dev/null $(IMAGE_NAME)) && \
	  extras=$$($(PYTHON) images/imagetool.py extras $$kind) || exit 1; \
	  start=$$(date +%s); \
	  $(RUN_OR_ECHO) $(BUILD_CMD) $$flags --build-arg BASE_IMAGE=$(BASE_IMAGE) \
	    --build-arg EXTRAS=$$extras --build-arg CONSTRAINTS=images/constraints/$$kind.txt \
	    --build-arg GIT_COMMIT=$$commit -f images/Dockerfile -t $$tag . || exit 1; \
	  $(if $(DRY_RUN),:,echo "$$tag: $$($(ENGINE) images --format '{{.Size}}' $$tag)," \
	    "built in $$(( $$(date +%s) - start )) s"); \
	done

# buildah records the pushed manifest's digest in a file; docker prints it.
PUSH_DIGEST = $(if $(filter buildah,$(BUILDER)),\
  $(ENGINE) push --digestfile $(IMAGE_WORK)/$$kind.digest $$tag >&2 && cat $(IMAGE_WORK)/$$kind.digest,\
  docker push $$tag | tee /dev/stderr | sed -n 's/.*digest: \(sha256:[0-9a-f]*\).*/\1/p')

push: ## push the images built by `make images`; record their digests in images/lock.json
	@mkdir -p $(IMAGE_WORK); for kind in $(IMAGES); do \
	  tag=$$(AUTOCOMP_IMAGE_LOCK=/dev/null $(IMAGE_NAME)) || exit 1; \
	  if [ -n "$(DRY_RUN)" ]; then echo $(ENGINE) push $$tag; continue; fi; \
	  digest=$$($(PUSH_DIGEST)) || exit 1; \
	  $(PYTHON) images/imagetool.py lock $$kind $$tag $$digest || exit 1; \
	done

base-image: ## bootstrap the local base image from Debian packages (debootstrap, python3; root)
	$(RUN_OR_ECHO) env BUILDAH="buildah --storage-driver $(STORAGE_DRIVER)" \
	  images/base/bootstrap.sh $(LOCAL_BASE)

constraints: ## resolve each image's pins for its own extras (images/constraints/<image>.txt)
	@for kind in $(IMAGES); do $(PYTHON) images/imagetool.py constraints $$kind || exit 1; done

clean: ## remove the venv, caches and demo outputs
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis build dist src/*.egg-info
