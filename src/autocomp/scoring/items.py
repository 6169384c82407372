"""The item model and judging: a benchmark row as the candidates a model scores, and the
prediction rows its scores give. Pure Python: no model, no files.

Per benchmark row the candidates are the positive (index 0), the Confusion negatives (1..C; every
Swap negative is one of them, found through `swap_in_confusion`) and, at N=1, the sanity sets.

Tie rule: an item is correct only if the positive's score is strictly greater than every
negative's; a tie at the top counts as an error (`tie` is set), and `predicted` then names the
first tied negative. The rule never favours the positive.

Protocols: predictions are computed for both from the same scores. "paper" uses every candidate;
"strict" leaves out candidates flagged as describing the positive's own scene.

Failures (a missing or unreadable image, a row the model cannot score) are recorded per item
with the reason (`scores` None); they stay in the denominator as errors and are counted in
`failed`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autocomp.store.catalog.ids import row_sample_id

if TYPE_CHECKING:
    from autocomp.store.catalog.benchmarks import Benchmark

REQUIRED = (
    "family", "n", "caption", "swap_negatives", "swap_in_confusion", "swap_same_scene",
    "confusion_negatives", "confusion_same_scene", "vary_attribute_negatives",
    "vary_object_negatives",
)  # fmt: skip
PROTOCOLS = ("paper", "strict")


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
    prompt: str | None = None  # the question the row asks (a VQA benchmark's), else none
    query_text: str | None = None  # a text-only row: its candidates are scored against this


def item_from_row(row: dict[str, Any], index: int) -> Item:
    """The item of benchmark row number `index` (its sample id: the row's, else the concept id
    with the condition, else row-<index>)."""
    sample_id = row_sample_id(row, index)
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
        prompt=row.get("prompt"),
        query_text=row.get("query_text"),
    )


def stream_items(source: Benchmark, limit: int | None = None) -> Iterator[Item]:
    """Benchmark rows as items, read batch by batch (a paper-scale table never sits in memory);
    with `limit`, only the first `limit` rows."""
    index = 0
    for batch in source.batches():
        for row in batch.to_pylist():
            if limit is not None and index >= limit:
                return
            yield item_from_row(row, index)
            index += 1


def chunks(items: Iterable[Item], max_candidates: int) -> Iterator[list[Item]]:
    """Items in chunks of at most `max_candidates` candidates (an item larger than that alone);
    a chunk is one written part, the resume granularity."""
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


def judge(scores: Sequence[float], negatives: list[int]) -> tuple[bool, bool, int, float]:
    """(correct, tie, predicted, best negative score) under the strict-greater tie rule."""
    best = max(scores[i] for i in negatives)
    first_best = next(i for i in negatives if scores[i] == best)
    positive = scores[0]
    if positive > best:
        return True, False, 0, best
    return False, positive == best, first_best, best


def protocols(item: Item, negatives: list[int]) -> list[tuple[str, list[int]]]:
    """(protocol, negatives kept) for both protocols: "paper" keeps all, "strict" drops the
    candidates describing the positive's own scene (possibly all of them)."""
    strict = [i for i in negatives if i not in item.same_scene]
    return [("paper", negatives), ("strict", strict)]


def prediction_row(
    model: str,
    item: Item,
    set_name: str,
    protocol: str,
    negatives: list[int],
    scores: Sequence[float] | None,
    reason: str = "",
    truncated: bool = False,
    score_type: str = "score",
    options: str | None = None,
) -> dict[str, Any]:
    """The prediction of one item, set and protocol: the positive (candidate 0) against
    `negatives`, judged on `scores` (per candidate index; None: the item failed, `reason` says
    why). `options`: the options shown (the choice test)."""
    row: dict[str, Any] = {
        "model": model, "sample_id": item.sample_id, "family": item.family, "n": item.n,
        "condition": item.condition, "set": set_name, "protocol": protocol,
        "candidates": len(negatives) + 1, "correct": False, "tie": False, "predicted": -1,
        "positive_score": None, "best_negative_score": None, "failed": scores is None,
        "reason": reason, "truncated": truncated, "score_type": score_type, "options": options,
    }  # fmt: skip
    if scores is not None and negatives:
        correct, tie, predicted, best = judge(scores, negatives)
        row.update(
            correct=correct, tie=tie, predicted=predicted,
            positive_score=scores[0], best_negative_score=best,
        )  # fmt: skip
    return row


def predictions_for(
    model: str,
    item: Item,
    scores: Sequence[float] | None,
    reason: str,
    truncated: bool = False,
    score_type: str = "score",
) -> list[dict[str, Any]]:
    """Every set x protocol prediction of an item from one score per candidate."""
    return [
        prediction_row(model, item, set_name, protocol, kept, scores, reason, truncated, score_type)
        for set_name, negatives in item.sets.items()
        for protocol, kept in protocols(item, negatives)
    ]
