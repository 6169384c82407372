"""The human study's and the second judge's tables in the paper's layout, cut from the long
tables (never recomputed):

- Table 11: left, the concordance between the annotators' validity answers and the automated
  verdicts; right, the annotators' Swap / Confusion accuracy; rows condition x N ("Min, N=2"),
  columns the families (long table `human`).
- Table 20: per family, N and condition, each annotator's correct answers out of the items they
  answered, Swap then Confusion (long table `human_per_annotator`; the paper's "/50").
- Table 21: per second judge, agreement with this run's verdicts per family x N over both
  conditions and overall: agreement, Cohen's kappa, disagreement and its two directions (long
  table `judge_agreement_<name>`, its condition "all" rows).

An undefined kappa shows "–" and the table says why, cell by cell. An incomplete study (`audit
collect --partial`, human/audit.json) is stated on every human table: which annotator answered
how many of their items.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from autocomp.analysis.paper_tables import (
    CONDITION_LABELS,
    Layout,
    condition_rank,
    n_label,
)
from autocomp.analysis.wide import Cell, Row, WideTable

CONDITION_SHORT = {"minimal": "Min", "contextual": "Ctx"}


def natural(name: str) -> tuple:
    """V2 before V10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def progress_caveats(progress: dict[str, Any] | None) -> list[str]:
    """One line naming every annotator with open items (audit collect's record), or none."""
    if not progress:
        return []
    open_ = {
        name: p for name, p in progress.items() if isinstance(p, dict) and p.get("open", 0) > 0
    }
    if not open_:
        return []
    said = ", ".join(
        f"{name} answered {p.get('answered', 0):,} of {p.get('answered', 0) + p['open']:,}"
        for name, p in sorted(open_.items(), key=lambda kv: natural(kv[0]))
    )
    return [
        f"Incomplete study (audit collect --partial): {said} items; counts are out of the items "
        "answered, and Fleiss' kappa uses only the items every annotator answered."
    ]


def _families(rows: Iterable[dict], layout: Layout) -> list[str]:
    return sorted({r["family"] for r in rows}, key=layout.family_rank)


def table11(human: pa.Table, layout: Layout, caveats: tuple[str, ...] = ()) -> list[WideTable]:
    """Table 11, left (concordance) and right (human Swap / Confusion accuracy)."""
    rows = human.to_pylist()
    if not rows:
        return []
    families = _families(rows, layout)
    cells = {(r["family"], r["condition"], r["n"]): r for r in rows}
    keys = sorted(
        {(r["condition"], r["n"]) for r in rows}, key=lambda k: (condition_rank(k[0]), k[1])
    )

    def label(condition: str, n: int) -> str:
        return f"{CONDITION_SHORT.get(condition, condition)}, {n_label(n)}"

    def value(family: str, key: tuple, column: str) -> Cell:
        r = cells.get((family, *key))
        return Cell() if r is None else Cell(r[column])

    left = WideTable(
        name="paper_table11_concordance",
        title="Table 11 (left): concordance between the automated pipeline and human judges",
        note="% of the annotators' validity answers (the image shows its caption: yes / no) that "
        "agree with the validator's decision on the sample; – = no validity answer in the cell.",
        columns=tuple((f,) for f in families),
        rows=tuple(
            Row(label(*k), tuple(value(f, k, "concordance") for f in families)) for k in keys
        ),
        stub="Condition, N",
        keys=tuple((f,) for f in families),
        caveats=caveats,
    )
    right_keys = [(f, s) for f in families for s in ("swap_accuracy", "confusion_accuracy")]
    right = WideTable(
        name="paper_table11_accuracy",
        title="Table 11 (right): human accuracy on the benchmark, Swap / Confusion",
        note="% of the annotators' Swap and Confusion answers that chose the positive caption.",
        columns=tuple((f, "Swap" if s == "swap_accuracy" else "Conf.") for f, s in right_keys),
        rows=tuple(Row(label(*k), tuple(value(f, k, s) for f, s in right_keys)) for k in keys),
        stub="Condition, N",
        keys=tuple(right_keys),
        caveats=caveats,
    )
    return [left, right]


def table20(
    per_annotator: pa.Table, layout: Layout, caveats: tuple[str, ...] = ()
) -> WideTable | None:
    """Table 20: each annotator's correct answers out of those they answered."""
    rows = per_annotator.to_pylist()
    if not rows:
        return None
    annotators = sorted({r["annotator"] for r in rows}, key=natural)
    keys = [(task, a) for task in ("swap", "confusion") for a in annotators]
    by_cell = {(r["family"], r["n"], r["condition"], r["annotator"]): r for r in rows}
    cells = sorted(
        {(r["family"], r["n"], r["condition"]) for r in rows},
        key=lambda c: (layout.family_rank(c[0]), c[1], condition_rank(c[2])),
    )
    out = []
    for family, n, condition in cells:
        values = []
        for task, a in keys:
            r = by_cell.get((family, n, condition, a))
            if r and r[f"{task}_items"]:
                values.append(Cell(count=r[f"{task}_correct"], of=r[f"{task}_items"]))
            else:
                values.append(Cell())
        label = f"{n_label(n)} {CONDITION_LABELS.get(condition, condition)}"
        out.append(Row(label, tuple(values), group=family))
    return WideTable(
        name="paper_table20",
        title="Table 20: per-annotator raw scores (correct / answered)",
        note="Each annotator's correct answers out of the items of the cell they answered (the "
        "paper's study: 50 per cell); – = the annotator answered no item of the cell.",
        columns=tuple(
            ("Swap accuracy" if task == "swap" else "Confusion accuracy", a) for task, a in keys
        ),
        rows=tuple(out),
        stub="N, condition",
        keys=tuple(keys),
        caveats=caveats,
    )


def table21(name: str, judge: pa.Table, layout: Layout) -> WideTable | None:
    """Table 21 for one second judge: per family x N (both conditions) and overall."""
    rows = [r for r in judge.to_pylist() if r["condition"] == "all"]
    if not rows:
        return None
    rows.sort(key=lambda r: (r["family"] == "all", layout.family_rank(r["family"]), r["n"] or 0))
    out, undefined = [], []
    for r in rows:
        overall = r["family"] == "all"
        cells = (
            Cell(r["agreement"]),
            Cell(r["kappa"], decimals=2),
            Cell(1 - r["agreement"]),
            Cell(r["a_pass_b_fail"]),
            Cell(r["a_fail_b_pass"]),
        )
        label = "all" if overall else n_label(r["n"])
        out.append(Row(label, cells, group="Overall" if overall else r["family"]))
        if r.get("kappa_undefined"):
            where = "overall" if overall else f"{r['family']} {n_label(r['n'])}"
            undefined.append(f"kappa – ({where}): {r['kappa_undefined']}.")
    columns = (("Agreement (%)",), ("kappa",), ("Disagree (%)",), ("a+ b- (%)",), ("a- b+ (%)",))
    return WideTable(
        name=f"paper_table21_{name}",
        title=f"Table 21: cross-validator agreement, this run's verdicts (a) vs judge {name} (b)",
        note="Agreement: share of samples both judges decided alike (pass / fail), over both "
        "conditions; kappa: Cohen's kappa; a+ b-: a passes and b fails; a- b+: a fails and b "
        "passes (% of the samples); Overall: every family and N.",
        columns=columns,
        rows=tuple(out),
        stub="Family, N",
        keys=tuple(c[:1] for c in columns),
        caveats=tuple(undefined),
    )


def audit_tables(
    tables: dict[str, pa.Table], layout: Layout, progress: dict[str, Any] | None = None
) -> list[WideTable]:
    """Tables 11, 20 and 21 (one per judge) for the run's human study and second judges."""
    caveats = tuple(progress_caveats(progress))
    out: list[WideTable] = []
    if "human" in tables:
        out += table11(tables["human"], layout, caveats)
    if "human_per_annotator" in tables:
        found = table20(tables["human_per_annotator"], layout, caveats)
        out += [found] if found else []
    for key in sorted(k for k in tables if k.startswith("judge_agreement_")):
        found = table21(key.removeprefix("judge_agreement_"), tables[key], layout)
        out += [found] if found else []
    return out
