"""Components of the finetune_models pipeline (autocomp.pipelines.definitions.components)."""

from autocomp.pipelines.definitions.components.finetune import (
    plan,
    report,
    score_finetuned,
    score_pretrained,
    split,
    train,
)

__all__ = ["plan", "report", "score_finetuned", "score_pretrained", "split", "train"]
