"""Reading a run folder for the report: the benchmark, every model's predictions and run
record, the optional concept set, survival table, human annotations and judge decisions."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.analysis import finetune as finetune_analysis
from autocomp.errors import UsageError

BENCH_COLUMNS = [
    "sample_id",
    "family",
    "n",
    "condition",
    "caption",
    "objects",
    "attributes",
    "confusion_arrangements",
    "confusion_same_scene",
    "paired",
    "accepted",
]


def load_run(run: str | Path) -> dict[str, Any]:
    run = Path(run)
    if not run.is_dir():
        raise UsageError(
            "--run", str(run), "no such folder; give a run folder (see autocomp report --help)"
        )
    bench_dir = run / "benchmark"
    files = sorted((bench_dir / "data").glob("*.parquet")) if bench_dir.is_dir() else []
    if not files and (run / "benchmark.parquet").is_file():
        files = [run / "benchmark.parquet"]
    if not files:
        raise UsageError("--run", str(run), "holds no benchmark/ folder or benchmark.parquet")
    available = pq.read_schema(files[0]).names
    columns = [c for c in BENCH_COLUMNS if c in available]
    benchmark = pa.concat_tables([pq.read_table(f, columns=columns) for f in files])
    results = sorted(p for p in (run / "results").glob("*") if (p / "predictions").is_dir())
    if not results:
        raise UsageError("--run", str(run), "holds no results/<model>/ score outputs")
    predictions = pa.concat_tables(
        [pq.read_table(p / "predictions") for p in results], promote_options="default"
    )
    models = {}
    for p in results:
        record = json.loads((p / "run.json").read_text()) if (p / "run.json").is_file() else {}
        models[p.name] = record.get("entry") or {"name": p.name}
    optional = {name: bench_dir / f"{name}.parquet" for name in ("concepts", "survival")}
    return {
        "run": run,
        "benchmark": benchmark,
        "predictions": predictions,
        "models": models,
        "meta": json.loads((pq.read_schema(files[0]).metadata or {}).get(b"autocomp", b"{}")),
        **{k: pq.read_table(v) if v.is_file() else None for k, v in optional.items()},
        "human": _read_csvs(sorted((run / "human").glob("*.csv"))),
        "judges": {p.stem: _read_csvs([p]) for p in sorted((run / "judges").glob("*.csv"))},
        "finetune": finetune_analysis.load_runs(results),  # score runs with finetune.json
    }


def _read_csvs(paths: list[Path]) -> list[dict[str, str]]:
    rows = []
    for path in paths:
        with path.open(newline="", encoding="utf-8") as f:
            rows += list(csv.DictReader(f))
    return rows


def family_kinds(meta: dict[str, Any], names: Iterable[str]) -> dict[str, list[str]]:
    """The families of a run grouped by kind (attribute / relation), from the benchmark's own
    record of its family configs; a family missing there is looked up on the search path."""
    from autocomp.protocol.family import load_family

    recorded = {
        name: (record.get("config") or {}).get("kind")
        for name, record in (meta.get("families") or {}).items()
        if isinstance(record, dict)
    }
    kinds: dict[str, list[str]] = {"attribute": [], "relation": []}
    for name in sorted(set(names)):
        kind = recorded.get(name)
        if kind is None:
            try:
                kind = load_family(name).kind
            except UsageError:
                continue  # unknown family: no kind-specific analysis for it
        kinds.setdefault(kind, []).append(name)
    return kinds
