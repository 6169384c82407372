"""Tabular sources of released rows: Parquet files, folders of them, `datasets` folders, JSON.

A source is one of:
- a `.parquet` file;
- a folder holding `.parquet` files at any depth (a Hugging Face download: `data/train-*.parquet`);
- a folder written by `datasets.Dataset.save_to_disk` (`state.json` naming `.arrow` files in the
  Arrow streaming format; every name must resolve inside the folder), or a single such `.arrow`
  file;
- a `.json` file, or a folder holding exactly one (`json_rows` below turns its items into rows).

Rows are read batch by batch and in a fixed order (files sorted by path), so a release larger
than memory streams, and row i means the same row on every read. JSON is read whole (the
release's JSON files hold captions only, no images).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.errors import UsageError
from autocomp.store.paths import OutsideRoot, resolve_inside

BATCH_ROWS = 256
# datasets' own files in a save_to_disk folder: never release rows
DATASETS_FILES = {"state.json", "dataset_info.json", "dataset_dict.json"}


@dataclass(frozen=True)
class TableSource:
    """The files of one source and their common schema (JSON: the rows, already read)."""

    path: Path
    files: tuple[Path, ...]
    kind: str  # parquet | arrow | json
    schema: pa.Schema
    table: pa.Table | None = field(default=None, compare=False, repr=False)  # kind json

    def batches(self, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        """The chosen columns of every row, in order."""
        if self.table is not None:
            yield from self.table.select(list(columns)).to_batches(BATCH_ROWS)
            return
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
    """The `.arrow` files of a save_to_disk folder: those its state.json names, each resolved
    inside the folder (a `../` or absolute name is refused), else the folder's own."""
    state = folder / "state.json"
    if not state.is_file():
        return sorted(folder.glob("*.arrow"))
    try:
        names = [f["filename"] for f in json.loads(state.read_text())["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        raise UsageError(
            "source", str(state), "is not a datasets state.json; save the dataset again"
        ) from None
    files = []
    for name in names:
        try:
            files.append(resolve_inside(folder, name))
        except OutsideRoot as exc:
            raise UsageError(
                "source", str(state), f"names a file outside its folder ({exc}); refused: "
                "save the dataset again"
            ) from None  # fmt: skip
    return files


def _json_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.glob("*.json") if p.name not in DATASETS_FILES and p.name[0] != "."
    )


def _schema(file: Path, kind: str) -> pa.Schema:
    try:
        if kind == "parquet":
            return pq.read_schema(file)
        with pa.memory_map(str(file)) as stream:
            return pa.ipc.open_stream(stream).schema
    except (OSError, pa.ArrowException) as exc:
        fix = f"is not a readable {kind} file ({' '.join(str(exc).split())[:120]})"
        raise UsageError("source", str(file), fix) from None


def read_json(file: Path) -> Any:
    """A JSON file's value; one clean error for unreadable, invalid or too deeply nested JSON."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError("source", str(file), f"cannot be read ({exc.strerror})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError("source", str(file), f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise UsageError(
            "source", str(file), "is JSON nested too deeply to read; give the release's file"
        ) from None


JsonRows = Callable[[Path, Any], pa.Table]


def _shown(file: Path, root: Path) -> str:
    """A file as an error names it: its path under the source folder (two files may share a
    base name: data/a/train-0.parquet and data/b/train-0.parquet)."""
    try:
        return str(file.relative_to(root))
    except ValueError:
        return str(file)


def open_source(path: str | Path, json_rows: JsonRows | None = None) -> TableSource:
    """The source at `path`, its files checked to share one schema (UsageError if not).
    `json_rows(file, value)` turns a JSON source's parsed value into rows (None: JSON is no
    source of this format)."""
    path = Path(path)
    if not path.exists():
        raise UsageError("source", str(path), "no such file or folder")
    if path.is_file():
        kind = {".arrow": "arrow", ".json": "json"}.get(path.suffix.lower(), "parquet")
        files = [path]
    else:
        files = sorted(p for p in path.rglob("*.parquet") if not p.name.startswith("."))
        kind = "parquet"
        if not files:
            files, kind = _arrow_files(path), "arrow"
        if not files and json_rows is not None:
            files, kind = _json_files(path), "json"
            if len(files) > 1:
                names = ", ".join(p.name for p in files[:4])
                raise UsageError(
                    "source", str(path), f"holds {len(files)} JSON files ({names}); import "
                    "each with its own image folder (their concept ids overlap)"
                )  # fmt: skip
        if not files:
            what = ".parquet, datasets .arrow" + (" or .json" if json_rows else "")
            raise UsageError("source", str(path), f"holds no {what} files")
    if kind == "json":
        if json_rows is None:
            raise UsageError("source", str(path), "is JSON; give the release's Parquet files")
        table = json_rows(files[0], read_json(files[0]))
        return TableSource(path, tuple(files), kind, table.schema, table)
    schemas = [_schema(f, kind) for f in files]
    root = path if path.is_dir() else path.parent
    for file, schema in zip(files[1:], schemas[1:]):
        if schema.names != schemas[0].names:
            raise UsageError(
                "source", str(file), f"has other columns than {_shown(files[0], root)} "
                f"({', '.join(schema.names)} vs {', '.join(schemas[0].names)}); give one release",
            )  # fmt: skip
    return TableSource(path, tuple(files), kind, schemas[0])
