"""Report analyses at paper scale: accuracy with intervals and paired context deltas.

Synthetic predictions shaped like the paper's suite: 259,579 samples per model (both
conditions), Swap and Confusion, both protocols, `--models` models. Times the vectorised
analyses (autocomp.analysis.statistics: pyarrow group-bys and joins, exact binomial intervals, multinomial
paired bootstrap from counts) against a naive per-row Python baseline (dictionaries, one
bootstrap per cell by resampling items) run on the same rows, and checks they agree.

Usage: python benchmarks/report_throughput.py [--models 4] [--samples 259579]
"""

from __future__ import annotations

import argparse
import resource
import time
from collections import defaultdict

import numpy as np
import pyarrow as pa

from autocomp.analysis import statistics as analysis
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA


def synthetic(models: int, samples: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    concepts = samples // 2
    families = np.array(["color", "shape_color", "position", "relative_size"])
    fam = families[rng.integers(0, 4, concepts)]
    n = rng.integers(2, 4, concepts).astype(np.int8)
    columns: dict[str, list] = defaultdict(list)
    for m in range(models):
        skill = 0.3 + 0.1 * m
        for condition in ("minimal", "contextual"):
            for set_name, size in (("swap", 3), ("confusion", 100)):
                for protocol in ("paper", "strict"):
                    correct = rng.random(concepts) < skill
                    columns["model"].append(np.full(concepts, f"model-{m}"))
                    columns["sample_id"].append(
                        np.char.add(
                            np.char.add("c", np.arange(concepts).astype(str)), f"/{condition}"
                        )
                    )
                    columns["family"].append(fam)
                    columns["n"].append(n)
                    columns["condition"].append(np.full(concepts, condition))
                    columns["set"].append(np.full(concepts, set_name))
                    columns["protocol"].append(np.full(concepts, protocol))
                    columns["candidates"].append(np.full(concepts, size, np.int32))
                    columns["correct"].append(correct)
    arrays = {k: np.concatenate(v) for k, v in columns.items()}
    rows = len(arrays["model"])
    arrays.update(
        tie=np.zeros(rows, bool), predicted=np.zeros(rows, np.int32),
        positive_score=np.zeros(rows), best_negative_score=np.zeros(rows),
        failed=np.zeros(rows, bool), reason=np.full(rows, ""), truncated=np.zeros(rows, bool),
        score_type=np.full(rows, "score"), options=np.full(rows, ""),  # native scoring
    )  # fmt: skip
    return pa.table({f.name: pa.array(arrays[f.name], f.type) for f in PREDICTIONS_SCHEMA})


def naive_accuracy(table: pa.Table, resamples: int = 1000, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    cells = defaultdict(list)
    for r in analysis.with_score_type(table).to_pylist():
        cells[tuple(r[c] for c in analysis.CELL)].append(r["correct"])
    out = {}
    for key, values in cells.items():
        v = np.array(values, float)
        means = v[rng.integers(0, len(v), (resamples, len(v)))].mean(1)
        out[key] = (v.mean(), *np.percentile(means, [2.5, 97.5]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--samples", type=int, default=259_579)
    parser.add_argument("--naive-samples", type=int, default=20_000)
    args = parser.parse_args()
    table = synthetic(args.models, args.samples)
    print(f"{table.num_rows:,} prediction rows ({args.models} models x {args.samples:,} samples x "
          "2 sets x 2 protocols)")  # fmt: skip
    start = time.perf_counter()
    acc = analysis.accuracy(table)
    t_acc = time.perf_counter() - start
    start = time.perf_counter()
    deltas = analysis.context_deltas(table)
    t_delta = time.perf_counter() - start
    print(f"  accuracy + exact intervals:   {t_acc:7.2f} s  ({acc.num_rows} cells)")
    print(f"  paired context deltas:        {t_delta:7.2f} s  ({deltas.num_rows} comparisons)")
    print(f"  peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")

    small = synthetic(args.models, args.naive_samples, seed=1)
    start = time.perf_counter()
    fast = analysis.accuracy(small)
    t_fast = time.perf_counter() - start
    start = time.perf_counter()
    slow = naive_accuracy(small)
    t_slow = time.perf_counter() - start
    worst = 0.0
    for r in fast.to_pylist():
        mean, low, high = slow[tuple(r[c] for c in analysis.CELL)]
        assert abs(mean - r["accuracy"]) < 1e-12
        worst = max(worst, abs(low - r["ci_low"]), abs(high - r["ci_high"]))
    print(
        f"on {small.num_rows:,} rows: vectorised {t_fast:.3f} s, naive per-row + resampling "
        f"bootstrap {t_slow:.2f} s (x{t_slow / t_fast:.0f}); accuracies equal, interval ends "
        f"within {worst:.4f} (resampling noise of the naive bootstrap)"
    )


if __name__ == "__main__":
    main()
