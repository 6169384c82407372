"""A seeded, concept-disjoint partition of a benchmark for fine-tuning (paper A.9).

The source concepts of one (family, N, condition) -- Color N=2 Minimal in the paper -- are
shuffled with the seed and cut into held-out (20 %), validation (10 % of the rest) and train.
The split table lists every source concept with its split; a concept is in exactly one split.
`evaluation_table` keeps every benchmark row whose concept was not trained or validated on (the
held-out concepts in every condition, and all other families / N), which is what is scored.
The benchmark is anything autocomp.store.catalog.benchmarks opens (a table, a folder of parts,
or an opened Benchmark); the evaluation benchmark is always one table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.config import FinetuneConfig
from autocomp.errors import UsageError
from autocomp.store.catalog.benchmarks import Benchmark, as_benchmark
from autocomp.store.catalog.ids import concept_of
from autocomp.store.catalog.schemas import SPLIT_SCHEMA
from autocomp.store.tables import StreamWriter, provenance, write_table

BenchmarkSource = str | Path | Benchmark

SPLITS = ("train", "validation", "heldout")


def concept_id(row: dict[str, Any]) -> str:
    """The concept of a benchmark row (a concept's Minimal and Contextual rows share it)."""
    if row.get("concept_id"):
        return str(row["concept_id"])
    return concept_of(str(row.get("sample_id") or ""))


def is_source(row: dict[str, Any], config: FinetuneConfig) -> bool:
    """Whether a row belongs to the training partition's (family, N, condition)."""
    condition = row.get("condition") or "minimal"
    return (
        row["family"] == config.family
        and int(row["n"]) == config.n
        and (condition == config.condition)
    )


def partition(concepts: list[str], config: FinetuneConfig, seed: int) -> dict[str, str]:
    """concept -> split. Deterministic in (the set of concepts, fractions, seed)."""
    import numpy as np

    ordered = sorted(set(concepts))
    if len(ordered) < 3:
        raise UsageError(
            "benchmark",
            f"{len(ordered)} concept(s) of {config.family} N={config.n} {config.condition}",
            "a split needs at least 3 source concepts (train, validation, held-out)",
        )
    order = np.random.default_rng(seed).permutation(len(ordered))
    shuffled = [ordered[i] for i in order]
    heldout = max(1, round(config.heldout_fraction * len(shuffled)))
    rest = len(shuffled) - heldout
    validation = min(rest - 1, max(1, round(config.validation_fraction * rest)))
    names = ["heldout"] * heldout + ["validation"] * validation
    names += ["train"] * (len(shuffled) - len(names))
    return dict(zip(shuffled, names))


def split_stage(
    benchmark: BenchmarkSource, out: str | Path, config: FinetuneConfig, seed: int = 0
) -> pa.Table:
    """Write the split table (concept_id, split) of `benchmark` to `out`; return it."""
    source = as_benchmark(benchmark)
    columns = [
        c
        for c in ("concept_id", "sample_id", "family", "n", "condition")
        if c in source.schema.names
    ]
    rows = source.read(columns).to_pylist()
    concepts = [concept_id(r) for r in rows if is_source(r, config)]
    mapping = partition(concepts, config, seed)
    table = pa.Table.from_pylist(
        [{"concept_id": c, "split": s} for c, s in sorted(mapping.items())], SPLIT_SCHEMA
    )
    counts = {name: sum(1 for s in mapping.values() if s == name) for name in SPLITS}
    document = provenance(
        "finetune_split",
        seed=seed,
        config=config.record(),
        counts=counts,
        benchmark=_shown(benchmark),
        benchmark_metadata=source.metadata,
    )
    write_table(table, out, document)
    return table


def _shown(benchmark: BenchmarkSource) -> str:
    """How a provenance document names the benchmark: as it was given."""
    return benchmark.shown if isinstance(benchmark, Benchmark) else str(benchmark)


def read_split(path: str | Path) -> dict[str, str]:
    table = pq.read_table(path)
    if table.schema.names[:2] != ["concept_id", "split"]:
        raise UsageError("split_file", str(path), "is not a split table (autocomp finetune split)")
    return dict(zip(table["concept_id"].to_pylist(), table["split"].to_pylist()))


def rows_of(
    benchmark: BenchmarkSource, split: dict[str, str], name: str, config: FinetuneConfig
) -> list[dict]:
    """The source rows (family, N, condition of the config) whose concept is in split `name`,
    read batch by batch (a paper-scale table with embedded images never sits in memory whole;
    the kept rows hold their images still encoded)."""
    rows = []
    for batch in as_benchmark(benchmark).batches(batch_size=256):
        rows += [
            r
            for r in batch.to_pylist()
            if is_source(r, config) and split.get(concept_id(r)) == name
        ]
    return rows


def evaluation_table(benchmark: BenchmarkSource, split: dict[str, str], out: str | Path) -> int:
    """Write every row of `benchmark` except those of training and validation concepts, batch
    by batch, as one table; return the number of rows written."""
    source = as_benchmark(benchmark)
    id_columns = [c for c in ("concept_id", "sample_id") if c in source.schema.names]
    document = dict(source.metadata)
    document.update(provenance("benchmark", finetune_evaluation=True, heldout_of=_shown(benchmark)))
    kept = 0
    with StreamWriter(out, source.schema.remove_metadata(), document) as writer:
        for batch in source.batches(batch_size=256):
            ids = [concept_id(r) for r in batch.select(id_columns).to_pylist()]
            keep = pa.array([split.get(c, "heldout") == "heldout" for c in ids])
            chosen = batch.filter(keep)
            kept += chosen.num_rows
            if chosen.num_rows:
                writer.write(chosen)
    return kept
