"""The pipeline definitions (generate_benchmark, evaluate_models, finetune_models), their KFP
components (components/) and the helpers those components import inside the images
(artifacts, plan, report_outputs: no kfp). Each definition module's `build(cluster)` makes its
pipeline (builder.Build: cluster settings and images, or the local run's bare tasks); nothing is
built at import."""

from __future__ import annotations

import importlib
from typing import Any

from autocomp.pipelines.plumbing import PIPELINES


def build(pipeline: str, cluster: bool = True) -> Any:
    """One pipeline, built now (cluster=True: what compile writes; False: the local run's)."""
    if pipeline not in PIPELINES:
        raise ValueError(f"unknown pipeline {pipeline!r}; one of {PIPELINES}")
    module = importlib.import_module(f"autocomp.pipelines.definitions.{pipeline}")
    return module.build(cluster)
