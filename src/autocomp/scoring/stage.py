"""The score stage: one model x one benchmark -> scores, predictions and accuracy.

The benchmark is a table, a folder of Parquet parts or an opened `Benchmark`
(autocomp.scoring.benchmark); `ScoreConfig.limit` scores only its first N items in table order.

Per benchmark row the candidates are the positive (index 0), the Confusion negatives (1..C; every
Swap negative is one of them, found through `swap_in_confusion`) and, at N=1, the sanity sets.
Each distinct (image, caption) is scored once. Outputs, in the run folder (`autocomp score`:
<out>/<model>/):

    run.json                  model entry, benchmark (source, digest), limit, versions (a
                              resumed run must match it)
    scores/part-NNNNN.parquet model, sample_id, candidate_index, score
    predictions/part-*.parquet one row per sample x set x protocol (schema below)
    summary.parquet           accuracy per family x N x condition x set x protocol, with chance

Tie rule: an item is correct only if the positive's score is strictly greater than every
negative's; a tie at the top counts as an error (`tie` is set), and `predicted` then names the
first tied negative. The rule never favours the positive.

Protocols: predictions are computed for both from the same scores. "paper" uses every candidate;
"strict" leaves out candidates flagged as describing the positive's own scene.

Failures (a missing or unreadable image, a row the model cannot score) are recorded per item
with the reason; they stay in the denominator as errors and are counted in `failed`.

Resume: items whose predictions already exist in the folder are not scored again; parts are
written atomically, so a killed run resumes at the first unfinished part. A resumed run may raise
or drop its limit (the first items are scored already; only the rest is scored), never lower it
(the summary would then count items outside the limit).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from autocomp import __version__
from autocomp.config import ScoreConfig
from autocomp.devices import check_device
from autocomp.errors import UsageError
from autocomp.scoring import Scorer, ScoreRequest
from autocomp.scoring.benchmark import Benchmark, open_benchmark
from autocomp.scoring.registry import ModelEntry
from autocomp.store.paths import resolve_inside
from autocomp.store.tables import (
    provenance,
    read_metadata,
    require_columns,
    sweep_stale,
    with_sample_keys,
    write_table,
)

REQUIRED = (
    "family", "n", "caption", "swap_negatives", "swap_in_confusion", "swap_same_scene",
    "confusion_negatives", "confusion_same_scene", "vary_attribute_negatives",
    "vary_object_negatives",
)  # fmt: skip
SETS = ("swap", "confusion", "vary_attribute", "vary_object")
SCORES_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("sample_id", pa.string()),
        ("candidate_index", pa.int32()),
        ("score", pa.float64()),
    ]
)
PREDICTIONS_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("sample_id", pa.string()),
        ("family", pa.string()),
        ("n", pa.int8()),
        ("condition", pa.string()),
        ("set", pa.string()),
        ("protocol", pa.string()),
        ("candidates", pa.int32()),
        ("correct", pa.bool_()),
        ("tie", pa.bool_()),
        ("predicted", pa.int32()),
        ("positive_score", pa.float64()),
        ("best_negative_score", pa.float64()),
        ("failed", pa.bool_()),
        ("reason", pa.string()),
        ("truncated", pa.bool_()),
    ]
)


@dataclass
class Item:
    """One benchmark row, ready to score."""

    sample_id: str
    family: str
    n: int
    condition: str
    image: str | dict | None  # a path, or an embedded {bytes, path} image
    candidates: list[str]  # positive first, then confusion, then the N=1 sanity sets
    sets: dict[str, list[int]]  # set name -> candidate indices of its negatives
    same_scene: set[int]


def item_from_row(row: dict[str, Any], index: int) -> Item:
    sample_id = row.get("sample_id") or row.get("concept_id") or f"row-{index}"
    if row.get("condition") and not row.get("sample_id"):
        sample_id = f"{sample_id}/{row['condition']}"
    candidates = [row["caption"], *row["confusion_negatives"]]
    sets = {
        "confusion": list(range(1, len(candidates))),
        "swap": [i + 1 for i in row["swap_in_confusion"]],
    }
    same = {i + 1 for i, flag in enumerate(row["confusion_same_scene"]) if flag}
    for name in ("vary_attribute", "vary_object"):
        start = len(candidates)
        candidates += row[f"{name}_negatives"]
        sets[name] = list(range(start, len(candidates)))
    return Item(
        sample_id=str(sample_id),
        family=row["family"],
        n=int(row["n"]),
        condition=str(row.get("condition") or "minimal"),
        image=row.get("image"),
        candidates=candidates,
        sets={k: v for k, v in sets.items() if v},
        same_scene=same,
    )


def judge(scores: list[float], negatives: list[int]) -> tuple[bool, bool, int, float]:
    """(correct, tie, predicted, best negative score) under the strict-greater tie rule."""
    best = max(scores[i] for i in negatives)
    first_best = next(i for i in negatives if scores[i] == best)
    positive = scores[0]
    if positive > best:
        return True, False, 0, best
    return False, positive == best, first_best, best


def predictions_for(
    model: str, item: Item, scores: list[float] | None, reason: str, truncated: bool = False
) -> list[dict]:
    rows = []
    for set_name, negatives in item.sets.items():
        for protocol in ("paper", "strict"):
            kept = (
                negatives
                if protocol == "paper"
                else [i for i in negatives if i not in item.same_scene]
            )
            row = {
                "model": model, "sample_id": item.sample_id, "family": item.family, "n": item.n,
                "condition": item.condition, "set": set_name, "protocol": protocol,
                "candidates": len(kept) + 1, "correct": False, "tie": False, "predicted": -1,
                "positive_score": None, "best_negative_score": None, "failed": scores is None,
                "reason": reason, "truncated": truncated,
            }  # fmt: skip
            if scores is not None and kept:
                correct, tie, predicted, best = judge(scores, kept)
                row.update(
                    correct=correct, tie=tie, predicted=predicted,
                    positive_score=scores[0], best_negative_score=best,
                )  # fmt: skip
            rows.append(row)
    return rows


def load_image(root: Path | None, ref: str | dict | None) -> Any:
    """An RGB PIL image from a path (under `root`) or an embedded image ({bytes, path}, the
    Hugging Face datasets Image layout of published benchmarks); else ValueError with a reason."""
    import io

    from PIL import Image, UnidentifiedImageError

    unreadable = (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombError)
    if isinstance(ref, dict):
        if ref.get("bytes"):
            try:
                with Image.open(io.BytesIO(ref["bytes"])) as image:
                    image.load()
                    return image.convert("RGB")
            except (
                UnidentifiedImageError,
                OSError,
                SyntaxError,
                Image.DecompressionBombError,
            ) as exc:
                raise ValueError(f"embedded image unreadable: {ref.get('path')} ({exc})") from None
        ref = ref.get("path")
    if ref is None:
        raise ValueError("the row has no image")
    if root is None:
        raise ValueError(f"image {ref} is a path but no images folder was given (--images)")
    path = resolve_inside(root, ref)
    try:
        with Image.open(path) as image:
            image.load()
            return image.convert("RGB")
    except FileNotFoundError:
        raise ValueError(f"image not found: {path}") from None
    except unreadable as exc:
        raise ValueError(f"image unreadable: {path} ({exc})") from None


def _chunks(items: Iterable[Item], max_candidates: int) -> Iterator[list[Item]]:
    chunk: list[Item] = []
    size = 0
    for item in items:
        if chunk and size + len(item.candidates) > max_candidates:
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += len(item.candidates)
    if chunk:
        yield chunk


def _stream_items(source: Benchmark, limit: int | None = None) -> Iterator[Item]:
    """Benchmark rows as items, read batch by batch (a paper-scale table never sits in memory);
    with `limit`, only the first `limit` rows."""
    index = 0
    for batch in source.batches():
        for row in batch.to_pylist():
            if limit is not None and index >= limit:
                return
            yield item_from_row(row, index)
            index += 1


def _parts(out: Path) -> list[Path]:
    return sorted((out / "predictions").glob("part-*.parquet"))


def _drop_failures(out: Path) -> None:
    """Failed items are retried by the next run: rewrite (atomically) every part that holds
    failures without them, scores and predictions alike; a part left empty goes."""
    for part in _parts(out):
        predictions = pq.read_table(part)
        failed = set(predictions.filter(predictions["failed"])["sample_id"].to_pylist())
        if not failed:
            continue
        for folder in ("predictions", "scores"):
            path = out / folder / part.name
            table = pq.read_table(path)
            keep = pc.invert(pc.is_in(table["sample_id"], pa.array(sorted(failed))))
            kept = table.filter(keep)
            if kept.num_rows:
                write_table(kept.replace_schema_metadata(None), path, read_metadata(path))
            else:
                path.unlink(missing_ok=True)


def _done_ids(out: Path) -> set[str]:
    done: set[str] = set()
    for part in _parts(out):
        done.update(pq.read_table(part, columns=["sample_id"]).column(0).to_pylist())
    return done


def _next_part(out: Path) -> int:
    return max((int(p.stem.split("-")[1]) + 1 for p in _parts(out)), default=0)


def _check_run(out: Path, record: dict[str, Any], rows: int) -> None:
    """A resumed run must be of the same model, benchmark and mode, and may only extend its
    --limit (checked before any work)."""
    if out.exists() and not out.is_dir():
        raise UsageError("--out", str(out), "is a file; give a folder for the run")
    if not out.parent.is_dir():
        raise UsageError("--out", str(out), f"folder {out.parent} does not exist")
    run_file = out / "run.json"
    if run_file.exists():
        try:
            previous = json.loads(run_file.read_text())
        except (OSError, ValueError):
            raise UsageError(
                "--out", str(run_file), "is unreadable; delete the folder to start over"
            ) from None
        keys = ("model", "benchmark_sha", "blind")
        weights = ("weights", "architecture", "model_class", "revision")  # same name, other
        entry, now = previous.get("entry") or {}, record["entry"]  # weights: another model
        same_weights = all(entry.get(k) == now.get(k) for k in weights) or not entry
        if any(previous.get(k) != record.get(k) for k in keys) or not same_weights:
            raise UsageError(
                "--out",
                str(out),
                "holds a run of another model or benchmark; use a new folder to keep both",
            )
        before = min(previous.get("limit") or rows, rows)
        if min(record.get("limit") or rows, rows) < before:
            raise UsageError(
                "--limit",
                record.get("limit"),
                f"{out} already holds the first {before} items; a resumed run may only extend "
                f"it: give --limit {before} or more (or none), or a new --out",
            )


def _start_run(out: Path, record: dict[str, Any]) -> None:
    """Create the run folder and its run.json: only once a scored part is about to be written,
    so a run that fails before (weights, device) leaves nothing behind."""
    (out / "scores").mkdir(parents=True, exist_ok=True)
    (out / "predictions").mkdir(exist_ok=True)
    run_file = out / "run.json"
    tmp = run_file.with_name(f".run.json.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True))
    tmp.replace(run_file)


def check_config(config: ScoreConfig) -> None:
    """The numeric options are in range (checked before any work)."""
    if config.limit is not None and config.limit < 1:
        raise UsageError("--limit", config.limit, "must be at least 1 (items to score)")
    if config.batch_size is not None and config.batch_size < 1:
        raise UsageError(
            "--batch-size", config.batch_size, "must be at least 1 (texts per forward)"
        )
    if config.max_candidates < 1:
        raise UsageError("max_candidates", config.max_candidates, "must be at least 1")


def check_mode(entry: ModelEntry, config: ScoreConfig) -> None:
    """The model can run in the requested mode (blind: generative models only)."""
    if config.blind and entry.backend != "transformers_vlm":
        raise UsageError(
            "--blind", entry.name, "scores captions without images with generative models only"
        )


def check_benchmark(source: Benchmark, config: ScoreConfig) -> None:
    """The benchmark table and the images fit the mode, before any model is loaded (once per
    benchmark and mode: several models scored on one benchmark check it once)."""
    key = (config.blind, config.images)
    if key in source.checked:
        return
    benchmark, schema = source.path, source.schema
    hint = "give a benchmark table (autocomp negatives)"
    require_columns(benchmark, schema, REQUIRED, hint, option="--benchmark")
    if not config.blind:
        if "image" not in schema.names:
            raise UsageError(
                "--benchmark", str(benchmark), "has no image column; pass --blind to score "
                "captions alone (generative models)",
            )  # fmt: skip
        if config.images is not None and not Path(config.images).is_dir():
            raise UsageError("--images", config.images, "is not a folder; give the images folder")
        if config.images is None and pa.types.is_string(schema.field("image").type):
            raise UsageError(
                "--images", None, f"{benchmark} names its images by path: give their folder"
            )
    keys = [c for c in ("sample_id", "concept_id", "condition") if c in schema.names]
    ids = with_sample_keys(source.read(keys))["sample_id"]
    counts = pc.value_counts(ids)
    repeated = [c["values"] for c in counts.to_pylist() if c["counts"] > 1]
    if repeated:
        raise UsageError(
            "--benchmark",
            str(benchmark),
            f"has duplicate sample_id {repeated[0]!r} ({len(repeated)} duplicated); each item "
            "must be listed once",
        )
    source.checked.add(key)


def score_stage(
    entry: ModelEntry,
    benchmark: str | Path | Benchmark,
    out: str | Path,
    scorer_factory: Callable[[], Scorer],
    config: ScoreConfig = ScoreConfig(),
    progress: Callable[[int], None] | None = None,
) -> pa.Table:
    """Score every not-yet-scored item of `benchmark` (a table, a folder of parts, or an opened
    Benchmark) with the model, the first `config.limit` items only if set (items that failed in
    an earlier run are retried); return the summary."""
    blind = config.blind
    check_config(config)
    check_device(config.device)
    check_mode(entry, config)
    source = benchmark if isinstance(benchmark, Benchmark) else open_benchmark(benchmark)
    check_benchmark(source, config)
    out = Path(out)
    digest = source.digest
    record = {
        "model": entry.name, "entry": entry.record(), "benchmark": str(source.path),
        "benchmark_source": source.source(), "benchmark_sha": digest,
        "benchmark_metadata": source.metadata, "blind": blind, "limit": config.limit,
        "batch_size": config.batch_size, "autocomp_version": __version__,
    }  # fmt: skip
    _check_run(out, record, source.rows)
    for folder in (out, out / "scores", out / "predictions"):
        sweep_stale(folder)
    if (out / "predictions").is_dir():
        _drop_failures(out)
    done = _done_ids(out) if (out / "predictions").is_dir() else set()
    todo = (it for it in _stream_items(source, config.limit) if it.sample_id not in done)
    root = Path(config.images) if config.images else None
    scorer: Scorer | None = None
    part = _next_part(out) if (out / "predictions").is_dir() else 0
    document = provenance(
        "scores", model=entry.name, entry=entry.record(), benchmark_sha=digest, blind=blind
    )

    def get_scorer() -> Scorer:  # loaded on the first item that can be scored, not before
        nonlocal scorer
        scorer = scorer or scorer_factory()
        return scorer

    for chunk in _chunks(todo, config.max_candidates):
        score_rows, prediction_rows = _score_chunk(entry.name, chunk, get_scorer, root, blind)
        _start_run(out, record)
        name = f"part-{part:05d}.parquet"
        write_table(
            pa.Table.from_pylist(score_rows, SCORES_SCHEMA), out / "scores" / name, document
        )
        write_table(
            pa.Table.from_pylist(prediction_rows, PREDICTIONS_SCHEMA),
            out / "predictions" / name,
            {**document, "table": "predictions"},
        )
        part += 1
        if progress:
            progress(len(chunk))
    _start_run(out, record)
    summary = summarize(out)
    write_table(summary, out / "summary.parquet", {**document, "table": "summary"})
    return summary


def _score_chunk(
    model: str,
    chunk: list[Item],
    get_scorer: Callable[[], Scorer],
    root: Path | None,
    blind: bool,
) -> tuple[list[dict], list[dict]]:
    images: dict[str, Any] = {}
    ready: list[Item] = []
    prediction_rows: list[dict] = []
    for item in chunk:
        if blind:
            ready.append(item)
            continue
        try:
            images[item.sample_id] = load_image(root, item.image)
            ready.append(item)
        except ValueError as exc:
            prediction_rows += predictions_for(model, item, None, str(exc))
    requests = [
        ScoreRequest(None if blind else item.sample_id, text)
        for item in ready
        for text in item.candidates
    ]
    scorer = get_scorer() if requests else None
    flat = scorer.score(requests, images) if scorer else []
    cut = _truncated(scorer, [r.text for r in requests]) if scorer else []
    score_rows = []
    offset = 0
    for item in ready:
        scores = flat[offset : offset + len(item.candidates)]
        truncated = any(cut[offset : offset + len(item.candidates)])
        offset += len(item.candidates)
        score_rows += [
            {"model": model, "sample_id": item.sample_id, "candidate_index": i, "score": s}
            for i, s in enumerate(scores)
        ]
        prediction_rows += predictions_for(model, item, scores, "", truncated)
    return score_rows, prediction_rows


def _truncated(scorer: Scorer, texts: list[str]) -> list[bool]:
    """Per caption: longer than the model's text context (a scorer without a limit: never)."""
    check = getattr(scorer, "truncated", None)
    return check(texts) if callable(check) else [False] * len(texts)


def read_predictions(out: str | Path) -> pa.Table:
    parts = sorted((Path(out) / "predictions").glob("part-*.parquet"))
    if not parts:
        return PREDICTIONS_SCHEMA.empty_table()
    tables = [pq.read_table(p).replace_schema_metadata(None) for p in parts]
    return pa.concat_tables(tables, promote_options="default")  # parts older than `truncated`


def summarize(out: str | Path) -> pa.Table:
    """Accuracy per model x family x N x condition x set x protocol, with the chance baseline."""
    table = read_predictions(out)
    table = table.append_column(
        "chance", pc.divide(1.0, pc.cast(table["candidates"], pa.float64()))
    )
    keys = ["model", "family", "n", "condition", "set", "protocol"]
    grouped = table.group_by(keys).aggregate(
        [
            ("sample_id", "count"),
            ("correct", "sum"),
            ("failed", "sum"),
            ("tie", "sum"),
            ("chance", "mean"),
            ("truncated", "sum"),
        ]
    )
    names = ["items", "correct", "failed", "ties", "chance", "truncated"]
    grouped = grouped.rename_columns(keys + names)
    accuracy = pc.divide(
        pc.cast(grouped["correct"], pa.float64()), pc.cast(grouped["items"], pa.float64())
    )
    return grouped.append_column("accuracy", accuracy).sort_by([(k, "ascending") for k in keys])


def score_model(
    model: str, benchmark: str | Path, out: str | Path, store: str = "", name: str = ""
) -> Path:
    """Score one registered model and publish its run to the store as results/<name>/<model>.
    A run already published there is fetched instead of scored again (resume)."""
    from autocomp.scoring import load_scorer
    from autocomp.scoring.registry import NO_MODEL, get_model

    out = Path(out)
    if model == NO_MODEL:  # the placeholder of a GPU group with no requested model
        out.mkdir(parents=True, exist_ok=True)
        return out
    key = f"results/{name}/{model}"
    target = None
    if store:
        from autocomp.store.storage import open_store

        target = open_store(store)
        if target.manifest(key) is not None:
            target.get(key, out)
            return out
    entry = get_model(model)
    score_stage(entry, benchmark, out, lambda: load_scorer(model))
    if target is not None:
        target.put(key, out, {"stage": "score", "model": model, "benchmark": name})
    return out


def collect_runs(folders: list[str | Path], out: str | Path) -> pa.Table:
    """One summary table over several score runs (each folder: one model's `score` output)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [Path(f) / "summary.parquet" for f in folders]
    tables = [pq.read_table(f) for f in files if f.is_file()]  # placeholders have none
    tables = [t for t in tables if t.num_rows]
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
    write_table(table, out / "summary.parquet", provenance("summary", runs=len(folders)))
    return table
