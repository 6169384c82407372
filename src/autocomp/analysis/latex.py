"""Tables as booktabs LaTeX: the long tables (to_latex) and the paper-layout ones (wide_to_latex).
Fractions in the long tables print as they are stored; the paper-layout tables print percent."""

from __future__ import annotations

import math

import pyarrow as pa

from autocomp.analysis.escape import escape
from autocomp.analysis.wide import Cell, WideTable


def to_latex(table: pa.Table, caption: str) -> str:
    """A booktabs LaTeX table."""
    cols = table.column_names

    def cell(v: object) -> str:
        if isinstance(v, float):
            return "--" if math.isnan(v) else f"{v:.3f}"
        return escape(v, "latex")

    lines = [
        r"\begin{table}[t]",
        r"\centering",
        f"\\caption{{{cell(caption)}}}",
        f"\\begin{{tabular}}{{{'l' * len(cols)}}}",
        r"\toprule",
        " & ".join(cell(c) for c in cols) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(cell(r[c]) for c in cols) + r" \\" for r in table.to_pylist()]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


# the two non-ASCII characters the paper-layout tables print themselves, as plain LaTeX
_SYMBOLS = {"Δ": r"$\Delta$", "–": "--"}


def _tex(text: str) -> str:
    """Escaped text with the tables' own symbols spelled in LaTeX."""
    out = escape(text, "latex")
    for symbol, tex in _SYMBOLS.items():
        out = out.replace(symbol, tex)
    return out


def _wide_cell(cell: Cell) -> str:
    text = _tex(cell.text)
    interval = cell.interval
    return f"{text} {{\\scriptsize {_tex(interval)}}}" if interval else text


def wide_to_latex(table: WideTable) -> str:
    """A paper-layout table as booktabs LaTeX: \\multicolumn headers with \\cmidrule under each
    group, a row per group heading (italic), every label escaped."""
    width = 1 + len(table.columns)
    caution = "".join(f" \\textbf{{Caution:}} {_tex(c)}" for c in table.caveats)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        f"\\caption{{{_tex(table.title)}. {_tex(table.note)}{caution}}}",
        f"\\label{{tab:{escape(table.name, 'id')}}}",
        f"\\begin{{tabular}}{{l{'r' * len(table.columns)}}}",
        r"\toprule",
    ]
    levels = table.header_levels()
    for depth, runs in enumerate(levels):
        last = depth == len(levels) - 1
        heads = [_tex(table.stub) if last else ""]
        rules, start = [], 2
        for label, span in runs:
            text = _tex(label)
            heads.append(text if span == 1 else f"\\multicolumn{{{span}}}{{c}}{{{text}}}")
            if not last:
                rules.append(f"\\cmidrule(lr){{{start}-{start + span - 1}}}")
            start += span
        lines.append(" & ".join(heads) + r" \\")
        if rules:
            lines.append(" ".join(rules))
    lines.append(r"\midrule")
    for group, rows in table.groups():
        if group:
            lines.append(f"\\multicolumn{{{width}}}{{l}}{{\\textit{{{_tex(group)}}}}} \\\\")
        for row in rows:
            cells = [_tex(row.label), *(_wide_cell(c) for c in row.cells)]
            lines.append(" & ".join(cells) + r" \\")
        if not group:
            lines.append(r"\midrule")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)
