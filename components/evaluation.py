"""Components of the evaluate_models pipeline (defined in autocomp.pipelines.components)."""

from autocomp.pipelines.components.evaluation import (
    collect_scores,
    fetch,
    report,
    score,
    select_models,
)

__all__ = ["collect_scores", "fetch", "report", "score", "select_models"]
