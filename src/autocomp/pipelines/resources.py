"""Where each step runs on a cluster: resources, retries, caching, secrets, GPU placement.

Data, in one dict: the pipelines apply it to their tasks; kfp.local ignores all of it.
"""

from __future__ import annotations

from typing import Any

# cpu/memory are limits (requests are set equal); gpus: nvidia.com/gpu count
STEPS: dict[str, dict[str, Any]] = {
    "sample": {"cpu": "1", "memory": "2G", "cache": True},
    "shard_plan": {"cpu": "1", "memory": "1G", "cache": True},
    "caption": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3},
    "render": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3},
    "validate": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3},
    "collect": {"cpu": "2", "memory": "4G", "cache": True},
    "curate": {"cpu": "2", "memory": "8G", "cache": True},
    "negatives": {"cpu": "4", "memory": "8G", "cache": True},
    "publish": {"cpu": "2", "memory": "8G", "cache": False, "retries": 3, "store": True},
    "fetch": {"cpu": "2", "memory": "8G", "cache": False, "retries": 3, "store": True},
    "select_models": {"cpu": "1", "memory": "1G", "cache": False},
    "score": {"cpu": "8", "memory": "64G", "cache": False, "retries": 3, "store": True},
    "collect_scores": {"cpu": "2", "memory": "4G", "cache": False},
    "report": {"cpu": "2", "memory": "8G", "cache": False, "retries": 3, "store": True},
    "finetune_split": {"cpu": "2", "memory": "8G", "cache": True},
    "finetune_plan": {"cpu": "1", "memory": "1G", "cache": False},
    "finetune_train": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 2},
    "finetune_score": {"cpu": "8", "memory": "64G", "gpus": 1, "cache": True, "retries": 3},
    "finetune_report": {"cpu": "2", "memory": "8G", "cache": False, "retries": 3, "store": True},
}
DEFAULT_STORE = "s3://autocomp/runs"  # the pipelines' store parameter default
SECRET = "autocomp-s3"
SECRET_KEYS = {
    "endpoint": "AUTOCOMP_S3_ENDPOINT",
    "access_key": "AWS_ACCESS_KEY_ID",
    "secret_key": "AWS_SECRET_ACCESS_KEY",
}
GPU_NODE_LABEL = ("nvidia.com/gpu.present", "true")


def configure(task: Any, step: str, gpus: int | None = None, retries: bool = True) -> Any:
    """Apply one step's settings to a pipeline task (gpus overrides the step's GPU count;
    retries=False for the local run, where a failure is a bug to see at once, not a flaky node
    to wait out with backoff)."""
    from kfp import kubernetes

    spec = STEPS[step]
    gpus = spec.get("gpus", 0) if gpus is None else gpus
    task.set_cpu_limit(spec["cpu"]).set_cpu_request(spec["cpu"])
    task.set_memory_limit(spec["memory"]).set_memory_request(spec["memory"])
    task.set_caching_options(spec["cache"])
    if retries and spec.get("retries"):
        task.set_retry(
            num_retries=spec["retries"],
            backoff_duration="60s",
            backoff_factor=2.0,
            backoff_max_duration="3600s",
        )
    if gpus:
        task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(gpus)
        kubernetes.add_node_selector(
            task, label_key=GPU_NODE_LABEL[0], label_value=GPU_NODE_LABEL[1]
        )
        kubernetes.add_toleration(
            task, key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"
        )
    if spec.get("store"):
        kubernetes.use_secret_as_env(task, secret_name=SECRET, secret_key_to_env=SECRET_KEYS)
    return task
