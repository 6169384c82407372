"""The score stage: one model x one benchmark -> scores, predictions and accuracy.

The benchmark is a table, a folder of Parquet parts or an opened `Benchmark`
(autocomp.scoring.benchmark); `ScoreConfig.limit` scores only its first N items in table order.

Per benchmark row the candidates are the positive (index 0), the Confusion negatives (1..C; every
Swap negative is one of them, found through `swap_in_confusion`) and, at N=1, the sanity sets.
Each distinct (image, caption) is scored once. Outputs, in the run folder (`autocomp score`:
<out>/<model>/):

    run.json                  model entry, benchmark (source, digest), mode, limit, versions (a
                              resumed run must match it)
    scores/part-NNNNN.parquet model, sample_id, candidate_index, score, tokens (schema below)
    predictions/part-*.parquet one row per sample x set x protocol x score type (schema below)
    summary.parquet           accuracy per family x N x condition x set x protocol x score type,
                              with chance

Score types (`score_type`): "score" is the model's native score (cosine, sigmoid or summed
log-likelihood). Generative models also get "per_token": the summed log-likelihood divided by
the caption's token count (`tokens` in the scores table; the same forward pass), since the sum
favours short captions and Confusion negatives differ in length. `--blind choice` writes only
"choice" rows: the paper's A.8 multiple-choice test (autocomp.scoring.choice); its scores rows
are the option labels' scores, with the set, protocol and shown position (`option`), and its
predictions list the options shown (`options`: candidate indices in the order shown, comma
separated; a string, so the table stays joinable and writable as CSV). Tables written
before `score_type` existed read as all "score".

Tie rule: an item is correct only if the positive's score is strictly greater than every
negative's; a tie at the top counts as an error (`tie` is set), and `predicted` then names the
first tied negative. The rule never favours the positive.

Protocols: predictions are computed for both from the same scores. "paper" uses every candidate;
"strict" leaves out candidates flagged as describing the positive's own scene.

Failures (a missing or unreadable image, a row the model cannot score) are recorded per item
with the reason; they stay in the denominator as errors and are counted in `failed`.

Resume: items whose predictions already exist in the folder are not scored again; parts are
written atomically, so a killed run resumes at the first unfinished part. A folder written before
score types (run.json without "format") is upgraded in place when it is contrastive (its scores
are complete) and refused when it is generative (no token counts for the per-token score). A
resumed run may raise or drop its limit (the first items are scored already; only the rest is
scored), never lower it (the summary would then count items outside the limit).
"""

from __future__ import annotations

import functools
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
from autocomp.scoring import Scorer, ScoreRequest, choice
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
        ("tokens", pa.int32()),  # generative: tokens the score sums over; else null
        ("score_type", pa.string()),  # "score", or "choice" (a label's score, --blind choice)
        ("set", pa.string()),  # choice rows: the set, protocol and 1-based option shown
        ("protocol", pa.string()),
        ("option", pa.int32()),
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
        ("score_type", pa.string()),
        ("options", pa.string()),  # choice: candidate indices in the order shown, "4,0,9"
    ]
)
SCORE_FORMAT = 2  # 2: scores have tokens, predictions score_type (run.json "format")
BLIND_MODES = ("likelihood", "choice")


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
    model: str,
    item: Item,
    scores: list[float] | None,
    reason: str,
    truncated: bool = False,
    score_type: str = "score",
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
                "reason": reason, "truncated": truncated, "score_type": score_type,
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


def _check_run(out: Path, record: dict[str, Any], rows: int) -> bool:
    """A resumed run must be of the same model, weights, benchmark and mode, and may only
    extend its --limit (checked before any work). True when the folder holds a run written
    before score types, to be upgraded."""
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
        old = previous.get("format") is None
        previous = _check_format(out, previous)
        keys = ("model", "benchmark_sha", "blind", "choice")
        weights = ("weights", "architecture", "model_class", "revision")  # same name, other
        entry, now = previous.get("entry") or {}, record["entry"]  # weights: another model
        same_weights = all(entry.get(k) == now.get(k) for k in weights) or not entry
        if any(previous.get(k) != record.get(k) for k in keys) or not same_weights:
            raise UsageError(
                "--out",
                str(out),
                "holds a run of another model, benchmark or mode (--blind and its choice "
                "settings); use a new folder to keep both",
            )
        before = min(previous.get("limit") or rows, rows)
        if min(record.get("limit") or rows, rows) < before:
            raise UsageError(
                "--limit",
                record.get("limit"),
                f"{out} already holds the first {before} items; a resumed run may only extend "
                f"it: give --limit {before} or more (or none), or a new --out",
            )
        return old
    return False


def _check_format(out: Path, previous: dict[str, Any]) -> dict[str, Any]:
    """The previous run's record in today's terms. A run written before score types (no
    "format") is upgraded when its scores are complete (contrastive: only the native score);
    a generative one is refused, since its items have no token counts for the per-token score."""
    if previous.get("format") == SCORE_FORMAT:
        return previous
    if previous.get("format") is not None:
        raise UsageError(
            "--out", str(out), f"holds a run in format {previous['format']} of another autocomp "
            "version; score into a new folder",
        )  # fmt: skip
    if (previous.get("entry") or {}).get("score") == "loglik" or previous.get("blind"):
        raise UsageError(
            "--out", str(out), "holds a generative run made before per-token scores (it has no "
            "token counts); score into a new folder, or delete this one to score it again",
        )  # fmt: skip
    return {**previous, "blind": "", "choice": None}


def _upgrade_parts(out: Path) -> None:
    """Rewrite (atomically) the parts of a run made before score types in today's schemas:
    score_type "score", no token counts, no choice columns."""
    for folder, schema in (("scores", SCORES_SCHEMA), ("predictions", PREDICTIONS_SCHEMA)):
        for path in sorted((out / folder).glob("part-*.parquet")):
            table = pq.read_table(path)
            if "score_type" not in table.column_names:
                table = _conform(table.replace_schema_metadata(None), schema)
                write_table(table, path, read_metadata(path))


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` in `schema`: missing columns null, a missing score_type "score"."""
    columns = []
    for field in schema:
        if field.name in table.column_names:
            columns.append(table[field.name].cast(field.type))
        elif field.name == "score_type":
            columns.append(pa.array(["score"] * table.num_rows, pa.string()))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


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
    """The mode and the numeric options are valid (checked before any work)."""
    if config.limit is not None and config.limit < 1:
        raise UsageError("--limit", config.limit, "must be at least 1 (items to score)")
    if config.batch_size is not None and config.batch_size < 1:
        raise UsageError(
            "--batch-size", config.batch_size, "must be at least 1 (texts per forward)"
        )
    if config.max_candidates < 1:
        raise UsageError("max_candidates", config.max_candidates, "must be at least 1")
    if config.blind and config.blind not in BLIND_MODES:
        raise UsageError("--blind", config.blind, f"must be one of {', '.join(BLIND_MODES)}")
    if config.blind == "choice" and config.choice_negatives < 1:
        raise UsageError(
            "--choice-negatives", str(config.choice_negatives), "must be 1 or more (paper: 49)"
        )
    if config.blind == "choice" and config.choice_seed < 0:
        raise UsageError("--choice-seed", str(config.choice_seed), "must be 0 or more")


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
    choice_record = (
        {"negatives": config.choice_negatives, "seed": config.choice_seed}
        if blind == "choice"
        else None
    )
    record = {
        "model": entry.name, "entry": entry.record(), "benchmark": str(source.path),
        "benchmark_source": source.source(), "benchmark_sha": digest,
        "benchmark_metadata": source.metadata, "blind": blind, "choice": choice_record,
        "limit": config.limit, "batch_size": config.batch_size, "format": SCORE_FORMAT,
        "autocomp_version": __version__,
    }  # fmt: skip
    old = _check_run(out, record, source.rows)
    for folder in (out, out / "scores", out / "predictions"):
        sweep_stale(folder)
    if old:
        _upgrade_parts(out)
    if (out / "predictions").is_dir():
        _drop_failures(out)
    done = _done_ids(out) if (out / "predictions").is_dir() else set()
    todo = (it for it in _stream_items(source, config.limit) if it.sample_id not in done)
    root = Path(config.images) if config.images else None
    scorer: Scorer | None = None
    part = _next_part(out) if (out / "predictions").is_dir() else 0
    document = provenance(
        "scores", model=entry.name, entry=entry.record(), benchmark_sha=digest, blind=blind,
        choice=choice_record,
    )  # fmt: skip
    if blind == "choice":
        score: Callable[..., tuple[list[dict], list[dict]]] = functools.partial(
            _choice_chunk, negatives=config.choice_negatives, seed=config.choice_seed
        )
    else:
        types = ("score", "per_token") if entry.score == "loglik" else ("score",)
        score = functools.partial(_score_chunk, blind=bool(blind), score_types=types)

    def get_scorer() -> Scorer:  # loaded on the first item that can be scored, not before
        nonlocal scorer
        scorer = scorer or scorer_factory()
        return scorer

    for chunk in _chunks(todo, config.max_candidates):
        score_rows, prediction_rows = score(entry.name, chunk, get_scorer, root)
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
    score_types: tuple[str, ...] = ("score",),
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
            for score_type in score_types:
                prediction_rows += predictions_for(model, item, None, str(exc), False, score_type)
    requests = [
        ScoreRequest(None if blind else item.sample_id, text)
        for item in ready
        for text in item.candidates
    ]
    scorer = get_scorer() if requests else None
    flat = scorer.score(requests, images) if scorer else []
    cut = _truncated(scorer, [r.text for r in requests]) if scorer else []
    tokens = _token_counts(scorer, [r.text for r in requests], score_types) if scorer else []
    score_rows = []
    offset = 0
    for item in ready:
        span = slice(offset, offset + len(item.candidates))
        offset += len(item.candidates)
        scores, truncated = flat[span], any(cut[span])
        counts: list[int | None] = list(tokens[span]) or [None] * len(scores)
        score_rows += [
            {"model": model, "sample_id": item.sample_id, "candidate_index": i, "score": s,
             "tokens": t, "score_type": "score"}
            for i, (s, t) in enumerate(zip(scores, counts))
        ]  # fmt: skip
        prediction_rows += predictions_for(model, item, scores, "", truncated)
        if "per_token" in score_types:
            per_token = [s / t for s, t in zip(scores, counts)]  # type: ignore[operator]
            prediction_rows += predictions_for(model, item, per_token, "", truncated, "per_token")
    return score_rows, prediction_rows


def _token_counts(scorer: Scorer, texts: list[str], score_types: tuple[str, ...]) -> list[int]:
    """Per caption: the tokens its score sums over (generative scorers), else nothing."""
    if "per_token" not in score_types:
        return []
    count = getattr(scorer, "token_counts", None)
    if not callable(count):
        raise TypeError(f"{type(scorer).__name__} reports no token counts for per_token scores")
    return list(count(texts))


def _choice_chunk(
    model: str,
    chunk: list[Item],
    get_scorer: Callable[[], Scorer],
    root: Path | None,
    negatives: int,
    seed: int,
) -> tuple[list[dict], list[dict]]:
    """The blind multiple-choice test (paper A.8) for a chunk: per item, set and protocol one
    prompt listing the shown options (no image); each option's score is its label's score as
    the reply; the answer is the best option, judged under the same tie rule."""
    asked: list[tuple[Item, str, str, list[int]]] = []
    requests: list[ScoreRequest] = []
    for item in chunk:
        for set_name, set_negatives in item.sets.items():
            for protocol, kept in _protocols(item, set_negatives):
                shown = choice.draw_options(kept, negatives, seed, item.sample_id, set_name)
                text = choice.prompt([item.candidates[i] for i in shown])
                asked.append((item, set_name, protocol, shown))
                requests += [ScoreRequest(None, choice.label(k), text) for k in range(len(shown))]
    flat = get_scorer().score(requests, {}) if requests else []
    score_rows: list[dict] = []
    prediction_rows: list[dict] = []
    offset = 0
    for item, set_name, protocol, shown in asked:
        values = flat[offset : offset + len(shown)]
        offset += len(shown)
        score_rows += [
            {"model": model, "sample_id": item.sample_id, "candidate_index": c, "score": v,
             "score_type": "choice", "set": set_name, "protocol": protocol, "option": k + 1}
            for k, (c, v) in enumerate(zip(shown, values))
        ]  # fmt: skip
        by_candidate = [float("nan")] * len(item.candidates)  # judge reads the shown ones
        for c, v in zip(shown, values):
            by_candidate[c] = v
        correct, tie, predicted, best = judge(by_candidate, [c for c in shown if c != 0])
        prediction_rows.append(
            {"model": model, "sample_id": item.sample_id, "family": item.family, "n": item.n,
             "condition": item.condition, "set": set_name, "protocol": protocol,
             "candidates": len(shown), "correct": correct, "tie": tie, "predicted": predicted,
             "positive_score": by_candidate[0], "best_negative_score": best, "failed": False,
             "reason": "", "truncated": False, "score_type": "choice",
             "options": choice.options_text(shown)}
        )  # fmt: skip
    return score_rows, prediction_rows


def _protocols(item: Item, negatives: list[int]) -> list[tuple[str, list[int]]]:
    """(protocol, negatives kept): "paper" keeps all, "strict" drops the positive's own scene;
    a protocol left without negatives is not asked."""
    strict = [i for i in negatives if i not in item.same_scene]
    return [(p, kept) for p, kept in (("paper", negatives), ("strict", strict)) if kept]


def _truncated(scorer: Scorer, texts: list[str]) -> list[bool]:
    """Per caption: longer than the model's text context (a scorer without a limit: never)."""
    check = getattr(scorer, "truncated", None)
    return check(texts) if callable(check) else [False] * len(texts)


def read_predictions(out: str | Path) -> pa.Table:
    parts = sorted((Path(out) / "predictions").glob("part-*.parquet"))
    if not parts:
        return PREDICTIONS_SCHEMA.empty_table()
    tables = [pq.read_table(p).replace_schema_metadata(None) for p in parts]
    table = pa.concat_tables(tables, promote_options="default")  # parts older than `truncated`
    return with_score_type(table)


def with_score_type(table: pa.Table) -> pa.Table:
    """`table` (predictions or summary) with a score_type column: tables written before it
    existed, or rows without it, are the native "score"."""
    if "score_type" not in table.column_names:
        return table.append_column("score_type", pa.array(["score"] * table.num_rows, pa.string()))
    index = table.column_names.index("score_type")
    return table.set_column(index, "score_type", pc.fill_null(table["score_type"], "score"))


def summarize(out: str | Path) -> pa.Table:
    """Accuracy per model x family x N x condition x set x protocol x score type, with the
    chance baseline."""
    table = read_predictions(out)
    table = table.append_column(
        "chance", pc.divide(1.0, pc.cast(table["candidates"], pa.float64()))
    )
    keys = ["model", "family", "n", "condition", "set", "protocol", "score_type"]
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
    model: str,
    benchmark: str | Path,
    out: str | Path,
    store: str = "",
    name: str = "",
    config: ScoreConfig = ScoreConfig(),
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
    score_stage(
        entry, benchmark, out, lambda: load_scorer(model, config.device, config.batch_size), config
    )
    if target is not None:
        target.put(key, out, {"stage": "score", "model": model, "benchmark": name})
    return out


def collect_runs(folders: list[str | Path], out: str | Path) -> pa.Table:
    """One summary table over several score runs (each folder: one model's `score` output)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [Path(f) / "summary.parquet" for f in folders]
    tables = [pq.read_table(f) for f in files if f.is_file()]  # placeholders have none
    tables = [with_score_type(t) for t in tables if t.num_rows]
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
    write_table(table, out / "summary.parquet", provenance("summary", runs=len(folders)))
    return table
