"""The protocol-only tour (`autocomp demo`): for every family and N, sample concepts, write
their Minimal captions, build the Swap and Confusion sets under the paper protocol, and measure
each benchmark table's candidate counts and chance baselines under both protocols. No models,
so no profile (CPU, seconds); the CLI prints the result next to the paper's published baselines.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from autocomp.config import NegativesConfig
from autocomp.errors import UsageError
from autocomp.protocol.concepts import count_concepts
from autocomp.protocol.family import load_all
from autocomp.protocol.stages import negatives_stage, sample_stage


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(path: Path) -> dict[str, Any]:
    """Candidate counts and chance baselines (paper and strict) of one benchmark table."""
    table = pq.read_table(path)
    rows = table.to_pylist()
    swap = [len(r["swap_negatives"]) for r in rows]
    conf = [len(r["confusion_negatives"]) for r in rows]
    swap_strict = [len(r["swap_negatives"]) - sum(r["swap_same_scene"]) for r in rows]
    conf_strict = [len(r["confusion_negatives"]) - sum(r["confusion_same_scene"]) for r in rows]
    vary = [len(r["vary_attribute_negatives"]) for r in rows]

    def chance(counts: list[int]) -> float | None:
        return _mean([1 / (1 + c) for c in counts if c])

    return {
        "rows": len(rows),
        "example": rows[0]["caption"],
        "swap": sorted(set(swap)),
        "confusion": sorted(set(conf)),
        "swap_chance": chance(swap),
        "confusion_chance": chance(conf),
        "swap_chance_strict": chance(swap_strict),
        "confusion_chance_strict": chance(conf_strict),
        "same_scene_items": sum(1 for r in rows if any(r["confusion_same_scene"])),
        "vary": sorted(set(vary)),
        "vary_object": sorted({len(r["vary_object_negatives"]) for r in rows}),
    }


def protocol_tour(
    out: str | Path, count: int, seed: int, done: Callable[[dict[str, Any]], None] | None = None
) -> list[dict[str, Any]]:
    """Every family and N into `out` (concepts_<family>_n<N>.parquet and
    benchmark_<family>_n<N>.parquet, `count` concepts each or all there are); one summary row
    each (family, n, relation, concepts, benchmark and `summarize`'s figures), passed to `done`
    as it is made."""
    if count < 1:
        raise UsageError("count", count, "must be at least 1")
    if seed < 0:
        raise UsageError("seed", seed, "must be 0 or more")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for family in load_all():
        for n in range(family.n_min, family.n_max + 1):
            k = min(count, count_concepts(family, n))
            concepts = out / f"concepts_{family.name}_n{n}.parquet"
            benchmark = out / f"benchmark_{family.name}_n{n}.parquet"
            sample_stage(family.name, n, k, seed, concepts, force=True)
            negatives_stage(concepts, benchmark, NegativesConfig(workers=1, force=True))
            row = {"family": family.name, "n": n, "relation": family.is_relation,
                   "concepts": k, "benchmark": benchmark, **summarize(benchmark)}  # fmt: skip
            results.append(row)
            if done is not None:
                done(row)
    return results
