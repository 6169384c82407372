"""The cumulative survival funnel (paper Table 3) from the curate stage's survival table.

Per family x N x condition the funnel's stages are: `sampled` (every sample of the cell; for
Contextual, every concept that asked for a caption), `caption` (Contextual only: the concepts that
kept their LLM caption, when the survival table has that row), then each validation check in its
order. A stage's `survivors` are the samples that passed every check up to and including it
(`passed` of the survival table: a sample enters a check only when it passed the earlier ones), so
the funnel never rises; `share` is survivors / sampled, `rate` survivors / the samples that
entered the stage. A stage no sample entered has neither ("–": nothing entered), never 0 or 100.

Fallback Contextual captions (the caption LLM kept none; the sample carries its Minimal twin's
caption, seed and image) still go through the checks, so the survival table counts them there
but not at the caption stage. `fallback` counts them per Contextual cell. When every sample that
entered the checks is a fallback, the checks are left out of the funnel (entered 0: "–"), so it
describes the concepts' own captions only; when some are, the checks count them and can rise
after the caption stage (Table 3 says so).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from autocomp.analysis import draw
from autocomp.analysis.draw import Plot
from autocomp.analysis.paper_tables import CONDITION_LABELS, Layout, condition_rank
from autocomp.analysis.wide import percent

# Paul Tol's colour-blind-safe "muted" scheme: one colour per stage
STAGE_COLORS = ["#332288", "#88CCEE", "#44AA99", "#117733", "#DDCC77", "#CC6677", "#AA4499"]
FUNNEL_COLUMNS = [
    "family",
    "n",
    "condition",
    "order",
    "stage",
    "entered",
    "survivors",
    "share",
    "rate",
    "fallback",
]
SAMPLED, CAPTION = "sampled", "caption"


def _stages(checks: list[dict[str, Any]], caption: dict[str, Any] | None) -> list[tuple]:
    """(order, stage, entered, survivors) of one cell, first stage first."""
    checks = sorted(checks, key=lambda r: r["step"])
    if caption is not None:
        head = [
            (-2, SAMPLED, caption["entered"], caption["entered"]),
            (-1, CAPTION, caption["entered"], caption["passed"]),
        ]
    else:
        start = max((r["entered"] for r in checks), default=0)
        head = [(-2, SAMPLED, start, start)]
    return head + [(int(r["step"]), r["check"], r["entered"], r["passed"]) for r in checks]


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")


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
        fallback = 0
        if caption is not None and len(stages) > 2:
            fallback = max(0, stages[2][2] - caption["passed"])
        only_fallback = fallback > 0 and caption is not None and caption["passed"] == 0
        start = stages[0][3]
        for order, stage, entered, survivors in stages:
            if only_fallback and order >= 0:
                entered = survivors = 0  # nothing but fallback samples entered the checks
            out.append(
                {
                    "family": family,
                    "n": n,
                    "condition": condition,
                    "order": order,
                    "stage": stage,
                    "entered": entered,
                    "survivors": survivors,
                    "share": _ratio(survivors, start) if entered else float("nan"),
                    "rate": _ratio(survivors, entered),
                    "fallback": fallback,
                }
            )
    if not out:
        return pa.table({c: pa.array([], pa.null()) for c in FUNNEL_COLUMNS})
    return pa.Table.from_pylist(out).select(FUNNEL_COLUMNS)


def fallback_note(funnel: pa.Table) -> list[str]:
    """What the funnel's Contextual rows were computed on, where fallback captions entered."""
    notes = {}
    for r in funnel.to_pylist():
        if r["fallback"]:
            cell = f"{r['family']} N={r['n']}"
            if r["order"] >= 0 and r["entered"] == 0:
                notes[cell] = (
                    f"{cell} Contextual: the caption LLM kept no caption; the {r['fallback']} "
                    "fallback samples (Minimal caption, seed and image) that went through the "
                    "checks are left out, so the checks show – (nothing entered)."
                )
            elif cell not in notes:
                notes[cell] = (
                    f"{cell} Contextual: the checks count {r['fallback']} fallback samples "
                    "(Minimal caption, seed and image) beside the kept captions, so cum. can rise "
                    "after the caption stage."
                )
    return list(notes.values())


# ----------------------------------------------------------------------------- the figure


def funnel_plot(funnel: pa.Table, layout: Layout | None) -> Plot | None:
    """A panel per family x N x condition: one labelled bar per stage, its length the share of
    the sampled items that survived every stage up to it; a stage that does not apply to the
    cell says "n/a", one no sample entered says so."""
    rows = funnel.to_pylist()
    if not rows:
        return None
    stages = [s for _, s in sorted({(r["order"], r["stage"]) for r in rows})]
    colors = {s: STAGE_COLORS[i % len(STAGE_COLORS)] for i, s in enumerate(stages)}
    rank = layout.family_rank if layout else (lambda f: (0, f))
    cells: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        cells[(r["family"], r["n"], r["condition"])][r["stage"]] = r
    keys = sorted(cells, key=lambda k: (rank(k[0]), k[1], condition_rank(k[2])))
    cols = min(3, len(keys))
    lines = (len(keys) + cols - 1) // cols
    title = "Survival funnel: % of the sampled items surviving every stage so far"
    with draw.style():
        fig = draw.new_figure(cols * 3.1 + 0.4, lines * (0.5 + 0.24 * len(stages)) + 0.5)
        axes = fig.subplots(lines, cols, squeeze=False)
        for ax in axes.flat[len(keys) :]:
            ax.set_visible(False)
        for ax, key in zip(axes.flat, keys):
            family, n, condition = key
            ys = range(len(stages))
            for y, stage in zip(ys, stages):
                r = cells[key].get(stage)
                if r is None:
                    ax.text(2, y, "n/a", va="center", ha="left", color="#888888", fontsize=7)
                elif r["share"] != r["share"]:  # NaN: nothing entered
                    ax.text(
                        2,
                        y,
                        "– nothing entered",
                        va="center",
                        ha="left",
                        color="#888888",
                        fontsize=7,
                    )
                else:
                    ax.barh(y, 100 * r["share"], 0.7, color=colors[stage], zorder=2)
                    ax.text(
                        100 * r["share"] + 2,
                        y,
                        f"{percent(r['share'])} ({r['survivors']:,})",
                        va="center",
                        ha="left",
                        fontsize=7,
                    )
            ax.set_yticks(list(ys), stages)
            ax.set_ylim(len(stages) - 0.4, -0.6)  # first stage on top, room above and below
            ax.set_xlim(0, 150)  # room for the labels right of a full bar
            ax.set_xticks([0, 25, 50, 75, 100])
            ax.spines["bottom"].set_bounds(0, 100)
            ax.grid(axis="x", color="#dddddd", linewidth=0.6)
            ax.grid(axis="y", visible=False)
            label = CONDITION_LABELS.get(condition, condition)
            ax.set_title(draw.wrap(f"{family} N={n}, {label}", 34))
            ax.set_xlabel("cumulative %")
        fig.suptitle(title)
    notes = fallback_note(funnel)
    return Plot("survival_funnel", title, fig, notes)
