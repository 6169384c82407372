"""The report's plots as inline SVG (no scripts, renders offline)."""

from __future__ import annotations

import math
from collections import defaultdict

import pyarrow as pa

from autocomp.analysis.escape import escape

PALETTE = ["#1b6ca8", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#2e4057", "#c97b84"]


def svg_bars(
    title: str,
    bars: list[tuple[str, float, float | None, float | None]],
    lo: float = 0.0,
    hi: float = 1.0,
) -> str:
    """Horizontal bars (label, value, ci low, ci high) with whiskers; values in [lo, hi]."""
    if not bars:
        return ""
    width, row, left = 640, 18, 230
    height = row * len(bars) + 40
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return left + (min(max(v, lo), hi) - lo) / span * (width - left - 20)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text x="4" y="14" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<line x1="{x(0 if lo < 0 else lo)}" y1="22" x2="{x(0 if lo < 0 else lo)}" '
        f'y2="{height - 10}" stroke="#999"/>',
    ]
    for i, (label, value, low, high) in enumerate(bars):
        y = 26 + i * row
        x0, x1 = sorted((x(0 if lo < 0 else lo), x(value)))
        parts.append(f'<text x="4" y="{y + 11}" font-size="11">{escape(label[:38])}</text>')
        parts.append(
            f'<rect x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 0.5):.1f}" '
            f'height="{row - 6}" fill="{PALETTE[i % len(PALETTE)]}"/>'
        )
        if low is not None and high is not None and not math.isnan(low):
            parts.append(
                f'<line x1="{x(low):.1f}" y1="{y + row / 2}" x2="{x(high):.1f}" '
                f'y2="{y + row / 2}" stroke="#222" stroke-width="1.5"/>'
            )
        parts.append(
            f'<text x="{width - 16}" y="{y + 11}" font-size="10" text-anchor="end">'
            f"{value:+.3f}</text>"
            if lo < 0
            else f'<text x="{width - 16}" y="{y + 11}" font-size="10" text-anchor="end">'
            f"{value:.3f}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def svg_lines(title: str, series: dict[str, list[tuple[int, float]]]) -> str:
    """Accuracy vs N, one line per series."""
    if not series:
        return ""
    width, height, left, bottom = 640, 260, 50, 40
    ns = sorted({n for pts in series.values() for n, _ in pts})
    if not ns:
        return ""
    n_lo, n_hi = ns[0], ns[-1]

    def x(n: int) -> float:
        return left + (0.5 if n_hi == n_lo else (n - n_lo) / (n_hi - n_lo)) * (width - left - 190)

    def y(v: float) -> float:
        return 20 + (1 - v) * (height - bottom - 20)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text x="4" y="14" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for v in (0, 0.5, 1):
        parts.append(
            f'<line x1="{left}" y1="{y(v)}" x2="{width - 190}" y2="{y(v)}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y(v) + 4}" font-size="10" text-anchor="end">{v:g}</text>'
        )
    for n in ns:
        parts.append(
            f'<text x="{x(n)}" y="{height - bottom + 16}" font-size="10" '
            f'text-anchor="middle">N={n}</text>'
        )
    for i, (name, pts) in enumerate(sorted(series.items())):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(pts)
        path = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        parts += [f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>' for n, v in pts]
        parts.append(
            f'<text x="{width - 180}" y="{30 + 14 * i}" font-size="11" fill="{color}">'
            f"{escape(name[:30])}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def plots(tables: dict[str, pa.Table]) -> str:
    acc = [r for r in tables["accuracy"].to_pylist() if r["protocol"] == "paper"]
    out = []
    by_family: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in acc:
        if r["set"] in ("swap", "confusion"):
            by_family[(r["family"], r["set"])][f"{r['model']} ({r['condition'][:3]})"].append(
                (r["n"], r["accuracy"])
            )
    for (family, set_name), series in sorted(by_family.items()):
        out.append(svg_lines(f"{family}: {set_name} accuracy vs N", series))
    gaps = defaultdict(dict)
    for r in acc:
        gaps[(r["model"], r["family"], r["n"], r["condition"])][r["set"]] = r["accuracy"]
    bars = [
        (f"{m} {f} N={n} {c[:3]}", v["swap"] - v["confusion"], None, None)
        for (m, f, n, c), v in sorted(gaps.items())
        if "swap" in v and "confusion" in v
    ]
    out.append(svg_bars("Swap minus Confusion accuracy", bars, -1, 1))
    deltas = [r for r in tables["context_deltas"].to_pylist() if r["protocol"] == "paper"]
    out.append(
        svg_bars(
            "Contextual minus Minimal (95 % CI)",
            [
                (
                    f"{r['model']} {r['family']} N={r['n']} {r['set']}",
                    r["delta"],
                    r["ci_low"],
                    r["ci_high"],
                )
                for r in deltas
            ],
            -1,
            1,
        )
    )
    if "survival" in tables:
        funnel = [
            (
                f"{r['family']} N={r['n']} {r['condition'][:3]} {r['check']}",
                r["cumulative"],
                None,
                None,
            )
            for r in tables["survival"].to_pylist()
        ]
        out.append(svg_bars("Survival funnel (cumulative share)", funnel))
    return "".join(f"<figure>{svg}</figure>" for svg in out if svg)
