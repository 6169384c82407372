"""The configuration of the fine-tuning stage, defined once: `paper` is Appendix A.9, `tiny` the
same recipe shrunk so that it runs on a CPU in seconds (tests, local default)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from autocomp.errors import UsageError

NEGATIVE_KINDS = ("swap", "confusion")


@dataclass(frozen=True)
class FinetuneConfig:
    """Every setting of a fine-tuning run (recorded in every output)."""

    family: str = "color"  # the training partition: Color N=2 Minimal
    n: int = 2
    condition: str = "minimal"
    heldout_fraction: float = 0.2  # of source concepts, for evaluation
    validation_fraction: float = 0.1  # of the training concepts, for early stopping
    k: int = 3  # hard negatives per positive
    peak_lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 0.1
    warmup_steps: int = 500
    steps: int = 5000
    batch_cosine: int = 2048  # positives per step, CLIP family
    batch_sigmoid: int = 4096  # positives per step, SigLIP family
    micro_batch: int = 256  # positives encoded at once with gradients (gradient caching)
    eval_every: int = 250  # steps between validation evaluations (and checkpoints)
    patience: int = 4  # evaluations without a better validation Confusion accuracy -> stop
    seeds: tuple[int, ...] = (0, 1, 2)
    mixed_precision: bool = True  # bf16 autocast on GPU; ignored on CPU

    def batch_for(self, score: str) -> int:
        """Positives per optimizer step for a model scored by `score` (cosine / sigmoid)."""
        return self.batch_sigmoid if score == "sigmoid" else self.batch_cosine

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> FinetuneConfig:
        """A copy with some settings changed (unknown names are refused)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise UsageError("fine-tuning setting", unknown[0], "unknown; see FinetuneConfig")
        return dataclasses.replace(self, **changes)


PROFILES: dict[str, FinetuneConfig] = {
    "paper": FinetuneConfig(),
    # Random-weight tiny models: a larger LR so that a few steps visibly move the loss.
    "tiny": FinetuneConfig(
        peak_lr=5e-4,
        warmup_steps=2,
        steps=8,
        batch_cosine=8,
        batch_sigmoid=8,
        micro_batch=4,
        eval_every=4,
        patience=2,
        seeds=(0,),
        mixed_precision=False,
    ),
}


def profile(name: str) -> FinetuneConfig:
    if name not in PROFILES:
        raise UsageError("--profile", name, f"must be one of {', '.join(PROFILES)}")
    return PROFILES[name]


def negative_kind(kind: str) -> str:
    if kind not in NEGATIVE_KINDS:
        raise UsageError("--negatives", kind, f"must be one of {', '.join(NEGATIVE_KINDS)}")
    return kind
