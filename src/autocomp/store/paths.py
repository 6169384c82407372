"""Paths read from tables resolve inside their root: an image reference such as
`../../../../etc/passwd`, an absolute path or a symlink that leads out of the images folder is
refused, so no host file can be read, scored or published through a benchmark table."""

from __future__ import annotations

from pathlib import Path


class OutsideRoot(ValueError):
    """A table's path that resolves outside its root (the item fails with this reason)."""


def resolve_inside(root: str | Path, ref: str) -> Path:
    """`root / ref` with every link resolved, if it stays inside `root`; else OutsideRoot."""
    base = Path(root).resolve()
    if not isinstance(ref, str) or not ref or "\0" in ref:
        raise OutsideRoot(f"not a usable relative path: {ref!r}")
    path = (base / ref).resolve()
    if path != base and not path.is_relative_to(base):
        raise OutsideRoot(f"path leaves the images root {base}: {ref}")
    return path
