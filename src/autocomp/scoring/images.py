"""The image of a benchmark item: a path under the images folder, or embedded bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.store.paths import resolve_inside


def load_image(root: Path | None, ref: str | dict | None) -> Any:
    """An RGB PIL image from a path (under `root`) or an embedded image ({bytes, path}, the
    Hugging Face datasets Image layout of published benchmarks); else ValueError with a reason."""
    import io

    from PIL import Image, UnidentifiedImageError

    unreadable = (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombError)
    if isinstance(ref, dict):
        if ref.get("bytes"):
            try:
                with Image.open(io.BytesIO(ref["bytes"])) as image:
                    image.load()
                    return image.convert("RGB")
            except unreadable as exc:
                raise ValueError(f"embedded image unreadable: {ref.get('path')} ({exc})") from None
        ref = ref.get("path")
    if ref is None:
        raise ValueError("the row has no image")
    if root is None:
        raise ValueError(f"image {ref} is a path but no images folder was given (--images)")
    path = resolve_inside(root, ref)
    try:
        with Image.open(path) as image:
            image.load()
            return image.convert("RGB")
    except FileNotFoundError:
        raise ValueError(f"image not found: {path}") from None
    except unreadable as exc:
        raise ValueError(f"image unreadable: {path} ({exc})") from None
