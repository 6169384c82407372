"""Where each step runs on a cluster: resources, scratch disk, retries, caching, secrets, the
model cache, GPU placement. Data, in a few dicts: the pipelines apply it to their tasks; kfp.local
ignores all of it (`configure(..., cluster=False)` adds nothing that would break a local run).

How each setting reaches a pod (docs/cluster.md cites the backend source of each):
- cpu/memory: limits with equal requests. gpus: `nvidia.com/gpu` limit plus a toleration of the
  `nvidia.com/gpu` taint.
- disk: an emptyDir at /scratch with that size limit (TMPDIR points there). An emptyDir is
  writable by the images' uid 1000; a freshly provisioned volume is root-owned and KFP sets no
  fsGroup. The size limit is an eviction limit, not a reservation: GPU nodes need that much local
  disk (doctor checks their allocatable ephemeral storage).
- timeout: the longest one attempt may run (activeDeadlineSeconds: a hung attempt is stopped and
  retried, and the retry resumes from what the step committed to the store). It also sizes the
  retry window: Argo measures `backoff.maxDuration` from the first attempt's start and stops
  every retry at its end, so the window is every attempt's timeout plus the time a retry may
  wait for a node plus the backoffs (`retry_window`). The numbers are the capacity plan's at its
  design scale (cluster/capacity.py: 2 x the expected wall + 1 h) where they exceed STEPS'.
- GPU memory: from the models a step loads (`step_need`, the registries' `gpu_memory_gb`),
  rounded up to a GPU size (GPU_TIERS_GB); nodes qualify by GPU feature discovery's per-GPU
  memory label, in MiB (GPU_CARDS: the values real cards report). Backends with node affinity
  (KFP 2.14+) select on that label; older ones on a boolean label per size
  (`autocomp.io/gpu-<N>gb=true`) that doctor prints the `kubectl label` commands for.

Score steps get their resources from the model registry instead of from STEPS: models are grouped
into resource classes by GPU count and the GPU memory each GPU must have (`score_class`), and each
class is one sub-pipeline with its own GPU request, placement, CPU, memory and scratch disk.

What the compiled YAML may contain depends on the backend it is compiled for: `building(target)`
(compile) sets it for the tasks configured meanwhile; cluster.backends holds the matrix.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from autocomp.pipelines.cluster import capacity
from autocomp.pipelines.cluster.backends import DEFAULT_TARGET, Target
from autocomp.pipelines.cluster.gpus import (  # noqa: F401 (re-exported)
    GPU_TIERS_GB,
    SCORE_HOST,
    SCORE_PARALLELISM,
    ScoreClass,
    score_class,
    tier_for,
)

# cpu/memory: limits (requests equal); gpus: nvidia.com/gpu count; disk: the /scratch size limit;
# timeout: the longest expected attempt (memory, disk and timeout are floors: a compiled step gets
# the larger of these and what the capacity plan says it needs at its design scale,
# capacity.resources); store: gets the S3 Secret; hub: gets the HF token and
# the model cache; gpu_models: the profile's models the step loads at once (their GPU memory is
# summed; `finetune_models`: the largest one).
STEPS: dict[str, dict[str, Any]] = {
    "sample": {"cpu": "1", "memory": "2G", "cache": True, "store": True, "timeout": "1h"},
    "shard_plan": {"cpu": "1", "memory": "1G", "cache": True, "timeout": "10m"},
    "caption": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3,
                "hub": True, "disk": "60Gi", "timeout": "12h", "gpu_models": ("captioner",)},
    "render": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3,
               "hub": True, "store": True, "disk": "120Gi", "timeout": "12h",
               "gpu_models": ("renderer",)},
    "validate": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3,
                 "hub": True, "store": True, "disk": "120Gi", "timeout": "12h",
                 "gpu_models": ("detector", "segmenter", "vqa")},
    "curate": {"cpu": "2", "memory": "8G", "cache": True, "store": True,
               "timeout": "2h"},  # tables only
    "negatives": {"cpu": "4", "memory": "8G", "cache": True, "store": True, "timeout": "6h"},
    # publish and report: scratch disk from the capacity plan only (publish streams store to
    # store and holds a few parts; report reads the table and predictions, never images)
    "publish": {"cpu": "4", "memory": "16G", "cache": False, "retries": 3, "store": True,
                "timeout": "12h"},
    "select_models": {"cpu": "1", "memory": "1G", "cache": False, "timeout": "10m"},
    "benchmark_name": {"cpu": "1", "memory": "1G", "cache": False, "timeout": "10m"},
    "collect_scores": {"cpu": "2", "memory": "4G", "cache": False, "store": True,
                       "timeout": "1h"},
    "report": {"cpu": "2", "memory": "8G", "cache": False, "retries": 3, "store": True,
               "timeout": "4h"},
    "finetune_split": {"cpu": "2", "memory": "8G", "cache": True, "store": True, "timeout": "1h"},
    "finetune_plan": {"cpu": "1", "memory": "1G", "cache": False, "timeout": "10m"},
    "finetune_train": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 2,
                       "hub": True, "store": True, "disk": "120Gi", "timeout": "24h",
                       "gpu_models": ("finetune_models",)},
    "finetune_score": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3,
                       "hub": True, "store": True, "disk": "120Gi", "timeout": "6h",
                       "gpu_models": ("finetune_models",)},
    "finetune_report": {"cpu": "2", "memory": "8G", "cache": False, "retries": 3, "store": True,
                        "timeout": "2h"},
}  # fmt: skip
# Retries: the first wait, the (integer: Argo parses it with Atoi) factor, and how long a retry
# may wait for a node (Pending time counts against the window: it starts at the first attempt).
RETRY = {"backoff_s": 60, "factor": 2, "queue_s": 3600}
SECRET = "autocomp-s3"
SECRET_KEYS = {
    "endpoint": "AUTOCOMP_S3_ENDPOINT",
    "access_key": "AWS_ACCESS_KEY_ID",
    "secret_key": "AWS_SECRET_ACCESS_KEY",
}
HF_SECRET = "autocomp-hf"  # key `token`: a Hugging Face token with access to the gated models
HF_SECRET_KEYS = {"token": "HF_TOKEN"}
MODEL_CACHE_PVC = "autocomp-model-cache"  # filled once by the warm-up Job (cluster.warmup)
MODEL_CACHE_PATH = "/models"
MODEL_CACHE_ENV = {  # where the libraries look for weights inside a pod
    "HF_HUB_CACHE": f"{MODEL_CACHE_PATH}/hub",
    "AUTOCOMP_WEIGHTS_DIR": f"{MODEL_CACHE_PATH}/weights",  # file: weights (e.g. negclip.pth)
}
SCRATCH_PATH = "/scratch"
# NVIDIA GPU feature discovery (the GPU operator) labels every GPU node with its per-GPU memory
# in MiB; without the operator label the nodes the same way (docs/cluster.md).
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
TIER_LABEL = "autocomp.io/gpu-{gb}gb"  # node selector placement (backends without affinity)
# What GPU feature discovery reports for real cards (nvidia.com/gpu.memory, MiB), with the size
# each is sold as. tests/pipelines read it: every tier admits the cards of its size and larger,
# and no smaller one.
GPU_CARDS: dict[str, tuple[int, int]] = {
    "Tesla-T4": (16, 15360),
    "NVIDIA-A10G": (24, 23028),
    "NVIDIA-L4": (24, 23034),
    "Tesla-V100-SXM2-32GB": (32, 32768),
    "NVIDIA-A100-SXM4-40GB": (40, 40960),
    "NVIDIA-L40S": (48, 46068),
    "NVIDIA-A100-SXM4-80GB": (80, 81920),
    "NVIDIA-H100-PCIe": (80, 81559),
    "NVIDIA-H200": (141, 143771),
}


def seconds(duration: str | int) -> int:
    """`12h`, `90m`, `30s` (or a number of seconds) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    if isinstance(duration, int):
        return duration
    if duration[-1] in units:
        return int(float(duration[:-1]) * units[duration[-1]])
    return int(duration)


def retry_window(retries: int, timeout: str | int) -> int:
    """Seconds from the first attempt's start within which every retry fits: each of the
    retries + 1 attempts its timeout and a wait for a node, plus each backoff."""
    attempts = (retries + 1) * (seconds(timeout) + RETRY["queue_s"])
    return attempts + sum(RETRY["backoff_s"] * RETRY["factor"] ** i for i in range(retries))


# ----------------------------------------------------------------------------- GPU memory


def tier_floor_mib(gpu_gb: int) -> int:
    """The per-GPU memory label (MiB) a node needs for a `gpu_gb` GB class: the class's size in
    GB (10^9 bytes) in MiB, which every card of that size reports at least (GPU_CARDS)."""
    from autocomp.pipelines.cluster.placement import tier_floor_mib as floor

    return floor(gpu_gb)


def node_tiers(memory_mib: int) -> list[int]:
    """The GPU sizes a node whose GPUs report `memory_mib` can serve."""
    return [t for t in GPU_TIERS_GB if memory_mib >= tier_floor_mib(t)]


def tier_label(gpu_gb: int) -> str:
    return TIER_LABEL.format(gb=gpu_gb)


def gpu_memory_affinity(gpu_gb: int) -> list[dict[str, Any]]:
    """Node affinity: nodes whose GPUs report at least tier_floor_mib(gpu_gb) MiB."""
    return [
        {"key": GPU_MEMORY_LABEL, "operator": "Gt", "values": [str(tier_floor_mib(gpu_gb) - 1)]}
    ]


def model_need(role: str, name: str) -> float:
    """The GPU memory (GB) one model of a role needs (the generation registry's, or the model
    registry's for the VQA judge and fine-tuned models)."""
    if role in ("vqa", "finetune_models"):
        from autocomp.scoring.registry import get_model

        return get_model(name).gpu_memory_gb
    from autocomp.generation.registry import get_generation_model

    return get_generation_model(role, name).gpu_memory_gb


def step_need(step: str, models: dict[str, Any]) -> float | None:
    """The GPU memory (GB) a step's models need (`models`: role -> name, or names for
    finetune_models); None for a step without models of its own."""
    roles = STEPS.get(step, {}).get("gpu_models")
    if not roles:
        return None
    total = 0.0
    for role in roles:
        given = models[role]
        names = [given] if isinstance(given, str) else list(given)
        total += max(model_need(role, n) for n in names)
    return total


def profile_models(profile: Any) -> dict[str, Any]:
    """role -> model of a profile (what the compiled GPU steps are placed for)."""
    return {**profile.roles(), "finetune_models": profile.finetune_models}


# ----------------------------------------------------------------------------- the build


@dataclass(frozen=True)
class Cluster:
    """What a cluster build is compiled for: the backend target, image pull secrets, and GPU
    sizes (GB) chosen for steps whose models are parameters (default: the paper profile's
    models' need, `step_need`)."""

    target: Target = DEFAULT_TARGET
    pull_secrets: tuple[str, ...] = ()
    gpu_sizes: tuple[tuple[str, int], ...] = ()
    tolerations: tuple[tuple[str, str, str], ...] = ()  # GPU-node taints beyond nvidia.com/gpu
    placement: str = "gfd"  # cluster.placement's scheme
    gpu_labels: tuple[tuple[int, str, str], ...] = ()  # --gpu-label GB:KEY=VALUE (labels)


GPU_TOLERATION = ("nvidia.com/gpu", "", "")  # every effect of the GPU operator's/GKE's taint


def parse_toleration(text: str) -> tuple[str, str, str]:
    """`key[=value][:effect]` (kubectl taint's form) as (key, value, effect); the key and value
    by the grammar the API server validates tolerations with (cluster.validate)."""
    from autocomp.errors import UsageError
    from autocomp.pipelines.cluster.validate import check_label_key, check_label_value

    rest, _, effect = text.rpartition(":") if text.count(":") else (text, "", "")
    key, _, value = rest.partition("=")
    if not key or effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise UsageError("tolerations", text, "give key[=value][:effect], e.g. sku=gpu:NoSchedule")
    check_label_key("tolerations", key)
    check_label_value("tolerations", value)
    return key, value, effect


def check_gpu_sizes(given: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """`step -> GB` for Cluster.gpu_sizes: GPU steps with models of their own, GPU sizes from
    GPU_TIERS_GB, each at least what the paper profile's models need."""
    from autocomp.config import PROFILES
    from autocomp.errors import UsageError

    steps = [s for s, spec in STEPS.items() if spec.get("gpu_models")]
    for step, gb in given.items():
        if step not in steps:
            raise UsageError("gpu_sizes", step, f"one of {', '.join(steps)}")
        if gb not in GPU_TIERS_GB:
            raise UsageError("gpu_sizes", f"{step}={gb}", f"a GPU size: {GPU_TIERS_GB}")
        need = step_need(step, profile_models(PROFILES["paper"])) or 0
        if gb < tier_for(need):
            raise UsageError("gpu_sizes", f"{step}={gb}", f"the default models need "
                             f"{tier_for(need)} GB GPUs")  # fmt: skip
    return tuple(sorted(given.items()))


DEFAULT_CLUSTER = Cluster()
_CLUSTER: contextvars.ContextVar[Cluster] = contextvars.ContextVar(
    "cluster", default=DEFAULT_CLUSTER
)


@contextlib.contextmanager
def building(cluster: Cluster) -> Iterator[None]:
    """Tasks configured inside are configured for `cluster` (compile)."""
    token = _CLUSTER.set(cluster)
    try:
        yield
    finally:
        _CLUSTER.reset(token)


def configure(
    task: Any,
    step: str,
    score: ScoreClass | None = None,
    cluster: bool = True,
) -> Any:
    """Apply one step's settings to a pipeline task (`score`: a score step's resource class;
    cluster=False for the local run: no retries (a failure there is a bug to see at once), and
    no environment that points at cluster volumes)."""
    spec = dict(STEPS.get(step, {}))
    if cluster and score is None:  # the capacity plan raises the floors (compiled runs only)
        spec.update(_sized(spec, capacity.resources(step)))
    if score is not None:
        sized = capacity.score_resources(score)  # the host share plus the streamed batches
        spec = {"cpu": score.cpu, "memory": str(sized["memory"]), "cache": False, "retries": 3,
                "store": True, "hub": True, "disk": str(sized["disk"])}  # fmt: skip
        if cluster:
            spec["timeout"] = int(sized["timeout"])
    task.set_cpu_limit(spec["cpu"]).set_cpu_request(spec["cpu"])
    task.set_memory_limit(spec["memory"]).set_memory_request(spec["memory"])
    task.set_caching_options(spec["cache"])
    if not cluster:
        return task
    settings = _CLUSTER.get()
    if spec.get("retries"):
        task.set_retry(
            num_retries=spec["retries"],
            backoff_duration=f"{RETRY['backoff_s']}s",
            backoff_factor=float(RETRY["factor"]),
            backoff_max_duration=f"{retry_window(spec['retries'], spec['timeout'])}s",
        )
    if spec.get("timeout"):  # activeDeadlineSeconds: one attempt's limit
        from kfp import kubernetes

        kubernetes.set_timeout(task, seconds(spec["timeout"]))
    if score is not None and score.gpus:
        _place_on_gpus(task, score.gpus, score.gpu_gb, settings)
    elif spec.get("gpus"):
        from autocomp.config import PROFILES

        chosen = dict(settings.gpu_sizes).get(step)
        tier = chosen or tier_for(step_need(step, profile_models(PROFILES["paper"])) or 0)
        _place_on_gpus(task, spec["gpus"], tier, settings, step)
    _wire_volumes_and_secrets(task, spec, settings)
    return task


def _sized(spec: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any]:
    """The plan's memory, disk and timeout where they exceed the step's floors."""

    def amount(text: str) -> float:
        return float(text.rstrip("GiB")) * (2**30 if text.endswith("Gi") else 1e9)

    out: dict[str, Any] = {}
    for key in ("memory", "disk"):
        if key in planned and (key not in spec or amount(planned[key]) > amount(spec[key])):
            out[key] = planned[key]
    if "timeout" in planned and seconds(planned["timeout"]) > seconds(spec.get("timeout", 0)):
        out["timeout"] = planned["timeout"]
    return out


def _place_on_gpus(
    task: Any, gpus: int, gpu_gb: int, settings: Cluster, step: str | None = None
) -> None:
    """The GPU request, tolerations and the placement scheme's node requirement
    (cluster.placement). A score class no card of the scheme holds stays unplaced (the package
    records it, submit refuses a run that scores it); a generation step always runs: refused."""
    from kfp import kubernetes

    from autocomp.pipelines.cluster.placement import place

    task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(gpus)
    for key, value, effect in (GPU_TOLERATION, *settings.tolerations):
        kubernetes.add_toleration(task, key=key, operator="Equal" if value else "Exists",
                                  value=value or None, effect=effect or None)  # fmt: skip
    found = place(settings.placement, gpus, gpu_gb, settings.target.has("node_affinity"),
                  settings.gpu_labels)  # fmt: skip
    if not found.placed and step is not None:
        from autocomp.errors import UsageError

        raise UsageError("placement", settings.placement, f"{step} needs {gpus} GPU(s) of "
                         f"{gpu_gb} GB: {found.note}; choose another --placement or "
                         f"--gpu-size")  # fmt: skip
    for key, value in found.selector.items():
        kubernetes.add_node_selector(task, label_key=key, label_value=value)
    if found.expressions:
        kubernetes.add_node_affinity(task, match_expressions=found.expressions)


def _wire_volumes_and_secrets(task: Any, spec: dict[str, Any], settings: Cluster) -> None:
    from kfp import kubernetes

    if settings.pull_secrets:
        kubernetes.set_image_pull_secrets(task, list(settings.pull_secrets))
    if spec.get("disk"):
        kubernetes.empty_dir_mount(
            task, volume_name="scratch", mount_path=SCRATCH_PATH, size_limit=spec["disk"]
        )
        task.set_env_variable("TMPDIR", SCRATCH_PATH)
    if spec.get("store"):
        kubernetes.use_secret_as_env(task, secret_name=SECRET, secret_key_to_env=SECRET_KEYS)
    if spec.get("hub"):
        # optional where the backend honours it (KFP 2.15+): runs of ungated models start
        # without it; a gated model then fails with the weights error that names HF_TOKEN.
        # Older backends need the Secret (an empty token is fine); doctor says which.
        optional = settings.target.has("secret_optional")
        kubernetes.use_secret_as_env(
            task, secret_name=HF_SECRET, secret_key_to_env=HF_SECRET_KEYS, optional=optional
        )
        kubernetes.mount_pvc(task, pvc_name=MODEL_CACHE_PVC, mount_path=MODEL_CACHE_PATH)
        for name, value in MODEL_CACHE_ENV.items():
            task.set_env_variable(name, value)
