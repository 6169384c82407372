"""How image data moves between the generation steps: a render shard's output is two artifacts,
its tables (small: what collect, curate and the KFP UI handle) and its images (large: only the
shard's validate step and publish, which embeds them, download them). So collect and curate
never copy the image set, and no step downloads it twice.

No kfp here: the components import this module inside the image.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autocomp.store.shards import collect_stage


def split_render(folder: str | Path, tables: str | Path, images: str | Path) -> None:
    """Move a render folder's top-level files (its tables) to `tables` and everything under
    its subfolders (images/...) to `images`, keeping relative paths."""
    folder, tables, images = Path(folder), Path(tables), Path(images)
    tables.mkdir(parents=True, exist_ok=True)
    images.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.iterdir()):
        shutil.move(str(path), str((tables if path.is_file() else images) / path.name))


def join(parts: list[str | Path], out: str | Path) -> Path:
    """One folder holding every part's files (hard links where possible): a render folder again
    from its tables and images, or every shard's images under one root."""
    collect_stage(list(parts), out)
    return Path(out)
