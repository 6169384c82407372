"""A benchmark published in a store (`benchmarks/<name>`, publish's layout), as its readers see it:
the names a store holds, a name checked against them (an unknown name lists the published ones),
and the published folder fetched resumably. The catalog's benchmarks.py resolves a published
name through this module; store/publish.py writes the layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.store.atomic import write_json
from autocomp.store.stores import open_store


def published_names(store_uri: str) -> list[str]:
    """The names of the benchmarks published in a store (complete outputs only)."""
    prefix = "benchmarks/"
    found = open_store(store_uri).outputs(prefix)
    return sorted(n.removeprefix(prefix) for n in found if "/" not in n.removeprefix(prefix))


def check_published(store_uri: str, name: str, option: str = "benchmark") -> dict[str, Any]:
    """The manifest of benchmarks/<name>; a name that is not there is a usage error that lists
    what the store holds."""
    if not name or name.strip("/") != name or any(p in ("", ".", "..") for p in name.split("/")):
        raise UsageError(option, name, "is not a benchmark name; give a name like run-1")
    manifest = open_store(store_uri).manifest(f"benchmarks/{name}")
    if manifest is None:
        names = published_names(store_uri)
        listed = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "") if names else "none"
        raise UsageError(
            option, name, f"is not a benchmark published in {store_uri} (published: {listed})"
        )
    return manifest


def fetch_published(
    store_uri: str, name: str, folder: str | Path, manifest: dict[str, Any] | None = None
) -> Path:
    """Fetch benchmarks/<name> into `folder` (the published layout: data/*.parquet, README.md,
    ...), resumably: the store's manifest is written into the folder last, and a folder whose
    manifest matches the store's (and whose files are all there) is not fetched again.
    `manifest`: check_published's, when the caller has checked the name already."""
    folder = Path(folder)
    manifest = manifest if manifest is not None else check_published(store_uri, name)
    marker = folder / "_manifest.json"
    if marker.is_file():
        try:
            done = json.loads(marker.read_text()) == manifest
        except ValueError:
            done = False
        sizes_ok = all(
            (folder / f["path"]).is_file() and (folder / f["path"]).stat().st_size == f["size"]
            for f in manifest["files"]
        )
        if done and sizes_ok:
            return folder
        marker.unlink()
    open_store(store_uri).get(f"benchmarks/{name}", folder)
    write_json(marker, manifest)
    return folder
