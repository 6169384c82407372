"""Tables as booktabs LaTeX."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from autocomp.analysis.escape import escape


def to_latex(table: pa.Table, caption: str) -> str:
    """A booktabs LaTeX table."""
    cols = table.column_names

    def cell(v: Any) -> str:
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
