"""The report's figures as inline SVG (no scripts; hover titles give exact values).

Colours mean something: each model (a generative model's per-token accuracy counts as its own
series) keeps one colour and marker in every figure, from the Okabe-Ito colour-blind-safe
palette (eight colours, then the next marker shape), listed in each figure's legend; the survival
funnel colours its stages. Chance is a dashed grey line labelled "chance".

- accuracy vs N, one figure per family: a panel per set (rows) and condition (columns); models
  are dodged side by side at each N and joined by lines only when there are several N;
- the Swap - Confusion gap per model, one figure per condition, grouped by family x N;
- Contextual - Minimal on the paired set with its interval, per model;
- the cumulative survival funnel, a panel per family x N x condition (analysis/survival.py).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from autocomp.analysis.escape import escape
from autocomp.analysis.paper_tables import (
    CONDITION_LABELS,
    GROUP_ORDER,
    MAIN_SCORE_TYPES,
    ROW_SUFFIX,
    SET_LABELS,
    Layout,
    condition_rank,
)
from autocomp.analysis.survival import svg_funnel
from autocomp.analysis.svg import svg_document
from autocomp.analysis.wide import percent

# Okabe & Ito (2008), ordered so that neighbours differ most; black last
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
MARKERS = ("circle", "square", "triangle", "diamond")
CHANCE_STYLE = 'stroke="#777" stroke-width="1.2" stroke-dasharray="5,3"'


def series_label(r: dict[str, Any]) -> str:
    """A model's series: its name, with the per-token suffix for per-token rows."""
    return r["model"] + ROW_SUFFIX.get(r.get("score_type", "score"), f" ({r['score_type']})")


def series_styles(rows: list[dict[str, Any]], layout: Layout | None) -> dict[str, tuple[str, str]]:
    """series -> (colour, marker), in the tables' row order (contrastive, generative, other)."""
    group = layout.group if layout else (lambda _: "other")
    names = sorted(
        {(r["model"], r.get("score_type", "score"), series_label(r)) for r in rows},
        key=lambda k: (GROUP_ORDER.index(group(k[0])), k[0], k[1] != "score", k[1]),
    )
    return {
        label: (PALETTE[i % len(PALETTE)], MARKERS[(i // len(PALETTE)) % len(MARKERS)])
        for i, (_, _, label) in enumerate(names)
    }


def marker(shape: str, x: float, y: float, color: str, tip: str, size: float = 3.5) -> str:
    """A filled marker (circle, square, triangle or diamond) with a hover title."""
    s = size
    shapes = {
        "square": (
            "rect",
            f'x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}"',
        ),
        "triangle": (
            "polygon",
            f'points="{x:.1f},{y - s:.1f} {x - s:.1f},{y + s:.1f} {x + s:.1f},{y + s:.1f}"',
        ),
        "diamond": (
            "polygon",
            f'points="{x:.1f},{y - s:.1f} {x + s:.1f},{y:.1f} '
            f'{x:.1f},{y + s:.1f} {x - s:.1f},{y:.1f}"',
        ),
    }
    tag, attrs = shapes.get(shape, ("circle", f'cx="{x:.1f}" cy="{y:.1f}" r="{s:.1f}"'))
    return f'<{tag} {attrs} fill="{color}"><title>{escape(tip)}</title></{tag}>'


def legend(styles: dict[str, tuple[str, str]], x: float, y: float) -> list[str]:
    parts = []
    for i, (label, (color, shape)) in enumerate(styles.items()):
        yy = y + 14 * i
        parts.append(marker(shape, x + 5, yy - 4, color, label))
        parts.append(f'<text x="{x + 14}" y="{yy}" font-size="11">{escape(label[:40])}</text>')
    return parts


# ----------------------------------------------------------------------------- accuracy vs N


PANEL_W, PANEL_H, PAD_L, PAD_T = 250, 170, 38, 34


def _panel(
    x0: float,
    y0: float,
    title: str,
    ns: list[int],
    points: dict[str, dict[int, dict]],
    chance: dict[int, float],
    styles: dict[str, tuple[str, str]],
) -> list[str]:
    """One accuracy-vs-N panel at (x0, y0): y 0-100 %, a band per N, models dodged in it."""
    w, h = PANEL_W - PAD_L - 10, PANEL_H - 40
    band = w / len(ns)

    def y(v: float) -> float:
        return y0 + 18 + (1 - v) * h

    parts = [f'<text x="{x0 + PAD_L}" y="{y0 + 10}" font-size="11">{escape(title)}</text>']
    for v in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<line x1="{x0 + PAD_L}" y1="{y(v):.1f}" x2="{x0 + PAD_L + w}" y2="{y(v):.1f}" '
            f'stroke="#e3e3e3"/><text x="{x0 + PAD_L - 4}" y="{y(v) + 3:.1f}" font-size="9" '
            f'text-anchor="end">{v * 100:.0f}</text>'
        )
    series = [s for s in styles if s in points]
    step = min(12.0, band * 0.8 / max(len(series), 1))
    centre = {n: x0 + PAD_L + band * (i + 0.5) for i, n in enumerate(ns)}
    for n in ns:
        parts.append(
            f'<text x="{centre[n]:.1f}" y="{y(0) + 13:.1f}" font-size="10" '
            f'text-anchor="middle">N={n}</text>'
        )
        if n in chance:
            left, right = centre[n] - band * 0.45, centre[n] + band * 0.45
            parts.append(
                f'<line x1="{left:.1f}" y1="{y(chance[n]):.1f}" x2="{right:.1f}" '
                f'y2="{y(chance[n]):.1f}" {CHANCE_STYLE}><title>chance '
                f"{percent(chance[n], chance=True)} %</title></line>"
                f'<text x="{right:.1f}" y="{y(chance[n]) - 3:.1f}" font-size="9" fill="#555" '
                f'text-anchor="end">chance {percent(chance[n], chance=True)}</text>'
            )
    for i, name in enumerate(series):
        color, shape = styles[name]
        offset = (i - (len(series) - 1) / 2) * step
        pts = sorted((n, r) for n, r in points[name].items() if n in centre)
        xy = [(centre[n] + offset, r) for n, r in pts]
        if len(xy) > 1:
            line = " ".join(f"{x:.1f},{y(r['accuracy']):.1f}" for x, r in xy)
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{line}"/>'
            )
        for x, r in xy:
            if r.get("ci_low") is not None and r.get("ci_high") is not None:
                parts.append(
                    f'<line x1="{x:.1f}" y1="{y(r["ci_low"]):.1f}" x2="{x:.1f}" '
                    f'y2="{y(r["ci_high"]):.1f}" stroke="{color}" stroke-width="1"/>'
                )
            interval = f"[{percent(r.get('ci_low'))}, {percent(r.get('ci_high'))}]"
            tip = f"{name}: {percent(r['accuracy'])} % {interval}"
            parts.append(marker(shape, x, y(r["accuracy"]), color, tip))
    return parts


def svg_accuracy_vs_n(
    family: str, rows: list[dict[str, Any]], styles: dict[str, tuple[str, str]]
) -> str:
    """One family: a panel per set (rows) x condition (columns), a shared legend."""
    sets = [s for s in ("swap", "confusion") if any(r["set"] == s for r in rows)]
    conditions = sorted({r["condition"] for r in rows}, key=condition_rank)
    ns = sorted({r["n"] for r in rows})
    if not sets or not ns:
        return ""
    mine = {series_label(r) for r in rows}
    used = {k: v for k, v in styles.items() if k in mine}
    parts = []
    for i, set_name in enumerate(sets):
        for j, condition in enumerate(conditions):
            cell = [r for r in rows if r["set"] == set_name and r["condition"] == condition]
            points: dict[str, dict[int, dict]] = defaultdict(dict)
            chances: dict[int, list[float]] = defaultdict(list)
            for r in cell:
                points[series_label(r)][r["n"]] = r
                chances[r["n"]].append(r["chance"])
            chance = {n: sum(v) / len(v) for n, v in chances.items()}
            label = CONDITION_LABELS.get(condition, condition)
            title = f"{SET_LABELS.get(set_name, set_name)}, {label} (accuracy %)"
            parts += _panel(j * PANEL_W, PAD_T + i * PANEL_H, title, ns, points, chance, used)
    width = len(conditions) * PANEL_W + 230
    height = max(PAD_T + len(sets) * PANEL_H, PAD_T + 20 + 14 * len(used))
    parts += legend(used, len(conditions) * PANEL_W + 10, PAD_T + 12)
    return svg_document(width, height, f"{family}: accuracy vs N", parts)


# ----------------------------------------------------------------------------- gap, deltas


def svg_grouped_bars(
    title: str,
    groups: list[tuple[str, dict[str, tuple[float, float | None, float | None]]]],
    styles: dict[str, tuple[str, str]],
    unit: str = "pp",
) -> str:
    """Vertical bars in groups (label, series -> (value, low, high)), fractions shown in
    percentage points around a zero line, one colour per series (legend at the right)."""
    values = [v for _, bars in groups for triple in bars.values() for v in triple if v is not None]
    if not values:
        return ""
    lo = min(0.0, min(values))
    hi = max(0.0, max(values))
    lo, hi = (-0.1 if lo == hi == 0 else lo), (0.1 if hi == lo else hi)
    used = {k: v for k, v in styles.items() if any(k in bars for _, bars in groups)}
    bar_w = 9
    group_w = [max(len(bars), 1) * bar_w + 18 for _, bars in groups]
    left, top, h = 44, 28, 180
    width = left + sum(group_w) + 240

    def y(v: float) -> float:
        return top + (hi - v) / (hi - lo) * h

    right = left + sum(group_w)
    parts = [
        f'<line x1="{left}" y1="{y(0):.1f}" x2="{right}" y2="{y(0):.1f}" stroke="#555"/>',
        f'<text x="4" y="{top + h + 40}" font-size="9" fill="#555">{escape(unit)}</text>',
    ]
    for v in sorted({hi, lo, 0.0}):
        text = percent(v, signed=True) if v else "0"
        parts.append(
            f'<text x="{left - 4}" y="{y(v) + 3:.1f}" font-size="9" text-anchor="end">{text}</text>'
        )
    x = left + 9
    for (label, bars), gw in zip(groups, group_w):
        for name in (s for s in used if s in bars):
            value, low, high = bars[name]
            color = used[name][0]
            y0, y1 = sorted((y(0), y(value)))
            tip = f"{name}, {label}: {percent(value, signed=True)} {unit}"
            tall = max(y1 - y0, 0.5)
            parts.append(
                f'<rect x="{x:.1f}" y="{y0:.1f}" width="{bar_w - 2}" height="{tall:.1f}" '
                f'fill="{color}"><title>{escape(tip)}</title></rect>'
            )
            if low is not None and high is not None:
                mid = x + (bar_w - 2) / 2
                parts.append(
                    f'<line x1="{mid:.1f}" y1="{y(low):.1f}" x2="{mid:.1f}" y2="{y(high):.1f}" '
                    'stroke="#222" stroke-width="1"/>'
                )
            x += bar_w
        parts.append(
            f'<text x="{x - (gw - 18) / 2 - 4:.1f}" y="{top + h + 16}" font-size="9" '
            f'text-anchor="middle">{escape(label[:24])}</text>'
        )
        x += 18
    parts += legend(used, left + sum(group_w) + 16, top + 8)
    return svg_document(width, max(top + h + 48, top + 20 + 14 * len(used)), title, parts)


def gap_figures(rows: list[dict], styles: dict, layout: Layout | None) -> list[str]:
    """Swap minus Confusion accuracy per model, a figure per condition."""
    acc: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        acc[(r["condition"], r["family"], r["n"], series_label(r))][r["set"]] = r
    rank = layout.family_rank if layout else (lambda f: (0, f))
    out = []
    for condition in sorted({k[0] for k in acc}, key=condition_rank):
        cells = sorted(
            {(f, n) for c, f, n, _ in acc if c == condition}, key=lambda k: (rank(k[0]), k[1])
        )
        groups = []
        for family, n in cells:
            bars = {
                name: (v["swap"]["accuracy"] - v["confusion"]["accuracy"], None, None)
                for (c, f, nn, name), v in acc.items()
                if (c, f, nn) == (condition, family, n) and "swap" in v and "confusion" in v
            }
            if bars:
                groups.append((f"{family} N={n}", bars))
        label = CONDITION_LABELS.get(condition, condition)
        out.append(svg_grouped_bars(f"Swap minus Confusion accuracy, {label}", groups, styles))
    return out


def delta_figures(deltas: list[dict], styles: dict, layout: Layout | None) -> list[str]:
    """Contextual minus Minimal on the paired set, per set, grouped by family x N."""
    rank = layout.family_rank if layout else (lambda f: (0, f))
    out = []
    for set_name in ("swap", "confusion"):
        mine = [r for r in deltas if r["set"] == set_name]
        cells = sorted({(r["family"], r["n"]) for r in mine}, key=lambda k: (rank(k[0]), k[1]))
        groups = [
            (
                f"{family} N={n}",
                {
                    series_label(r): (r["delta"], r["ci_low"], r["ci_high"])
                    for r in mine
                    if (r["family"], r["n"]) == (family, n)
                },
            )
            for family, n in cells
        ]
        title = f"Contextual minus Minimal, {SET_LABELS[set_name]} (paired set, 95 % CI)"
        out.append(svg_grouped_bars(title, groups, styles))
    return out


# ----------------------------------------------------------------------------- all figures


def plots(tables: dict[str, pa.Table], layout: Layout | None = None) -> str:
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
    rank = layout.family_rank if layout else (lambda f: (0, f))
    out = [
        svg_accuracy_vs_n(family, [r for r in acc if r["family"] == family], styles)
        for family in sorted({r["family"] for r in acc}, key=rank)
    ]
    out += gap_figures(acc, styles, layout)
    out += delta_figures(deltas, styles, layout)
    if "survival_funnel" in tables:
        out.append(svg_funnel(tables["survival_funnel"].to_pylist(), layout))  # survival.py
    return "".join(f"<figure>{svg}</figure>" for svg in out if svg)
