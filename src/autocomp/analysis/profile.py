"""One model across benchmarks: `report --compare` over runs of different benchmarks (a harness
import, or a run sharing no concept with this one) gives each model's headline on every
benchmark, each with its own metric, rule and interval: a harness import's official headline
(analysis/harness.py: its rule, tie policy and aggregation, bootstrap over groups), an
Auto-Comp run's accuracy per set (paper protocol, native scores, exact binomial over items).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from autocomp.analysis.harness import run_tables
from autocomp.store.catalog.schemas import PROFILE_SCHEMA


def _autocomp_rows(name: str, predictions: pa.Table) -> list[dict[str, Any]]:
    """An Auto-Comp (or SugarCrepe) run's headline per model and set: accuracy over items,
    paper protocol, native scores, with the exact binomial interval."""
    from autocomp.analysis.statistics import binomial_interval

    keep = pc.and_(pc.equal(predictions["protocol"], "paper"), pc.invert(predictions["failed"]))
    if "score_type" in predictions.schema.names:
        keep = pc.and_(keep, pc.equal(pc.fill_null(predictions["score_type"], "score"), "score"))
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    chosen = predictions.filter(keep).select(["model", "set", "correct"]).to_pylist()
    for row in chosen:
        cell = counts[(row["model"], row["set"])]
        cell[0] += int(row["correct"])
        cell[1] += 1
    out = []
    for (model, set_name), (correct, n) in sorted(counts.items()):
        low, high = binomial_interval(correct, n)
        out.append({
            "model": model, "benchmark": "autocomp", "run": name, "metric": set_name,
            "rule": "positive > every negative (ties wrong), paper protocol, micro over items",
            "accuracy": correct / n, "low": low, "high": high, "units": n,
        })  # fmt: skip
    return out


def profile(runs: Mapping[str, Path], seed: int = 0) -> pa.Table:
    """One table across run folders of different benchmarks (name -> folder): per model and
    benchmark its headline metric(s), each with its own rule and interval."""
    from autocomp.analysis.load import load_run

    out: list[dict[str, Any]] = []
    for name, folder in runs.items():
        tables = run_tables(folder, seed)
        if tables is None:
            out += _autocomp_rows(name, load_run(folder, "compare").predictions)
            continue
        chosen = tables["harness_metrics"].filter(
            pc.and_(
                pc.and_(pc.equal(tables["harness_metrics"]["subset"], "all"),
                        pc.equal(tables["harness_metrics"]["tie"], "official")),
                pc.equal(tables["harness_metrics"]["score_type"], "score"),
            )
        )  # fmt: skip
        for row in chosen.to_pylist():
            out.append({
                "model": row["model"], "benchmark": row["benchmark"], "run": name,
                "metric": row["metric"], "rule": f"{row['rule']}, {row['aggregate']}",
                "accuracy": row["accuracy"], "low": row["low"], "high": row["high"],
                "units": row["units"],
            })  # fmt: skip
    return pa.Table.from_pylist(out, PROFILE_SCHEMA)
