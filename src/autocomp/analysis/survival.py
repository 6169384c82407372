"""The cumulative survival funnel (paper Table 3) from the curate stage's survival table.

Per family x N x condition the funnel's stages are: `sampled` (every sample of the cell; for
Contextual, every concept that asked for a caption), `caption` (Contextual only: the concepts that
kept their LLM caption, when the survival table has that row), then each validation check in its
order. A stage's `survivors` are the samples that passed every check up to and including it
(`passed` of the survival table: a sample enters a check only when it passed the earlier ones), so
the funnel never rises; `share` is survivors / sampled, `rate` survivors / the previous stage's.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

FUNNEL_COLUMNS = ["family", "n", "condition", "order", "stage", "survivors", "share", "rate"]
SAMPLED, CAPTION = "sampled", "caption"


def _stages(checks: list[dict[str, Any]], caption: dict[str, Any] | None) -> list[tuple]:
    """(order, stage, survivors) of one cell, first stage first."""
    checks = sorted(checks, key=lambda r: r["step"])
    if caption is not None:
        head = [(-2, SAMPLED, caption["entered"]), (-1, CAPTION, caption["passed"])]
    else:
        head = [(-2, SAMPLED, max((r["entered"] for r in checks), default=0))]
    return head + [(int(r["step"]), r["check"], r["passed"]) for r in checks]


def survival_funnel(survival: pa.Table) -> pa.Table:
    """One row per family x N x condition x stage (see the module doc)."""
    rows = survival.to_pylist()
    captions = {(r["family"], r["n"]): r for r in rows if r["check"] == CAPTION}
    cells: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["check"] != CAPTION:
            cells[(r["family"], r["n"], r["condition"])].append(r)
    out = []
    for (family, n, condition), checks in sorted(cells.items()):
        caption = captions.get((family, n)) if condition == "contextual" else None
        stages = _stages(checks, caption)
        start = stages[0][2]
        previous = start
        for order, stage, survivors in stages:
            out.append(
                {
                    "family": family,
                    "n": n,
                    "condition": condition,
                    "order": order,
                    "stage": stage,
                    "survivors": survivors,
                    "share": survivors / start if start else float("nan"),
                    "rate": survivors / previous if previous else float("nan"),
                }
            )
            previous = survivors
    if not out:
        return pa.table({c: pa.array([], pa.null()) for c in FUNNEL_COLUMNS})
    return pa.Table.from_pylist(out).select(FUNNEL_COLUMNS)
