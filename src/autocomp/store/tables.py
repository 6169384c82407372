"""Parquet tables: provenance metadata, atomic table writes, output checks and checked reads.

Every file autocomp writes carries, under the Parquet key-value metadata key `autocomp`, a JSON
document with the table kind, its schema version, the package version, and whatever made it
(family configs with their SHA-256, seed, protocol...). Nothing time- or machine-dependent goes
in, so the same inputs give byte-identical files.

Writes go to a temporary file beside the target and are renamed into place only when complete
(store/atomic.py): a failed or interrupted run never leaves a partial file under the final name.

Column schemas are documented where they are defined, in store/catalog/schemas.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp import __version__
from autocomp.errors import UsageError, shorten
from autocomp.store.atomic import atomic_path, sweep_stale
from autocomp.store.outputs import check_output, check_writable

METADATA_KEY = b"autocomp"
SCHEMA_VERSION = 1


def provenance(table: str, **made_by: Any) -> dict[str, Any]:
    """The metadata document of one output."""
    return {
        "table": table,
        "schema_version": SCHEMA_VERSION,
        "autocomp_version": __version__,
        **made_by,
    }


def with_metadata(schema: pa.Schema, document: dict[str, Any]) -> pa.Schema:
    payload = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return schema.with_metadata({METADATA_KEY: payload})


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The autocomp metadata document of a Parquet file ({} if it has none)."""
    meta = open_parquet(path).schema_arrow.metadata or {}
    return json.loads(meta[METADATA_KEY]) if METADATA_KEY in meta else {}


def open_parquet(path: str | Path, option: str = "path") -> pq.ParquetFile:
    """Open a Parquet file, turning every failure into a UsageError that names it."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(option, str(path), "no such file; give the path of a Parquet table")
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        problem = f"is not a readable Parquet file ({shorten(str(exc))})"
        raise UsageError(option, str(path), problem) from exc


def read_parquet(
    path: str | Path, option: str = "path", columns: Sequence[str] | None = None, fix: str = ""
) -> pa.Table:
    """Read a whole Parquet table (or `columns` of it), turning a damaged or foreign file into
    one UsageError that names it (`fix`: what to do about it, when the caller knows)."""
    try:
        return pq.read_table(path, columns=list(columns) if columns is not None else None)
    except (OSError, pa.ArrowException) as exc:
        problem = f"is not a readable Parquet file ({shorten(str(exc))})"
        raise UsageError(option, str(path), f"{problem}; {fix}" if fix else problem) from exc


def require_columns(
    path: str | Path,
    schema: pa.Schema,
    columns: Sequence[str],
    hint: str,
    option: str = "path",
) -> None:
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise UsageError(option, str(path), f"missing column(s) {', '.join(missing)}; {hint}")


def read_rows(
    source: pq.ParquetFile, path: str | Path, option: str, columns: Sequence[str] | None = None
) -> pa.Table:
    """Read a whole table; a damaged page is a usage error naming the file, not a traceback."""
    try:
        return source.read(columns=list(columns) if columns is not None else None)
    except (OSError, pa.ArrowException) as exc:
        raise _damaged(option, path, exc) from None


def _damaged(option: str, path: str | Path, exc: Exception) -> UsageError:
    problem = shorten(str(exc))
    return UsageError(option, str(path), f"holds damaged data ({problem}); re-create it")


def read_batches(
    source: pq.ParquetFile, path: str | Path, option: str, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """The table's rows in batches, as they are read; a page damaged mid-file (found only when
    its batch is decoded) is a usage error naming the file, as read_rows says it."""
    batches = source.iter_batches(batch_size=batch_size)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (OSError, pa.ArrowException) as exc:
            raise _damaged(option, path, exc) from None
        yield batch


def check_output_path(
    path: str | Path, inputs: Sequence[str | Path] = (), force: bool = False
) -> Path:
    """Validate an output table's path before any work starts: a .parquet file that is not
    under a file (missing folders are made by the write: store/outputs.py), not one of the
    stage's inputs, and not an existing table unless `force`."""
    path = Path(path)
    if path.suffix != ".parquet":
        raise UsageError("out", str(path), "must end in .parquet")
    if path.is_dir():
        raise UsageError("out", str(path), "is a folder; give a file path ending in .parquet")
    check_output(path)
    if path.exists():  # replaced (--force): its folder must take the new file
        check_writable(path.parent, "out", path)
    for source in inputs:
        if path.resolve() == Path(source).resolve():
            raise UsageError("out", str(path), "is the --input itself; write to a new file")
    if path.exists() and not force:
        raise UsageError(
            "out", str(path), "exists; choose a new path, or pass --force to replace it"
        )
    sweep_stale(path.parent)
    return path


def write_table(table: pa.Table, path: str | Path, document: dict[str, Any]) -> None:
    """Write one whole table atomically, with its metadata."""
    table = table.replace_schema_metadata(with_metadata(table.schema, document).metadata)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


class StreamWriter:
    """Append record batches to a Parquet file that appears under its name only when closed."""

    def __init__(
        self, path: str | Path, schema: pa.Schema, document: dict[str, Any], **options: Any
    ) -> None:
        """`options`: further `pq.ParquetWriter` options (which columns get a dictionary...)."""
        self._context = atomic_path(path)
        self._tmp = self._context.__enter__()
        self._writer = pq.ParquetWriter(
            self._tmp, with_metadata(schema, document), compression="zstd", **options
        )

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._writer.close()
        self._context.__exit__(exc_type, exc, tb)  # renames on success, removes on failure
