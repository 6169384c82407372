"""The Kubeflow pipelines. Their definitions ship inside the installed package
(`autocomp.pipelines`), so `autocomp compile/upload/submit/schedule/run` work from any folder and
inside the images; this folder is the entry point users look for:

    from pipelines import generate_benchmark, evaluate_models, finetune_models

Each name builds its pipeline for the cluster when it is looked up (images resolved then);
importing this package builds nothing.
"""

from typing import Any

from autocomp.pipelines.plumbing import PIPELINES

__all__ = list(PIPELINES)


def __getattr__(name: str) -> Any:
    if name in PIPELINES:
        from autocomp.pipelines.definitions import build

        return build(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
