"""Reading a run folder for the report: the benchmark, every model's predictions and run
record, the optional concept set, survival table, human annotations and judge decisions."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.analysis.finetune_tables import load_runs
from autocomp.errors import UsageError
from autocomp.store.catalog.benchmarks import open_benchmark
from autocomp.store.catalog.ids import with_sample_keys
from autocomp.store.catalog.runs import ScoreRun

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
    "caption_status",  # the concept's; "fallback" on a Contextual row: its Minimal twin's caption
    "swap_in_confusion",  # Swap = Confusion when it covers every Confusion negative
]


Json = dict[str, Any]  # a JSON object as read (run.json, the benchmark's metadata)
CsvRows = list[dict[str, str]]  # the rows of CSV files, column -> text


@dataclass(frozen=True)
class RunData:
    """Everything the report reads from a run folder, as `load_run` read it. Nothing writes
    into it: the tables, scope, layout, notes and caveats computed from it are a new value
    (analysis/tables.py: ReportTables)."""

    run: Path
    benchmark: pa.Table  # BENCH_COLUMNS present, with sample keys (ids.with_sample_keys)
    predictions: pa.Table  # every model's predictions, one table
    models: dict[str, Json]  # model name -> its registry entry (run.json "entry")
    weights: dict[str, Json]  # model name -> how its weights were made (run.json "weights")
    meta: Json  # the benchmark's own record (configs, seeds, versions)
    concepts: pa.Table | None  # the sampled concept set, when the run has this benchmark's
    survival: pa.Table | None  # survival per check, when the run has this benchmark's
    human: CsvRows  # human/*.csv: annotator, sample_id, task, answer
    human_progress: Json | None  # answered / open items per annotator (audit collect)
    judges: dict[str, CsvRows]  # judge name -> its decisions (judges/<name>.csv)
    finetune: list[Json]  # score runs with finetune.json (finetune_tables.load_runs)


def load_run(run: str | Path, option: str = "run") -> RunData:
    """Everything the report reads from a run folder (`option`: the flag that named it)."""
    run = Path(run)
    if not run.is_dir():
        raise UsageError(
            option, str(run), "no such folder; give a run folder (see autocomp report --help)"
        )
    bench_dir, table = run / "benchmark", run / "benchmark.parquet"
    published = any((bench_dir / "data").glob("*.parquet"))
    if bench_dir.is_dir() and (published or not table.is_file()):
        source = open_benchmark(bench_dir)  # published (data/*.parquet) or a folder of parts
    elif table.is_file():
        source = open_benchmark(table)
    else:
        raise UsageError(option, str(run), "holds no benchmark/ folder or benchmark.parquet")
    columns = [c for c in (*BENCH_COLUMNS, "concept_id") if c in source.schema.names]
    benchmark = with_sample_keys(source.read(columns))
    results = sorted(p for p in (run / "results").glob("*") if (p / "predictions").is_dir())
    if not results:
        raise UsageError(option, str(run), "holds no results/<model>/ score outputs")
    models: dict[str, Json] = {}
    weights: dict[str, Json] = {}
    for p in results:
        record = _run_record(p / "run.json")
        models[p.name] = record.get("entry") or {"name": p.name}
        weights[p.name] = record.get("weights") or {}  # random or trained (autocomp.tiny)
    empty = [p for p in results if not any((p / "predictions").glob("part-*.parquet"))]
    if empty:
        raise UsageError(
            "run", str(empty[0]), "holds no predictions; finish its `autocomp score` first"
        )
    read = [ScoreRun(p).read_predictions() for p in results]  # the run folder's owner
    for folder, part in zip(results, read):
        _check_same_benchmark(folder, part, benchmark)
    predictions = pa.concat_tables(read, promote_options="default")
    stage = _stage_tables(run, bench_dir, benchmark)
    return RunData(
        run=run,
        benchmark=benchmark,
        predictions=predictions,
        models=models,
        weights=weights,
        meta=source.metadata,
        concepts=stage["concepts"],
        survival=stage["survival"],
        human=_read_csvs(sorted((run / "human").glob("*.csv")), HUMAN_COLUMNS),
        human_progress=_human_progress(run / "human" / "audit.json"),
        judges={
            p.stem: _read_csvs([p], JUDGE_COLUMNS) for p in sorted((run / "judges").glob("*.csv"))
        },
        finetune=load_runs(results),  # score runs with finetune.json
    )


def _check_same_benchmark(folder: Path, predictions: pa.Table, benchmark: pa.Table) -> None:
    """A score run in the run folder scored this run's benchmark: every prediction names one of
    its samples. Another benchmark's run (SugarCrepe beside an Auto-Comp benchmark) would be
    reported under this benchmark's scope and caveats: refused, naming it."""
    import pyarrow.compute as pc

    foreign = pc.invert(pc.is_in(predictions["sample_id"], value_set=benchmark["sample_id"]))
    count = pc.sum(foreign).as_py() or 0
    if count:
        first = predictions["sample_id"].filter(foreign)[0].as_py()
        raise UsageError(
            "run", str(folder), f"holds {count:,} predictions of samples this run's benchmark "
            f"does not have (first: {first!r}): it scored another benchmark; move it out of "
            "results/, or score this run's benchmark into it"
        )  # fmt: skip


def _stage_tables(run: Path, bench_dir: Path, benchmark: pa.Table) -> dict[str, pa.Table | None]:
    """The concepts and survival tables: beside the benchmark (a published folder), else where
    the stage verbs write them in a run folder made by hand (README: run/concepts.parquet,
    run/curated/survival.parquet), and there only when they belong to this benchmark (never
    another run's): the concepts must cover every concept of the benchmark, and the survival
    table's curated.parquet must hold exactly the benchmark's samples."""
    found: dict[str, pa.Table | None] = {}
    for name in ("concepts", "survival"):
        path = bench_dir / f"{name}.parquet"
        found[name] = pq.read_table(path) if path.is_file() else None
    concepts, curated = run / "concepts.parquet", run / "curated"
    if found["concepts"] is None and concepts.is_file() and "concept_id" in benchmark.schema.names:
        table = pq.read_table(concepts)
        needed = set(benchmark["concept_id"].to_pylist())
        if "concept_id" in table.schema.names and needed <= set(table["concept_id"].to_pylist()):
            found["concepts"] = table
    survival, table = curated / "survival.parquet", curated / "curated.parquet"
    if found["survival"] is None and survival.is_file() and table.is_file():
        samples = pq.read_table(table, columns=["sample_id"])["sample_id"].to_pylist()
        if sorted(samples) == sorted(benchmark["sample_id"].to_pylist()):
            found["survival"] = pq.read_table(survival)
    return found


HUMAN_COLUMNS = ("annotator", "sample_id", "task", "answer")
JUDGE_COLUMNS = ("sample_id", "passed")


def _read_csvs(paths: list[Path], columns: tuple[str, ...]) -> CsvRows:
    """Rows of CSV files that must be UTF-8 with at least `columns`, every row complete."""
    rows: CsvRows = []
    for path in paths:
        try:
            with path.open(newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                missing = [c for c in columns if c not in (reader.fieldnames or [])]
                if missing:
                    raise UsageError(
                        "run", str(path), f"lacks column(s) {', '.join(missing)}; a header "
                        f"line {','.join(columns)} is expected",
                    )  # fmt: skip
                for row in reader:
                    if any(row.get(c) is None for c in columns):
                        raise UsageError(
                            "run", str(path), f"row {reader.line_num} is short: every row "
                            f"needs {', '.join(columns)}",
                        )  # fmt: skip
                    rows.append(row)
        except UnicodeDecodeError:
            raise UsageError("run", str(path), "is not UTF-8 text; save it as UTF-8") from None
        except csv.Error as exc:
            raise UsageError("run", str(path), f"is not a readable CSV ({exc})") from None
    return rows


def _human_progress(path: Path) -> Json | None:
    """Answered and open items per annotator, as `audit collect` recorded them (None: no
    record, as for annotation CSVs made some other way)."""
    if not path.is_file():
        return None
    record = _run_record(path, "run `autocomp audit collect` again")
    answers = record.get("answers")
    return answers if isinstance(answers, dict) else None


def _run_record(path: Path, fix: str = "re-run `autocomp score` into a new folder") -> Json:
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise UsageError("run", str(path), f"is not valid JSON; {fix}") from None
    if not isinstance(record, dict):
        raise UsageError("run", str(path), "must hold a JSON object")
    return record


def family_kinds(meta: Json, names: Iterable[str]) -> dict[str, list[str]]:
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
