"""Components of the generate_benchmark pipeline (autocomp.pipelines.definitions.components)."""

from autocomp.pipelines.definitions.components.generation import (
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
