"""Tabular sources of released rows: Parquet files, folders of them, and `datasets` folders.

A source is one of:
- a `.parquet` file;
- a folder holding `.parquet` files at any depth (a Hugging Face download: `data/test-*.parquet`);
- a folder written by `datasets.Dataset.save_to_disk` (`state.json` naming `.arrow` files in the
  Arrow streaming format), or a single such `.arrow` file.

Rows are read batch by batch and in a fixed order (files sorted by path), so a release larger
than memory streams, and row i means the same row on every read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.errors import UsageError

BATCH_ROWS = 256


@dataclass(frozen=True)
class TableSource:
    """The files of one source and their common schema."""

    path: Path
    files: tuple[Path, ...]
    kind: str  # parquet | arrow
    schema: pa.Schema

    def batches(self, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        """The chosen columns of every row, in order."""
        for file in self.files:
            try:
                yield from _file_batches(file, self.kind, list(columns))
            except (OSError, pa.ArrowException) as exc:
                problem = " ".join(str(exc).split())[:160]
                raise UsageError(
                    "source", str(file), f"holds damaged data ({problem}); download it again"
                ) from None

    def require(self, columns: Sequence[str], hint: str) -> None:
        missing = [c for c in columns if c not in self.schema.names]
        if missing:
            raise UsageError(
                "source", str(self.path), f"missing column(s) {', '.join(missing)}; {hint}"
            )


def _file_batches(file: Path, kind: str, columns: list[str]) -> Iterator[pa.RecordBatch]:
    if kind == "parquet":
        yield from pq.ParquetFile(file).iter_batches(batch_size=BATCH_ROWS, columns=columns)
        return
    with pa.memory_map(str(file)) as stream:
        for batch in pa.ipc.open_stream(stream):
            yield batch.select(columns)


def _arrow_files(folder: Path) -> list[Path]:
    state = folder / "state.json"
    if state.is_file():
        try:
            names = [f["filename"] for f in json.loads(state.read_text())["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError):
            raise UsageError(
                "source", str(state), "is not a datasets state.json; save the dataset again"
            ) from None
        return [folder / name for name in names]
    return sorted(folder.glob("*.arrow"))


def _schema(file: Path, kind: str) -> pa.Schema:
    try:
        if kind == "parquet":
            return pq.read_schema(file)
        with pa.memory_map(str(file)) as stream:
            return pa.ipc.open_stream(stream).schema
    except (OSError, pa.ArrowException) as exc:
        fix = f"is not a readable {kind} file ({' '.join(str(exc).split())[:120]})"
        raise UsageError("source", str(file), fix) from None


def open_source(path: str | Path) -> TableSource:
    """The source at `path`, its files checked to share one schema (UsageError if not)."""
    path = Path(path)
    if not path.exists():
        raise UsageError("source", str(path), "no such file or folder")
    if path.is_file():
        kind = "arrow" if path.suffix == ".arrow" else "parquet"
        files = [path]
    else:
        files = sorted(p for p in path.rglob("*.parquet") if not p.name.startswith("."))
        kind = "parquet"
        if not files:
            files, kind = _arrow_files(path), "arrow"
        if not files:
            raise UsageError("source", str(path), "holds no .parquet or datasets .arrow files")
    schemas = [_schema(f, kind) for f in files]
    for file, schema in zip(files[1:], schemas[1:]):
        if schema.names != schemas[0].names:
            raise UsageError(
                "source", str(file), f"has other columns than {files[0].name}; give one release"
            )
    return TableSource(path, tuple(files), kind, schemas[0])
