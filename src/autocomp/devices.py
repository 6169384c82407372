"""Device and dtype selection, the same rule for every model backend: CUDA when present unless
a device is given; the registry's dtype on an accelerator, float32 on a CPU (bf16 and fp16
matmuls are slow or unsupported there)."""

from __future__ import annotations

from typing import Any


def select_device(device: str | None = None) -> str:
    """The given torch device, else "cuda" when a GPU is visible, else "cpu"."""
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def select_dtype(name: str, device: str) -> Any:
    """The torch dtype called `name` (e.g. "bfloat16") on an accelerator; float32 on a CPU."""
    import torch

    return getattr(torch, name) if device != "cpu" else torch.float32
