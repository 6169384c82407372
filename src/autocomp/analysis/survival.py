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

from autocomp.analysis.escape import escape
from autocomp.analysis.paper_tables import CONDITION_LABELS, Layout, condition_rank
from autocomp.analysis.svg import svg_document
from autocomp.analysis.wide import percent

# Paul Tol's colour-blind-safe "muted" scheme: one colour per stage
STAGE_COLORS = ["#332288", "#88CCEE", "#44AA99", "#117733", "#DDCC77", "#CC6677", "#AA4499"]
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


# ----------------------------------------------------------------------------- the figure


def svg_funnel(funnel: list[dict[str, Any]], layout: Layout | None) -> str:
    """A panel per family x N x condition: one bar per stage, its length the share of the sampled
    items that survived every stage up to it."""
    if not funnel:
        return ""
    stages = [s for _, s in sorted({(r["order"], r["stage"]) for r in funnel})]
    colors = {s: STAGE_COLORS[i % len(STAGE_COLORS)] for i, s in enumerate(stages)}
    rank = layout.family_rank if layout else (lambda f: (0, f))
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for r in funnel:
        cells[(r["family"], r["n"], r["condition"])].append(r)
    keys = sorted(cells, key=lambda k: (rank(k[0]), k[1], condition_rank(k[2])))
    cols, pw, row = 3, 230, 13
    ph = 22 + row * len(stages) + 8
    parts = []
    for i, key in enumerate(keys):
        x0, y0 = (i % cols) * pw, 30 + (i // cols) * ph
        family, n, condition = key
        parts.append(
            f'<text x="{x0 + 4}" y="{y0 + 12}" font-size="11">{escape(family)} N={n} '
            f"{escape(CONDITION_LABELS.get(condition, condition))}</text>"
        )
        for j, r in enumerate(sorted(cells[key], key=lambda r: r["order"])):
            y = y0 + 18 + j * row
            length = max(r["share"] * (pw - 60), 0.5)
            tip = f"{r['stage']}: {r['survivors']} ({percent(r['share'])} %)"
            parts.append(
                f'<rect x="{x0 + 4}" y="{y}" width="{length:.1f}" height="{row - 3}" '
                f'fill="{colors[r["stage"]]}"><title>{escape(tip)}</title></rect>'
                f'<text x="{x0 + 8 + length:.1f}" y="{y + row - 4}" font-size="9">'
                f"{percent(r['share'])}</text>"
            )
    lx = cols * pw + 10
    for j, stage in enumerate(stages):
        parts.append(
            f'<rect x="{lx}" y="{30 + 14 * j}" width="10" height="10" fill="{colors[stage]}"/>'
            f'<text x="{lx + 14}" y="{39 + 14 * j}" font-size="11">{escape(stage)}</text>'
        )
    height = max(30 + ((len(keys) + cols - 1) // cols) * ph, 40 + 14 * len(stages))
    return svg_document(
        lx + 140, height, "Survival funnel: % of sampled items surviving every stage so far", parts
    )
