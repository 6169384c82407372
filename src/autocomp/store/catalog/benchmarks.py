"""Where a benchmark comes from: one Parquet table, a folder of Parquet parts, or a benchmark
published in a store (fetched once into a cache folder, resumably). The one reader of a
benchmark's location: scoring, the report, the audit export and fine-tuning all open it here, so
they accept the same inputs.

A folder is either the layout `store/publish.py` writes (data/*.parquet, images embedded as
{bytes, path}) or a plain folder of *.parquet parts; the parts are read in name order as one
table and must share one schema. `Benchmark` is what the stages read: the parts, their schema,
row count and one content digest (a resumed run must score the same rows).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.errors import UsageError
from autocomp.store.storage import file_sha256
from autocomp.store.tables import open_parquet, read_metadata, read_rows

STORE_CACHE = "benchmark"  # the folder under --out that a published benchmark is fetched into


@dataclass
class Benchmark:
    """A benchmark's Parquet parts, read in order as one table."""

    path: Path  # what was given: a table or a folder
    files: tuple[Path, ...]
    schema: pa.Schema
    rows: int
    store: str | None = None  # the store and name it was fetched from, if any
    name: str | None = None
    checked: set[tuple[Any, ...]] = field(default_factory=set)  # checks already passed
    _digest: str | None = None

    @property
    def digest(self) -> str:
        """SHA-256 of the table (one file), or of the parts' names and digests (a folder)."""
        if self._digest is None:
            if len(self.files) == 1 and self.files[0] == self.path:
                self._digest = file_sha256(self.path)
            else:
                lines = (f"{f.name}:{file_sha256(f)}\n" for f in self.files)
                self._digest = hashlib.sha256("".join(lines).encode()).hexdigest()
        return self._digest

    @property
    def metadata(self) -> dict[str, Any]:
        """The provenance document of the first part."""
        return read_metadata(self.files[0])

    def source(self) -> dict[str, Any]:
        """How the run records where its benchmark came from."""
        kind = "store" if self.store else "folder" if self.path.is_dir() else "table"
        record: dict[str, Any] = {"kind": kind, "path": str(self.path), "parts": len(self.files)}
        if self.store:
            record.update(store=self.store, name=self.name)
        return record

    def batches(
        self, batch_size: int = 512, columns: list[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Every row (or some columns of it), part by part, in batches (a paper-scale table
        never sits in memory)."""
        for path in self.files:
            yield from pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=columns)

    def read(self, columns: list[str]) -> pa.Table:
        """Some columns of every row (a damaged part is a usage error naming it)."""
        tables = [read_rows(open_parquet(f, "benchmark"), f, "benchmark", columns)
                  for f in self.files]  # fmt: skip
        return pa.concat_tables(tables)


def _parts(folder: Path) -> list[Path]:
    data = folder / "data"
    files = sorted(data.glob("*.parquet")) if data.is_dir() else []
    files = files or sorted(folder.glob("*.parquet"))
    if not files:
        raise UsageError(
            "benchmark",
            str(folder),
            "is a folder without Parquet parts (neither data/*.parquet nor *.parquet); give a "
            "benchmark table, a published benchmark folder or a folder of *.parquet parts",
        )
    return files


def _same_schema(folder: Path, files: list[Path]) -> pa.Schema:
    first = open_parquet(files[0], "benchmark").schema_arrow.remove_metadata()
    for path in files[1:]:
        schema = open_parquet(path, "benchmark").schema_arrow.remove_metadata()
        if schema.equals(first):
            continue
        names, other = set(first.names), set(schema.names)
        if names != other:
            diff = sorted(names ^ other)
            problem = f"columns differ ({', '.join(diff[:4])})"
        else:
            column = next(n for n in first.names if first.field(n) != schema.field(n))
            problem = (
                f"column {column} is {schema.field(column).type}, not {first.field(column).type}"
            )
        raise UsageError(
            "benchmark",
            str(folder),
            f"mixes schemas: {path.name} and {files[0].name}: {problem}; keep the parts of one "
            "benchmark in a folder",
        )
    return first


def open_benchmark(path: str | Path) -> Benchmark:
    """A benchmark from a Parquet table or a folder of parts (see the module doc)."""
    path = Path(path)
    if path.is_dir():
        files = _parts(path)
        schema = _same_schema(path, files)
        rows = sum(open_parquet(f, "benchmark").metadata.num_rows for f in files)
        return Benchmark(path, tuple(files), schema, rows)
    if not path.exists() and path.suffix != ".parquet" and "/" not in str(path):
        raise UsageError(
            "benchmark",
            str(path),
            "no such table or folder; to score a published benchmark by name, give its store "
            "with --store URI",
        )
    source = open_parquet(path, "benchmark")
    return Benchmark(path, (path,), source.schema_arrow, source.metadata.num_rows)


def as_benchmark(source: str | Path | Benchmark) -> Benchmark:
    """`source` itself if it is an opened Benchmark, else the table or folder it names."""
    return source if isinstance(source, Benchmark) else open_benchmark(source)


def check_source(benchmark: str, store: str | None) -> None:
    """What can be checked before anything is fetched: the table or folder exists, or the store
    holds the published name (an unknown name lists the published ones)."""
    if store:
        from autocomp.store.publish import check_published

        check_published(store, benchmark)
    else:
        open_benchmark(benchmark)


def resolve_benchmark(benchmark: str, store: str | None, out: str | Path) -> Benchmark:
    """The benchmark to score; a published name (with `store`) is fetched into
    <out>/benchmark/<name>/ once (a later run reuses a complete fetch)."""
    if not store:
        return open_benchmark(benchmark)
    from autocomp.store.publish import check_published, fetch_published

    check_published(store, benchmark)
    folder = fetch_published(store, benchmark, Path(out) / STORE_CACHE / benchmark)
    found = open_benchmark(folder)
    found.store, found.name = store, benchmark
    return found
