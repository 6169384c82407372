"""Stage functions of the protocol core: tables in, tables out (called by the CLI and, later,
by the pipeline components).

- `sample_stage`: concepts of one (family, N) with their Minimal captions -> concepts table.
- `negatives_stage`: a concepts table (uses `minimal_caption`) or a curated table (uses
  `caption`) -> benchmark table with Swap / Confusion / sanity candidate sets, streamed in
  batches over worker processes with bounded memory.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.config import NegativesConfig, SampleConfig
from autocomp.errors import UsageError
from autocomp.protocol import concepts as concepts_mod
from autocomp.protocol.binding import BindingError
from autocomp.protocol.concepts import check_concept_row
from autocomp.protocol.family import Family, load_family
from autocomp.protocol.minimal import minimal_caption
from autocomp.protocol.negatives import PROTOCOLS, build_candidates, chance
from autocomp.store.tables import (
    BENCHMARK_FIELDS,
    CONCEPT_COLUMNS,
    CONCEPTS_SCHEMA,
    StreamWriter,
    check_output_path,
    open_parquet,
    provenance,
    require_columns,
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
    """`autocomp sample`: write the concepts table atomically; return it (`force`: replace an
    existing table)."""
    if seed < 0:
        raise UsageError("--seed", seed, "must be 0 or more")
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
    """Candidate sets for every row of one batch (runs in a worker process)."""
    rows = batch.to_pydict()
    out: dict[str, list] = {name: [] for name, _ in BENCHMARK_FIELDS}
    families = {name: load_family(name) for name in set(rows["family"])}
    for i in range(batch.num_rows):
        family = families[rows["family"][i]]
        objects, labels, text = rows["objects"][i], rows["attributes"][i], rows[caption_column][i]
        concept = rows["concept_id"][i] if "concept_id" in rows else None
        where = f"--input row {first_row + i}" + (f" ({concept})" if concept else "")
        check_concept_row(family, {k: v[i] for k, v in rows.items()}, where, caption_column)
        try:
            sets = build_candidates(family, objects, labels, text, protocol)
        except BindingError as exc:
            raise UsageError(where, text, f"the caption does not state its concept: {exc}") from exc
        out["caption"].append(sets.caption)
        out["caption_rewritten"].append(sets.caption != text)
        out["protocol"].append(protocol)
        out["swap_negatives"].append(sets.swap)
        out["swap_arrangements"].append(sets.swap_arrangements)
        out["swap_same_scene"].append(sets.swap_same_scene)
        out["swap_in_confusion"].append(sets.swap_in_confusion)
        out["confusion_negatives"].append(sets.confusion)
        out["confusion_arrangements"].append(sets.confusion_arrangements)
        out["confusion_same_scene"].append(sets.confusion_same_scene)
        out["vary_attribute_negatives"].append(sets.vary_attribute)
        out["vary_object_negatives"].append(sets.vary_object)
        for name in ("swap", "confusion", "vary_attribute", "vary_object"):
            out[f"{name}_chance"].append(chance(len(getattr(sets, name))))
    arrays = list(batch.columns) + [
        pa.array(out[name], type=type_) for name, type_ in BENCHMARK_FIELDS
    ]
    names = list(batch.schema.names) + [name for name, _ in BENCHMARK_FIELDS]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _benchmark_job(args: tuple[pa.RecordBatch, str, str, int]) -> pa.RecordBatch:
    return benchmark_batch(*args)


def default_workers() -> int:
    """Worker processes that fit the cores: the parent reads, encodes and writes the Parquet, so
    it keeps a core; with two cores or fewer the batches run in the parent itself (measured on 2
    cores: 2 workers were 1.13-1.55x slower than 1, with 44 % more CPU)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 1 if (cores or 1) <= 2 else min((cores or 1) - 1, 16)


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


def remove_stale_temporaries(out: Path) -> list[Path]:
    """Remove the temporary files a killed run left beside `out` (`.NAME.tmp-PID` of a process
    that no longer runs); return them."""
    removed = []
    for path in out.parent.glob(f".{out.name}.tmp-*"):
        pid = path.name.rsplit("-", 1)[-1]
        if pid.isdigit() and _alive(int(pid)):
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def negatives_stage(
    input_path: str | Path,
    out: str | Path,
    config: NegativesConfig = NegativesConfig(),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """`autocomp negatives`: stream a concepts or curated table into a benchmark table.

    Returns a summary: rows and candidate counts written.
    """
    protocol, batch_size = config.protocol, config.batch_size
    if protocol not in PROTOCOLS:
        raise UsageError("--protocol", protocol, f"must be one of {', '.join(PROTOCOLS)}")
    if config.workers is not None and config.workers < 1:
        raise UsageError("--workers", config.workers, "must be at least 1 (or left out)")
    if batch_size < 1:
        raise UsageError("--batch-size", batch_size, "must be at least 1")
    source = open_parquet(input_path)
    out = check_output_path(out, inputs=(input_path,), force=config.force)
    schema = source.schema_arrow
    hint = "give a concepts table (autocomp sample) or a curated table"
    require_columns(input_path, schema, CONCEPT_COLUMNS, hint)
    try:
        caption_column = _caption_column(schema)
    except KeyError:
        raise UsageError(
            "--input", str(input_path), f"missing column caption (or minimal_caption); {hint}"
        ) from None
    clashes = [name for name, _ in BENCHMARK_FIELDS if name in schema.names and name != "caption"]
    if clashes:
        raise UsageError(
            "--input", str(input_path), f"already has {clashes[0]}: it is a benchmark table; {hint}"
        )
    if caption_column == "caption":  # the positive is rewritten into "caption"; keep the source
        schema = schema.set(
            schema.get_field_index("caption"), pa.field("source_caption", pa.string())
        )
    names = sorted({str(v) for v in source.read(columns=["family"]).column(0).unique().to_pylist()})
    families = {name: family_record(load_family(name)) for name in names}
    out_schema = pa.schema(list(schema) + [pa.field(n, t) for n, t in BENCHMARK_FIELDS])
    document = provenance(
        "benchmark",
        protocol=protocol,
        input=Path(input_path).name,
        input_metadata=_input_summary(input_path),
        families=families,
    )
    workers = config.workers if config.workers is not None else default_workers()
    text_column = "source_caption" if caption_column == "caption" else caption_column
    batches = (
        (batch.rename_columns(schema.names), text_column, protocol, i * batch_size)
        for i, batch in enumerate(source.iter_batches(batch_size=batch_size))
    )
    summary = {"rows": 0, "swap": 0, "confusion": 0, "vary": 0}
    remove_stale_temporaries(out)
    with _terminate_as_exit(), StreamWriter(out, out_schema, document) as writer:
        for result in _ordered_parallel(_benchmark_job, batches, workers, window=2 * workers):
            writer.write(result)
            summary["rows"] += result.num_rows
            for key, column in (("swap", "swap_negatives"), ("confusion", "confusion_negatives")):
                summary[key] += _total_length(result.column(column))
            for column in ("vary_attribute_negatives", "vary_object_negatives"):
                summary["vary"] += _total_length(result.column(column))
            if progress:
                progress(result.num_rows)
    return summary


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
        name, sep, n = item.partition(":")
        if not sep or not n.isdigit():
            raise UsageError("--specs", item, "must look like family:N, e.g. color:2,position:3")
        out.append((name, int(n)))
    if not out:
        raise UsageError("--specs", specs, "names no family:N pair")
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
            raise UsageError("--specs", f"{name}:{n}", exc.fix) from None
        total = concepts_mod.count_concepts(family, n)
        if count < 1 or count > total:
            raise UsageError(
                "--count", count, f"must be from 1 to {total:,} ({name} N={n} has {total:,})"
            )
    return pairs


def sample_many(config: SampleConfig, out: str | Path) -> pa.Table:
    """Concepts of several (family, N) pairs in one table (`count` each), written atomically."""
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
    import shutil
    import tempfile

    from autocomp.store.storage import open_store

    work = Path(tempfile.mkdtemp(prefix="reuse-"))
    open_store(store).get(f"benchmarks/{reuse}", work)
    shutil.copyfile(work / "concepts.parquet", out)
    return open_parquet(out).read()
