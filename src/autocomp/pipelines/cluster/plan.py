"""What evaluate_models schedules, decided when it is compiled (from the registry of the machine
that compiles it, not the one baked into an image): the score resource classes and the models in
each, what `models=["all"]` means, and the registry text each score step receives.

No kfp here: the select_models and score components import this module inside the image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.pipelines.cluster.gpus import ScoreClass, score_class
from autocomp.pipelines.plumbing import ALL


def _models(path: str | Path | None = None) -> dict[str, Any]:
    from autocomp.scoring.registry import all_models

    return all_models(path)


def score_groups(path: str | Path | None = None) -> dict[ScoreClass, list[str]]:
    """Every registered model by resource class (GPUs x size, and the engine where it has an
    image of its own: gpus.score_class), classes in GPU order."""
    groups: dict[ScoreClass, list[str]] = {}
    for entry in _models(path).values():
        # a tiny entry stays in its size's class: the tiny vLLM entries are the vllm lane's
        # (`make test-vllm`), and a class of their own would make every cluster pipeline name
        # the caption image's CPU variant (a 4 GB image, for test models)
        engine = None if entry.is_tiny else (entry.engine or entry.kind.default_engine)
        klass = score_class(entry.gpus, entry.gpu_memory_gb, engine)
        groups.setdefault(klass, []).append(entry.name)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0].gpus, kv[0].gpu_gb, kv[0].engine)))


def in_all(path: str | Path | None = None) -> tuple[list[str], dict[str, str]]:
    """The models `all` means (every non-tiny model whose weights the hub or the model cache can
    provide) and those left out, with why. `file:` weights are not on the hub: they are scored
    only when named, and their file must be in the model cache's weights/ folder."""
    chosen, left_out = [], {}
    for entry in _models(path).values():
        if entry.is_tiny:
            continue
        if entry.weights.startswith("file:"):
            left_out[entry.name] = (
                f"its weights are a local file ({entry.weights}); put it in the model cache's "
                f"weights/ folder and name the model to score it"
            )
            continue
        chosen.append(entry.name)
    return chosen, left_out


def select(
    requested: list[str], members: list[str], everything: list[str], known: list[str]
) -> list[str]:
    """The requested models in one class (`members`); `all` means `everything`. Unknown names
    are a usage error (the same in every class, so every select step says it)."""
    unknown = [m for m in requested if m != ALL and m not in known]
    if unknown:
        raise UsageError("models", unknown[0], "unknown model; `autocomp models` lists all")
    wanted = everything if requested == [ALL] else requested
    return [m for m in members if m in wanted]


def registry_text(names: list[str], path: str | Path | None = None) -> str:
    """A registry file holding just `names` (what one class's score steps need)."""
    import yaml

    models = _models(path)
    return yaml.safe_dump({"models": [models[n].raw for n in names]}, sort_keys=False)


def draw_seed(seed: int, draw: str) -> int:
    """The seed of one draw: `seed` itself when `draw` is empty, else a seed derived from both
    (a recurring generate run's `draw` is its run id, so each run samples, captions and renders
    anew and misses KFP's cache where it should; docs/cluster.md, recurring runs)."""
    if not draw:
        return seed
    import hashlib

    return int(hashlib.sha256(f"{seed}:{draw}".encode()).hexdigest()[:8], 16)


def drawn(config: Any, draw: str) -> Any:
    """A stage configuration with its seed for `draw` (draw_seed)."""
    import dataclasses

    return dataclasses.replace(config, seed=draw_seed(config.seed, draw)) if draw else config


def published_name(name: str, run_id: str, unique: bool) -> str:
    """The store name a generate run publishes under: `<name>-<first 8 of the KFP run id>` when
    `unique` (the cluster default: every run, a recurring one too, publishes anew and never
    collides with or skips over an earlier one), else `name` as given (the local run gives a
    name that already carries the hash of its parameters)."""
    return f"{name}-{run_id.replace('-', '')[:8]}" if unique else name
