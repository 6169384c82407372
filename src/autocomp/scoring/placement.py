"""Where a generative model's weights go: one device, or split over several GPUs with
accelerate's `device_map="auto"` and a per-device `max_memory` budget.

A model whose registry entry asks for several GPUs is split over that many visible GPUs, each
given HEADROOM of its memory for weights (the rest holds activations and the KV cache of the
shared prefix). `fits` is the planner's rule, the same budget on paper: a test checks that every
registered model fits the GPUs its resource class asks for
(pipelines/cluster/resources.score_class).
"""

from __future__ import annotations

from typing import Any

from autocomp.errors import UsageError
from autocomp.scoring.registry import ModelEntry

HEADROOM = 0.9
BYTES_PER_PARAM = {"float32": 4, "bfloat16": 2, "float16": 2}


def weights_gib(entry: ModelEntry) -> float | None:
    """The weights' size in GiB at the entry's dtype, from its `params_b`; None if unknown."""
    if entry.params_b is None:
        return None
    return entry.params_b * 1e9 * BYTES_PER_PARAM[entry.dtype] / 2**30


def fits(entry: ModelEntry, gpu_gib: float) -> bool:
    """Whether the weights fit `entry.gpus` GPUs of `gpu_gib` GiB each within HEADROOM."""
    need = weights_gib(entry)
    return need is not None and need <= entry.gpus * gpu_gib * HEADROOM


def max_memory(entry: ModelEntry, device_gib: list[float]) -> dict[int, str]:
    """accelerate's per-device budget for the first `entry.gpus` devices."""
    return {i: f"{int(gib * HEADROOM * 1024)}MiB" for i, gib in enumerate(device_gib[: entry.gpus])}


def load_options(
    entry: ModelEntry,
    device: str,
    budget: dict[Any, str] | None = None,
    offload_folder: str | None = None,
) -> dict[str, Any]:
    """from_pretrained keywords that place the model: {} for one device (the caller moves it);
    a device_map with max_memory for a given `budget` (e.g. {"cpu": "2GiB", "disk": "20GiB"})
    or for a model that needs several GPUs."""
    if budget is not None:
        options: dict[str, Any] = {"device_map": "auto", "max_memory": budget}
        if "disk" in budget:
            options["offload_folder"] = offload_folder
        return options
    if not device.startswith("cuda") or entry.gpus <= 1:
        return {}
    import torch

    visible = torch.cuda.device_count()
    if visible < entry.gpus:
        raise UsageError(
            "models", entry.name, f"needs {entry.gpus} GPUs and {visible} are visible; "
            "run it where that many are (the pipeline's score class for it requests them)",
        )  # fmt: skip
    gib = [torch.cuda.get_device_properties(i).total_memory / 2**30 for i in range(entry.gpus)]
    return {"device_map": "auto", "max_memory": max_memory(entry, gib)}
