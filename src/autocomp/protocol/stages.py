"""Stage functions of the protocol core: tables in, tables out (called by the CLI and, later,
by the pipeline components).

- `sample_stage`: concepts of one (family, N) with their Minimal captions -> concepts table.
- `negatives_stage`: a concepts table (uses `minimal_caption`) or a curated table (uses
  `caption`) -> benchmark table with Swap / Confusion / sanity candidate sets, streamed in
  batches (built column-wise, `candidate_columns`) with bounded memory: in this process, or over
  worker processes that write their own Parquet parts, joined into one file without decoding.

Over 450 lines because it holds both protocol stages with the checks of their configurations and
the process pool they share (cgroup-aware core count, ordered parallel map, clean termination);
that pool is the part that could move out."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from autocomp.config import NegativesConfig, SampleConfig
from autocomp.errors import UsageError, whole_number
from autocomp.protocol import concepts as concepts_mod
from autocomp.protocol.binding import BindingError, bind
from autocomp.protocol.candidate_columns import CaptionRow, candidate_columns
from autocomp.protocol.concepts import check_concept_row
from autocomp.protocol.family import Family, load_family
from autocomp.protocol.minimal import minimal_caption
from autocomp.protocol.negatives import PROTOCOLS
from autocomp.store.atomic import atomic_path, scratch_folder
from autocomp.store.catalog.schemas import BENCHMARK_FIELDS, CONCEPT_COLUMNS, CONCEPTS_SCHEMA
from autocomp.store.concat import ParquetConcat
from autocomp.store.tables import (
    StreamWriter,
    check_output_path,
    open_parquet,
    provenance,
    read_batches,
    read_rows,
    require_columns,
    with_metadata,
    write_table,
)

Progress = Callable[[int], None]


def family_record(family: Family) -> dict[str, Any]:
    """How a family is recorded in output metadata: its resolved config and its hash."""
    return {"sha256": family.sha256, "config": family.config}


def concepts_table(
    family: Family, n: int, count: int, seed: int
) -> tuple[pa.Table, dict[str, Any]]:
    """Sample concepts and build the concepts table with its metadata document."""
    sampled = concepts_mod.sample_concepts(family, n, count, seed)
    columns: dict[str, list] = {name: [] for name in CONCEPTS_SCHEMA.names}
    for concept in sampled:
        columns["concept_id"].append(concepts_mod.concept_id(family, concept))
        columns["family"].append(family.name)
        columns["n"].append(n)
        columns["objects"].append(list(concept.objects))
        columns["attributes"].append(list(concept.labels))
        columns["minimal_caption"].append(minimal_caption(family, concept.objects, concept.labels))
    table = pa.table(columns, schema=CONCEPTS_SCHEMA)
    document = provenance(
        "concepts",
        seed=seed,
        n=n,
        count=count,
        sampler="balanced-pool/v1",
        distinct_concepts=concepts_mod.count_concepts(family, n),
        label_prior=concepts_mod.label_prior(sampled),
        families={family.name: family_record(family)},
    )
    return table, document


def sample_stage(
    family_name: str, n: int, count: int, seed: int, out: str | Path, force: bool = False
) -> pa.Table:
    """`autocomp sample`: write the concepts table atomically and return it.

    Args:
        family_name: a family's name (`autocomp families`; AUTOCOMP_FAMILY_PATH adds more).
        n: the number of objects per concept, within the family's range.
        count: how many distinct concepts to draw (at most the family's total at `n`).
        seed: the sampling seed (the same seed gives the same bytes).
        out: the .parquet path to write; its folders are made.
        force: replace an existing table (refused without it).

    Returns:
        The concepts table (CONCEPTS_SCHEMA), as written with its provenance.
    """
    if seed < 0:
        raise UsageError("seed", seed, "must be 0 or more")
    out = check_output_path(out, force=force)
    family = load_family(family_name)
    table, document = concepts_table(family, n, count, seed)
    write_table(table, out, document)
    return table


# ----------------------------------------------------------------------------- negatives


def _caption_column(schema: pa.Schema) -> str:
    for name in ("caption", "minimal_caption"):
        if name in schema.names:
            return name
    raise KeyError


def benchmark_batch(
    batch: pa.RecordBatch, caption_column: str, protocol: str, first_row: int = 0
) -> pa.RecordBatch:
    """Candidate sets for every row of one batch: the batch's columns, then the benchmark
    columns (`candidate_columns`: the values of `build_candidates`, built column-wise)."""
    wanted = ["family", "n", "objects", "attributes", caption_column, "concept_id"]
    rows = {name: batch.column(name).to_pylist() for name in wanted if name in batch.schema.names}
    families = {name: load_family(name) for name in set(rows["family"])}
    concepts = rows.get("concept_id")

    def where(i: int) -> str:
        concept = concepts[i] if concepts else None
        return f"input_path row {first_row + i}" + (f" ({concept})" if concept else "")

    if not rows_pass_checks(batch, families, caption_column):
        for i in range(batch.num_rows):  # the first bad row raises its own error
            row = {k: v[i] for k, v in rows.items()}
            check_concept_row(families[rows["family"][i]], row, where(i), caption_column)
    captions = []
    for i, (name, objects, labels, text) in enumerate(
        zip(rows["family"], rows["objects"], rows["attributes"], rows[caption_column])
    ):
        family = families[name]
        try:
            template = bind(family, objects, labels, text)
        except BindingError as exc:
            fix = f"the caption does not state its concept: {exc}"
            raise UsageError(where(i), text, fix) from exc
        captions.append(CaptionRow(family, objects, labels, text, template))
    columns = candidate_columns(captions, protocol)
    arrays = list(batch.columns) + [columns[name] for name, _ in BENCHMARK_FIELDS]
    names = list(batch.schema.names) + [name for name, _ in BENCHMARK_FIELDS]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _string_lists(column: pa.Array) -> bool:
    """A list<string> column without a null list or a null string in it."""
    return (
        pa.types.is_list(column.type)
        and pa.types.is_string(column.type.value_type)
        and column.null_count == 0
        and column.flatten().null_count == 0
    )


def rows_pass_checks(
    batch: pa.RecordBatch, families: dict[str, Family], caption_column: str
) -> bool:
    """Whether `check_concept_row` passes on every row of the batch, tested column-wise. Only
    ever true when it does (a caption passes only if it holds an ASCII letter or digit), so a
    false answer just means "check row by row"."""
    names = batch.schema.names
    if not {"family", "n", "objects", "attributes", caption_column} <= set(names):
        return False
    n, objects, labels = batch.column("n"), batch.column("objects"), batch.column("attributes")
    caption = batch.column(caption_column)
    if not (pa.types.is_integer(n.type) and n.null_count == 0):
        return False
    if not (_string_lists(objects) and _string_lists(labels)):
        return False
    if not (pa.types.is_string(caption.type) and caption.null_count == 0):
        return False
    if not pc.all(pc.match_substring_regex(caption, "[A-Za-z0-9]")).as_py():
        return False
    family_column = batch.column("family")
    for name, family in families.items():
        mask = pc.equal(family_column, name)
        n_f = n.filter(mask)
        bounds = pc.min_max(n_f)
        if not family.n_min <= bounds["min"].as_py() <= bounds["max"].as_py() <= family.n_max:
            return False
        k_labels = pc.subtract(n_f, 1) if family.is_relation else n_f
        for column, vocabulary, size in (
            (objects, family.objects, n_f),
            (labels, family.labels, k_labels),
        ):
            lists = column.filter(mask)
            if not pc.all(pc.equal(pc.list_value_length(lists), size)).as_py():
                return False
            if not set(pc.unique(lists.flatten()).to_pylist()) <= vocabulary.by_name.keys():
                return False
    return True


_CANDIDATE_TEXT = (
    "swap_negatives",
    "confusion_negatives",
    "vary_attribute_negatives",
    "vary_object_negatives",
)


def _leaf_paths(field: pa.Field) -> list[str]:
    """The Parquet column paths of one Arrow field ("a", "a.list.element", "a.b")."""
    if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
        return [f"{field.name}.list.{p}" for p in _leaf_paths(field.type.value_field)]
    if pa.types.is_struct(field.type):
        return [f"{field.name}.{p}" for p in _leaf_paths_of(list(field.type))]
    return [field.name]


def _leaf_paths_of(fields: list[pa.Field]) -> list[str]:
    return [path for field in fields for path in _leaf_paths(field)]


def writer_options(schema: pa.Schema) -> dict[str, Any]:
    """Parquet options of a benchmark table: the candidate caption lists get neither a
    dictionary (millions of distinct captions overflow it) nor min/max statistics (useless for
    captions); measured at paper scale: about 1.6x faster to write, 6 % smaller."""
    kept = _leaf_paths_of([f for f in schema if f.name not in _CANDIDATE_TEXT])
    return {"use_dictionary": kept, "write_statistics": kept}


@dataclass(frozen=True)
class _PartJob:
    """One batch for a worker, which writes its benchmark rows to its own Parquet part."""

    batch: pa.RecordBatch
    text_column: str
    protocol: str
    first_row: int
    part: Path
    schema: pa.Schema  # with the output's metadata
    options: dict[str, Any]


def _tally(result: pa.RecordBatch) -> dict[str, int]:
    """What one batch adds to the stage's summary."""
    vary = ("vary_attribute_negatives", "vary_object_negatives")
    return {
        "rows": result.num_rows,
        "swap": _total_length(result.column("swap_negatives")),
        "confusion": _total_length(result.column("confusion_negatives")),
        "vary": sum(_total_length(result.column(c)) for c in vary),
    }


def _part_job(job: _PartJob) -> dict[str, int]:
    """Runs in a worker: build one batch and write it as a Parquet part (one row group, as the
    in-process writer would); only the tally goes back to the parent."""
    result = benchmark_batch(job.batch, job.text_column, job.protocol, job.first_row)
    with pq.ParquetWriter(job.part, job.schema, compression="zstd", **job.options) as writer:
        writer.write_batch(result)
    return _tally(result)


def usable_cores() -> int:
    """CPU cores this process may use: its affinity mask, capped by a cgroup CPU quota
    (a container's `--cpus`, a Kubernetes CPU limit)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = _cgroup_cpu_quota()
    return max(1, min(cores or 1, quota) if quota else (cores or 1))


def _cgroup_cpu_quota() -> int | None:
    """Whole CPUs of the cgroup quota (rounded up), None when there is none."""
    import math

    try:  # cgroup v2
        limit, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if limit == "max" else math.ceil(int(limit) / int(period))
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        every = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return None if quota <= 0 else math.ceil(quota / every)
    except (OSError, ValueError):
        return None


def default_workers() -> int:
    """Worker processes that fit the cores (`usable_cores`, at most 16); 1 runs the batches in
    the parent, with no pool. Workers write their own Parquet parts, so the parent only hands
    out batches and joins the parts: it needs no core of its own. (The stage starts no more
    workers than the input has batches: a table of one batch runs in the parent.)"""
    return min(usable_cores(), 16)


def _worker_init(parent: int) -> None:
    """Workers die with their parent, even when it is killed with SIGKILL (Linux: the parent-
    death signal), and leave Ctrl-C to it (the parent then shuts the pool down)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL))
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _ordered_parallel(
    fn: Callable[[Any], Any], jobs: Iterator[Any], workers: int, window: int
) -> Iterator[Any]:
    """Map in worker processes, yielding results in input order, with at most `window` jobs in
    flight (the input is read lazily, so memory stays bounded). A worker's exception is raised
    here; a worker that dies raises BrokenProcessPool instead of hanging; workers die with the
    parent."""
    if workers <= 1:
        yield from map(fn, jobs)
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_worker_init, initargs=(os.getpid(),)
    )
    pending: deque = deque()
    try:
        for job in jobs:
            pending.append(pool.submit(fn, job))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit(143) while the block runs, so the temporary output is removed
    and the workers are shut down as on Ctrl-C (a plain SIGTERM would skip every cleanup)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_negatives_config(config: NegativesConfig) -> None:
    """The negatives settings are valid (before any work; the pipelines check their parameters
    with it too)."""
    if config.protocol not in PROTOCOLS:
        raise UsageError("protocol", config.protocol, f"must be one of {', '.join(PROTOCOLS)}")
    if config.workers is not None and config.workers < 1:
        raise UsageError("workers", config.workers, "must be at least 1 (or left out)")
    if config.batch_size < 1:
        raise UsageError("batch_size", config.batch_size, "must be at least 1")


def _table_family(path: str | Path, name: str) -> Family:
    """A family a table names: one that is not there is the table's error, not a flag's."""
    try:
        return load_family(name)
    except UsageError as exc:
        fix = f"column family holds {name!r}: {exc.fix}"
        raise UsageError("input_path", str(path), fix) from None


def negatives_stage(
    input_path: str | Path,
    out: str | Path,
    config: NegativesConfig = NegativesConfig(),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """`autocomp negatives`: stream a concepts or curated table into a benchmark table.

    Args:
        input_path: a concepts table (`autocomp sample`: its `minimal_caption` is the positive)
            or a curated table (`caption`, Contextual captions included).
        out: the benchmark .parquet to write (every input column kept, the candidate sets
            added); refused if it exists unless `config.force`.
        config: the protocol (paper or strict), batch size, workers, force.
        progress: called with the rows of each batch written.

    Returns:
        The summary: rows, and the Swap, Confusion and vary candidates written.
    """
    protocol, batch_size = config.protocol, config.batch_size
    check_negatives_config(config)
    source = open_parquet(input_path, "input_path")
    out = check_output_path(out, inputs=(input_path,), force=config.force)  # not the input
    schema = source.schema_arrow
    hint = "give a concepts table (autocomp sample) or a curated table"
    require_columns(input_path, schema, CONCEPT_COLUMNS, hint, "input_path")
    try:
        caption_column = _caption_column(schema)
    except KeyError:
        raise UsageError(
            "input_path", str(input_path), f"missing column caption (or minimal_caption); {hint}"
        ) from None
    clashes = [name for name, _ in BENCHMARK_FIELDS if name in schema.names and name != "caption"]
    if clashes:
        fix = f"already has {clashes[0]}: it is a benchmark table; {hint}"
        raise UsageError("input_path", str(input_path), fix)
    if caption_column == "caption":  # the positive is rewritten into "caption"; keep the source
        schema = schema.set(
            schema.get_field_index("caption"), pa.field("source_caption", pa.string())
        )
    families_read = read_rows(source, input_path, "input_path", ["family"]).column(0)
    names = sorted({str(v) for v in families_read.unique().to_pylist()})
    families = {name: family_record(_table_family(input_path, name)) for name in names}
    out_schema = pa.schema(list(schema) + [pa.field(n, t) for n, t in BENCHMARK_FIELDS])
    document = provenance(
        "benchmark",
        protocol=protocol,
        input=Path(input_path).name,
        input_metadata=_input_summary(input_path),
        families=families,
    )
    batches_in_input = -(-source.metadata.num_rows // batch_size)
    workers = config.workers or min(default_workers(), max(1, batches_in_input))
    text_column = "source_caption" if caption_column == "caption" else caption_column
    batches = (
        (batch.rename_columns(schema.names), i * batch_size)
        for i, batch in enumerate(read_batches(source, input_path, "input_path", batch_size))
    )
    summary = dict.fromkeys(("rows", "swap", "confusion", "vary"), 0)
    job = _Job(text_column, protocol, out, out_schema, document)  # (check_output_path swept)
    with _terminate_as_exit():
        tallies = _in_process(job, batches) if workers <= 1 else _in_workers(job, batches, workers)
        for tally in tallies:
            for key, value in tally.items():
                summary[key] += value
            if progress:
                progress(tally["rows"])
    return summary


@dataclass(frozen=True)
class _Job:
    """What every batch of one run shares: the caption column, protocol, output path, output
    schema and metadata document."""

    text_column: str
    protocol: str
    out: Path
    schema: pa.Schema
    document: dict[str, Any]


def _in_process(job: _Job, batches: Iterator[tuple[pa.RecordBatch, int]]) -> Iterator[dict]:
    """Build and write every batch here, through one writer (no pool: one worker)."""
    with StreamWriter(job.out, job.schema, job.document, **writer_options(job.schema)) as w:
        for batch, first_row in batches:
            result = benchmark_batch(batch, job.text_column, job.protocol, first_row)
            w.write(result)
            yield _tally(result)


def _in_workers(
    job: _Job, batches: Iterator[tuple[pa.RecordBatch, int]], workers: int
) -> Iterator[dict]:
    """Workers build the batches and write each as a Parquet part in a temporary folder beside
    the output (store/atomic.py: removed on failure, and by the next run after a kill); the
    parent appends each part, in order, to one file there without decoding it (`ParquetConcat`:
    the same bytes one writer would write) and moves it into place at the end."""
    options, schema = writer_options(job.schema), with_metadata(job.schema, job.document)
    with scratch_folder(job.out) as folder:
        jobs = (
            _PartJob(batch, job.text_column, job.protocol, first_row, folder / _part_name(k),
                     schema, options)
            for k, (batch, first_row) in enumerate(batches)
        )  # fmt: skip
        merged = folder / job.out.name
        with open(merged, "wb") as sink:
            concat = ParquetConcat(sink)
            for k, tally in enumerate(_ordered_parallel(_part_job, jobs, workers, 2 * workers)):
                concat.add(folder / _part_name(k))
                (folder / _part_name(k)).unlink()
                yield tally
            if concat.files:
                concat.close()
        if not concat.files:  # no rows: the file one writer writes with no batch
            pq.ParquetWriter(merged, schema, compression="zstd", **options).close()
        os.replace(merged, job.out)  # the scratch folder's file: complete, on the same disk


def _part_name(k: int) -> str:
    return f"part-{k:06d}.parquet"


def _total_length(column: pa.Array) -> int:
    offsets = column.offsets
    return int(offsets[-1].as_py() - offsets[0].as_py()) if len(column) else 0


def _input_summary(path: str | Path) -> dict[str, Any]:
    from autocomp.store.tables import read_metadata

    meta = read_metadata(path)
    return {k: meta[k] for k in ("table", "seed", "autocomp_version", "n", "count") if k in meta}


# ----------------------------------------------------------------------------- pipeline helpers


def parse_specs(specs: str) -> list[tuple[str, int]]:
    """ "color:2,position:3" -> [("color", 2), ("position", 3)]."""
    out = []
    for item in (s.strip() for s in specs.split(",") if s.strip()):
        name, sep, digits = item.partition(":")
        n = whole_number(digits)
        if not sep or n is None:
            raise UsageError("specs", item, "must look like family:N, e.g. color:2,position:3")
        if (name, n) in out:  # the same concepts twice: their ids (and files) collide
            raise UsageError("specs", item, "is given twice; name each family:N once")
        out.append((name, n))
    if not out:
        raise UsageError("specs", specs, "names no family:N pair")
    return out


def check_specs(specs: str, count: int) -> list[tuple[str, int]]:
    """Every family:N of a run exists and holds `count` distinct concepts (checked before any
    task starts)."""
    pairs = parse_specs(specs)
    for name, n in pairs:
        try:
            family = load_family(name)
            concepts_mod.check_n(family, n)
        except UsageError as exc:
            raise UsageError("specs", f"{name}:{n}", exc.fix) from None
        total = concepts_mod.count_concepts(family, n)
        if count < 1 or count > total:
            raise UsageError(
                "count", count, f"must be from 1 to {total:,} ({name} N={n} has {total:,})"
            )
    return pairs


def check_sample_config(config: SampleConfig) -> list[tuple[str, int]]:
    """The sample settings of a run are valid: every family:N exists and holds `count`
    distinct concepts, and the seed is 0 or more (the pipelines check their parameters with
    it); returns the (family, N) pairs."""
    pairs = check_specs(config.specs, config.count)
    if config.seed < 0:
        raise UsageError("seed", config.seed, "must be 0 or more")
    return pairs


def sample_many(config: SampleConfig, out: str | Path) -> pa.Table:
    """Concepts of several (family, N) pairs in one table, written atomically (the pipelines'
    sample step).

    Args:
        config: `specs` ("color:2,position:3"), `count` concepts of each pair, `seed`.
        out: the .parquet path to write (replaced if it exists).

    Returns:
        The concepts table of every pair, in the order `specs` names them.
    """
    out = check_output_path(out, force=True)
    tables, documents = [], {}
    for name, n in parse_specs(config.specs):
        table, document = concepts_table(load_family(name), n, config.count, config.seed)
        tables.append(table)
        documents[f"{name}:{n}"] = document
    table = pa.concat_tables(tables)
    document = provenance("concepts", seed=config.seed, count=config.count, specs=documents)
    write_table(table, out, document)
    return table


def reuse_or_sample(config: SampleConfig, store: str, reuse: str, out: str | Path) -> pa.Table:
    """The concept set of a run: fetched from the published benchmark `reuse` (so a re-run with
    a new generator is comparable concept by concept), or sampled."""
    if not reuse:
        return sample_many(config, out)
    import tempfile

    from autocomp.store.stores import open_store

    with tempfile.TemporaryDirectory(prefix="reuse-") as work:  # only the file it reads
        open_store(store).get_file(f"benchmarks/{reuse}", "concepts.parquet", Path(work) / "c")
        with atomic_path(out) as tmp:
            shutil.copyfile(Path(work) / "c", tmp)
    return open_parquet(out).read()
