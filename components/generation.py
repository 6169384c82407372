"""Components of the generate_benchmark pipeline (defined in autocomp.pipelines.components)."""

from autocomp.pipelines.components.generation import (
    caption,
    collect,
    curate,
    negatives,
    publish,
    render,
    sample,
    shard_plan,
    validate,
)

__all__ = [
    "caption",
    "collect",
    "curate",
    "negatives",
    "publish",
    "render",
    "sample",
    "shard_plan",
    "validate",
]
