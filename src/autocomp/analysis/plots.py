"""The report's figures, drawn with matplotlib (analysis/draw.py: style, output, overlap check).

Each model (a generative model's per-token accuracy counts as its own series) keeps one colour and
marker in every figure, from the Okabe-Ito colour-blind-safe palette (eight colours, then the next
marker shape), named in each figure's legend beside the plots. Chance is a dashed grey line,
named in the legend, its value printed under each N.

- accuracy vs N, one figure per Auto-Comp family: a panel per set (rows) and condition (columns);
  models dodged side by side at each N with their 95 % intervals, joined by lines only when there
  are several N; imported families without N (SugarCrepe) share one figure, one x per family;
- the Swap - Confusion gap per model, a figure per condition, grouped by family x N (families
  whose Swap set is their Confusion set are left out: their gap is 0 by construction);
- Contextual - Minimal on the paired set with its 95 % interval, a panel per set;
- the cumulative survival funnel (analysis/survival.py).
Every figure carries the caveats of what it was computed on (analysis/scope.py) and a figure
with no data is left out with a one-line note.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from autocomp.analysis import draw
from autocomp.analysis.draw import Plot
from autocomp.analysis.paper_tables import (
    CONDITION_LABELS,
    MAIN_SCORE_TYPES,
    ROW_SUFFIX,
    SET_LABELS,
    Layout,
    condition_rank,
)
from autocomp.analysis.scope import Scope
from autocomp.analysis.survival import funnel_plot
from autocomp.analysis.wide import percent
from autocomp.scoring.backends import OTHER_GROUP, group_rank

PANEL_H = 1.9  # inches


def series_label(r: dict[str, Any]) -> str:
    """A model's series: its name, with the per-token suffix for per-token rows."""
    score_type = r.get("score_type", "score")
    return r["model"] + ROW_SUFFIX.get(score_type, f" ({score_type})")


def series_styles(rows: list[dict[str, Any]], layout: Layout | None) -> dict[str, tuple[str, str]]:
    """series -> (colour, marker), in the tables' row order (contrastive, generative, other)."""
    group = layout.group if layout else (lambda _: OTHER_GROUP)
    names = sorted(
        {(r["model"], r.get("score_type", "score"), series_label(r)) for r in rows},
        key=lambda k: (group_rank(group(k[0])), k[0], k[1] != "score", k[1]),
    )
    return draw.series_styles([label for _, _, label in names])


def _legend(fig: Any, styles: dict[str, tuple[str, str]], chance: bool = False) -> float:
    """The models' legend at the figure's right; returns its width in inches (to widen the
    figure by)."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color=c, marker=m, linestyle="none", markersize=6)
        for c, m in styles.values()
    ]
    labels = [draw.wrap(label) for label in styles]
    if chance:
        handles.append(Line2D([], [], **draw.CHANCE))
        labels.append("chance (1 / candidates)")
    if handles:
        fig.legend(handles, labels, loc="outside right center", frameon=False)
    longest = max((len(line) for label in labels for line in label.split("\n")), default=0)
    return 0.35 + 0.068 * longest


def _height(rows: int, styles: dict, extra: float = 0.6) -> float:
    """Tall enough for the panels and for the legend's lines."""
    lines = sum(draw.wrap(label).count("\n") + 1 for label in styles) + 1
    return max(rows * PANEL_H + extra, 0.2 * lines + 0.7)


# ----------------------------------------------------------------------------- accuracy


def _bound(r: dict[str, Any], key: str) -> float:
    """An interval bound, the accuracy itself where the row has none."""
    return r[key] if r.get(key) is not None else r["accuracy"]


def _accuracy_panel(
    ax: Any,
    xs: list[Any],
    tick: Callable[[Any], str],
    points: dict[str, dict[Any, dict]],
    styles: dict[str, tuple[str, str]],
    join: bool,
) -> None:
    """Models dodged at each x with their intervals (joined by a line when `join`: x is N); the
    chance of each x dashed across its band and printed under it."""
    series = [s for s in styles if s in points]
    step = 0.7 / max(len(series), 1)
    chances: dict[Any, list[float]] = defaultdict(list)
    for s in series:
        for x, r in points[s].items():
            chances[x].append(r["chance"])
    for i, x in enumerate(xs):
        if chances.get(x):
            level = 100 * sum(chances[x]) / len(chances[x])
            ax.hlines(level, i - 0.42, i + 0.42, **draw.CHANCE, zorder=1)
    for j, s in enumerate(series):
        color, marker = styles[s]
        offset = (j - (len(series) - 1) / 2) * step
        found = [(i, points[s][x]) for i, x in enumerate(xs) if x in points[s]]
        px = [i + offset for i, _ in found]
        py = [100 * r["accuracy"] for _, r in found]
        low = [y - 100 * _bound(r, "ci_low") for y, (_, r) in zip(py, found)]
        high = [100 * _bound(r, "ci_high") - y for y, (_, r) in zip(py, found)]
        ax.errorbar(
            px,
            py,
            yerr=[[max(0.0, v) for v in low], [max(0.0, v) for v in high]],
            color=color,
            marker=marker,
            markersize=4.5,
            linestyle="-" if join and len(px) > 1 else "none",
            linewidth=1.2,
            elinewidth=0.9,
            capsize=0,
            zorder=3,
        )
    labels = []
    for x in xs:
        c = chances.get(x)
        text = tick(x)
        if c:
            text += f"\nchance {percent(sum(c) / len(c), chance=True)} %"
        labels.append(text)
    ax.set_xticks(range(len(xs)), labels)
    ax.set_xlim(-0.6, len(xs) - 0.4)
    ax.set_ylim(-3, 103)
    ax.set_yticks([0, 25, 50, 75, 100])


def accuracy_figure(
    title: str,
    rows: list[dict[str, Any]],
    styles: dict[str, tuple[str, str]],
    x_of: Callable[[dict], Any],
    tick: Callable[[Any], str],
    sets: list[str],
    join: bool = True,
) -> Any | None:
    """A panel per set (rows) x condition (columns): accuracy (%) at each x; `join`: x is
    ordered (N), so each model's points are joined."""
    conditions = sorted({r["condition"] for r in rows}, key=condition_rank)
    xs = sorted({x_of(r) for r in rows})
    if not rows or not xs:
        return None
    mine = {series_label(r) for r in rows}
    used = {k: v for k, v in styles.items() if k in mine}
    tick_lines = max(tick(x).count("\n") for x in xs) + 2
    panel_w = max(2.3, 0.6 + len(xs) * max(0.75, 0.14 * len(used)))
    with draw.style():
        fig = draw.new_figure(1, 1)
        legend_w = _legend(fig, used, chance=True)
        width = len(conditions) * panel_w + 0.6 + legend_w
        height = _height(len(sets), used, 0.55 + 0.14 * tick_lines * len(sets))
        fig.set_size_inches(width, height)
        axes = fig.subplots(len(sets), len(conditions), squeeze=False, sharey=True)
        for i, set_name in enumerate(sets):
            for j, condition in enumerate(conditions):
                ax = axes[i][j]
                points: dict[str, dict[Any, dict]] = defaultdict(dict)
                for r in rows:
                    if r["set"] == set_name and r["condition"] == condition:
                        points[series_label(r)][x_of(r)] = r
                _accuracy_panel(ax, xs, tick, points, used, join)
                label = CONDITION_LABELS.get(condition, condition)
                ax.set_title(f"{SET_LABELS.get(set_name, set_name)}, {label}")
                if j == 0:
                    ax.set_ylabel("accuracy (%)")
        fig.suptitle(draw.wrap(title, int(width * 11)))
    return fig


def accuracy_plots(acc: list[dict], styles: dict, layout: Layout | None, scope: Scope) -> list:
    """One figure per Auto-Comp family (x = N); one for the imported families (x = family)."""
    rank = layout.family_rank if layout else (lambda f: (0, f))
    out = []
    families = sorted({r["family"] for r in acc}, key=rank)
    for family in (f for f in families if scope.autocomp(f)):
        rows = [r for r in acc if r["family"] == family]
        sets = [s for s in ("swap", "confusion") if any(r["set"] == s for r in rows)]
        fig = accuracy_figure(
            f"{family}: accuracy vs N", rows, styles, lambda r: r["n"], lambda n: f"N={n}", sets
        )
        if fig is not None:
            in_family = {s.key for s in scope.samples.values() if s.key[0] == family}
            caveats = scope.caveats(in_family, compare=True)
            out.append(Plot(f"accuracy_vs_n_{family}", f"{family}: accuracy vs N", fig, caveats))
    others = [f for f in families if not scope.autocomp(f)]
    if others:
        rows = [r for r in acc if r["family"] in others]
        single = all(f in scope.single_set for f in others)
        sets = (
            ["swap"]
            if single
            else [s for s in ("swap", "confusion") if any(r["set"] == s for r in rows)]
        )
        title = "Imported families: accuracy" + (" (one negative: Swap = Conf.)" if single else "")
        fig = accuracy_figure(
            title, rows, styles, lambda r: r["family"], lambda f: draw.wrap(f, 14), sets, join=False
        )
        if fig is not None:
            caveats = scope.caveats(lambda k: k[0] in others, compare=True)
            out.append(Plot("accuracy_imported", title, fig, caveats))
    return out


# ----------------------------------------------------------------------------- gap, deltas


def bars_figure(
    title: str,
    panels: list[tuple[str, list[tuple[str, dict[str, tuple]]]]],
    styles: dict[str, tuple[str, str]],
    ylabel: str,
) -> Any | None:
    """Vertical bars in groups, a panel per (panel title, [(group label, series -> (value,
    low, high))]); fractions in percentage points around a zero line."""
    groups = max((len(g) for _, g in panels), default=0)
    used = {k: v for k, v in styles.items() if any(k in b for _, g in panels for _, b in g)}
    if not groups or not used:
        return None
    bar = 0.8 / len(used)
    with draw.style():
        fig = draw.new_figure(1, 1)
        legend_w = _legend(fig, used)
        width = max(3.2, 1.1 + groups * max(0.8, 0.16 * len(used))) + legend_w
        fig.set_size_inches(width, _height(len(panels), used, 0.7 * len(panels)))
        axes = fig.subplots(len(panels), 1, squeeze=False)
        for ax, (panel_title, grouped) in zip(axes[:, 0], panels):
            ax.axhline(0, color="#444444", linewidth=0.8)
            for g, (_, values) in enumerate(grouped):
                for j, name in enumerate(s for s in used):
                    if name not in values:
                        continue
                    value, low, high = values[name]
                    x = g + (j - (len(used) - 1) / 2) * bar
                    color, marker = used[name]
                    ax.bar(x, 100 * value, bar * 0.9, color=color, zorder=2)
                    ax.plot(
                        [x],
                        [100 * value],
                        marker=marker,
                        color=color,
                        markersize=4,
                        markeredgecolor="white",
                        markeredgewidth=0.5,
                        zorder=3,
                    )
                    if low is not None and high is not None:
                        ax.vlines(
                            x, 100 * low, 100 * high, color="#222222", linewidth=0.9, zorder=4
                        )
            ax.set_xticks(range(len(grouped)), [draw.wrap(label, 14) for label, _ in grouped])
            ax.set_xlim(-0.6, len(grouped) - 0.4)
            lo, hi = ax.get_ylim()
            ax.set_ylim(min(lo, -5), max(hi, 5))
            ax.set_ylabel(ylabel)
            ax.set_title(panel_title)
        fig.suptitle(draw.wrap(title, int(width * 11)))
    return fig


def gap_plots(acc: list[dict], styles: dict, layout: Layout | None, scope: Scope) -> list[Plot]:
    """Swap minus Confusion accuracy per model, a figure per condition."""
    cell: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in acc:
        if r["family"] not in scope.single_set:
            cell[(r["condition"], r["family"], r["n"], series_label(r))][r["set"]] = r
    rank = layout.family_rank if layout else (lambda f: (0, f))
    out = []
    for condition in sorted({k[0] for k in cell}, key=condition_rank):
        keys = sorted(
            {(f, n) for c, f, n, _ in cell if c == condition}, key=lambda k: (rank(k[0]), k[1])
        )
        groups = []
        for family, n in keys:
            bars = {
                name: (v["swap"]["accuracy"] - v["confusion"]["accuracy"], None, None)
                for (c, f, nn, name), v in cell.items()
                if (c, f, nn) == (condition, family, n) and "swap" in v and "confusion" in v
            }
            if bars:
                groups.append((f"{family}\nN={n}", bars))
        label = CONDITION_LABELS.get(condition, condition)
        title = f"Swap minus Confusion accuracy, {label}"
        fig = bars_figure(title, [("", groups)], styles, "Swap - Confusion (pp)")
        if fig is not None:
            wanted = {(f, n, condition) for f, n in keys}
            out.append(Plot(f"gap_{condition}", title, fig, scope.caveats(wanted)))
    return out


def delta_plots(deltas: list[dict], styles: dict, layout: Layout | None, scope: Scope) -> list:
    """Contextual minus Minimal on the paired set, a panel per set, grouped by family x N."""
    rank = layout.family_rank if layout else (lambda f: (0, f))
    panels = []
    for set_name in ("swap", "confusion"):
        mine = [r for r in deltas if r["set"] == set_name]
        keys = sorted({(r["family"], r["n"]) for r in mine}, key=lambda k: (rank(k[0]), k[1]))
        groups = [
            (
                f"{family}\nN={n}",
                {
                    series_label(r): (r["delta"], r["ci_low"], r["ci_high"])
                    for r in mine
                    if (r["family"], r["n"]) == (family, n)
                },
            )
            for family, n in keys
        ]
        if groups:
            panels.append((SET_LABELS[set_name], groups))
    title = "Contextual minus Minimal on the paired set (95 % CI)"
    fig = bars_figure(title, panels, styles, "Contextual - Minimal (pp)")
    if fig is None:
        return []
    cells = {(r["family"], r["n"]) for r in deltas}
    caveats = scope.caveats(lambda k: k[:2] in cells, paired=True, compare=True)
    return [Plot("context_deltas", title, fig, caveats)]


# ----------------------------------------------------------------------------- all figures


def report_plots(
    tables: dict[str, pa.Table], layout: Layout | None, scope: Scope
) -> tuple[list[Plot], list[str]]:
    """Every figure the run has data for, and a one-line note per figure left out."""
    acc = [
        r
        for r in tables["accuracy"].to_pylist()
        if r["protocol"] == "paper"
        and r["set"] in ("swap", "confusion")
        and r.get("score_type", "score") in MAIN_SCORE_TYPES
    ]
    deltas = [
        r
        for r in tables["context_deltas"].to_pylist()
        if r["protocol"] == "paper" and r.get("score_type", "score") in MAIN_SCORE_TYPES
    ]
    styles = series_styles(acc + deltas, layout)
    plots: list[Plot] = []
    notes: list[str] = []
    found = accuracy_plots(acc, styles, layout, scope)
    if not found:
        notes.append(
            "Accuracy figures left out: the run has no Swap or Confusion accuracy scored "
            "with images (score_type score or per_token)."
        )
    plots += found
    found = gap_plots(acc, styles, layout, scope)
    if not found and acc:
        notes.append(
            "Swap minus Confusion figure left out: every family has one negative set "
            "(Swap = Confusion), so the gap is 0 by construction."
        )
    elif found and any(f in scope.single_set for f in {r["family"] for r in acc}):
        left = sorted({r["family"] for r in acc} & scope.single_set)
        for plot in found:
            plot.caveats.append(f"Left out: {', '.join(left)} (Swap = Confusion: gap 0).")
    plots += found
    found = delta_plots(deltas, styles, layout, scope)
    if not found:
        notes.append("Contextual minus Minimal figure left out: " + scope.paired_reason())
    plots += found
    if "survival_funnel" in tables:
        funnel = funnel_plot(tables["survival_funnel"], layout)
        if funnel is not None:
            plots.append(funnel)
    else:
        notes.append(
            "Survival funnel left out: the run's benchmark has no survival table "
            "(survival.parquet from the curate stage)."
        )
    return plots, notes
