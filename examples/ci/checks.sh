#!/usr/bin/env bash
# The checks both example workflows run before a release: the Dockerfile through hadolint and
# the repository's image tests (tests/infra/test_images_manifests.py: hadolint's rules, the pins
# of every image, `make images` as a dry run, the manifests) -- the same tests autocomp's CI
# runs. The image-size check runs in .ci/release (imagetool verify: each pushed image against its
# budget, images/imagetool.py SIZE_BUDGET_MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/hadolint --failure-threshold warning images/Dockerfile
HF_HUB_OFFLINE=1 .venv/bin/pytest -q -p no:cacheprovider tests/infra/test_images_manifests.py
