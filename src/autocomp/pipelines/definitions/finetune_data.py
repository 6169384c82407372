"""How data moves between the finetune_models steps: the published benchmark and the evaluation
benchmark are read from the store as the steps go (never passed as artifacts); training state
is committed to the store at every evaluation, so a preempted train step resumes from its last
one; the score runs and the checkpoints' curves are published to the store, where the report
step reads them (no `dsl.Collected`).

The splits artifact holds split.parquet, evaluation-rows.parquet (the evaluation benchmark's
rows without their images: what the report reads) and location.json: the store, the work
prefix `work/finetune/<key>` (key: the benchmark's digest, the fine-tuning settings, the split
seed) and under it `evaluation` (the evaluation benchmark), `train/<run>` (the committed training
state) and `results` (the score runs and curves the report reads).

No kfp here: the components import this module inside the image.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from autocomp.store.work import Location, PartLog, work_prefix

CHECKPOINT_FILES = ("run.json", "curve.parquet", "curve.csv", "curve.svg", "registry.yaml")


def run_slug(run: str) -> str:
    """A training run ("model|kind|seed") as a store key segment."""
    return run.replace("|", "-")


def split_to_store(store: str, name: str, config: Any, seed: int, out: str | Path) -> Location:
    """The concept split of benchmarks/<name> (read from the store) into `out`, and its
    evaluation benchmark into the store (store to store, part by part)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from autocomp.finetune import split as split_mod
    from autocomp.store.catalog.benchmarks import open_published
    from autocomp.store.publish import copy_rows
    from autocomp.store.tables import provenance

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source = open_published(store, name)
    split_mod.split_stage(source, out / "split.parquet", config, seed)
    mapping = split_mod.read_split(out / "split.parquet")
    key = {"benchmark": source.digest, "config": config.record(), "split_seed": seed}
    prefix = work_prefix("finetune", key)
    evaluation = f"{prefix}/evaluation"
    ids = [c for c in ("concept_id", "sample_id") if c in source.schema.names]

    def keep(batch: pa.RecordBatch) -> pa.Array:
        rows = batch.select(ids).to_pylist()
        return pa.array(
            [mapping.get(split_mod.concept_id(r), "heldout") == "heldout" for r in rows]
        )

    document = dict(source.metadata)
    document.update(provenance("benchmark", finetune_evaluation=True, heldout_of=str(source.path)))
    with tempfile.TemporaryDirectory(prefix="evaluation-") as work:
        copy_rows(source, keep, store, evaluation, work, document)
    columns = [c for c in source.schema.names if c != "image"]  # what the report reads
    schema = pa.schema([source.schema.field(c) for c in columns])
    with pq.ParquetWriter(out / "evaluation-rows.parquet", schema, compression="zstd") as rows:
        for batch in source.batches(columns=columns):  # streamed: one batch in memory
            rows.write_batch(batch.filter(keep(batch)))
    results = f"{prefix}/results"
    location = Location(store, prefix, {"evaluation": evaluation, "results": results})
    location.write(out)
    return location


def evaluation(splits: str | Path) -> Any:
    """The evaluation benchmark of a split, streamed from the store."""
    from autocomp.store.catalog.benchmarks import open_stored

    location = Location.read(splits)
    return open_stored(location.store, location.extra["evaluation"])


def train_resumable(name: str, splits: str | Path, run: str, config: Any, out: str | Path) -> Any:
    """One training run into `out`, resumable across pods: the last committed evaluation's
    folder (weights, state) is restored from the store first, and the folder is committed
    again after every evaluation (only the latest is kept). Then the run's curves and record
    are published beside the score runs, for the report."""
    from autocomp.finetune.stage import parse_run, train
    from autocomp.store.catalog.benchmarks import open_published
    from autocomp.store.storage import file_sha256

    location = Location.read(splits)
    store = location.open()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source = open_published(location.store, name)
    split_file = Path(splits) / "split.parquet"
    model, kind, seed = parse_run(run)
    record = {"run": run, "config": config.record(), "benchmark": source.digest,
              "split": file_sha256(split_file)}  # fmt: skip
    log = PartLog(store, f"{location.prefix}/train/{run_slug(run)}", record)
    committed = log.committed()
    if committed:
        log.fetch(max(committed), out)
    state = {"index": max(committed, default=-1) + 1}

    def commit() -> None:
        files = {p.relative_to(out).as_posix(): p for p in sorted(out.rglob("*"))
                 if p.is_file() and not p.name.startswith(".")}  # fmt: skip
        log.commit(state["index"], files, stage="finetune_train")
        for older in [i for i in log.committed() if i < state["index"]]:
            store.delete(log.name(older))
        state["index"] += 1

    result = train(model, source, split_file, kind, seed, out, config, on_checkpoint=commit)
    with tempfile.TemporaryDirectory(prefix="curves-") as tmp:
        for file in CHECKPOINT_FILES:
            if (out / file).is_file():
                shutil.copyfile(out / file, Path(tmp) / file)
        key = f"{location.extra['results']}/checkpoints/{run_slug(run)}"
        store.put(key, tmp, {"stage": "finetune_train", "run": run})
    return result


def score_to_store(model: str | Path, splits: str | Path, out: str | Path, slug: str) -> Path:
    """Score a checkpoint (or a registered model) on the evaluation benchmark, streamed from
    the store, and publish the run beside the others (results/scores/<slug>)."""
    from autocomp.finetune.stage import score_checkpoint

    location = Location.read(splits)
    done = score_checkpoint(model, evaluation(splits), out)
    location.open().put(f"{location.extra['results']}/scores/{slug}", done, {"stage": "finetune"})
    return done


def gather_results(splits: str | Path, slugs: list[str], out: str | Path) -> dict[str, list[Path]]:
    """The published score runs (`slugs`) and every training run's curves, from the store."""
    location = Location.read(splits)
    store = location.open()
    base = location.extra["results"]
    out = Path(out)
    runs = []
    for slug in slugs:
        store.get(f"{base}/scores/{slug}", out / "scores" / slug)
        runs.append(out / "scores" / slug)
    checkpoints = []
    for name in store.outputs(f"{base}/checkpoints/"):
        folder = out / "checkpoints" / name.rsplit("/", 1)[-1]
        store.get(name, folder)
        checkpoints.append(folder)
    return {"runs": runs, "checkpoints": checkpoints}
