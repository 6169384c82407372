"""Confusion fine-tuning results (paper Table 8) from stored score runs; no model is re-run.
The tables only: analysis/finetune.py writes their report (page, curves, the whole report).

Each score run of a fine-tuning experiment carries `finetune.json`: base_model, negatives
("pretrained", "swap" or "confusion") and seed. Per base model x family x N x condition:
- table8: the additional Confusion gain of the Confusion variant over the Swap-only baseline,
  Delta_C = acc_Confusion(confusion variant) - acc_Confusion(swap variant), mean over the seeds
  both variants have;
- finetune_deltas: Delta Swap and Delta Confusion of each variant against the pretrained model.
Intervals: 95 % percentile bootstrap over samples of the seed-averaged per-sample difference
(paper protocol, every sample of the cell; a failed item counts as wrong, as in `score`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.analysis.statistics import CONFIDENCE, rows_table

RUN_FILE = "finetune.json"
TABLE8_COLUMNS = [
    "model",
    "family",
    "n",
    "condition",
    "samples",
    "seeds",
    "confusion_swap_only",
    "confusion_confusion",
    "delta_c",
    "ci_low",
    "ci_high",
]
DELTA_COLUMNS = [
    "model",
    "variant",
    "family",
    "n",
    "condition",
    "set",
    "samples",
    "seeds",
    "pretrained",
    "finetuned",
    "delta",
    "ci_low",
    "ci_high",
]


def mean_interval(values: Sequence[float], seed: int = 0, resamples: int = 2000) -> tuple:
    """(mean, low, high): percentile bootstrap interval of a mean."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return float("nan"), float("nan"), float("nan")
    means = data[np.random.default_rng(seed).integers(0, data.size, (resamples, data.size))]
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means.mean(axis=1), [tail, 100 - tail])
    return float(data.mean()), float(low), float(high)


def load_runs(folders: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The fine-tuning score runs among `folders` (each: finetune.json + predictions)."""
    from autocomp.store.catalog.runs import read_predictions

    runs = []
    for folder in folders:
        path = Path(folder) / RUN_FILE
        if path.is_file():
            meta = json.loads(path.read_text())
            runs.append({**meta, "predictions": read_predictions(folder)})
    return runs


def _correct(runs: list[dict]) -> dict[tuple, dict[str, bool]]:
    """(model, variant, seed, family, n, condition, set) -> sample_id -> correct."""
    out: dict[tuple, dict[str, bool]] = defaultdict(dict)
    for run in runs:
        seed = run.get("seed") if run["negatives"] != "pretrained" else None
        for r in run["predictions"].to_pylist():
            if r["protocol"] != "paper" or r["set"] not in ("swap", "confusion"):
                continue
            key = (
                run["base_model"],
                run["negatives"],
                seed,
                r["family"],
                r["n"],
                r["condition"],
                r["set"],
            )
            out[key][r["sample_id"]] = bool(r["correct"])
    return out


def _gain_row(cell: tuple, correct: dict, seeds: list, seed: int) -> dict[str, Any]:
    """One Table 8 row: Confusion variant minus Swap-only on the Confusion set."""
    model, family, n, condition = cell

    def get(variant: str, s: int) -> dict[str, bool]:
        return correct.get((model, variant, s, family, n, condition, "confusion"), {})

    ids = sorted(set.intersection(*(set(get(v, s)) for v in ("swap", "confusion") for s in seeds)))
    diffs = [
        sum(get("confusion", s)[i] - get("swap", s)[i] for s in seeds) / len(seeds) for i in ids
    ]
    acc = {
        v: sum(get(v, s)[i] for s in seeds for i in ids) / max(1, len(ids) * len(seeds))
        for v in ("swap", "confusion")
    }
    mean, low, high = mean_interval(diffs, seed)
    values = [
        model,
        family,
        n,
        condition,
        len(ids),
        len(seeds),
        acc["swap"],
        acc["confusion"],
        mean,
        low,
        high,
    ]
    return dict(zip(TABLE8_COLUMNS, values))


def _delta_row(
    cell: tuple, variant: str, set_name: str, correct: dict, seeds: list, seed: int
) -> dict[str, Any] | None:
    """One variant against the pretrained model on one set, or None without both sides."""
    model, family, n, condition = cell
    base = correct.get((model, "pretrained", None, family, n, condition, set_name), {})
    tuned = [correct.get((model, variant, s, family, n, condition, set_name), {}) for s in seeds]
    if not base or not tuned or not all(tuned):
        return None
    ids = sorted(set(base).intersection(*map(set, tuned)))
    after = [sum(t[i] for t in tuned) / len(tuned) for i in ids]
    before = [float(base[i]) for i in ids]
    mean, low, high = mean_interval([a - b for a, b in zip(after, before)], seed)
    values = [
        model,
        variant,
        family,
        n,
        condition,
        set_name,
        len(ids),
        len(seeds),
        sum(before) / max(1, len(ids)),
        sum(after) / max(1, len(ids)),
        mean,
        low,
        high,
    ]
    return dict(zip(DELTA_COLUMNS, values))


def table8_empty_reason(runs: list[dict]) -> str | None:
    """Why Table 8 has no row (None when it has one): it compares a model's Confusion-trained
    checkpoint with its Swap-only one of the same seed, so each base model needs both."""
    if not runs:
        return (
            "no score run carries finetune.json: score checkpoints with `autocomp finetune "
            "score` (a plain `autocomp score` run is not marked for Table 8)"
        )
    seeds: dict[tuple[str, str], set] = defaultdict(set)
    for run in runs:
        if run["negatives"] != "pretrained":
            seeds[(run["base_model"], run["negatives"])].add(run.get("seed"))
    models = sorted({run["base_model"] for run in runs})
    if any(seeds[(m, "swap")] & seeds[(m, "confusion")] for m in models):
        return None
    have = "; ".join(
        f"{m}: {', '.join(v for v in ('swap', 'confusion') if seeds[(m, v)]) or 'pretrained'} only"
        for m in models
    )
    return (
        "Table 8 is the Confusion-trained checkpoint minus the Swap-only one (same model and "
        f"seed), and these runs lack a pair ({have}): train and score the other "
        "`--negatives` with the same --seed"
    )


def finetune_tables(runs: list[dict], seed: int = 0) -> dict[str, pa.Table]:
    """table8 and finetune_deltas (see the module doc)."""
    correct = _correct(runs)
    seeds: dict[tuple, set] = defaultdict(set)
    cells = set()
    for model, variant, s, family, n, condition, _ in correct:
        cells.add((model, family, n, condition))
        if variant != "pretrained":
            seeds[(model, variant)].add(s)
    table8, deltas = [], []
    for cell in sorted(cells):
        model = cell[0]
        both = sorted(seeds[(model, "swap")] & seeds[(model, "confusion")])
        if both:
            table8.append(_gain_row(cell, correct, both, seed))
        for variant in ("swap", "confusion"):
            for set_name in ("swap", "confusion"):
                row = _delta_row(
                    cell, variant, set_name, correct, sorted(seeds[(model, variant)]), seed
                )
                if row:
                    deltas.append(row)
    return {
        "table8": rows_table(table8, TABLE8_COLUMNS),
        "finetune_deltas": rows_table(deltas, DELTA_COLUMNS),
    }


TABLE8_NOTE = (
    "delta_c = Confusion accuracy of the Confusion-negatives variant minus that of the Swap-only "
    "baseline (K hard negatives each), mean over seeds; 95 % bootstrap interval over samples of "
    "the seed-averaged per-sample difference. Paper protocol; held-out concepts of the training "
    "family and every other family's benchmark."
)
DELTAS_NOTE = (
    "Delta Swap and Delta Confusion of each fine-tuned variant against its pretrained model "
    "(mean over seeds; 95 % bootstrap interval over samples)."
)
