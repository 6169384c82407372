"""A fine-tuned checkpoint as the unchanged scorer reads it: an open_clip `local-dir:` folder
(open_clip_config.json with the model and preprocessing config, open_clip_model.safetensors)
and registry.yaml holding the base entry and the fine-tuned entry (architecture
`local-dir:<folder>`, `base_model` naming the base)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.scoring.registry import ModelEntry
from autocomp.store.atomic import atomic_path, write_text

WEIGHTS_FILE = "open_clip_model.safetensors"


def save_weights(model: Any, model_cfg: dict, folder: Path) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items()}
    with atomic_path(folder / WEIGHTS_FILE) as tmp:
        save_file(state, str(tmp))
    config = {"model_cfg": model_cfg, "preprocess_cfg": dict(model.visual.preprocess_cfg)}
    write_text(folder / "open_clip_config.json", json.dumps(config, indent=2, default=list))


def write_registry(base: ModelEntry, name: str, folder: Path, notes: str) -> dict[str, Any]:
    """registry.yaml: the base entry and the fine-tuned one (its weights: local-dir:<folder>).
    AUTOCOMP_MODEL_REGISTRY=<folder>/registry.yaml makes both scorable by name."""
    import copy

    import yaml

    entry = {
        "name": name,
        "title": f"{base.title} fine-tuned ({notes})",
        "backend": "open_clip",
        "score": base.score,
        "architecture": f"local-dir:{folder.resolve()}",
        "weights": "local-dir",
        "preprocess": copy.deepcopy(base.preprocess),
        "dtype": base.dtype,
        "gpus": base.gpus,
        "gpu_memory_gb": base.gpu_memory_gb,
        "trust_remote_code": False,
        "base_model": base.name,
        "notes": f"autocomp finetune: {notes}",
    }
    models = [copy.deepcopy(base.raw), entry] if base.name != name else [entry]
    text = "# Written by `autocomp finetune`; use with AUTOCOMP_MODEL_REGISTRY=<this file>.\n"
    (folder / "registry.yaml").write_text(
        text + yaml.safe_dump({"models": models}, sort_keys=False)
    )
    return entry


def finetuned_entry(folder: str | Path) -> ModelEntry:
    """The fine-tuned entry of a checkpoint folder, its architecture pointing at the folder
    where it is now (a folder copied between machines or pipeline steps still loads)."""
    import dataclasses

    from autocomp.scoring.registry import all_models

    folder = Path(folder).resolve()
    path = folder / "registry.yaml"
    if not path.is_file():
        raise UsageError("model", str(folder), "has no registry.yaml (autocomp finetune output)")
    tuned = [
        m for m in all_models(path).values() if (m.architecture or "").startswith("local-dir:")
    ]
    if len(tuned) != 1:
        raise UsageError("model", str(folder), "registry.yaml must hold one fine-tuned entry")
    arch = f"local-dir:{folder}"
    entry = tuned[0]
    return dataclasses.replace(entry, architecture=arch, raw={**entry.raw, "architecture": arch})
