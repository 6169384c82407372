"""Compile the three pipelines to YAML (`autocomp compile`): each built for the cluster now
(images resolved, cluster settings applied), with the `paper` profile's parameter defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.pipelines.plumbing import PIPELINES


def load(name: str) -> Any:
    """One pipeline built for the cluster (a kfp GraphComponent)."""
    from autocomp.pipelines.definitions import build

    return build(name, cluster=True)


def compile_all(out: str | Path = "dist") -> dict[str, Path]:
    """Write dist/<pipeline>.yaml for every pipeline (`out` checked first: a folder or nothing
    yet, in an existing folder); return the paths."""
    from kfp import compiler

    from autocomp.store.shards import prepare_folder

    out = prepare_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in PIPELINES:
        path = out / f"{name}.yaml"
        compiler.Compiler().compile(load(name), str(path))
        paths[name] = path
    return paths
