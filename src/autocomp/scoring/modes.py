"""The score modes: how one chunk of items becomes scores rows and prediction rows.

- native (`score_type` "score"): the model's own score of each candidate against the item's
  image (cosine, sigmoid or summed log-likelihood); with `--blind` (= likelihood) without it.
- per-token ("per_token", generative models, from the same pass): the summed log-likelihood
  divided by the caption's token count (`tokens` in the scores table), since the sum favours
  short captions and Confusion negatives differ in length.
- choice (`--blind choice`, "choice" rows only): the paper's A.8 multiple-choice test
  (autocomp.scoring.choice); one prompt per item, set and protocol lists the shown options, each
  after its ID (equal width, in a shuffled order: the position-neutral rule), and each option's
  score is its ID's score as the reply.

Every prediction row, in every mode, comes from items.prediction_row. `score_parts` runs a
model over what a run folder lacks, chunk by chunk in its mode, one part each (the stage's
loop); `run_record` is the run.json it is checked against.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp import __version__
from autocomp.config import ScoreConfig
from autocomp.errors import UsageError
from autocomp.scoring import Scorer, ScoreRequest, choice
from autocomp.scoring.images import load_image
from autocomp.scoring.items import (
    Item,
    chunks,
    prediction_row,
    predictions_for,
    protocols,
    stream_items,
)
from autocomp.scoring.registry import ModelEntry, get_model
from autocomp.scoring.runstore import StoredRun
from autocomp.store.catalog.benchmarks import Benchmark
from autocomp.store.catalog.runs import SCORE_FORMAT, ScoreRun
from autocomp.store.tables import provenance
from autocomp.tiny.common import weights_record

Rows = tuple[list[dict[str, Any]], list[dict[str, Any]]]  # scores rows, prediction rows
Mode = Callable[[str, list[Item], Callable[[], Scorer], Path | None], Rows]


def mode_for(entry: ModelEntry, config: ScoreConfig) -> Mode:
    """The chunk scorer of a model in the configured mode: (model name, chunk, get_scorer,
    images root) -> rows. `get_scorer` loads the model on first use."""
    if config.blind == "choice":
        return functools.partial(
            choice_chunk, negatives=config.choice_negatives, seed=config.choice_seed
        )
    types = ("score", "per_token") if entry.score == "loglik" else ("score",)
    return functools.partial(native_chunk, blind=bool(config.blind), score_types=types)


def score_row(model: str, item: Item, candidate: int, score: float, **extra: Any) -> dict[str, Any]:
    """One scores row (`extra`: tokens; the choice test's set, protocol and option shown)."""
    return {"model": model, "sample_id": item.sample_id, "candidate_index": candidate,
            "score": score, "score_type": "score", **extra}  # fmt: skip


def native_chunk(
    model: str,
    chunk: list[Item],
    get_scorer: Callable[[], Scorer],
    root: Path | None,
    blind: bool,
    score_types: tuple[str, ...] = ("score",),
) -> Rows:
    """Every candidate of every item against its image (none: `blind`), one scorer call; an
    item whose image cannot be loaded fails with the reason."""
    images: dict[str, Any] = {}
    ready: list[Item] = []
    prediction_rows: list[dict[str, Any]] = []
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
        ScoreRequest(None if blind else item.sample_id, text, item.prompt)
        for item in ready
        for text in item.candidates
    ]
    texts = [r.text for r in requests]
    scorer = get_scorer() if requests else None
    flat = _scores(scorer, requests, images, ready) if scorer else []
    cut = scorer.truncated(texts) if scorer else []
    tokens = _token_counts(scorer, texts) if scorer and "per_token" in score_types else []
    score_rows: list[dict[str, Any]] = []
    offset = 0
    for item in ready:
        span = slice(offset, offset + len(item.candidates))
        offset += len(item.candidates)
        scores, truncated = flat[span], any(cut[span])
        counts: list[int | None] = list(tokens[span]) or [None] * len(scores)
        score_rows += [
            score_row(model, item, i, s, tokens=t) for i, (s, t) in enumerate(zip(scores, counts))
        ]
        prediction_rows += predictions_for(model, item, scores, "", truncated)
        if "per_token" in score_types:
            per_token = [s / t for s, t in zip(scores, counts)]  # type: ignore[operator]
            prediction_rows += predictions_for(model, item, per_token, "", truncated, "per_token")
    return score_rows, prediction_rows


def _scores(
    scorer: Scorer, requests: list[ScoreRequest], images: dict[str, Any], ready: list[Item]
) -> list[float]:
    """The scores of `requests` in order: image rows by `score`, text-only rows (an item with
    a query text) by the scorer's `text_similarities` (checks.check_text_rows let only a
    backend with one score them)."""
    if not any(item.query_text for item in ready):
        return scorer.score(requests, images)
    queries = [item.query_text for item in ready for _ in item.candidates]
    pairs = [(q, r.text) for q, r in zip(queries, requests) if q is not None]
    image_rows = [r for q, r in zip(queries, requests) if q is None]
    similar = iter(scorer.text_similarities(pairs))  # type: ignore[attr-defined]
    scored = iter(scorer.score(image_rows, images) if image_rows else [])
    return [next(similar) if q is not None else next(scored) for q in queries]


def _token_counts(scorer: Scorer, texts: list[str]) -> list[int]:
    """Per caption: the tokens its score sums over (a generative scorer's)."""
    counts = scorer.token_counts(texts)
    if counts is None:
        raise TypeError(f"{type(scorer).__name__} reports no token counts for per_token scores")
    return list(counts)


def choice_chunk(
    model: str,
    chunk: list[Item],
    get_scorer: Callable[[], Scorer],
    root: Path | None,
    negatives: int,
    seed: int,
) -> Rows:
    """The blind multiple-choice test (paper A.8) for a chunk: per item, set and protocol one
    prompt listing the shown options (no image; `root` unused); each option's score is its
    ID's score as the reply; the answer is the best option, judged under the same tie rule.
    Scores rows: `option` = the position shown (1-based); the ID there is choice.draw's.
    A protocol left without negatives is not asked."""
    asked: list[tuple[Item, str, str, list[int]]] = []
    requests: list[ScoreRequest] = []
    for item in chunk:
        for set_name, set_negatives in item.sets.items():
            for protocol, kept in protocols(item, set_negatives):
                if not kept:
                    continue
                shown, ids = choice.draw(kept, negatives, seed, item.sample_id, set_name)
                text = choice.prompt([item.candidates[i] for i in shown], ids)
                asked.append((item, set_name, protocol, shown))
                requests += [ScoreRequest(None, answer, text) for answer in ids]
    flat = get_scorer().score(requests, {}) if requests else []
    score_rows: list[dict[str, Any]] = []
    prediction_rows: list[dict[str, Any]] = []
    offset = 0
    for item, set_name, protocol, shown in asked:
        values = flat[offset : offset + len(shown)]
        offset += len(shown)
        score_rows += [
            score_row(model, item, c, v, score_type="choice", set=set_name, protocol=protocol,
                      option=k + 1)
            for k, (c, v) in enumerate(zip(shown, values))
        ]  # fmt: skip
        by_candidate = [float("nan")] * len(item.candidates)  # judge reads the shown ones
        for c, v in zip(shown, values):
            by_candidate[c] = v
        prediction_rows.append(
            prediction_row(model, item, set_name, protocol, [c for c in shown if c != 0],
                           by_candidate, score_type="choice", options=choice.options_text(shown))
        )  # fmt: skip
    return score_rows, prediction_rows


def run_record(entry: ModelEntry, source: Benchmark, config: ScoreConfig) -> dict[str, Any]:
    """run.json: what a resumed run must match, and what the run was made with."""
    asked = (
        {"negatives": config.choice_negatives, "seed": config.choice_seed, "rule": choice.RULE}
        if config.blind == "choice"
        else None
    )
    return {
        "model": entry.name, "entry": entry.record(), "benchmark": str(source.path),
        "benchmark_source": source.source(), "benchmark_sha": source.digest,
        "benchmark_metadata": source.metadata, "blind": config.blind, "choice": asked,
        "limit": config.limit, "batch_size": config.batch_size, "format": SCORE_FORMAT,
        "autocomp_version": __version__, "weights": _weights(entry),
    }  # fmt: skip


def _weights(entry: ModelEntry) -> dict[str, Any]:
    """run.json `weights`: random or trained, as autocomp.tiny (which builds the random ones)
    records it; a fine-tuned entry is judged by its base model's weights."""
    base = None
    if entry.base_model:
        try:
            base = get_model(entry.base_model).weights
        except UsageError:  # a base outside the registries: its weights are its own
            base = None
    return weights_record(entry.weights, base)


def score_parts(
    entry: ModelEntry,
    source: Benchmark,
    run: ScoreRun,
    record: dict[str, Any],
    config: ScoreConfig,
    loader: Callable[[], Scorer],
    progress: Callable[[int], None] | None,
    stored: StoredRun | None = None,
) -> pa.Table:
    """Score what the checked run folder (or, `stored`, the store's committed parts) lacks,
    part by part, each chunk in the mode the entry and configuration ask for; write and return
    the summary. `record` is run.json (run_record); the scorer is loaded at the first item."""
    done, part = stored.resume() if stored else (run.resume(), run.next_part())
    todo = (it for it in stream_items(source, config.limit) if it.sample_id not in done)
    root = Path(config.images) if config.images else None
    document = provenance(
        "scores", model=entry.name, entry=entry.record(), benchmark_sha=source.digest,
        blind=config.blind, choice=record["choice"],
    )  # fmt: skip
    mode = mode_for(entry, config)
    scorer: Scorer | None = None

    def get_scorer() -> Scorer:  # loaded on the first item that can be scored, not before
        nonlocal scorer
        scorer = scorer or loader()
        return scorer

    for chunk in chunks(todo, config.max_candidates):
        score_rows, prediction_rows = mode(entry.name, chunk, get_scorer, root)
        run.start(record)
        run.write_part(part, score_rows, prediction_rows, document)
        if stored:  # committed before the next part starts (preemption-safe)
            stored.commit(part)
        part += 1
        if progress:
            progress(len(chunk))
    run.start(record)
    return run.write_summary(document, stored.summary() if stored else None)
