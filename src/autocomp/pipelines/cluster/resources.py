"""Where each step runs on a cluster: resources, scratch disk, retries, caching, secrets, the
model cache, GPU placement. Data, in a few dicts: the pipelines apply it to their tasks; kfp.local
ignores all of it (`configure(..., cluster=False)` adds nothing that would break a local run).

Score steps get their resources from the model registry instead of from STEPS: models are grouped
into resource classes by GPU count and the GPU memory each GPU must have (`score_class`), and each
class is one sub-pipeline with its own GPU request, node affinity, CPU, memory and scratch disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autocomp.pipelines.cluster import capacity

# cpu/memory are limits (requests are set equal); gpus: nvidia.com/gpu count; disk: the size of
# the step's scratch volume (a generic ephemeral volume at /scratch, TMPDIR and downloads go
# there; KFP 2.17's SDK has no ephemeral-storage resource setter, and a volume is what the
# scheduler reserves); store: gets the S3 Secret; hub: gets the HF token and the model cache.
# memory and disk here are floors: a compiled step gets the larger of these and what the
# capacity plan says it needs at its design scale (capacity.resources: memory, disk and the
# step's timeout, from the numbers in cluster/capacity.py).
STEPS: dict[str, dict[str, Any]] = {
    "sample": {"cpu": "1", "memory": "2G", "cache": True, "store": True},
    "shard_plan": {"cpu": "1", "memory": "1G", "cache": True},
    "caption": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3,
                "hub": True, "disk": "60Gi"},
    "render": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3,
               "hub": True, "store": True, "disk": "120Gi"},
    "validate": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3,
                 "hub": True, "store": True, "disk": "120Gi"},
    "curate": {"cpu": "2", "memory": "8G", "cache": True, "store": True},  # tables only
    "negatives": {"cpu": "4", "memory": "8G", "cache": True, "store": True},
    "publish": {"cpu": "4", "memory": "16G", "cache": False, "retries": 3, "store": True},
    # (publish and report: scratch disk from the capacity plan only; publish streams store to
    # store and holds a few parts, report reads the table and predictions, never images)
    "select_models": {"cpu": "1", "memory": "1G", "cache": False},
    "collect_scores": {"cpu": "2", "memory": "4G", "cache": False, "store": True},
    "report": {"cpu": "2", "memory": "8G", "cache": False, "retries": 3, "store": True},
    "finetune_split": {"cpu": "2", "memory": "8G", "cache": True, "store": True},
    "finetune_plan": {"cpu": "1", "memory": "1G", "cache": False},
    "finetune_train": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 2,
                       "hub": True, "store": True, "disk": "120Gi"},
    "finetune_score": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3,
                       "hub": True, "store": True, "disk": "120Gi"},
    "finetune_report": {"cpu": "2", "memory": "8G", "cache": False, "retries": 3, "store": True},
}  # fmt: skip
SECRET = "autocomp-s3"
SECRET_KEYS = {
    "endpoint": "AUTOCOMP_S3_ENDPOINT",
    "access_key": "AWS_ACCESS_KEY_ID",
    "secret_key": "AWS_SECRET_ACCESS_KEY",
}
HF_SECRET = "autocomp-hf"  # key `token`: a Hugging Face token with access to the gated models
HF_SECRET_KEYS = {"token": "HF_TOKEN"}
MODEL_CACHE_PVC = "autocomp-model-cache"  # filled once by manifests/base/model-cache-warmup.yaml
MODEL_CACHE_PATH = "/models"
MODEL_CACHE_ENV = {  # where the libraries look for weights inside a pod
    "HF_HUB_CACHE": f"{MODEL_CACHE_PATH}/hub",
    "AUTOCOMP_WEIGHTS_DIR": f"{MODEL_CACHE_PATH}/weights",  # file: weights (e.g. negclip.pth)
}
SCRATCH_PATH = "/scratch"
# NVIDIA GPU feature discovery (the GPU operator) labels every GPU node with its per-GPU memory
# in MiB; GKE/EKS without the operator: label the nodes the same way (README, cluster section).
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_TIERS_GB = (16, 24, 40, 48, 80, 141)  # the memory sizes GPUs are sold with
# host memory: a share of the GPU memory (weights pass through it when they load), at least 16 GB
SCORE_HOST = {"cpu_min": 4, "cpu_per_gpu": 4, "memory_gb_min": 16, "memory_per_gpu_memory": 0.75}
SCORE_PARALLELISM = {0: 4, 1: 8}  # concurrent score pods per class, by GPU count; else 1


@dataclass(frozen=True)
class ScoreClass:
    """The resources of one group of score steps: `gpus` GPUs of at least `gpu_gb` GB each."""

    gpus: int
    gpu_gb: int

    @property
    def name(self) -> str:
        return "cpu" if not self.gpus else f"{self.gpus}x{self.gpu_gb}gb"

    @property
    def cpu(self) -> str:
        return str(max(SCORE_HOST["cpu_min"], SCORE_HOST["cpu_per_gpu"] * self.gpus))

    @property
    def memory(self) -> str:  # the capacity plan's: the host share plus the streamed batches
        return capacity.score_resources(self)["memory"]

    @property
    def disk(self) -> str:  # the capacity plan's: weights when the cache misses, one part
        return capacity.score_resources(self)["disk"]

    @property
    def timeout(self) -> int:  # the capacity plan's: 2 x the slowest model's pass + 1 h
        return capacity.score_resources(self)["timeout"]

    @property
    def parallelism(self) -> int:
        return SCORE_PARALLELISM.get(self.gpus, 1)


def score_class(gpus: int, gpu_memory_gb: float) -> ScoreClass:
    """The resource class of a model that needs `gpus` GPUs and `gpu_memory_gb` GB in all:
    the smallest GPU tier that holds its share on each GPU."""
    if not gpus:
        return ScoreClass(0, 0)
    share = gpu_memory_gb / gpus
    tier = next((t for t in GPU_TIERS_GB if t >= share), None)
    if tier is None:
        raise ValueError(
            f"{gpu_memory_gb} GB on {gpus} GPUs is {share:.0f} GB per GPU, more than any GPU "
            f"({GPU_TIERS_GB[-1]} GB); give the model more GPUs in the registry"
        )
    return ScoreClass(gpus, tier)


def gpu_memory_affinity(gpu_gb: int) -> list[dict[str, Any]]:
    """Node affinity: nodes whose GPUs have at least `gpu_gb` GB (the label is in MiB; a 40 GB
    card reports about 40960, an 80 GB one about 81559)."""
    return [{"key": GPU_MEMORY_LABEL, "operator": "Gt", "values": [str(gpu_gb * 1000 - 1)]}]


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
        spec = {"cpu": score.cpu, "memory": score.memory, "cache": False, "retries": 3,
                "store": True, "hub": True, "disk": score.disk}  # fmt: skip
        if cluster:
            spec["timeout"] = score.timeout
    task.set_cpu_limit(spec["cpu"]).set_cpu_request(spec["cpu"])
    task.set_memory_limit(spec["memory"]).set_memory_request(spec["memory"])
    task.set_caching_options(spec["cache"])
    if not cluster:
        return task
    if spec.get("retries"):
        task.set_retry(
            num_retries=spec["retries"],
            backoff_duration="60s",
            backoff_factor=2.0,
            backoff_max_duration="3600s",
        )
    if spec.get("timeout"):
        from kfp import kubernetes

        kubernetes.set_timeout(task, int(spec["timeout"]))
    gpus = score.gpus if score is not None else spec.get("gpus", 0)
    if gpus:
        _place_on_gpus(task, gpus, score.gpu_gb if score is not None else 0)
    _wire_volumes_and_secrets(task, spec)
    return task


def _sized(spec: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any]:
    """The plan's memory and disk where they exceed the step's floors, and its timeout."""

    def amount(text: str) -> float:
        return float(text.rstrip("GiB")) * (2**30 if text.endswith("Gi") else 1e9)

    out = {k: v for k, v in planned.items() if k == "timeout"}
    for key in ("memory", "disk"):
        if key in planned and (key not in spec or amount(planned[key]) > amount(spec[key])):
            out[key] = planned[key]
    return out


def _place_on_gpus(task: Any, gpus: int, gpu_gb: int) -> None:
    from kfp import kubernetes

    task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(gpus)
    kubernetes.add_toleration(task, key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
    if gpu_gb:
        kubernetes.add_node_affinity(task, match_expressions=gpu_memory_affinity(gpu_gb))


def _wire_volumes_and_secrets(task: Any, spec: dict[str, Any]) -> None:
    from kfp import kubernetes

    if spec.get("disk"):
        kubernetes.add_ephemeral_volume(
            task,
            volume_name="scratch",
            mount_path=SCRATCH_PATH,
            access_modes=["ReadWriteOnce"],
            size=spec["disk"],
        )
        task.set_env_variable("TMPDIR", SCRATCH_PATH)
    if spec.get("store"):
        kubernetes.use_secret_as_env(task, secret_name=SECRET, secret_key_to_env=SECRET_KEYS)
    if spec.get("hub"):
        # optional: runs of ungated models start without it; a gated model then fails with the
        # weights error that names HF_TOKEN (and `autocomp doctor` says the Secret is missing)
        kubernetes.use_secret_as_env(
            task, secret_name=HF_SECRET, secret_key_to_env=HF_SECRET_KEYS, optional=True
        )
        kubernetes.mount_pvc(task, pvc_name=MODEL_CACHE_PVC, mount_path=MODEL_CACHE_PATH)
        for name, value in MODEL_CACHE_ENV.items():
            task.set_env_variable(name, value)
