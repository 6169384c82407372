"""Where a benchmark comes from: one Parquet table, a folder of Parquet parts, or a benchmark
published in a store (the CLI fetches it once into a cache folder, resumably; the pipelines'
steps stream it: `open_published` reads each Parquet part from the store by range as it goes,
with no copy on disk and one row group, 16 rows, in memory at a time). The one reader of a
benchmark's location: scoring, the report, the audit export and fine-tuning all open it here, so
they accept the same inputs.

A folder is either the layout `store/publish.py` writes (data/*.parquet, images embedded as
{bytes, path}) or a plain folder of *.parquet parts; the parts are read in name order as one
table and must share one schema. `Benchmark` is what the stages read: the parts, their schema,
row count and one content digest (a resumed run must score the same rows).

Resolved once, at the edge: `locate` turns what a stage was given (a table, a folder, an opened
Benchmark, or a published name with its store) into one checked value, an opened `Benchmark`
or a `Published` name (its store's manifest read once) that `fetch` opens without checking it
again; the stages pass that value down and nothing below opens or checks the location again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.errors import UsageError
from autocomp.store.storage import Store, file_sha256, open_verified
from autocomp.store.stores import open_store
from autocomp.store.tables import METADATA_KEY, open_parquet, read_metadata, read_rows
from autocomp.store.transfer import read_ahead

STORE_CACHE = "benchmark"  # the folder under --out that a published benchmark is fetched into
STREAM_ROWS = 16  # rows per batch read from a store (publish writes row groups of this size)
FOOTERS = 4096  # parts whose parsed footer a process keeps: each footer is read once, not at
# every open (a range pod opens every part for its id check and part plan, then its own); the
# paper-scale suite is about 1,300 parts of 200 rows
_FOOTERS: dict[tuple[str, str, str], pq.FileMetaData] = {}
_FOOTERS_LOCK = threading.Lock()


@dataclass(frozen=True)
class RemotePart:
    """One Parquet part of a benchmark in a store, read by range (never copied to disk)."""

    store: Store
    key: str
    size: int
    sha256: str

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return f"{self.store.uri}/{self.key}"

    def open(self, verify: bool = True) -> pq.ParquetFile:
        """The part as Parquet, its bytes verified first (`verify=False`: a glance at its
        footer or a few columns, storage.open_verified; pyarrow coalesces the column chunks
        of a row group into one read)."""
        fix = ("the published benchmark was changed after it was published: publish it again "
               "(under a new name) or restore the part")  # fmt: skip
        handle = open_verified(self.store, self.key, self.size, self.sha256, fix, verify)
        mark = (self.store.uri, self.key, self.sha256)
        try:
            opened = pq.ParquetFile(handle, metadata=_FOOTERS.get(mark), pre_buffer=not verify)
            with _FOOTERS_LOCK:
                if mark not in _FOOTERS and len(_FOOTERS) >= FOOTERS:
                    _FOOTERS.pop(next(iter(_FOOTERS)))
                _FOOTERS[mark] = opened.metadata
            return opened
        except (OSError, pa.ArrowException) as exc:
            problem = f"is not a readable Parquet file ({exc})"
            raise UsageError("benchmark", str(self), problem) from None


Part = Path | RemotePart


def _parquet(part: Part, verify: bool = True) -> pq.ParquetFile:
    if isinstance(part, RemotePart):
        return part.open(verify)
    return open_parquet(part, "benchmark")


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's Parquet parts, read in order as one table: opened and checked (the parts
    exist, are Parquet and share one schema), never changed after."""

    path: Path | str  # what was given: a table or a folder (a store's URI: a published one)
    files: tuple[Part, ...]
    schema: pa.Schema
    rows: int
    store: str | None = None  # the store and name it was fetched from, if any
    name: str | None = None
    given: str = ""  # the location as the caller wrote it (provenance names it so)

    @property
    def shown(self) -> str:
        """How a provenance document names the benchmark: as it was given."""
        return self.given or str(self.path)

    @property
    def published(self) -> bool:
        """Whether it is a benchmark published in a store (fetched or streamed from it)."""
        return self.name is not None

    @cached_property
    def digest(self) -> str:
        """SHA-256 of the table (one file), or of the parts' names and digests (a folder)."""
        if len(self.files) == 1 and self.files[0] == self.path:
            return file_sha256(Path(self.path))
        lines = (f"{f.name}:{_sha(f)}\n" for f in self.files)
        return hashlib.sha256("".join(lines).encode()).hexdigest()

    @property
    def metadata(self) -> dict[str, Any]:
        """The provenance document of the first part."""
        first = self.files[0]
        if isinstance(first, Path):
            return read_metadata(first)
        meta = first.open(verify=False).schema_arrow.metadata or {}  # in the footer
        return json.loads(meta[METADATA_KEY]) if METADATA_KEY in meta else {}

    @property
    def remote(self) -> bool:
        """Whether the parts are read from a store as they go."""
        return any(isinstance(f, RemotePart) for f in self.files)

    def source(self) -> dict[str, Any]:
        """How the run records where its benchmark came from."""
        kind = "store" if self.store else "folder" if Path(self.path).is_dir() else "table"
        record: dict[str, Any] = {"kind": kind, "path": str(self.path), "parts": len(self.files)}
        if self.store:
            record.update(store=self.store, name=self.name)
        return record

    def batches(
        self, batch_size: int = 512, columns: list[str] | None = None, verify: bool = True
    ) -> Iterator[pa.RecordBatch]:
        """Every row (or some columns of it), part by part, in batches (a paper-scale table
        never sits in memory). From a store: STREAM_ROWS rows at a time, the next batch read
        while this one is used; `verify=False`: a few columns every range pod reads (the
        parts are not read whole to be verified first: RemotePart.open)."""
        if not self.remote:
            for path in self.files:
                yield from pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=columns)
            return
        size = min(batch_size, STREAM_ROWS)

        def stream() -> Iterator[pa.RecordBatch]:
            for part in self.files:
                yield from _parquet(part, verify).iter_batches(batch_size=size, columns=columns)

        yield from read_ahead(stream(), depth=2)

    def read(self, columns: list[str], verify: bool = True) -> pa.Table:
        """Some columns of every row (a damaged part is a usage error naming it; `verify`: as
        `batches` says)."""
        tables = [read_rows(_parquet(f, verify), str(f), "benchmark", columns)
                  for f in self.files]  # fmt: skip
        return pa.concat_tables(tables)

    @cached_property
    def part_rows(self) -> tuple[int, ...]:
        """The rows of each part, from its footer (a remote part's: a glance, not verified)."""
        return tuple(_parquet(f, verify=False).metadata.num_rows for f in self.files)


def _sha(part: Part) -> str:
    return part.sha256 if isinstance(part, RemotePart) else file_sha256(part)


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
    given, path = str(path), Path(path)
    if path.is_dir():
        files = _parts(path)
        schema = _same_schema(path, files)
        rows = sum(open_parquet(f, "benchmark").metadata.num_rows for f in files)
        return Benchmark(path, tuple(files), schema, rows, given=given)
    if not path.exists() and path.suffix != ".parquet" and "/" not in str(path):
        raise UsageError(
            "benchmark",
            str(path),
            "no such table or folder; to score a published benchmark by name, give its store "
            "with --store URI",
        )
    source = open_parquet(path, "benchmark")
    return Benchmark(path, (path,), source.schema_arrow, source.metadata.num_rows, given=given)


def as_benchmark(source: str | Path | Benchmark) -> Benchmark:
    """`source` itself if it is an opened Benchmark, else the table or folder it names."""
    return source if isinstance(source, Benchmark) else open_benchmark(source)


@dataclass(frozen=True)
class Published:
    """A benchmark name found published in a store (its manifest, read once), not fetched yet."""

    store: str
    name: str
    manifest: dict[str, Any]

    def fetch(self, out: str | Path) -> Benchmark:
        """The benchmark fetched into <out>/benchmark/<name>/ once (a later run reuses a
        complete fetch), opened; the name is not checked again."""
        from autocomp.store.catalog.published import fetch_published

        folder = Path(out) / STORE_CACHE / self.name
        found = open_benchmark(fetch_published(self.store, self.name, folder, self.manifest))
        return replace(found, store=self.store, name=self.name)


def locate(benchmark: str | Path | Benchmark, store: str | None = None) -> Benchmark | Published:
    """The one resolution of a stage's benchmark argument, before anything is written: an
    opened Benchmark as it is; a table or folder opened (it exists, its parts share a schema);
    with `store`, a name the store has published (an unknown name lists the published ones)."""
    if isinstance(benchmark, Benchmark):
        return benchmark
    if store:
        from autocomp.store.catalog.published import check_published

        return Published(store, str(benchmark), check_published(store, str(benchmark)))
    return open_benchmark(benchmark)


def opened(found: Benchmark | Published, out: str | Path) -> Benchmark:
    """What `locate` found, opened: a published name fetched into `out` (Published.fetch)."""
    return found.fetch(out) if isinstance(found, Published) else found


def resolve_benchmark(benchmark: str | Path, store: str | None, out: str | Path) -> Benchmark:
    """The benchmark a table, folder or published name (with `store`, fetched into
    <out>/benchmark/<name>/) names: `locate` then `opened`."""
    return opened(locate(benchmark, store), out)


def open_stored(
    store_uri: str, name: str, shown: str | None = None, manifest: dict[str, Any] | None = None
) -> Benchmark:
    """A benchmark folder that is an output of a store (`benchmarks/<name>` of publish, or a
    step's work output), read from the store as it goes: its parts (data/*.parquet, else
    *.parquet) come from the output's manifest, their digests too (nothing is downloaded to
    know what is there). The parts share one schema (one writer made them: the first part's
    is read). `manifest`: the output's, when the caller has read it already."""
    store = open_store(store_uri)
    manifest = manifest if manifest is not None else store.manifest(name)
    if manifest is None:
        raise UsageError("benchmark", f"{store.uri}/{name}", "holds no complete output there")
    files = [f for f in manifest["files"] if f["path"].endswith(".parquet")]
    data = [f for f in files if f["path"].startswith("data/")]
    chosen = sorted(data or [f for f in files if "/" not in f["path"]], key=lambda f: f["path"])
    if not chosen:
        raise UsageError("benchmark", f"{store.uri}/{name}", "holds no Parquet parts")
    parts = tuple(RemotePart(store, f"{name}/{f['path']}", f["size"], f["sha256"]) for f in chosen)
    schema = parts[0].open(verify=False).schema_arrow.remove_metadata()  # the footer alone
    rows = manifest.get("made_by", {}).get("rows")
    if rows is None:
        rows = sum(p.open(verify=False).metadata.num_rows for p in parts)
    return Benchmark(shown or f"{store.uri}/{name}", parts, schema, int(rows), store=store_uri)


def open_published(store_uri: str, name: str) -> Benchmark:
    """The benchmark published as benchmarks/<name>, streamed from the store (open_stored); an
    unknown name lists the published ones."""
    from autocomp.store.catalog.published import check_published

    manifest = check_published(store_uri, name)
    return replace(open_stored(store_uri, f"benchmarks/{name}", manifest=manifest), name=name)


def fetch_view(
    store_uri: str, name: str, folder: str | Path, drop: tuple[str, ...] = ("image",)
) -> Path:
    """The benchmark folder output `name` in `folder` without the columns in `drop` (the
    report reads the table, never the images): each part read from the store by range and
    written without them (its metadata kept), the output's other top-level files (concepts,
    survival, card) fetched as they are. Disk: the benchmark's text, not its images."""
    found = open_stored(store_uri, name)
    folder = Path(folder)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    for part in found.files:
        opened = _parquet(part)
        keep = [c for c in opened.schema_arrow.names if c not in drop]
        table = opened.read(columns=keep)
        pq.write_table(table, folder / "data" / part.name, compression="zstd")
    data = {f"data/{p.name}" for p in found.files}
    open_store(store_uri).get(name, folder, only=lambda p: "/" not in p and p not in data)
    return folder
