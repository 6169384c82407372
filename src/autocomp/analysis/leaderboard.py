"""The leaderboard over every score run in one or more stores (`autocomp leaderboard`).

A store (a folder or an S3 URI: the one `autocomp run`, the pipelines and `publish` write) holds
published benchmarks under `benchmarks/<name>` and score runs under `results/<name>/<model>`.
For every run this reads its run.json and summary.parquet (checked against the run's manifest:
a file whose SHA-256 differs, or that does not parse, makes the run *damaged*: listed, left
out of every number) and, once per benchmark, the published benchmark's digest and the
generators (the `renderer` column: the text-to-image model that drew its images).

What it computes, per cell (benchmark by name and digest, generator, family, N, condition,
set, protocol, score type) and run:
- accuracy with the report's 95 % interval (`statistics.binomial_interval`) and the items it
  rests on;
- the rank interval: the best and worst ranks the run could hold in the cell given the intervals
  (best: one more than the runs whose lower bound is above its upper bound; worst: the number of
  runs less those whose upper bound is below its lower bound);
- the mean win rate (HELM's): in each cell with at least two current runs, the share of the other
  runs it beats (a tie counts one half), averaged over the cells it is in.

Runs are told apart by their configuration (the model entry as recorded, dtype, batch size,
limit, blind/choice settings): two configurations of one model are two rows, labelled, never
averaged. A run is *stale* when its benchmark was published again since (its digest is not the
published one) or is no longer published, and *superseded* when the model registry now names
other weights for that model (weights, revision or architecture differ); both are shown and
marked, and neither counts in ranks or win rates.

analysis/leaderboard_page.py writes it: index.html, leaderboard.csv and leaderboard.json.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.analysis.statistics import binomial_interval
from autocomp.errors import UsageError
from autocomp.store.storage import StorageError, Store

CELL_KEYS = ("family", "n", "condition", "set", "protocol", "score_type")
CONFIG_KEYS = ("entry", "batch_size", "limit", "blind", "choice", "format")
WEIGHT_KEYS = ("weights", "revision", "architecture", "model_class")
CURRENT = "current"
SIDES = ("model", "base")  # model_deltas' pair columns, here the two benchmarks


@dataclass(frozen=True)
class Run:
    """One model's run on one benchmark, as the store holds it."""

    store: str
    benchmark: str
    model: str
    config: str  # a short digest of the run's configuration
    status: str  # current | stale | superseded | damaged
    problem: str = ""
    generator: str = ""
    digest: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    summary: list[dict[str, Any]] = field(default_factory=list)
    label: str = ""


@dataclass(frozen=True)
class Cell:
    """One run's accuracy in one cell, with its interval and rank interval."""

    label: str
    model: str
    benchmark: str
    digest: str
    generator: str
    key: tuple[Any, ...]
    items: int
    correct: int
    accuracy: float
    lower: float
    upper: float
    best_rank: int = 0
    worst_rank: int = 0
    runs_in_cell: int = 0
    status: str = CURRENT


@dataclass(frozen=True)
class Board:
    runs: list[Run]
    cells: list[Cell]
    models: list[dict[str, Any]]  # label, model, mean win rate, cells
    generators: list[dict[str, Any]] = field(default_factory=list)  # paired deltas across them


def _checked(target: Store, name: str, manifest: dict[str, Any], path: str) -> bytes:
    """One file of a run, read and checked against the run's manifest."""
    entry = next((f for f in manifest.get("files", []) if f.get("path") == path), None)
    if entry is None:
        raise StorageError(f"{path} is not in the run's manifest")
    data = target.read_bytes(f"{name}/{path}")
    if data is None or hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise StorageError(f"{path} does not match the SHA-256 its manifest records")
    return data


def _config(record: dict[str, Any]) -> str:
    text = json.dumps({k: record.get(k) for k in CONFIG_KEYS}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _provenance(record: dict[str, Any]) -> dict[str, Any]:
    entry = record.get("entry") or {}
    return {
        "entry": entry.get("name", record.get("model")),
        "weights": entry.get("weights"),
        "revision": entry.get("revision"),
        "dtype": entry.get("dtype"),
        "batch_size": record.get("batch_size"),
        "benchmark_sha": record.get("benchmark_sha"),
        "autocomp_version": record.get("autocomp_version"),
        "autocomp_commit": record.get("autocomp_commit"),
    }


def _superseded(record: dict[str, Any], registry: dict[str, Any]) -> str:
    entry = record.get("entry") or {}
    now = registry.get(str(entry.get("name", record.get("model"))))
    if now is None:
        return ""
    changed = [k for k in WEIGHT_KEYS if (now.raw.get(k) or None) != (entry.get(k) or None)]
    return f"the registry now names other {', '.join(changed)}" if changed else ""


def _read_run(target: Store, name: str, benchmarks: dict[str, tuple[str, str]]) -> Run:
    """The run published as `name` (results/<benchmark>/<model>); damaged when it cannot be
    read whole and checked."""
    _, benchmark, model = name.split("/", 2)
    base: dict[str, Any] = {
        "store": target.uri,
        "benchmark": benchmark,
        "model": model,
        "config": "",
    }
    try:
        manifest = target.manifest(name) or {}
        record = json.loads(_checked(target, name, manifest, "run.json"))
        if not isinstance(record, dict):
            raise StorageError("run.json is not a mapping")
        summary = pq.read_table(
            pa.BufferReader(_checked(target, name, manifest, "summary.parquet"))
        )
        rows = summary.select(["model", *CELL_KEYS, "items", "correct"]).to_pylist()
    except (StorageError, UsageError, ValueError, KeyError, OSError, pa.ArrowException) as exc:
        return Run(**base, status="damaged", problem=" ".join(str(exc).split())[:200])
    digest, generator = benchmarks.get(benchmark, ("", ""))
    status, problem = CURRENT, ""
    if not digest:
        status, problem = "stale", "its benchmark is no longer published in this store"
    elif record.get("benchmark_sha") != digest:
        status, problem = "stale", "its benchmark was published again since"
    else:
        from autocomp.scoring.registry import all_models

        problem = _superseded(record, all_models())
        status = "superseded" if problem else CURRENT
    return Run(
        **{**base, "config": _config(record)},
        status=status,
        problem=problem,
        generator=generator,
        digest=str(record.get("benchmark_sha", "")),
        provenance=_provenance(record),
        summary=rows,
    )


def _benchmark(target: Store, name: str) -> tuple[str, str]:
    """A published benchmark's digest and generators (its `renderer` values), or ("", "")."""
    from autocomp.store.catalog.benchmarks import open_stored

    try:
        found = open_stored(target.uri, f"benchmarks/{name}")
        generators: set[str] = set()
        if "renderer" in found.schema.names:
            for part in found.files:
                opened: Any = part.open() if not isinstance(part, Path) else pq.ParquetFile(part)
                column = opened.read(columns=["renderer"])["renderer"]
                generators.update(str(v) for v in column.unique().to_pylist() if v)
        return found.digest, ", ".join(sorted(generators)) or "unknown"
    except (UsageError, StorageError, OSError, pa.ArrowException):
        return "", ""


def collect(stores: list[str]) -> list[Run]:
    """Every score run in `stores` (results/<benchmark>/<model>), read and checked."""
    from autocomp.store.stores import local_root, open_store

    runs: list[Run] = []
    for uri in stores:
        root = local_root(uri)
        if root is not None and not root.is_dir():
            raise UsageError("stores", uri, "is not a folder; give a store: a folder holding "
                             "results/<benchmark>/<model>, or an s3:// URI")  # fmt: skip
        target = open_store(uri)
        names = sorted(n for n in target.outputs("results/") if n.count("/") == 2)
        benchmarks = {b: _benchmark(target, b) for b in {n.split("/")[1] for n in names}}
        runs += [_read_run(target, n, benchmarks) for n in names]
    return _labelled(runs)


def _labelled(runs: list[Run]) -> list[Run]:
    """Each run's row label: the model, with its configuration where a model has several."""
    configs: dict[str, set[str]] = {}
    for r in runs:
        if r.status != "damaged":
            configs.setdefault(r.model, set()).add(r.config)
    return [
        Run(**{**asdict(r), "label": r.model if len(configs.get(r.model, ())) <= 1
               else f"{r.model} [config {r.config}]"})
        for r in runs
    ]  # fmt: skip


def _cells(runs: list[Run]) -> list[Cell]:
    cells = []
    for r in runs:
        if r.status == "damaged":
            continue
        for row in r.summary:
            items, correct = int(row["items"] or 0), int(row["correct"] or 0)
            if items == 0:
                continue
            lower, upper = binomial_interval(correct, items)
            cells.append(Cell(
                r.label, r.model, r.benchmark, r.digest, r.generator,
                tuple(row[k] for k in CELL_KEYS),
                items, correct, correct / items, lower, upper, status=r.status,
            ))  # fmt: skip
    return cells


def _ranked(cells: list[Cell]) -> list[Cell]:
    """Rank intervals within each cell, among its current runs."""
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        if c.status == CURRENT:
            groups.setdefault((c.benchmark, c.digest, c.generator, c.key), []).append(c)
    out = []
    for c in cells:
        group = groups.get((c.benchmark, c.digest, c.generator, c.key), [])
        if c.status != CURRENT:
            out.append(c)
            continue
        best = 1 + sum(o.lower > c.upper for o in group)
        worst = len(group) - sum(o.upper < c.lower for o in group)
        out.append(Cell(**{**asdict(c), "key": c.key, "best_rank": best, "worst_rank": worst,
                           "runs_in_cell": len(group)}))  # fmt: skip
    return out


def _win_rates(cells: list[Cell]) -> list[dict[str, Any]]:
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        if c.status == CURRENT:
            groups.setdefault((c.benchmark, c.digest, c.generator, c.key), []).append(c)
    rates: dict[str, list[float]] = {}
    models: dict[str, str] = {}
    for group in groups.values():
        for c in group:
            models[c.label] = c.model
            others = [o for o in group if o.label != c.label]
            if others:
                wins = sum(1.0 if c.accuracy > o.accuracy else 0.5 if c.accuracy == o.accuracy
                           else 0.0 for o in others)  # fmt: skip
                rates.setdefault(c.label, []).append(wins / len(others))
    rows = [
        {"label": label, "model": models[label], "cells": len(rates.get(label, [])),
         "mean_win_rate": (sum(rates[label]) / len(rates[label])) if rates.get(label) else None}
        for label in sorted(models)
    ]  # fmt: skip
    return sorted(rows, key=lambda r: (-(r["mean_win_rate"] or -1), r["label"]))


def _predictions(run: Run) -> pa.Table:
    """A current run's predictions, every part checked against the run's manifest."""
    from autocomp.store.stores import open_store

    target = open_store(run.store)
    name = f"results/{run.benchmark}/{run.model}"
    manifest = target.manifest(name) or {}
    parts = sorted(f["path"] for f in manifest.get("files", [])
                   if f["path"].startswith("predictions/part-"))  # fmt: skip
    tables = [
        pq.read_table(pa.BufferReader(_checked(target, name, manifest, p))).replace_schema_metadata(
            None
        )
        for p in parts
    ]
    return pa.concat_tables(tables, promote_options="default")


def generator_deltas(runs: list[Run], seed: int = 0) -> list[dict[str, Any]]:
    """The same model (and configuration) on benchmarks drawn by different generators: the
    paired difference (b - a) on the concepts both hold, per cell, with the report's paired
    interval and McNemar's test (statistics.model_deltas)."""
    from autocomp.analysis.statistics import model_deltas

    by_label: dict[str, list[Run]] = {}
    for r in runs:
        if r.status == CURRENT:
            by_label.setdefault(r.label, []).append(r)
    rows: list[dict[str, Any]] = []
    for label, mine in sorted(by_label.items()):
        mine = sorted(mine, key=lambda r: (r.generator, r.benchmark, r.store))
        for i, a in enumerate(mine):
            for b in mine[i + 1 :]:
                if a.generator == b.generator:
                    continue
                side_a = _relabel(_predictions(a), "a")
                side_b = _relabel(_predictions(b), "b")
                both = pa.concat_tables([side_a, side_b], promote_options="default")
                sides = {"label": label, "benchmark_a": a.benchmark, "generator_a": a.generator,
                         "benchmark_b": b.benchmark, "generator_b": b.generator}  # fmt: skip
                for r in model_deltas(both, {"b": "a"}, seed).to_pylist():
                    rows.append({**sides, **{k: v for k, v in r.items() if k not in SIDES}})
    return rows


def _relabel(predictions: pa.Table, side: str) -> pa.Table:
    i = predictions.schema.get_field_index("model")
    return predictions.set_column(i, "model", pa.array([side] * predictions.num_rows, pa.string()))


def build(stores: list[str], seed: int = 0) -> Board:
    """The leaderboard of every run in `stores` (`seed`: the paired bootstraps')."""
    if not stores:
        raise UsageError("stores", stores, "give at least one store (a folder or an S3 URI)")
    runs = collect(stores)
    cells = _ranked(_cells(runs))
    return Board(runs, cells, _win_rates(cells), generator_deltas(runs, seed))


def cell_rows(board: Board) -> list[dict[str, Any]]:
    """One row per run and cell (the CSV), in a stable order."""
    rows = [
        {"label": c.label, "model": c.model, "benchmark": c.benchmark, "generator": c.generator,
         **dict(zip(CELL_KEYS, c.key)), "items": c.items, "correct": c.correct,
         "accuracy": round(100 * c.accuracy, 4), "lower": round(100 * c.lower, 4),
         "upper": round(100 * c.upper, 4), "best_rank": c.best_rank or None,
         "worst_rank": c.worst_rank or None, "runs_in_cell": c.runs_in_cell or None,
         "status": c.status}
        for c in board.cells
    ]  # fmt: skip
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in ("benchmark", *CELL_KEYS, "label")))
