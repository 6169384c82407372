"""The score stage: models x one benchmark -> one run folder per model and one summary.

`score` is the one entry (`autocomp score`, the evaluate_models pipeline's score step and Python
call it), in the shape of lm-evaluation-harness's `simple_evaluate`: it takes `--model` values
(names, ad-hoc specs) or ModelEntry objects and a benchmark (a table, a folder of parts, an
opened Benchmark or, with `store`, a published name); it checks every input once before any
model loads (configuration, models, output folder, benchmark, device, mode, every run folder),
builds each scorer itself with `config.device` and `config.batch_size`, scores each model into
<out>/<model>/ and writes <out>/summary.parquet; `score_stage`: one model into one run folder
(fine-tuned checkpoints). With `config.part_range` a call scores one range of each model's
parts into the store (scoring.ranges; the collect step merges). Around it: items.py (the item
model, judging), modes.py (native, per-token, choice, and the part-by-part loop over a run),
ranges.py, images.py, checks.py, autocomp.store.catalog.runs (the run folder, failed.json).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path, PurePosixPath

import pyarrow as pa

from autocomp.config import ScoreConfig
from autocomp.devices import check_device
from autocomp.errors import UsageError
from autocomp.scoring import LoadFailed, Scorer, load_or_fail, load_scorer
from autocomp.scoring.adaptive import check_adaptive, score_adaptive
from autocomp.scoring.checks import (
    check_benchmark,
    check_config,
    check_images,
    check_mode,
    check_out,
    check_prompts,
    check_text_rows,
)
from autocomp.scoring.modes import run_record, score_parts
from autocomp.scoring.ranges import ranged_key, score_range
from autocomp.scoring.registry import ModelEntry
from autocomp.scoring.runstore import Results, StoredRun, open_results
from autocomp.scoring.specs import parse_specs, resolve_spec
from autocomp.store.atomic import sweep_stale
from autocomp.store.catalog.benchmarks import Benchmark, as_benchmark, locate, opened
from autocomp.store.catalog.runs import (
    ScoreRun,
    collect_runs,
    earlier_runs,
    report_failed,
)
from autocomp.store.outputs import output_folder
from autocomp.store.paths import check_apart
from autocomp.store.stores import local_root

# progress(label, total) -> a context yielding advance(items): autocomp.progress.row_progress
Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


def score(
    models: str | ModelEntry | Sequence[str | ModelEntry],
    benchmark: str | Path | Benchmark,
    out: str | Path,
    config: ScoreConfig = ScoreConfig(),
    *,
    store: str | None = None,
    results: str | None = None,
    progress: Progress | None = None,
) -> pa.Table:
    """Score each model on `benchmark` into <out>/<model>/ (resuming what a folder holds) and
    return the combined summary (also <out>/summary.parquet). `store`: where a published
    benchmark name is fetched from (into <out>/benchmark/<name>/) and, with `results` (a key
    prefix such as results/<benchmark name>), where each model's run is published as
    <results>/<model>; a run already published there is not scored again (its summary is
    fetched; a lower limit there is extended). With `results`, every part is committed to the
    store as it is written and leaves <out> (scoring.runstore: <out>/<model>/ then holds
    run.json and the summary), and a run that starts where a killed or preempted one stopped
    scores only what the committed parts lack: the published run is the one an uninterrupted
    run publishes. A call that fails before its first result leaves no output folder behind.
    `config.target_width`: adaptive scoring (scoring/adaptive.py), into run folders only.

    Args:
        models: registered names, ad-hoc specs (`open_clip:ARCH:PRETRAINED`, `hf:ORG/NAME`, a
            folder) or entries; every one is checked before any loads.
        benchmark: a Parquet table, a folder of parts, a published name (with `store`), or an
            opened Benchmark.
        out: the folder of the run: <out>/<model>/ per model and <out>/summary.parquet.
        config: images, blind mode, device, batch size, limit (ScoreConfig).
        store: the store a published `benchmark` name is read from.
        results: the key prefix each model's run is published under in `store`.
        progress: a progress factory (autocomp.progress.row_progress) or None.

    Returns:
        The summary of every model scored into `out` on this benchmark: accuracy per model x
        family x N x condition x set x protocol x score type, with the chance baseline.

    Raises:
        UsageError: bad input (before any model loads), or a model that failed to load (after
            the others are scored; <out>/failed.json names it).
    """
    check_config(config)
    check_adaptive(config)
    if config.target_width is not None and results:
        raise UsageError("target_width", config.target_width, "is not available when each part "
                         "is committed to a store (results); score into a run folder")  # fmt: skip
    specs = parse_specs(models)  # every value's syntax and registered names: fast
    out = Path(out)
    local = None if store or isinstance(benchmark, Benchmark) else benchmark
    check_apart(out, {"benchmark": local, "images": config.images, "store": local_root(store)})
    check_out(out)
    found = locate(benchmark, store)  # the one resolution: opened, or a published name
    check_images(config)
    entries = [resolve_spec(spec) for spec in specs]  # every model, before any is loaded
    for entry in entries:
        check_mode(entry, config)
    check_device(config.device)
    if config.part_range and not results:
        fix = "scores one range of a run committed to a store: give the store and results too"
        raise UsageError("part_range", config.part_range, fix)
    target = open_results(store, results)
    with output_folder(out):  # a call that fails before its first result leaves nothing
        source = opened(found, out)  # a published name fetched into out/benchmark/<name>
        check_benchmark(source, config)
        for entry in entries:
            check_prompts(entry, source)
            check_text_rows(entry, source)
        runs = [(entry, ScoreRun(out / entry.name, "out"), run_record(entry, source, config))
                for entry in entries]  # fmt: skip
        ranged = functools.partial(ranged_key, config=config) if config.part_range else None
        published = Results(target, str(results), runs, ranged) if target is not None else None
        for _, run, record in runs:
            run.check(record, source.rows)
        for folder in (out, *(run.folder for _, run, _ in runs)):
            sweep_stale(folder)  # what a killed call was writing
        total = min(config.limit or source.rows, source.rows)
        failed: dict[str, str] = {}
        for i, (entry, run, record) in enumerate(runs, 1):
            if published and published.reuse(entry.name, run, record, config.limit, source.rows):
                continue  # a published run is not scored again
            label = f"score {entry.name}" + (f" ({i}/{len(runs)})" if len(runs) > 1 else "")
            loader = functools.partial(
                load_or_fail, load_scorer, entry, config.device, config.batch_size
            )
            stored = published.stored.get(entry.name) if published else None
            try:
                with progress(label, total) if progress else nullcontext() as advance:
                    if stored and config.part_range:  # one range; the collect step merges
                        score_range(entry, source, stored, config, loader, advance)
                        continue
                    _score_run(entry, source, run, record, config, loader, advance, stored)
            except LoadFailed as exc:  # the other models are scored; the summary says so
                failed[entry.name] = exc.fix
                continue
            if published:
                name = source.name or PurePosixPath(str(results)).name
                made_by = {"stage": "score", "model": entry.name, "benchmark": name}
                published.publish(entry.name, run, made_by)
        earlier = earlier_runs(out, [run.folder for _, run, _ in runs], source.digest)
        table = collect_runs([*earlier, *(run for _, run, _ in runs)], out)  # runs as held
        report_failed(out, failed, table.num_rows)
        return table


def score_stage(
    entry: ModelEntry,
    benchmark: str | Path | Benchmark,
    out: str | Path,
    config: ScoreConfig = ScoreConfig(),
    *,
    progress: Callable[[int], None] | None = None,
    loader: Callable[[], Scorer] | None = None,
) -> pa.Table:
    """Score every not-yet-scored item of `benchmark` (a table, a folder of parts, or an opened
    Benchmark) with one model into the run folder `out`, the first `config.limit` items only if
    set (items that failed in an earlier run are retried); return the summary. The scorer is
    `load_scorer(entry, config.device, config.batch_size)`, loaded at the first item to score;
    `loader` builds another (tests, benchmarks). `progress(items)` after each written part.

    Args:
        entry: the model's registry entry.
        benchmark: a table, a folder of parts, or an opened Benchmark.
        out: the model's run folder (run.json, scores/, predictions/, summary.parquet).
        config: images, blind mode, device, batch size, limit (ScoreConfig).
        progress: called with the items of each written part.
        loader: builds the scorer instead of the registry's backend.

    Returns:
        The model's summary (as <out>/summary.parquet).
    """
    check_config(config)
    check_adaptive(config)
    check_device(config.device)
    check_mode(entry, config)
    source = as_benchmark(benchmark)  # the one resolution
    check_images(config)
    check_benchmark(source, config)
    run, record = ScoreRun(out, "out"), run_record(entry, source, config)
    run.check(record, source.rows)
    loader = loader or functools.partial(load_scorer, entry, config.device, config.batch_size)
    return _score_run(entry, source, run, record, config, loader, progress)


def _score_run(
    entry: ModelEntry,
    source: Benchmark,
    run: ScoreRun,
    record: dict,
    config: ScoreConfig,
    loader: Callable[[], Scorer],
    progress: Callable[[int], None] | None,
    stored: StoredRun | None = None,
) -> pa.Table:
    """Every item (score_parts), or each cell until its interval is narrow (score_adaptive)."""
    if config.target_width is None:
        return score_parts(entry, source, run, record, config, loader, progress, stored)
    return score_adaptive(entry, source, run, record, config, loader, progress)
