"""Fill the model cache once: every model the pipelines load, downloaded into the model-cache
PVC where the steps look (HF_HUB_CACHE=/models/hub), by a Job in the run namespace.

- `wanted()`: what to download, from the registries: every model `models=[all]` scores (open_clip
  weights by their hub repository, transformers weights at their pinned revision), the paper
  profile's generation models, and the `file:` weights that must be copied by hand.
- `choose_files()`: which files of a repository a loader reads (safetensors over pickles; a
  diffusers pipeline's folders, not its single-file checkpoint), so the cache holds one copy.
- `prefetch()`: `autocomp prefetch`, what the Job runs.
- `job_manifest()`: the Job `autocomp compile` writes beside the pipelines (dist/), with the
  pipelines' gpu image: no namespace (`kubectl -n <ns> create -f`), no Istio sidecar (a sidecar
  keeps a Job's pod running after its container exits), and a uid-1000 init step that makes the
  cache folders (fsGroup 1000 for block volumes; a share must be uid 1000's already) and
  says so where they are not writable: Pod Security `restricted` allows no root step.
  manifests/base/model-cache-warmup.yaml is the same Job with the image left to set.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocomp.pipelines.cluster.resources import (
    HF_SECRET,
    MODEL_CACHE_ENV,
    MODEL_CACHE_PATH,
    MODEL_CACHE_PVC,
)

JOB_NAME = "autocomp-model-cache-warmup"
PICKLES = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.msgpack", "*.h5", "*.ot", "*.onnx",
           "*.onnx_data", "*.gguf", "*.tflite", "*.mlmodel", "*.mlpackage/*", "flax_model*",
           "onnx/*", "openvino/*", "tf_model*", "coreml/*")  # fmt: skip


@dataclass(frozen=True)
class Wanted:
    """One model's weights: a hub repository (at a revision), or a file copied by hand."""

    model: str
    repo: str | None
    revision: str | None = None
    by_hand: str | None = None  # a file: weight, with where it goes


def wanted() -> list[Wanted]:
    """Every model the pipelines load, one entry per hub repository (sorted by model)."""
    from autocomp.config import PROFILES
    from autocomp.generation.registry import get_generation_model
    from autocomp.pipelines.cluster.plan import in_all
    from autocomp.scoring.registry import all_models

    registry = all_models()
    everything, left_out = in_all()
    found: dict[str, Wanted] = {}
    for name in sorted(set(everything) | set(left_out)):
        entry = registry[name]
        if entry.weights.startswith("file:"):
            where = (
                f"{MODEL_CACHE_ENV['AUTOCOMP_WEIGHTS_DIR']}/{entry.weights.removeprefix('file:')}"
            )
            found[name] = Wanted(name, None, by_hand=where)
        elif entry.kind.hub_ids:  # the fields its backend names a hub repository in
            repo = entry.kind.hub_repo(entry)
            missing = f"no {entry.kind.hub_ids[0]} in the registry for {entry.architecture}"
            found[name] = (
                Wanted(name, repo, entry.revision) if repo else Wanted(name, None, by_hand=missing)
            )
    paper = PROFILES["paper"]
    for role, name in paper.roles().items():
        if role == "vqa":
            entry = registry[name]
            found.setdefault(name, Wanted(name, entry.weights, entry.revision))
            continue
        model = get_generation_model(role, name)
        if model.weights != "tiny":
            found.setdefault(name, Wanted(name, model.weights, getattr(model, "revision", None)))
    return sorted(found.values(), key=lambda w: w.model)


def choose_files(files: list[str]) -> list[str]:
    """The files of a hub repository the loaders read: everything but pickled or other-framework
    weights when safetensors exist, and for a diffusers pipeline (model_index.json) not the
    top-level single-file checkpoints beside its component folders."""
    chosen = list(files)
    if any(f.endswith(".safetensors") for f in files):
        chosen = [f for f in chosen if not any(fnmatch.fnmatch(f, p) for p in PICKLES)]
    if "model_index.json" in files:
        chosen = [f for f in chosen if "/" in f or not f.endswith(".safetensors")]
    return sorted(chosen)


def prefetch(cache: str | Path, only: list[str] | None = None, dry_run: bool = False) -> int:
    """Download every wanted repository into `cache` (an HF hub cache); print one line per
    model; returns how many failed (a gated model without a token says so and the rest go on).
    `dry_run`: print what would be downloaded, touch nothing."""
    known = wanted()
    unknown = sorted(set(only or []) - {w.model for w in known})
    if unknown:
        from autocomp.errors import UsageError

        raise UsageError("models", unknown[0], "not a model the pipelines load; `autocomp "
                         "prefetch --list` lists them")  # fmt: skip
    entries = [w for w in known if not only or w.model in only]
    failed = 0
    for entry in entries:
        if entry.repo is None:
            print(f"by hand  {entry.model}: copy it to {entry.by_hand}")
            continue
        at = f"@{entry.revision}" if entry.revision else ""
        if dry_run:
            print(f"would    {entry.model}: {entry.repo}{at}")
            continue
        try:
            _download(entry.repo, entry.revision, cache)
        except Exception as exc:  # noqa: BLE001  (one model's failure is reported, the rest go on)
            failed += 1
            print(f"FAILED   {entry.model}: {entry.repo}{at}: {type(exc).__name__}: {exc}")
            continue
        print(f"cached   {entry.model}: {entry.repo}{at}")
    return failed


def _download(repo: str, revision: str | None, cache: str | Path) -> None:
    from huggingface_hub import HfApi, snapshot_download

    files = HfApi().list_repo_files(repo, revision=revision)
    snapshot_download(repo, revision=revision, cache_dir=str(cache),
                      allow_patterns=choose_files(files))  # fmt: skip


HEADER = """\
# Fill the model cache (autocomp-model-cache) once: every model `models=[all]` scores and the
# paper profile's generation models, downloaded from the hub by `autocomp prefetch` (safetensors
# over pickles; `autocomp prefetch --list` shows the list). `autocomp compile` writes this Job to
# dist/jobs/model-cache-warmup.yaml with your gpu image filled in (and your image pull secrets);
# manifests/base/model-cache-warmup.yaml names the image by kind only (set it by hand).
#   kubectl -n <namespace> create -f dist/jobs/model-cache-warmup.yaml     (your profile namespace
#   kubectl -n <namespace> logs -f job/autocomp-model-cache-warmup     in multi-user Kubeflow)
# No namespace in it; no Istio sidecar (a sidecar keeps a Job's pod running after the download
# ends; the Job serves nothing, so Kubeflow's global-deny-all has nothing to deny). Pod Security
# `restricted` (Kubeflow 1.11's kubeflow namespace enforces it): every step as uid 1000, no
# capabilities, seccomp RuntimeDefault; fsGroup 1000 hands a block volume to the steps' group,
# and the first step fails with one line where a share's root is not writable by uid 1000
# (Filestore, a root-squashing NFS export: docs/cluster.md, model cache). HF_TOKEN (autocomp-hf,
# optional here) for the gated models; file: weights (negclip.pth) are copied into
# /models/weights by hand. Re-run it after adding models: finished downloads are kept.
# Written by autocomp.pipelines.cluster.warmup.render.
"""


def render(image: str, pull_secrets: tuple[str, ...] = ()) -> str:
    """The warm-up Job as a manifest file: HEADER, then the Job."""
    import yaml

    return HEADER + yaml.safe_dump(job_manifest(image, pull_secrets), sort_keys=False)


def job_manifest(image: str, pull_secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """The warm-up Job (see the module's doc)."""
    hub = MODEL_CACHE_ENV["HF_HUB_CACHE"]
    weights = MODEL_CACHE_ENV["AUTOCOMP_WEIGHTS_DIR"]
    prepare = (
        f"mkdir -p {hub} {weights} && test -w {hub} && test -w {weights} || {{ echo 'the model "
        f"cache ({MODEL_CACHE_PATH}) is not writable by uid 1000: give the share to uid 1000 "
        "(docs/cluster.md, model cache)' >&2; exit 1; }"
    )
    user = {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True,
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}  # fmt: skip
    mount = [{"name": "models", "mountPath": MODEL_CACHE_PATH}]
    pod: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "securityContext": {"fsGroup": 1000, "fsGroupChangePolicy": "OnRootMismatch",
                            "seccompProfile": {"type": "RuntimeDefault"}},  # fmt: skip
        "initContainers": [{
            "name": "prepare",
            "image": image,
            "command": ["sh", "-c", prepare],
            "securityContext": user,
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                          "limits": {"cpu": "1", "memory": "256Mi"}},
            "volumeMounts": mount,
        }],
        "containers": [{
            "name": "download",
            "image": image,
            "command": ["autocomp", "prefetch", "--cache", hub],
            "env": [
                *({"name": k, "value": v} for k, v in MODEL_CACHE_ENV.items()),
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
                    "name": HF_SECRET, "key": "token", "optional": True}}},
            ],
            "securityContext": user,
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                          "limits": {"cpu": "4", "memory": "8Gi"}},
            "volumeMounts": mount,
        }],
        "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": MODEL_CACHE_PVC}}],
    }  # fmt: skip
    if pull_secrets:
        pod["imagePullSecrets"] = [{"name": name} for name in pull_secrets]
    labels = {"app.kubernetes.io/part-of": "autocomp"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": JOB_NAME, "labels": labels},
        "spec": {
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                # both forms: Istio reads the label first, older releases the annotation
                "metadata": {
                    "labels": {**labels, "sidecar.istio.io/inject": "false"},
                    "annotations": {"sidecar.istio.io/inject": "false"},
                },  # fmt: skip
                "spec": pod,
            },
        },
    }
