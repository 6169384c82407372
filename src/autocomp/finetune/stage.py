"""Stage functions of fine-tuning (called by the CLI and the pipeline components).

- `split`: benchmark -> split table (concept -> train / validation / heldout) and the
  evaluation benchmark (every row not trained or validated on).
- `train`: benchmark + split -> one fine-tuned checkpoint folder (see autocomp.finetune.train).
- `score_checkpoint`: a checkpoint folder (or a registered name) x benchmark -> a score run,
  through the unchanged contrastive scorer, marked with finetune.json (base model, negatives
  kind or "pretrained", seed) for the Table 8 analysis.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from autocomp.config import FinetuneConfig, negative_kind
from autocomp.errors import UsageError
from autocomp.finetune import split as split_mod
from autocomp.finetune.checkpoint import finetuned_entry
from autocomp.finetune.sampler import check_attribute_family
from autocomp.finetune.train import TrainResult, finetune
from autocomp.scoring.registry import ModelEntry
from autocomp.store.atomic import write_text
from autocomp.store.catalog.benchmarks import Benchmark, as_benchmark
from autocomp.store.outputs import check_output
from autocomp.store.paths import check_apart
from autocomp.store.storage import file_sha256


def check_inputs(
    out: str | Path,
    model: str | Path | None = None,
    benchmark: str | Path | Benchmark | None = None,
    images_root: str | Path | None = None,
) -> None:
    """Everything a fine-tuning stage reads is checked before it writes anything: the model
    (a registered open_clip model, or a checkpoint folder), the benchmark (a table or a folder
    of parts), the images folder, and `out` (a folder or nothing yet)."""
    from autocomp.scoring.registry import get_model

    if model is not None and not Path(model).is_dir():
        entry = get_model(str(model))
        if not entry.kind.finetune:
            raise UsageError("model", str(model), "fine-tuning takes open_clip models only")
    if benchmark is not None:
        as_benchmark(benchmark)
    if images_root is not None and not Path(images_root).is_dir():
        raise UsageError("images_root", str(images_root), "is not a folder; give the images folder")
    if Path(out).exists() and not Path(out).is_dir():
        raise UsageError("out", str(out), "is a file; give a folder")
    local = benchmark if isinstance(benchmark, (str, Path)) else None
    check_apart(out, {"benchmark": local, "images_root": images_root})  # before any probe write
    if model is not None and Path(model).is_dir():
        check_apart(out, {"model": model})
    check_output(out)  # not under a file; missing parents are made with it


SEED_MAX = 2**32 - 1  # numpy's and torch's seeds are 32-bit


def check_values(
    *, device: str | None = None, split_file: str | Path | None = None, **seeds: int
) -> None:
    """The values a fine-tuning stage takes, checked before any work and before any folder
    appears: each seed a whole number 0 to 2**32 - 1, the device one this machine has, the
    split file a readable split table."""
    from autocomp.devices import check_device
    from autocomp.store.tables import open_parquet

    for name, value in seeds.items():
        if type(value) is not int or not 0 <= value <= SEED_MAX:
            raise UsageError(name, value, f"must be a whole number from 0 to {SEED_MAX}")
    check_device(device)
    if split_file is not None:
        names = open_parquet(split_file, "split_file").schema_arrow.names
        if names[:2] != ["concept_id", "split"]:
            fix = "is not a split table (autocomp finetune-split)"
            raise UsageError("split_file", str(split_file), fix)


def split(
    benchmark: str | Path | Benchmark, out: str | Path, config: FinetuneConfig, seed: int = 0
) -> dict[str, Path]:
    """out/split.parquet and out/evaluation.parquet (one table) of a benchmark: a table, a folder
    of parts or an opened Benchmark (autocomp.store.catalog.benchmarks)."""
    check_inputs(out, benchmark=benchmark)
    check_values(seed=seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    split_mod.split_stage(benchmark, out / "split.parquet", config, seed)
    mapping = split_mod.read_split(out / "split.parquet")
    split_mod.evaluation_table(benchmark, mapping, out / "evaluation.parquet")
    return {"split": out / "split.parquet", "evaluation": out / "evaluation.parquet"}


def train(
    model: str,
    benchmark: str | Path | Benchmark,
    split_file: str | Path | None,
    kind: str,
    seed: int,
    out: str | Path,
    config: FinetuneConfig,
    images_root: str | Path | None = None,
    device: str | None = None,
    progress: Callable[[int], None] | None = None,
    on_checkpoint: Callable[[], None] | None = None,
    split_seed: int = 0,
) -> TrainResult:
    """Fine-tune `model` on the benchmark's train split into `out` (resumable); `split_file`
    None: the split is made first in out/split (seed `split_seed`)."""
    from autocomp.scoring.registry import get_model

    check_inputs(out, model, benchmark, images_root)
    check_values(seed=seed, split_seed=split_seed, device=device, split_file=split_file)
    negative_kind(kind)
    if kind == "confusion":
        check_attribute_family(config.family)
    fresh = not Path(out).exists()
    try:
        if split_file is None:
            split_file = split(benchmark, Path(out) / "split", config, split_seed)["split"]
        base = get_model(model)
        source = as_benchmark(benchmark)
        mapping = split_mod.read_split(split_file)
        train_rows = split_mod.rows_of(source, mapping, "train", config)
        val_rows = split_mod.rows_of(source, mapping, "validation", config)
        data = {  # content, not paths: a resumed run may see the same files elsewhere
            "benchmark_sha": source.digest,
            "split_sha": file_sha256(Path(split_file)),
        }
        return finetune(
            base, train_rows, val_rows, kind, config, seed, out, images_root, device, data,
            progress, on_checkpoint,
        )  # fmt: skip
    except UsageError:  # e.g. weights that do not load: a new run leaves no partial folder
        if fresh and not any((Path(out) / "state").glob("*")):
            shutil.rmtree(out, ignore_errors=True)
        raise


def resolve_entry(model: str | Path) -> ModelEntry:
    """A registered model name, or the folder of a fine-tuned checkpoint."""
    from autocomp.scoring.registry import get_model

    if Path(model).is_dir():
        return finetuned_entry(model)
    return get_model(str(model))


def score_checkpoint(
    model: str | Path,
    benchmark: str | Path,
    out: str | Path,
    images_root: str | Path | None = None,
    device: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Score a model (name or checkpoint folder) on a benchmark with the contrastive scorer."""
    import json

    from autocomp.config import ScoreConfig
    from autocomp.scoring.stage import score_stage

    check_inputs(out, model, benchmark, images_root)
    entry = resolve_entry(model)
    out = Path(out)
    config = ScoreConfig(images=str(images_root) if images_root else None, device=device)
    score_stage(entry, benchmark, out, config, progress=progress)
    meta = {"base_model": entry.name, "negatives": "pretrained", "seed": None}
    if Path(model).is_dir():
        run = json.loads((Path(model) / "run.json").read_text())
        meta = {k: run[k] for k in ("base_model", "negatives", "seed")}
    write_text(out / "finetune.json", json.dumps({**meta, "entry": entry.name}))
    return out


RUN_SEPARATOR = "|"


def plan_runs(models: list[str], negatives: list[str], seeds: list[int]) -> list[str]:
    """One training run per model x negative kind x seed, as "model|kind|seed" (the items of the
    pipeline's fan-out); unknown or non-open_clip models and kinds fail here, before training."""
    from autocomp.scoring.registry import get_model

    for model in models:
        if not get_model(model).kind.finetune:
            raise UsageError("models", model, "fine-tuning supports open_clip models only")
    for kind in negatives:
        negative_kind(kind)
    if not models or not negatives or not seeds:
        raise UsageError("models/negatives/seeds", [models, negatives, seeds], "none may be empty")
    seeds = [int(s) for s in seeds]  # KFP passes list items through JSON: 0 may arrive as 0.0
    return [RUN_SEPARATOR.join([m, k, str(s)]) for m in models for k in negatives for s in seeds]


def parse_run(run: str) -> tuple[str, str, int]:
    model, kind, seed = run.split(RUN_SEPARATOR)
    return model, negative_kind(kind), int(seed)
