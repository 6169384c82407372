"""Paths read from tables resolve inside their root: an image reference such as
`../../../../etc/passwd`, an absolute path or a symlink that leads out of the images folder is
refused, so no host file can be read, scored or published through a benchmark table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from autocomp.errors import UsageError


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


def check_apart(
    out: str | Path, inputs: Mapping[str, str | Path | Sequence[str | Path] | None]
) -> None:
    """Refuse an output that is, contains or lies inside one of the stage's inputs (a --force
    over it would destroy the input; a write into it would change it). `inputs`: the inputs by
    their parameter's name (a path, several, or None when not given); names of published
    benchmarks (not local paths) are skipped by the caller. Called by every stage before any
    work, so the error comes before anything is written."""
    target = Path(out).resolve()
    for name, given in inputs.items():
        paths = [given] if isinstance(given, (str, Path)) else list(given or ())
        for path in paths:
            if path is None or str(path) == "":
                continue
            source = Path(path).resolve()
            if target == source:
                how = "is"
            elif source.is_relative_to(target):
                how = "contains"
            elif target.is_relative_to(source):
                how = "lies inside"
            else:
                continue
            raise UsageError(
                "out", str(out), f"{how} the input {name} ({path}); an output may never be, "
                "contain or lie inside an input: choose a folder apart from every input",
            )  # fmt: skip
