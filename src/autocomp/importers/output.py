"""The benchmark folder an importer writes, built beside its final name and renamed into place.

    data/test-IIIII-of-KKKKK.parquet  benchmark rows, images embedded ({bytes, path}), the
                                      `datasets` features and the autocomp provenance in the
                                      Parquet metadata (autocomp.store.publish.write_part)
    README.md                         the dataset card (autocomp.store.publish.dataset_card)
    import_report.json                what was read, mapped, normalised, dropped and why

The folder is assembled in a hidden sibling (store/atomic.py: a later run sweeps it away if this
one is killed) and renamed to NAME only when complete: NAME is never half-written. With `force`,
an existing NAME is replaced by the same rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.errors import UsageError
from autocomp.store.atomic import atomic_folder, sweep_stale
from autocomp.store.outputs import check_output
from autocomp.store.paths import OutsideRoot, resolve_inside
from autocomp.store.publish import (
    IMAGE_TYPE,
    ROWS_PER_SHARD,
    dataset_card,
    shard_count,
    write_part,
)
from autocomp.store.tables import with_metadata

REPORT = "import_report.json"


class MissingImage(Exception):
    """An image a row names is not there (the importer stops, or drops the row if asked)."""


def check_out(out: str | Path, force: bool) -> Path:
    """The output folder's path, checked before any work: not under a file, its nearest folder
    takes files (missing parents are made with the folder: store/outputs.py), and it does not
    exist yet (unless `force`)."""
    out = check_output(out)
    if out.exists() and not out.is_dir():
        raise UsageError("out", str(out), "is a file; give a folder path for the benchmark")
    if out.exists() and not force:
        raise UsageError(
            "out", str(out), "exists; choose a new folder, or pass --force to replace it"
        )
    sweep_stale(out.parent)
    return out


def building(out: Path) -> contextlib.AbstractContextManager[Path]:
    """Yield a temporary folder beside `out`; on success it replaces `out`, on failure it goes."""
    return atomic_folder(out, replace=True)


def locate(root: Path, ref: str, option: str = "images", flat: bool = False) -> Path | None:
    """The file image `ref` names under `root` (None: not there). With `flat`, a reference with
    folders ("handmade/concept_00001_handmade.webp", names the importer made) is also looked
    for by its file name directly under `root`, so --images may be the folder that holds both
    condition folders or one of them. UsageError if the reference leaves the root."""
    try:
        path = resolve_inside(root, ref)
        candidates = [path]
        if flat and Path(ref).name != ref:
            candidates.append(resolve_inside(root, Path(ref).name))
    except OutsideRoot as exc:
        raise UsageError(option, ref, f"refused: {exc}; fix the source") from None
    return next((p for p in candidates if p.is_file()), None)


def read_image(root: Path | None, ref: str, option: str = "images", flat: bool = False) -> bytes:
    """The bytes of image `ref` under `root` (see `locate`); MissingImage if it is not there,
    UsageError if the reference leaves the root."""
    if root is None:
        raise UsageError(option, None, f"image {ref!r} is a file name: give its folder")
    path = locate(root, ref, option, flat)
    if path is None:
        raise MissingImage(str(resolve_inside(root, ref)))
    return path.read_bytes()


def image_problem(data: bytes) -> str | None:
    """Why `data` is not an image: None when PIL identifies it and decodes every pixel (a file
    whose header is fine but whose data is cut or damaged does not pass)."""
    import io
    import warnings

    from PIL import Image, UnidentifiedImageError

    if not data:
        return "empty"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                image.load()
                if not image.width or not image.height:
                    return "no pixels"
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError,
            Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:  # fmt: skip
        said = re.sub(r"\s*<_io\.BytesIO object at 0x[0-9a-f]+>", "", str(exc))
        return " ".join(said.split())[:120] or type(exc).__name__
    return None


def image_problems(images: list[bytes]) -> list[str | None]:
    """`image_problem` of each (decoded on a few threads: PIL releases the GIL to decode)."""
    if len(images) < 2:
        return [image_problem(d) for d in images]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        return list(pool.map(image_problem, images))


def image_column(values: list[dict[str, Any]]) -> pa.Array:
    return pa.array(values, IMAGE_TYPE)


def write_parts(
    tables: Iterable[pa.Table],
    folder: Path,
    rows: int,
    document: dict,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Write `rows` rows, given as consecutive tables, as data/test-*.parquet parts of
    ROWS_PER_SHARD rows, each with the provenance `document`."""
    shards = shard_count(rows)
    pending: list[pa.Table] = []
    held = written = 0
    for table in tables:
        pending.append(table)
        held += table.num_rows
        if progress:
            progress(table.num_rows)
        while held >= ROWS_PER_SHARD or (held and written + held == rows):
            merged = pa.concat_tables(pending)
            part, rest = merged.slice(0, ROWS_PER_SHARD), merged.slice(ROWS_PER_SHARD)
            part = part.replace_schema_metadata(with_metadata(part.schema, document).metadata)
            write_part(part, folder, written // ROWS_PER_SHARD, shards)
            written += part.num_rows
            pending, held = ([rest] if rest.num_rows else []), rest.num_rows
    if written != rows:
        raise AssertionError(f"wrote {written} rows of {rows}")


def finish(
    folder: Path,
    name: str,
    keys: pa.Table,
    document: dict,
    about: str,
    report: dict[str, Any],
) -> None:
    """The dataset card (from the family, n and condition of every row) and the report."""
    (folder / "README.md").write_text(dataset_card(name, keys, None, document, about))
    (folder / REPORT).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
