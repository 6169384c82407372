"""Compile both pipelines to YAML (`autocomp compile`)."""

from __future__ import annotations

from pathlib import Path

PIPELINES = {
    "generate_benchmark": "autocomp.pipelines.generate_benchmark:generate_benchmark",
    "evaluate_models": "autocomp.pipelines.evaluate_models:evaluate_models",
    "finetune_models": "autocomp.pipelines.finetune_models:finetune_models",
}


def load(name: str):  # noqa: ANN201  (a kfp GraphComponent)
    import importlib

    module, attr = PIPELINES[name].split(":")
    return getattr(importlib.import_module(module), attr)


def compile_all(out: str | Path = "dist") -> dict[str, Path]:
    """Write dist/<pipeline>.yaml for every pipeline; return the paths."""
    from kfp import compiler

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in PIPELINES:
        path = out / f"{name}.yaml"
        compiler.Compiler().compile(load(name), str(path))
        paths[name] = path
    return paths
