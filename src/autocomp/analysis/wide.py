"""Wide tables in the paper's layout: the data model shared by the HTML, CSV and LaTeX writers.

A wide table has stub columns (the row labels), leaf columns each named by a header path (top
header level first: ("color", "N=2", "Swap")), and rows in groups (contrastive / generative
models, or one group per family); an optional first row without a group holds the chance
baselines. A cell keeps the fraction it shows (and its interval), so the paper-layout tables can
be checked against the long tables they are cut from; only the writers turn it into percent.

Percent as the paper prints it: one decimal, halves rounded up (6.25 -> 6.3); a chance value
under 1 % with two (0.14, 0.93).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from itertools import groupby

MISSING = "–"


FEW_ITEMS = 30  # a value resting on fewer items shows their count beside its interval


@dataclass(frozen=True)
class Cell:
    """One value: a fraction shown in percent (with its interval), or a count."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    signed: bool = False  # a difference: printed with its sign (percentage points)
    chance: bool = False  # a chance baseline: two decimals under 1 %
    count: int | None = None  # a plain count instead of a fraction
    of: int | None = None  # with count: out of how many ("49/50")
    decimals: int | None = None  # a plain number (Cohen's kappa 0.92), not a percent
    items: int | None = None  # the items (or concepts) the value rests on: shown when few

    @property
    def text(self) -> str:
        if self.count is not None:
            return f"{self.count:,}" if self.of is None else f"{self.count:,}/{self.of:,}"
        if self.decimals is not None:
            return MISSING if _missing(self.value) else f"{self.value:.{self.decimals}f}"
        return percent(self.value, self.signed, self.chance)

    @property
    def interval(self) -> str:
        """ "[low, high]" in percent, or "" without an interval."""
        if _missing(self.low) or _missing(self.high):
            return ""
        few = self.items is not None and self.items < FEW_ITEMS
        count = f" {self.items:,} item{'s' * (self.items != 1)}" if few else ""
        return f"[{percent(self.low, self.signed)}, {percent(self.high, self.signed)}]{count}"


@dataclass(frozen=True)
class Row:
    label: str
    cells: tuple[Cell, ...]
    group: str = ""  # "" for the chance row at the top
    chance: bool = False


@dataclass(frozen=True)
class WideTable:
    name: str  # file stem: tables/<name>.{csv,tex}
    title: str
    note: str
    columns: tuple[tuple[str, ...], ...]  # header path of every leaf column
    rows: tuple[Row, ...]
    stub: str = "Model"  # the heading of the row-label column
    keys: tuple[tuple, ...] = field(default=(), compare=False)  # per leaf column: what it holds
    caveats: tuple[str, ...] = ()  # what it was computed on, when not the accepted benchmark

    @property
    def depth(self) -> int:
        return max((len(c) for c in self.columns), default=1)

    def header_levels(self) -> list[list[tuple[str, int]]]:
        """Per header level, the (label, span) runs of consecutive leaf columns that share their
        header path down to that level."""
        levels = []
        for level in range(self.depth):
            runs = groupby(range(len(self.columns)), key=lambda i: self.columns[i][: level + 1])
            levels.append([(prefix[-1], len(list(members))) for prefix, members in runs])
        return levels

    def groups(self) -> list[tuple[str, list[Row]]]:
        """The rows in their groups, in order (the chance row first, in group "")."""
        return [(g, list(rows)) for g, rows in groupby(self.rows, key=lambda r: r.group)]


def _missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def percent(v: float | None, signed: bool = False, chance: bool = False) -> str:
    """A fraction as the paper prints it: 0.573 -> "57.3"; chance 0.0014 -> "0.14"; a signed
    difference -0.024 -> "-2.4"; None or NaN -> "–"."""
    if v is None or _missing(v):
        return MISSING
    x = Decimal(repr(float(v) * 100))  # the shortest decimal of the float: 6.25, not 6.2499...
    digits = 2 if chance and abs(x) < 1 else 1
    rounded = x.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    if rounded == 0:
        rounded = abs(rounded)  # no "-0.0"
    return f"{rounded:+}" if signed else f"{rounded}"


def column_label(path: tuple[str, ...]) -> str:
    return " ".join(path)


def to_csv(table: WideTable) -> str:
    """One header line (group, stub, then per leaf column its value, ci_low and ci_high) and one
    line per row, values in percent as displayed."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["group", table.stub]
    for path in table.columns:
        label = column_label(path)
        header += [label, f"{label} ci_low", f"{label} ci_high"]
    writer.writerow(header)
    for row in table.rows:
        line = [row.group, row.label]
        for cell in row.cells:
            line += [
                cell.text,
                "" if _missing(cell.low) else percent(cell.low, cell.signed),
                "" if _missing(cell.high) else percent(cell.high, cell.signed),
            ]
        writer.writerow(line)
    return out.getvalue()
