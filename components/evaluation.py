"""Components of the evaluate_models pipeline (autocomp.pipelines.definitions.components)."""

from autocomp.pipelines.definitions.components.evaluation import (
    collect_scores,
    fetch,
    report,
    score,
    select_models,
)

__all__ = ["collect_scores", "fetch", "report", "score", "select_models"]
