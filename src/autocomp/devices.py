"""Device and dtype selection, the same rule for every model backend: CUDA when present unless
a device is given; the registry's dtype on an accelerator, float32 on a CPU (bf16 and fp16
matmuls are slow or unsupported there)."""

from __future__ import annotations

from typing import Any

from autocomp.errors import UsageError


def select_device(device: str | None = None) -> str:
    """The given torch device, else "cuda" when a GPU is visible, else "cpu"."""
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def select_dtype(name: str, device: str) -> Any:
    """The torch dtype called `name` (e.g. "bfloat16") on an accelerator; float32 on a CPU."""
    import torch

    return getattr(torch, name) if device != "cpu" else torch.float32


def check_device(device: str | None, option: str = "device") -> None:
    """A device the user named exists here (checked before any work: a typo or a missing GPU
    is a usage error, not a crash after minutes of loading)."""
    if device is None:
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(option, device, "is not a torch device; use cpu, cuda or cuda:N") from None
    if parsed.type not in ("cpu", "cuda", "mps"):
        raise UsageError(option, device, "use cpu, cuda or cuda:N")
    if parsed.type == "cuda":
        count = torch.cuda.device_count()
        if count == 0 or (parsed.index or 0) >= count:
            raise UsageError(option, device, f"this machine has {count} CUDA GPU(s); use cpu")
