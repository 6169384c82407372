"""matplotlib plumbing for the report's figures: one figure factory and style, one colour and
marker per model, deterministic SVG / PDF / PNG output, the inline SVG the page embeds, and the
text-overlap check the tests run on every figure.

- matplotlib is imported inside the functions that draw (the report extra installs it). Figures
  are `matplotlib.figure.Figure` objects on an Agg canvas: no pyplot, no global backend switch.
- Same data, same bytes: every output is written under one rc context (svg.hashsalt fixed, text
  drawn as paths with the bundled DejaVu Sans, no dates in the metadata).
- Text from data is never interpreted: math parsing is off, so "$x^2$" is drawn as typed; the SVG
  backend escapes what it writes (it keeps each label as an escaped comment), and the inline copy
  drops the metadata block and prefixes every id with the figure's name, so several figures share
  one page without clashing ids.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox
    from matplotlib.typing import RcKeyType

# Okabe & Ito (2008), ordered so that neighbours differ most; black last
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
MARKERS = ("o", "s", "^", "D")
CHANCE: dict[str, Any] = {"color": "#666666", "linestyle": (0, (5, 3)), "linewidth": 1.2}
FORMATS = ("svg", "pdf", "png")
PNG_DPI = 200
RC: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "figure.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "text.parse_math": False,  # a model named "$x$" is drawn as typed
    "text.usetex": False,
    "svg.fonttype": "path",  # the page shows exactly the glyphs the overlap check measured
    "svg.hashsalt": "autocomp",  # stable clip-path and marker ids
    "pdf.fonttype": 42,
    "figure.dpi": 100,
    "savefig.dpi": PNG_DPI,
}
METADATA = {
    "svg": {"Date": None, "Creator": "autocomp (matplotlib)"},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": "autocomp (matplotlib)"},
    "png": {"Software": "autocomp (matplotlib)"},
}


@dataclass
class Plot:
    """One figure of the report: its file stem, title, matplotlib figure and the caveats of what
    it was computed on (analysis/scope.py)."""

    name: str
    title: str
    figure: Figure
    caveats: list[str] = field(default_factory=list)


@contextmanager
def style() -> Iterator[None]:
    """The report's rc settings, for drawing and for saving."""
    import matplotlib

    with matplotlib.rc_context(RC):
        yield


def new_figure(width: float, height: float) -> Figure:
    """A figure of `width` x `height` inches on an Agg canvas, with constrained layout (call
    inside `style()`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def wrap(text: str, width: int = 28) -> str:
    """A label on lines of at most `width` characters, broken after spaces, '-', '/' and '_'
    where it can (a long model name in a legend, a long title); a longer run is cut."""
    if "\n" in text:
        return "\n".join(wrap(part, width) for part in text.split("\n"))
    lines: list[str] = []
    line = ""
    for token in re.findall(r"[^-/_ ]*[-/_ ]?", text):
        while len(token) > width:  # no break point: cut
            if line:
                lines.append(line)
                line = ""
            lines.append(token[:width])
            token = token[width:]
        if len(line) + len(token.rstrip(" ")) > width and line:
            lines.append(line)
            line = ""
        line += token
    lines.append(line)
    return "\n".join(part.rstrip(" ") for part in lines if part.strip(" ")) or text


def series_styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    """label -> (colour, marker), in the given order: eight colours, then the next marker."""
    return {
        label: (PALETTE[i % len(PALETTE)], MARKERS[(i // len(PALETTE)) % len(MARKERS)])
        for i, label in enumerate(labels)
    }


# ----------------------------------------------------------------------------- output


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """The figure in one of FORMATS, deterministic for the same figure."""
    buffer = io.BytesIO()
    with style():
        fig.savefig(buffer, format=fmt, metadata=METADATA[fmt])
    return buffer.getvalue()


def write_figure(fig: Figure, folder: Path, name: str) -> str:
    """Write folder/<name>.{svg,pdf,png}; return the SVG text. The layout is computed once and
    kept, so the three files (and the overlap check after them) share it."""
    folder.mkdir(parents=True, exist_ok=True)
    with style():
        fig.canvas.draw()
    fig.set_layout_engine("none")
    svg = ""
    for fmt in FORMATS:
        data = figure_bytes(fig, fmt)
        (folder / f"{name}.{fmt}").write_bytes(data)
        if fmt == "svg":
            svg = data.decode("utf-8")
    return svg


_ID = re.compile(r'\bid="([^"]+)"')


def inline_svg(svg: str, prefix: str, label: str) -> str:
    """A saved SVG as an element for the page: no XML prolog, DOCTYPE, metadata or comments
    (matplotlib keeps each label as an escaped comment; the glyphs are drawn), every id
    (and every reference to it) prefixed, scaled to the page width, labelled for readers.
    `label` is escaped here; the SVG itself came from matplotlib's writer, which escapes."""
    from autocomp.analysis.escape import escape

    body = svg[svg.index("<svg") :]
    body = re.sub(r"<metadata>.*?</metadata>\s*", "", body, flags=re.S)
    body = re.sub(r"\s*<!--.*?-->", "", body, flags=re.S)  # the labels' comments: text is drawn
    ids = set(_ID.findall(body))
    tag = re.sub(r"[^A-Za-z0-9_-]", "-", prefix)

    def rename(match: re.Match) -> str:
        ref = match.group(2)
        return f"{match.group(1)}{tag}-{ref}" if ref in ids else match.group(0)

    body = _ID.sub(lambda m: f'id="{tag}-{m.group(1)}"', body)
    body = re.sub(r"(#)([A-Za-z0-9_.:-]+)", rename, body)  # href="#x", url(#x)
    attrs = f'role="img" aria-label="{escape(label)}" class="figure"'
    return body.replace("<svg ", f"<svg {attrs} ", 1)


# ----------------------------------------------------------------------------- the overlap check


def _hidden_tick_labels(fig: Figure) -> set[int]:
    """Tick labels matplotlib keeps but does not draw (their tick lies outside the view)."""
    hidden: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            tol = 1e-9 * max(1.0, hi - lo)
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                loc = tick.get_loc()
                if loc is None or not lo - tol <= loc <= hi + tol:
                    hidden |= {id(tick.label1), id(tick.label2)}
    return hidden


def drawn_texts(fig: Figure) -> list[Any]:
    """Every text artist the figure draws (non-empty, visible), after drawing it."""
    from matplotlib.text import Text

    with style():
        fig.canvas.draw()
    hidden = _hidden_tick_labels(fig)
    return [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and id(t) not in hidden
    ]


def text_overlaps(fig: Figure, pad: float = 0.5) -> list[str]:
    """What is wrong with the figure's text, measured by matplotlib after drawing (empty when
    nothing): two texts that overlap, a text cut by the figure's edge, a text over another
    panel's plot area, and a text inside a panel over one of its bars."""
    texts = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg: new_figure
    boxes = [t.get_window_extent(renderer).padded(-pad) for t in texts]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    frame = fig.bbox.padded(1.0)
    problems = []
    for t, box in zip(texts, boxes):
        label = repr(t.get_text())
        inside = frame.x0 <= box.x0 and box.x1 <= frame.x1
        if not (inside and frame.y0 <= box.y0 and box.y1 <= frame.y1):
            problems.append(f"cut by the figure's edge: {label}")
        if any(ax is not t.axes and box.overlaps(ax.bbox.padded(-pad)) for ax in panels):
            problems.append(f"over another panel's plot: {label}")
        if t.axes is not None and t in t.axes.texts and _over_a_bar(t.axes, box, renderer, pad):
            problems.append(f"over a bar: {label}")
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if boxes[i].overlaps(boxes[j]):
                problems.append(f"overlap: {texts[i].get_text()!r} and {texts[j].get_text()!r}")
    return problems


def _over_a_bar(ax: Axes, box: Bbox, renderer: Any, pad: float) -> bool:
    from matplotlib.patches import Rectangle

    return any(
        isinstance(p, Rectangle)
        and p.get_visible()
        and box.overlaps(p.get_window_extent(renderer).padded(-pad))
        for p in ax.patches
    )
