"""Parquet tables: schemas, provenance metadata, atomic writes and checked reads.

Every file autocomp writes carries, under the Parquet key-value metadata key `autocomp`, a JSON
document with the table kind, its schema version, the package version, and whatever made it
(family configs with their SHA-256, seed, protocol...). Nothing time- or machine-dependent goes
in, so the same inputs give byte-identical files.

Writes go to a temporary file beside the target and are renamed into place only when complete:
a failed or interrupted run never leaves a partial file under the final name.

Schemas
-------
concepts (autocomp sample):
    concept_id       string        content address of the scene: <family>-n<N>-<12 hex>
    family           string        task family name
    n                int8          number of objects
    objects          list<string>  object names, in caption order
    attributes       list<string>  attributes (len N) or relations (len N-1)
    minimal_caption  string        the template caption
benchmark (autocomp negatives): every input column, then
    caption                   string        the positive, normalised like its negatives
    caption_rewritten         bool          caption differs from the input text (articles, case)
    protocol                  string        paper | strict
    swap_negatives            list<string>  N!-1 (paper) captions
    swap_arrangements         list<int32>   canonical arrangement index of each (negatives.py)
    swap_same_scene           list<bool>    describes the same scene as the positive
    swap_in_confusion         list<int32>   position of each swap negative in confusion_negatives
    confusion_negatives       list<string>  N^(2N)-1 or N^N (N-1)^(N-1)-1 (paper) captions
    confusion_arrangements    list<int32>
    confusion_same_scene      list<bool>
    vary_attribute_negatives  list<string>  N=1 sanity sets (attribute families), else empty
    vary_object_negatives     list<string>
    swap_chance, confusion_chance, vary_attribute_chance, vary_object_chance
                              double        1 / (1 + negatives); null where there are none
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp import __version__
from autocomp.errors import UsageError

METADATA_KEY = b"autocomp"
SCHEMA_VERSION = 1

CONCEPTS_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),
        ("family", pa.string()),
        ("n", pa.int8()),
        ("objects", pa.list_(pa.string())),
        ("attributes", pa.list_(pa.string())),
        ("minimal_caption", pa.string()),
    ]
)

BENCHMARK_FIELDS = [
    ("caption", pa.string()),
    ("caption_rewritten", pa.bool_()),
    ("protocol", pa.string()),
    ("swap_negatives", pa.list_(pa.string())),
    ("swap_arrangements", pa.list_(pa.int32())),
    ("swap_same_scene", pa.list_(pa.bool_())),
    ("swap_in_confusion", pa.list_(pa.int32())),
    ("confusion_negatives", pa.list_(pa.string())),
    ("confusion_arrangements", pa.list_(pa.int32())),
    ("confusion_same_scene", pa.list_(pa.bool_())),
    ("vary_attribute_negatives", pa.list_(pa.string())),
    ("vary_object_negatives", pa.list_(pa.string())),
    ("swap_chance", pa.float64()),
    ("confusion_chance", pa.float64()),
    ("vary_attribute_chance", pa.float64()),
    ("vary_object_chance", pa.float64()),
]

CONCEPT_COLUMNS = ("family", "n", "objects", "attributes")


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


def open_parquet(path: str | Path, option: str = "--input") -> pq.ParquetFile:
    """Open a Parquet file, turning every failure into a UsageError that names it."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(option, str(path), "no such file; give the path of a Parquet table")
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(option, str(path), f"is not a readable Parquet file ({exc})") from exc


def require_columns(
    path: str | Path,
    schema: pa.Schema,
    columns: Sequence[str],
    hint: str,
    option: str = "--input",
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
        problem = " ".join(str(exc).split())[:160]
        raise UsageError(
            option, str(path), f"holds damaged data ({problem}); re-create it"
        ) from None


def check_writable(folder: Path, option: str, shown: Path) -> None:
    """The folder accepts a new file (probed: permissions, read-only file systems and special
    file systems all answer the same way), checked before any work starts."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".autocomp-probe-"):
            pass
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        fix = f"cannot be written ({reason}); choose another path"
        raise UsageError(option, str(shown), fix) from None


def check_output_path(
    path: str | Path, inputs: Sequence[str | Path] = (), force: bool = False
) -> Path:
    """Validate an output table's path before any work starts: a .parquet file in an existing
    folder, not one of the stage's inputs, and not an existing table unless `force`."""
    path = Path(path)
    if path.suffix != ".parquet":
        raise UsageError("--out", str(path), "must end in .parquet")
    if path.is_dir():
        raise UsageError("--out", str(path), "is a folder; give a file path ending in .parquet")
    if not path.parent.is_dir():
        what = "is a file" if path.parent.exists() else "does not exist"
        raise UsageError(
            "--out", str(path), f"folder {path.parent} {what}; create the folder first"
        )
    for source in inputs:
        if path.resolve() == Path(source).resolve():
            raise UsageError("--out", str(path), "is the --input itself; write to a new file")
    if path.exists() and not force:
        raise UsageError(
            "--out", str(path), "exists; choose a new path, or pass --force to replace it"
        )
    check_writable(path.parent, "--out", path)
    sweep_stale(path.parent)
    return path


_STALE = re.compile(r"^\..+\.(tmp|report|fetch)-(?P<pid>\d+)(-[0-9a-f]+)?$")


def sweep_stale(folder: str | Path) -> int:
    """Remove the temporary files and folders that killed runs left in `folder` (hidden names
    ending in .tmp-PID, whose process is gone); a live process's are left alone. Returns how
    many were removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    removed = 0
    for path in folder.iterdir():
        match = _STALE.match(path.name)
        if not match or _alive(int(match["pid"])):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only if the block succeeds."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_table(table: pa.Table, path: str | Path, document: dict[str, Any]) -> None:
    """Write one whole table atomically, with its metadata."""
    table = table.replace_schema_metadata(with_metadata(table.schema, document).metadata)
    Path(path).parent.mkdir(exist_ok=True)  # a stage folder appears with its first file
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

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._writer.close()
        self._context.__exit__(exc_type, exc, tb)  # renames on success, removes on failure


def with_sample_keys(table: pa.Table) -> pa.Table:
    """`table` with `sample_id` and `condition`, derived where missing by the score stage's rule
    (a benchmark made straight from concepts: the concept id, the Minimal condition)."""
    names = table.column_names
    rows = table.num_rows
    conditions = table["condition"].to_pylist() if "condition" in names else [None] * rows
    if "sample_id" not in names:
        concepts = table["concept_id"].to_pylist() if "concept_id" in names else [None] * rows
        ids = [
            f"{c}/{cond}" if c and cond else (c or f"row-{i}")
            for i, (c, cond) in enumerate(zip(concepts, conditions))
        ]
        table = table.append_column("sample_id", pa.array(ids, pa.string()))
    if "condition" not in names:
        table = table.append_column("condition", pa.array(["minimal"] * rows, pa.string()))
    return table
