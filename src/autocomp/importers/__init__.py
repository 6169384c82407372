"""Importers: benchmarks autocomp did not make, written as benchmark folders that `score` reads.

Each format has one module with one function (source, out, images, config) -> report:

    autocomp-release  the Auto-Comp public release in every layout its scripts read or write
                      (release.py, layouts.py): concepts mapped onto our vocabularies, captions
                      kept as written (words.py), candidate sets rebuilt as our negatives
                      stage builds them
    sugarcrepe        SugarCrepe's JSON files with COCO images (sugarcrepe.py): 1-negative sets
    winoground, eqben, mmvp-vlm, spec, ...
                      harness benchmarks (benchmarks.py: a registry of parser, official rule,
                      tie policy; harness.py writes one row per image of a group of images x
                      texts, scored by the official rule from the run's score matrix)

The folder is the layout of autocomp.store.publish (data/test-*.parquet with embedded images,
README.md) plus import_report.json, written atomically (autocomp.importers.output).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers.layouts import CONDITIONS
from autocomp.protocol.negatives import PROTOCOLS
from autocomp.store.paths import check_apart

Importer = Callable[[str | Path, str | Path, str | Path | None, ImportConfig], dict[str, Any]]


def formats() -> dict[str, Importer]:
    """Format name -> importer."""
    import functools

    from autocomp.importers.benchmarks import HARNESS
    from autocomp.importers.harness import import_harness
    from autocomp.importers.release import import_release
    from autocomp.importers.sugarcrepe import import_sugarcrepe

    known: dict[str, Importer] = {
        "autocomp-release": import_release,
        "sugarcrepe": import_sugarcrepe,
    }
    for name, spec in HARNESS.items():
        known[name] = functools.partial(import_harness, spec)
    return known


def import_benchmark(
    fmt: str,
    source: str | Path,
    out: str | Path,
    images: str | Path | None = None,
    config: ImportConfig = ImportConfig(),
) -> dict[str, Any]:
    """`autocomp import`: `source` in format `fmt` as a benchmark folder `out`, in the layout
    `publish` writes (data/ parts with the images embedded, README.md, import_report.json).

    Args:
        fmt: `autocomp-release`, `sugarcrepe` or a harness benchmark (importers.formats()).
        source: the other benchmark's files (a folder, a file, a `datasets` folder).
        out: the folder to create; it appears only when complete, and an existing one is
            replaced only with `config.force`.
        images: the folder the source's image file names are under (when not embedded).
        config: protocol, condition (a release's), skip_missing, force (ImportConfig).

    Returns:
        The import report (also import_report.json): what was read, mapped, dropped and why.
    """
    known = formats()
    if fmt not in known:
        raise UsageError("fmt", fmt, f"must be one of {', '.join(sorted(known))}")
    if config.protocol not in PROTOCOLS:
        raise UsageError("protocol", config.protocol, f"must be one of {', '.join(PROTOCOLS)}")
    if config.condition not in ("", *CONDITIONS):
        raise UsageError("condition", config.condition, f"must be {' or '.join(CONDITIONS)}")
    if config.condition and fmt != "autocomp-release":
        raise UsageError("condition", config.condition, f"applies to autocomp-release, not {fmt}")
    check_apart(out, {"source": source, "images": images})
    return known[fmt](source, out, images, config)
