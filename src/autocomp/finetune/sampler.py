"""K hard negatives per positive, drawn from the benchmark's own candidate sets (paper A.9).

- swap: K Swap negatives (the baseline of Table 8).
- confusion: K Confusion negatives stratified across the error families of Section 6, named by
  the project's taxonomy (`autocomp.analysis.statistics.error_type`): swapped attributes (the
  Swap family), shared attribute (attribute-shared / object-different) and shared object
  (object-shared / attribute-different). The fourth family ("repeated pair") is degenerate at
  N=2 and is not drawn; candidates flagged as describing the positive's own scene never are.

Allocation: the K slots go round-robin over the families that have candidates, in an order
shuffled per positive, so each family gets K/F slots in expectation and the remainder rotates.
Within a family candidates are drawn without replacement while they last, then with replacement
(Color N=2 has a single Swap negative: K=3 Swap-only repeats it, as any K>1 Swap-only must).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autocomp.analysis.statistics import error_type
from autocomp.errors import UsageError

STRATA = ("swapped attributes", "shared attribute", "shared object")


def strata(row: dict[str, Any]) -> dict[str, list[int]]:
    """Confusion candidate indices of a row by error family (same-scene candidates left out)."""
    groups: dict[str, list[int]] = {name: [] for name in STRATA}
    arrangements = row["confusion_arrangements"]
    for i, (arrangement, same) in enumerate(zip(arrangements, row["confusion_same_scene"])):
        kind = error_type(int(row["n"]), int(arrangement), bool(same))
        if kind in groups:
            groups[kind].append(i)
    return {k: v for k, v in groups.items() if v}


def _draw(pool: Sequence[int], count: int, rng: Any) -> list[int]:
    picks = [int(i) for i in rng.permutation(list(pool))[: min(count, len(pool))]]
    picks += [int(pool[i]) for i in rng.integers(0, len(pool), count - len(picks))]
    return picks


def hard_negatives(row: dict[str, Any], kind: str, k: int, rng: Any) -> list[tuple[str, str]]:
    """K (caption, family) hard negatives of one benchmark row; rng: a numpy Generator."""
    if k == 0:
        return []
    if kind == "swap":
        pool = [i for i, same in enumerate(row["swap_same_scene"]) if not same]
        if not pool:
            raise UsageError("benchmark row", row.get("concept_id"), "has no Swap negative")
        return [(row["swap_negatives"][i], STRATA[0]) for i in _draw(pool, k, rng)]
    groups = strata(row)
    if not groups:
        raise UsageError("benchmark row", row.get("concept_id"), "has no Confusion negative")
    order = [list(groups)[i] for i in rng.permutation(len(groups))]
    slots = {name: 0 for name in order}
    for j in range(k):
        slots[order[j % len(order)]] += 1
    out = []
    for name in order:
        out += [
            (row["confusion_negatives"][i], name) for i in _draw(groups[name], slots[name], rng)
        ]
    return out


def check_attribute_family(family: str) -> None:
    """The taxonomy is defined for attribute families only (relational arrangements differ)."""
    from autocomp.protocol.family import load_family

    if load_family(family).kind != "attribute":
        raise UsageError(
            "family", family, "Confusion stratification needs an attribute family (e.g. color)"
        )
