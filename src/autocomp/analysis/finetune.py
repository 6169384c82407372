"""Confusion fine-tuning results (paper Table 8) from stored score runs; no model is re-run.

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

from autocomp.analysis.escape import escape
from autocomp.analysis.statistics import CONFIDENCE

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
        "table8": _table(table8, TABLE8_COLUMNS),
        "finetune_deltas": _table(deltas, DELTA_COLUMNS),
    }


def _table(rows: list[dict], columns: list[str]) -> pa.Table:
    if not rows:
        return pa.table({c: pa.array([], pa.null()) for c in columns})
    return pa.Table.from_pylist(rows).select(columns)


def svg_curve(curve: list[dict], title: str = "training curve") -> str:
    """Training loss (left axis, scaled to its range) and validation accuracies per step."""
    width, height, left, right, top, bottom = 640, 260, 50, 170, 24, 30
    steps = [r["step"] for r in curve] or [0]
    lo, hi = min(steps), max(max(steps), min(steps) + 1)
    losses = [r["loss"] for r in curve if r["loss"] is not None]
    lmin, lmax = (min(losses), max(losses)) if losses else (0.0, 1.0)
    lspan = (lmax - lmin) or 1.0

    def x(step: float) -> float:
        return left + (step - lo) / (hi - lo) * (width - left - right)

    def y(v: float) -> float:
        return top + (1 - v) * (height - top - bottom)

    series = {
        "train loss (scaled)": [
            (r["step"], (r["loss"] - lmin) / lspan) for r in curve if r["loss"] is not None
        ],
        "val Swap acc": [(r["step"], r["val_swap"]) for r in curve if r["val_swap"] is not None],
        "val Confusion acc": [
            (r["step"], r["val_confusion"]) for r in curve if r["val_confusion"] is not None
        ],
    }
    colors = ["#555", "#1f77b4", "#d62728"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="4" y="14" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<text x="{left}" y="{height - 8}" font-size="10">step {lo}</text>',
        f'<text x="{width - right}" y="{height - 8}" font-size="10" text-anchor="end">'
        f"step {hi}</text>",
        f'<text x="4" y="{top + 10}" font-size="10">loss {lmax:.3g} / acc 1</text>',
        f'<text x="4" y="{height - bottom}" font-size="10">loss {lmin:.3g} / acc 0</text>',
    ]
    for i, (name, pts) in enumerate(series.items()):
        if pts:
            path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in pts)
            parts.append(
                f'<polyline fill="none" stroke="{colors[i]}" stroke-width="2" points="{path}"/>'
            )
        parts.append(
            f'<text x="{width - right + 10}" y="{40 + 14 * i}" font-size="11" '
            f'fill="{colors[i]}">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def write_report(
    folders: Sequence[str | Path],
    out: str | Path,
    checkpoints: Sequence[str | Path] = (),
    seed: int = 0,
) -> dict[str, Path]:
    """table8 / finetune_deltas as Parquet and CSV, and report.html with the training curves."""
    import pyarrow.csv as pacsv

    from autocomp.analysis.html import CSS, html_table
    from autocomp.store.tables import provenance, write_table

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = load_runs(folders)
    tables = finetune_tables(runs, seed)
    paths: dict[str, Path] = {}
    for name, table in tables.items():
        write_table(table, out / f"{name}.parquet", provenance(name, runs=len(runs), seed=seed))
        pacsv.write_csv(table, out / f"{name}.csv")
        paths[name] = out / f"{name}.parquet"
    curves = []
    for folder in checkpoints:
        svg = Path(folder) / "curve.svg"
        meta = Path(folder) / "run.json"
        if svg.is_file() and meta.is_file():
            title = json.loads(meta.read_text())["entry"]
            curves.append(f"<h3>{escape(title)}</h3>{svg.read_text()}")
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>autocomp fine-tuning (Table 8)</title><style>{CSS}</style></head><body>"
        f"<h1>Confusion fine-tuning (Table 8)</h1><p class=note>{escape(TABLE8_NOTE)}</p>"
        f"{html_table(tables['table8'])}<h2>Against the pretrained model</h2>"
        f"<p class=note>{escape(DELTAS_NOTE)}</p>{html_table(tables['finetune_deltas'])}"
        f"<h2>Training curves</h2>{''.join(curves)}"
        f'<p class=note><a href="full/index.html">The whole report over these runs</a></p>'
        "</body></html>"
    )
    (out / "report.html").write_text(page, encoding="utf-8")
    paths["html"] = out / "report.html"
    return paths


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


def full_report(
    runs: Sequence[str | Path],
    evaluation: str | Path,
    out: str | Path,
    seed: int = 0,
    title: str = "fine-tuning",
) -> Path:
    """The project's whole report (autocomp.analysis.report) over the fine-tuning score runs on
    their evaluation benchmark: accuracy per model, fine-tuned-vs-base deltas, Table 8, ...
    Written to out/full/index.html (the run folder it reads is out/full/run)."""
    import json
    import shutil

    from autocomp.analysis.report import report_stage

    run = Path(out) / "full" / "run"
    (run / "results").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(evaluation, run / "benchmark.parquet")
    for folder in runs:
        meta = Path(folder) / RUN_FILE
        if meta.is_file():
            target = run / "results" / json.loads(meta.read_text())["entry"]
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(folder, target)
    report_stage(run, Path(out) / "full", seed, title=title)
    return Path(out) / "full" / "index.html"


def publish_report(
    runs: Sequence[str | Path],
    checkpoints: Sequence[str | Path],
    evaluation: str | Path,
    out: str | Path,
    store: str = "",
    name: str = "",
    seed: int = 0,
) -> str:
    """Write the Table 8 page and the whole report into `out` and, with a store, publish them as
    finetune/<name>/report-<hash of the tables> (a re-run with other results never collides);
    return the path of the Table 8 page."""
    import hashlib

    paths = write_report(runs, out, checkpoints, seed)
    full_report(runs, evaluation, out, seed, title=f"{name} fine-tuning")
    if store:
        from autocomp.store.storage import open_store

        digest = hashlib.sha256()
        for key in ("table8", "finetune_deltas"):
            digest.update(Path(out, f"{key}.csv").read_bytes())
        key = f"finetune/{name}/report-{digest.hexdigest()[:12]}"
        open_store(store).put(key, out, {"stage": "finetune_report", "benchmark": name})
    return str(paths["html"])
