"""Tiny random-weight variants of each backend, built from a config and saved to disk.

They let every scoring path run on a CPU with no download: the weights are built once (seeded),
saved the way real weights are stored, and then loaded back by the production loader.
"""

from __future__ import annotations

import os
from pathlib import Path

from autocomp.registry import ModelEntry

TINY_CONFIGS = Path(__file__).parent / "tiny_configs"


def cache_dir() -> Path:
    """Where tiny weights live: $AUTOCOMP_CACHE/tiny, default ~/.cache/autocomp/tiny."""
    root = os.environ.get("AUTOCOMP_CACHE") or Path.home() / ".cache" / "autocomp"
    return Path(root) / "tiny"


def register_open_clip_configs() -> None:
    import open_clip

    open_clip.add_model_config(TINY_CONFIGS)


def ensure_open_clip_weights(entry: ModelEntry) -> Path:
    """Build (once) and save the tiny open_clip model's state dict; return the file."""
    import open_clip
    import torch

    register_open_clip_configs()
    path = cache_dir() / entry.name / "open_clip_model.safetensors"
    if path.is_file():
        return path
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = open_clip.create_model(entry.architecture, pretrained=None).eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp))
    os.replace(tmp, path)
    return path
