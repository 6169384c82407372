"""Dockerfiles through hadolint, `make images` as a dry run, manifests through
kubernetes-validate (no Docker engine or cluster here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autocomp.pipelines.components import IMAGE_KINDS, image

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOCKERFILES = sorted((ROOT / "images").glob("*/Dockerfile"))
MANIFESTS = sorted(
    p for p in (ROOT / "manifests").rglob("*.yaml") if p.name != "kustomization.yaml"
)

pytestmark = pytest.mark.infra


def test_every_image_kind_has_a_dockerfile():
    assert sorted(p.parent.name for p in DOCKERFILES) == sorted(IMAGE_KINDS)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfiles_pass_hadolint_and_the_house_rules(dockerfile):
    done = subprocess.run([BIN / "hadolint", "--failure-threshold", "warning", str(dockerfile)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    text = dockerfile.read_text()
    assert text.count("ARG BASE_IMAGE=") == 1 and "FROM ${BASE_IMAGE}" in text
    assert "USER 1000" in text  # non-root
    assert "--constraint constraints.txt" in text  # pinned dependencies


def test_hadolint_is_not_vacuous(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install torch\n")
    done = subprocess.run([BIN / "hadolint", "--failure-threshold", "warning", str(bad)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode != 0 and "DL3013" in done.stdout


def test_make_images_dry_run_uses_the_components_tags():
    done = subprocess.run(["make", "-s", "images", "push", "DRY_RUN=1", "BUILDER=buildah"],
                          cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for kind in IMAGE_KINDS:
        assert any(f"-f images/{kind}/Dockerfile -t {image(kind)} ." in line
                   and line.startswith("buildah bud --isolation chroot") for line in lines)  # fmt: skip
        assert f"buildah push {image(kind)}" in lines


def test_manifests_validate_against_the_kubernetes_schema():
    done = subprocess.run([BIN / "kubernetes-validate", "--strict", *map(str, MANIFESTS)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("passed") + done.stderr.count("passed") >= 8


def test_kubernetes_validate_is_not_vacuous(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}\nspec: {schedule: 3}\n"
    )
    done = subprocess.run([BIN / "kubernetes-validate", "--strict", str(bad)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode != 0


def test_kustomizations_name_existing_files_and_the_secret_is_a_template():
    for kustomization in (ROOT / "manifests").rglob("kustomization.yaml"):
        for resource in yaml.safe_load(kustomization.read_text())["resources"]:
            assert (kustomization.parent / resource).exists(), (kustomization, resource)
    secret = yaml.safe_load((ROOT / "manifests/base/secret.template.yaml").read_text())
    assert set(secret["stringData"].values()) == {""}
    base = yaml.safe_load((ROOT / "manifests/base/kustomization.yaml").read_text())
    assert "secret.template.yaml" not in base["resources"]
