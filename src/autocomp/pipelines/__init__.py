"""The Kubeflow pipelines (generate_benchmark, evaluate_models, finetune_models), in three parts:

- plumbing.py: the one table from a profile (autocomp.config) to the pipelines' parameters,
  their components' configurations and the parameter checks;
- definitions/: the pipelines and their components;
- cluster/: what talks to a cluster or prepares for one: images, resources, compile, the KFP
  client (upload, schedule, submit), doctor;
- local/: the local run through kfp.local (one runner for the three pipelines, the live task
  view, the captured logs).

`from autocomp.pipelines import generate_benchmark` builds the cluster pipeline at that moment
(its images resolved then); importing this package builds nothing and needs no kfp.
"""

from __future__ import annotations

from typing import Any

from autocomp.pipelines.plumbing import PIPELINES


def __getattr__(name: str) -> Any:
    if name in PIPELINES:
        from autocomp.pipelines.definitions import build

        return build(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
