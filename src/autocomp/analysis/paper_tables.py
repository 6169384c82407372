"""The paper's tables in its layout, cut from the long tables (never recomputed):

- Tables 5 / 12 / 13: one table per condition; rows = models grouped by their backend's group
  (contrastive, generative, then any other backend's; a generative model's per-token accuracy
  in the row under its summed score), the chance row on top; columns = family x N,
  sub-columns Swap / Confusion; accuracy with its 95 % interval.
- Table 6: Contextual minus Minimal on the paired set, one table per N: per family the Minimal and
  Contextual accuracies and the deltas with their paired-bootstrap intervals.
- Table 7: hard-negative-trained models under their base model, each family at its largest N.
- Table 14: the N=1 sanity split (vary the attribute / the object), per condition.
- A.8: the blind multiple-choice test (score_type "choice") in the Table 5 layout.
- Table 3: the cumulative survival funnel per family x N x condition.

A table whose data the run lacks is left out, with a one-line note saying why (never zeros).
Only the paper protocol is laid out; the strict protocol stays in the long tables. Each table
carries the caveats of what it was computed on (analysis/scope.py: rejected samples kept,
fallback Contextual captions). A family whose Swap set is its Confusion set (an imported
one-negative benchmark: SugarCrepe) gets one column, "Swap = Conf.", and N=0 reads "no N".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from autocomp.analysis.scope import Scope
from autocomp.analysis.wide import Cell, Row, WideTable
from autocomp.scoring.backends import OTHER_GROUP, group_of, group_rank

SET_LABELS = {
    "swap": "Swap",
    "confusion": "Conf.",
    "vary_attribute": "Vary attribute",
    "vary_object": "Vary object",
}
CONDITION_LABELS = {"minimal": "Minimal", "contextual": "Contextual"}
SAME_SET = "Swap = Conf."  # the one column of a family whose Swap set is its Confusion set
ROW_SUFFIX = {"score": "", "per_token": " (per-token)", "choice": ""}
MAIN_SCORE_TYPES = ("score", "per_token")
PROTOCOL = "paper"
KeyOf = Callable[[dict], tuple]  # a long-table row -> the key of its leaf column


@dataclass(frozen=True)
class Layout:
    """What orders rows and columns: each model's group, the families in display order (attribute
    families first, as the paper), and model -> base model (Table 7)."""

    groups: dict[str, str]
    families: list[str]
    bases: dict[str, str]

    def group(self, model: str) -> str:
        return self.groups.get(model, OTHER_GROUP)

    def family_rank(self, family: str) -> tuple[int, str]:
        known = family in self.families
        return (self.families.index(family) if known else len(self.families), family)


def layout_of(models: dict[str, dict[str, Any]], kinds: dict[str, list[str]]) -> Layout:
    """The layout of a run: `models` as load_run gives them (name -> registry entry); a model's
    group is its backend's (autocomp.scoring.backends), "other" if this machine lacks it."""
    groups = {name: group_of(m.get("backend")) for name, m in models.items()}
    families = [*kinds.get("attribute", []), *kinds.get("relation", [])]
    bases = {name: m["base_model"] for name, m in models.items() if m.get("base_model")}
    return Layout(groups, families, bases)


def n_label(n: int) -> str:
    """The header of an N: "N=2"; N=0 (an imported benchmark without object counts) "no N"."""
    return "no N" if n == 0 else f"N={n}"


def _caveats(scope: Scope | None, *args: Any, **kwargs: Any) -> tuple[str, ...]:
    return tuple(scope.caveats(*args, **kwargs)) if scope is not None else ()


def condition_rank(condition: str) -> tuple[int, str]:
    known = list(CONDITION_LABELS)
    return (known.index(condition) if condition in known else len(known), condition)


def _condition_order(conditions: Iterable[str]) -> list[str]:
    return sorted(set(conditions), key=condition_rank)


def _row_keys(rows: list[dict], layout: Layout) -> list[tuple[str, str]]:
    """(model, score_type) of every row, grouped and ordered; per-token under its model."""
    keys = {(r["model"], r["score_type"]) for r in rows}
    order = {t: i for i, t in enumerate(("score", "per_token", "choice"))}
    return sorted(
        keys,
        key=lambda k: (group_rank(layout.group(k[0])), k[0], order.get(k[1], 9), k[1]),
    )


def _accuracy_cell(r: dict | None) -> Cell:
    return Cell() if r is None else Cell(r["accuracy"], r["ci_low"], r["ci_high"])


def _chance_row(rows: list[dict], keys: list[tuple], key_of: KeyOf) -> Row:
    """The mean chance of each column over the models that have it."""
    chances: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        chances[key_of(r)].append(r["chance"])
    cells = [
        Cell(sum(chances[k]) / len(chances[k]), chance=True) if chances.get(k) else Cell()
        for k in keys
    ]
    return Row("Random chance", tuple(cells), chance=True)


def _model_rows(rows: list[dict], keys: list[tuple], key_of: KeyOf, layout: Layout) -> list[Row]:
    by_key = {(r["model"], r["score_type"], *key_of(r)): r for r in rows}
    out = []
    for model, score_type in _row_keys(rows, layout):
        cells = tuple(_accuracy_cell(by_key.get((model, score_type, *k))) for k in keys)
        out.append(Row(model + ROW_SUFFIX.get(score_type, f" ({score_type})"), cells,
                       group=layout.group(model)))  # fmt: skip
    return out


def _paper_rows(accuracy: pa.Table, sets: Iterable[str], score_types: Iterable[str]) -> list[dict]:
    sets, score_types = set(sets), set(score_types)
    return [
        r
        for r in accuracy.to_pylist()
        if r["protocol"] == PROTOCOL and r["set"] in sets and r["score_type"] in score_types
    ]


# ----------------------------------------------------------------------------- Tables 5, 12-14


def by_condition(
    accuracy: pa.Table,
    layout: Layout,
    *,
    name: str,
    title: str,
    note: str,
    sets: tuple[str, ...] = ("swap", "confusion"),
    score_types: tuple[str, ...] = MAIN_SCORE_TYPES,
    scope: Scope | None = None,
) -> list[WideTable]:
    """One table per condition: columns family x N x set, a chance row, the models' rows."""
    rows = _paper_rows(accuracy, sets, score_types)
    single = scope.single_set if scope is not None else set()
    tables = []
    for condition in _condition_order({r["condition"] for r in rows}):
        mine = [r for r in rows if r["condition"] == condition]
        cells = {(r["family"], r["n"]) for r in mine}
        keys = [
            (family, n, s)
            for family, n in sorted(cells, key=lambda c: (layout.family_rank(c[0]), c[1]))
            for s in (sets[:1] if family in single else sets)
        ]
        columns = tuple(
            (family, n_label(n), SAME_SET if family in single else SET_LABELS.get(s, s))
            for family, n, s in keys
        )

        def key_of(r: dict) -> tuple:
            return (r["family"], r["n"], r["set"])

        label = CONDITION_LABELS.get(condition, condition)
        tables.append(
            WideTable(
                name=f"{name}_{condition}",
                title=f"{title}: {label}",
                note=note,
                columns=columns,
                rows=(_chance_row(mine, keys, key_of), *_model_rows(mine, keys, key_of, layout)),
                keys=tuple(keys),
                caveats=_caveats(scope, {(f, n, condition) for f, n in cells}),
            )
        )
    return tables


def sanity_table(
    accuracy: pa.Table, layout: Layout, scope: Scope | None = None
) -> WideTable | None:
    """Table 14: per family and condition, accuracy on varying the attribute / the object."""
    sets = ("vary_attribute", "vary_object")
    rows = _paper_rows(accuracy, sets, MAIN_SCORE_TYPES)
    if not rows:
        return None
    cells = {(r["family"], r["condition"]) for r in rows}
    keys = [
        (family, condition, s)
        for family in sorted({f for f, _ in cells}, key=layout.family_rank)
        for condition in _condition_order({c for f, c in cells if f == family})
        for s in sets
    ]
    columns = tuple(
        (f"{family} (N=1)", CONDITION_LABELS.get(c, c), SET_LABELS[s]) for family, c, s in keys
    )

    def key_of(r: dict) -> tuple:
        return (r["family"], r["condition"], r["set"])

    return WideTable(
        name="paper_table14",
        title="Table 14: the N=1 single-object sanity split",
        note="Accuracy (%) choosing the caption among ones that change only the attribute or "
        "only the object; 95 % interval in brackets.",
        columns=columns,
        rows=(_chance_row(rows, keys, key_of), *_model_rows(rows, keys, key_of, layout)),
        keys=tuple(keys),
        caveats=_caveats(
            scope, {(r["family"], r["n"], r["condition"]) for r in rows}, compare=True
        ),  # fmt: skip
    )


def hard_negative_table(
    accuracy: pa.Table, layout: Layout, scope: Scope | None = None
) -> WideTable | None:
    """Table 7: each base model with its hard-negative-trained models under it, every family at
    its largest N, Minimal and Contextual, Swap and Confusion."""
    rows = _paper_rows(accuracy, ("swap", "confusion"), ("score",))
    present = {r["model"] for r in rows}
    pairs = {m: b for m, b in layout.bases.items() if m in present and b in present}
    if not pairs:
        return None
    hardest: dict[str, int] = defaultdict(int)
    for r in rows:
        hardest[r["family"]] = max(hardest[r["family"]], r["n"])
    conditions = _condition_order({r["condition"] for r in rows})
    keys = [
        (family, hardest[family], c, s)
        for family in sorted(hardest, key=layout.family_rank)
        for c in conditions
        for s in ("swap", "confusion")
    ]
    columns = tuple(
        (f"{f} (N={n})", CONDITION_LABELS.get(c, c), SET_LABELS[s]) for f, n, c, s in keys
    )
    by_key = {(r["model"], r["family"], r["n"], r["condition"], r["set"]): r for r in rows}
    out = []
    for base in sorted(set(pairs.values())):
        for model in [base, *sorted(m for m, b in pairs.items() if b == base)]:
            cells = tuple(_accuracy_cell(by_key.get((model, *k))) for k in keys)
            out.append(Row(model, cells, group=f"base model {base}"))
    return WideTable(
        name="paper_table7",
        title="Table 7: hard-negative-trained models and their base",
        note="Each family at its largest N; accuracy (%) with its 95 % interval. The paired "
        "differences to the base, with intervals and McNemar p-values, are in "
        "hard_negative_deltas.csv.",
        columns=columns,
        rows=tuple(out),
        keys=tuple(keys),
        caveats=_caveats(scope, {k[:3] for k in keys}, compare=True),
    )


# ----------------------------------------------------------------------------- Table 6


DELTA_PARTS = (("Minimal", "accuracy_a"), ("Contextual", "accuracy_b"), ("Δ", "delta"))


def delta_tables(deltas: pa.Table, layout: Layout, scope: Scope | None = None) -> list[WideTable]:
    """Table 6, one table per N: per family Minimal, Contextual and Δ (pp), Swap and Confusion."""
    rows = [
        r
        for r in deltas.to_pylist()
        if r["protocol"] == PROTOCOL
        and r["set"] in ("swap", "confusion")
        and r["score_type"] in MAIN_SCORE_TYPES
    ]
    tables = []
    for n in sorted({r["n"] for r in rows}):
        mine = [r for r in rows if r["n"] == n]
        keys = [
            (family, part, s)
            for family in sorted({r["family"] for r in mine}, key=layout.family_rank)
            for part, _ in DELTA_PARTS
            for s in ("swap", "confusion")
        ]
        columns = tuple((f"{family} (N={n})", part, SET_LABELS[s]) for family, part, s in keys)
        by_key = {(r["model"], r["score_type"], r["family"], r["set"]): r for r in mine}
        fields = dict(DELTA_PARTS)
        out = []
        for model, score_type in _row_keys(mine, layout):
            cells = []
            for family, part, s in keys:
                r = by_key.get((model, score_type, family, s))
                if r is None:
                    cells.append(Cell())
                elif part == "Δ":
                    cells.append(Cell(r["delta"], r["ci_low"], r["ci_high"], signed=True))
                else:
                    cells.append(Cell(r[fields[part]]))
            label = model + ROW_SUFFIX.get(score_type, f" ({score_type})")
            out.append(Row(label, tuple(cells), group=layout.group(model)))
        tables.append(
            WideTable(
                name=f"paper_table6_n{n}",
                title=f"Table 6: Contextual minus Minimal on the paired set, N={n}",
                note="Accuracy (%) on the concepts whose Minimal and Contextual samples both "
                "passed validation; Δ = Contextual - Minimal in percentage points with its 95 % "
                "paired-bootstrap interval (negative: context hurts). McNemar p-values are in "
                "context_deltas.csv.",
                columns=columns,
                rows=tuple(out),
                keys=tuple(keys),
                caveats=_caveats(scope, lambda k, n=n: k[1] == n, paired=True, compare=True),
            )
        )
    return tables


# ----------------------------------------------------------------------------- Table 3


def survival_table(
    funnel: pa.Table, layout: Layout, caveats: tuple[str, ...] = ()
) -> WideTable | None:
    """Table 3: per family x N x condition, the samples, then per stage the share of the previous
    stage that survived it and the cumulative share surviving every stage up to it."""
    rows = funnel.to_pylist()
    if not rows:
        return None
    stages = sorted({(r["order"], r["stage"]) for r in rows if r["order"] >= -1})
    keys: list[tuple] = [("sampled", "count")] + [
        (stage, part) for _, stage in stages for part in ("rate", "share")
    ]
    columns = tuple(
        ("Sampled", "samples") if stage == "sampled" else (stage, "kept" if p == "rate" else "cum.")
        for stage, p in keys
    )
    cells_of: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        cells_of[(r["family"], r["n"], r["condition"])][r["stage"]] = r
    out = []
    for family, n, condition in sorted(
        cells_of, key=lambda c: (layout.family_rank(c[0]), c[1], condition_rank(c[2]))
    ):
        found = cells_of[(family, n, condition)]
        cells = []
        for stage, part in keys:
            r = found.get(stage)
            if r is None:
                cells.append(Cell())
            elif part == "count":
                cells.append(Cell(count=r["survivors"]))
            else:
                cells.append(Cell(r[part]))
        label = f"{n_label(n)} {CONDITION_LABELS.get(condition, condition)}"
        out.append(Row(label, tuple(cells), group=family))
    return WideTable(
        name="paper_table3",
        title="Table 3: validation survival (cumulative funnel)",
        note="kept = % of the samples that entered this stage and passed it; cum. = % of the "
        "sampled items surviving every stage up to this one (never rises, unless fallback "
        "captions entered: see above); – = the stage does not apply (the background check is "
        "Minimal only, the caption stage Contextual only) or no sample entered it.",
        columns=columns,
        rows=tuple(out),
        stub="N, condition",
        keys=tuple(keys),
        caveats=caveats,
    )


# ----------------------------------------------------------------------------- all of them

MAIN_NOTE = (
    "Accuracy (%) under the paper protocol with its 95 % bootstrap interval over concepts in "
    "brackets; chance = the mean of 1 / candidates over the actual candidate sets. A generative "
    "model's per-token accuracy (log-likelihood / caption tokens) is the row under its summed "
    "score."
)
MAIN_TITLE = "Main results (Tables 5, 12, 13)"
BLIND_TITLE = "Blind multiple choice (A.8)"
BLIND_NOTE = (
    "The A.8 blind test: a language model picks the caption from the shuffled candidates with no "
    "image (score_type choice); near chance = no linguistic shortcut. Accuracy (%), 95 % interval."
)


def paper_tables(
    long: dict[str, pa.Table],
    layout: Layout,
    scope: Scope | None = None,
    funnel_caveats: tuple[str, ...] = (),
) -> tuple[list[WideTable], list[str]]:
    """Every paper-layout table the run has data for, and a one-line note per table left out
    (`funnel_caveats`: survival.fallback_note of the funnel, for Table 3)."""
    accuracy, funnel = long["accuracy"], long.get("survival_funnel")
    paired = scope.paired_reason() if scope is not None else (
        "no concept has both its Minimal and its Contextual sample scored (the paired set is "
        "empty).")  # fmt: skip
    survival = None
    if funnel is not None:
        survival = survival_table(funnel, layout, funnel_caveats)
    candidates: list[tuple[Sequence[WideTable | None], str]] = [
        (
            by_condition(
                accuracy, layout, name="paper_table5", title=MAIN_TITLE, note=MAIN_NOTE, scope=scope
            ),  # fmt: skip
            "Tables 5, 12, 13 left out: the run has no Swap or Confusion accuracy scored with "
            "images (score_type score or per_token).",
        ),
        (delta_tables(long["context_deltas"], layout, scope), f"Table 6 left out: {paired}"),
        (
            [hard_negative_table(accuracy, layout, scope)],
            "Table 7 left out: no hard-negative-trained model (a registry entry with base_model) "
            "was scored together with its base model.",
        ),
        (
            [sanity_table(accuracy, layout, scope)],
            "Table 14 left out: the run has no N=1 sanity split (sets vary_attribute / "
            "vary_object).",
        ),
        (
            by_condition(
                accuracy,
                layout,
                name="paper_blind_choice",
                title=BLIND_TITLE,
                note=BLIND_NOTE,
                score_types=("choice",),
                scope=scope,
            ),
            "The A.8 blind multiple-choice table left out: no predictions with score_type choice.",
        ),
        (
            [survival],
            "Table 3 left out: the run's benchmark has no survival table (survival.parquet from "
            "the curate stage).",
        ),
    ]
    out: list[WideTable] = []
    notes: list[str] = []
    for tables, missing in candidates:
        found = [t for t in tables if t is not None]
        out.extend(found)
        if not found:
            notes.append(missing)
    return out, notes
