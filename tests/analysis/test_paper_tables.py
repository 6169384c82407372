"""The paper-layout tables: every cell equals the long table it is cut from (a property over
generated runs), percent as the paper prints it, headers that span right, LaTeX of the right
shape with hostile names escaped, score types kept apart, and tables left out with a note."""

from __future__ import annotations

import csv
import io
import re
from itertools import product

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocomp.analysis import statistics as analysis
from autocomp.analysis.html import wide_html
from autocomp.analysis.latex import wide_to_latex
from autocomp.analysis.paper_tables import (
    by_condition,
    delta_tables,
    hard_negative_table,
    layout_of,
    paper_tables,
    sanity_table,
)
from autocomp.analysis.wide import Cell, Row, WideTable, percent, to_csv
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA

# predictions as score runs wrote them before score types
BEFORE_SCORE_TYPES = pa.schema(
    [f for f in PREDICTIONS_SCHEMA if f.name not in ("score_type", "options")]
)

KINDS = {"attribute": ["color", "shape_color"], "relation": ["position", "relative_size"]}
CANDIDATES = {("swap", 2): 2, ("swap", 3): 6, ("confusion", 2): 16, ("confusion", 3): 729}
HTML_HOSTILE = ["a&b<i>x</i>", 'q"wen']
LATEX_HOSTILE = ["m_{1}^2 %$#~\\", "a&b<i>x</i>"]
HOSTILE = ["clip-b16", *HTML_HOSTILE, *LATEX_HOSTILE[:1]]


def predictions(models: dict[str, dict], cells: list[tuple], concepts: int, seed: int,
                score_type: bool = True) -> pa.Table:  # fmt: skip
    """Predictions of `models` (name -> entry; generative models also get per-token rows) on
    every (family, n, condition) cell, `concepts` concepts each, correctness from `seed`."""
    import random

    rng = random.Random(seed)
    rows = []
    for model, entry in models.items():
        types = ["score", "per_token"] if entry["backend"] == "transformers_vlm" else ["score"]
        for (family, n, condition), set_name, kind, i in product(
            cells, ("swap", "confusion"), types, range(concepts)
        ):
            ok = rng.random() < 0.6
            row = {"model": model, "sample_id": f"{family}-{n}-{i}/{condition}",
                   "family": family, "n": n, "condition": condition, "set": set_name,
                   "protocol": "paper", "candidates": CANDIDATES[(set_name, n)], "correct": ok,
                   "tie": False, "predicted": 0 if ok else 1, "positive_score": 0.0,
                   "best_negative_score": 0.0, "failed": False, "reason": ""}  # fmt: skip
            if score_type:
                row["score_type"] = kind
            rows.append(row)
    schema = PREDICTIONS_SCHEMA if score_type else BEFORE_SCORE_TYPES
    return pa.Table.from_pylist(rows, schema)


@st.composite
def runs(draw):
    names = draw(st.lists(st.sampled_from(HOSTILE + ["siglip", "qwen-7b"]), min_size=1,
                          max_size=5, unique=True))  # fmt: skip
    models = {
        m: {"backend": draw(st.sampled_from(["open_clip", "transformers_vlm"]))} for m in names
    }
    families = draw(st.lists(st.sampled_from(sum(KINDS.values(), [])), min_size=1, max_size=4,
                             unique=True))  # fmt: skip
    cells = []
    for family in families:
        ns = draw(st.lists(st.sampled_from([2, 3]), min_size=1, max_size=2, unique=True))
        conditions = draw(st.lists(st.sampled_from(["minimal", "contextual"]), min_size=1,
                                   max_size=2, unique=True))  # fmt: skip
        cells += [(family, n, c) for n in ns for c in conditions]
    concepts = draw(st.integers(1, 6))
    return models, cells, concepts, draw(st.integers(0, 10_000))


def _keyed(table: WideTable) -> dict[tuple, Cell]:
    """(row label, column key) -> cell, for the model rows."""
    return {
        (row.label, key): cell
        for row in table.rows
        if not row.chance
        for key, cell in zip(table.keys, row.cells)
    }


def _label(r: dict) -> str:
    return r["model"] + (" (per-token)" if r["score_type"] == "per_token" else "")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_every_wide_cell_equals_its_long_row(run):
    models, cells, concepts, seed = run
    pred = predictions(models, cells, concepts, seed)
    long = analysis.accuracy(pred)
    layout = layout_of(models, KINDS)
    tables = by_condition(long, layout, name="t5", title="T5", note="")
    assert {t.name for t in tables} == {f"t5_{c}" for _, _, c in cells}
    seen = 0
    for table in tables:
        condition = table.name[3:]
        mine = [r for r in long.to_pylist() if r["condition"] == condition]
        wide = _keyed(table)
        for r in mine:
            cell = wide[(_label(r), (r["family"], r["n"], r["set"]))]
            assert (cell.value, cell.low, cell.high) == (r["accuracy"], r["ci_low"], r["ci_high"])
            seen += 1
        # every model row x column holds a long row or is empty; nothing else is invented
        filled = [c for c in wide.values() if c.value is not None]
        assert len(filled) == len(mine)
        # rows: the chance row, then each model's rows in groups (contrastive before generative)
        assert table.rows[0].chance and table.rows[0].label == "Random chance"
        groups = [r.group for r in table.rows[1:]]
        assert groups == sorted(groups, key=["contrastive", "generative"].index)
        assert len(table.rows) == 1 + len({(r["model"], r["score_type"]) for r in mine})
        assert len(table.columns) == 2 * len({(r["family"], r["n"]) for r in mine})
        # the chance row is the mean chance of the long rows of each column
        for key, cell in zip(table.keys, table.rows[0].cells):
            chances = [r["chance"] for r in mine if (r["family"], r["n"], r["set"]) == key]
            assert cell.value == pytest.approx(sum(chances) / len(chances))
        _check_csv(table)
        _check_latex(table)
        _check_html(table)
    assert seen == long.num_rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_table6_cells_equal_the_paired_deltas(run):
    models, cells, concepts, seed = run
    pred = predictions(models, cells, concepts, seed)
    long = analysis.context_deltas(pred, None, seed)
    tables = delta_tables(long, layout_of(models, KINDS))
    rows = long.to_pylist()
    assert {t.name for t in tables} == {f"paper_table6_n{n}" for n in {r["n"] for r in rows}}
    for table in tables:
        n = int(table.name.rsplit("n", 1)[1])
        wide = _keyed(table)
        for r in (r for r in rows if r["n"] == n):
            label, family, s = _label(r), r["family"], r["set"]
            assert wide[(label, (family, "Minimal", s))].value == r["accuracy_a"]
            assert wide[(label, (family, "Contextual", s))].value == r["accuracy_b"]
            delta = wide[(label, (family, "Δ", s))]
            assert (delta.value, delta.low, delta.high) == (r["delta"], r["ci_low"], r["ci_high"])
            assert delta.text.startswith(("+", "-"))
        _check_latex(table)


# ----------------------------------------------------------------------------- shape checks


def _check_csv(table: WideTable) -> None:
    lines = list(csv.reader(io.StringIO(to_csv(table))))
    assert len(lines) == 1 + len(table.rows)
    assert lines[0][:2] == ["group", table.stub]
    assert len(lines[0]) == 2 + 3 * len(table.columns)
    for line, row in zip(lines[1:], table.rows):
        assert line[1] == row.label
        assert line[2::3] == [c.text for c in row.cells]
        for text in line[2::3]:
            assert text == "–" or re.fullmatch(r"[+-]?\d+\.\d{1,2}", text), text


def _balanced(tex: str) -> bool:
    depth = 0
    for ch in re.sub(r"\\[{}]", "", tex):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _check_latex(table: WideTable) -> None:
    tex = wide_to_latex(table)
    assert _balanced(tex)
    assert tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}") == 1
    spec = re.search(r"\\begin\{tabular\}\{([lr]+)\}", tex).group(1)
    assert len(spec) == 1 + len(table.columns)
    body = tex.split(r"\midrule", 1)[1].split(r"\bottomrule")[0]
    for line in body.splitlines():
        if line.startswith(r"\multicolumn") or line in (r"\midrule", ""):
            continue
        # every data line has one cell per column: separators outside escaped \&
        assert len(re.findall(r"(?<!\\)&", line)) == len(table.columns), line
    for level in re.findall(r"^(.*) \\\\$", tex.split(r"\midrule")[0], re.M):
        spans = [int(s) for s in re.findall(r"\\multicolumn\{(\d+)\}", level)]
        plain = len(re.findall(r"(?<!\\)&", level)) + 1 - len(spans)
        assert sum(spans) + plain == 1 + len(table.columns)
    for name in LATEX_HOSTILE:
        assert name not in tex  # only ever in escaped form
    assert "\\input" not in tex.replace(r"\textbackslash{}", "")


def _check_html(table: WideTable) -> None:
    page = wide_html(table)
    for name in HTML_HOSTILE:
        assert name not in page
    for level, runs in enumerate(table.header_levels()):
        assert sum(span for _, span in runs) == len(table.columns), level
    assert page.count("<tr class=model>") == sum(not r.chance for r in table.rows)


# ----------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("value", "kwargs", "text"),
    [
        (0.573, {}, "57.3"),
        (0.0625, {}, "6.3"),  # halves round up, as the paper prints 6.3
        (0.0625, {"chance": True}, "6.3"),
        (1 / 729, {"chance": True}, "0.14"),
        (1 / 108, {"chance": True}, "0.93"),
        (1 / 729, {}, "0.1"),
        (-0.024, {"signed": True}, "-2.4"),
        (0.174, {"signed": True}, "+17.4"),
        (-0.0001, {"signed": True}, "+0.0"),
        (1.0, {}, "100.0"),
        (None, {}, "–"),
        (float("nan"), {}, "–"),
    ],
)
def test_percent_as_the_paper_prints_it(value, kwargs, text):
    assert percent(value, **kwargs) == text


def test_headers_span_their_columns_and_cells_show_intervals():
    table = WideTable(
        "t", "T", "", (("color", "N=2", "Swap"), ("color", "N=2", "Conf."),
                       ("color", "N=3", "Swap"), ("position", "N=2", "Swap")),  # fmt: skip
        (Row("Random chance", (Cell(0.5, chance=True),) * 4, chance=True),
         Row("m", (Cell(0.5, 0.4, 0.6), Cell(), Cell(1.0), Cell(0.0)), group="contrastive")),
    )  # fmt: skip
    assert table.header_levels() == [
        [("color", 3), ("position", 1)],
        [("N=2", 2), ("N=3", 1), ("N=2", 1)],
        [("Swap", 1), ("Conf.", 1), ("Swap", 1), ("Swap", 1)],
    ]
    page = wide_html(table)
    assert '<th colspan="3">color</th>' in page and '<th class=stub rowspan="3">' in page
    assert "<span class=v>50.0</span> <span class=ci>[40.0, 60.0]</span>" in page
    assert "<td><span class=v>–</span></td>" in page
    tex = wide_to_latex(table)
    assert r"\multicolumn{3}{c}{color}" in tex and r"\cmidrule(lr){2-4}" in tex
    assert r"50.0 {\scriptsize [40.0, 60.0]}" in tex and "& -- &" in tex


# ----------------------------------------------------------------------------- score types


def test_score_types_are_kept_apart_and_absent_means_score():
    """A fixture run: a contrastive model, a generative one with summed and per-token scores,
    and the same generative model's A.8 blind multiple choice."""
    models = {"clip": {"backend": "open_clip"}, "qwen": {"backend": "transformers_vlm"}}
    cells = [("color", 2, "minimal"), ("color", 2, "contextual")]
    rows = predictions(models, cells, 4, seed=3).to_pylist()
    for r in rows:  # per-token always right, summed score always wrong: no mixing possible
        if r["model"] == "qwen":
            r["correct"] = r["score_type"] == "per_token"
    blind = [{**r, "score_type": "choice", "candidates": 5, "correct": i % 2 == 0}
             for i, r in enumerate(rows) if r["score_type"] == "score" and r["model"] == "qwen"]  # fmt: skip
    pred = pa.Table.from_pylist(rows + blind, PREDICTIONS_SCHEMA)
    long = {"accuracy": analysis.accuracy(pred), "context_deltas": analysis.context_deltas(pred)}
    assert set(long["accuracy"].column("score_type").to_pylist()) == {
        "score",
        "per_token",
        "choice",
    }
    wide, omitted = paper_tables(long, layout_of(models, KINDS))
    by_name = {t.name: t for t in wide}
    main = by_name["paper_table5_minimal"]
    assert [r.label for r in main.rows] == ["Random chance", "clip", "qwen", "qwen (per-token)"]
    values = {r.label: {c.value for c in r.cells} for r in main.rows}
    assert values["qwen"] == {0.0} and values["qwen (per-token)"] == {1.0}
    choice = by_name["paper_blind_choice_minimal"]
    assert [r.label for r in choice.rows] == ["Random chance", "qwen"]
    assert {c.value for c in choice.rows[0].cells} == {0.2}  # chance of the blind sets
    assert {c.value for c in choice.rows[1].cells} == {0.5}
    assert [r.label for r in by_name["paper_table6_n2"].rows] == [
        "clip",
        "qwen",
        "qwen (per-token)",
    ]
    assert any("Table 7" in note for note in omitted)  # no base_model: left out, not zeros
    assert "paper_table7" not in by_name

    # the summed-score predictions without the column: read as "score", the same numbers
    scored = pred.filter(pa.compute.equal(pred["score_type"], "score"))
    plain = analysis.accuracy(scored.drop(["score_type"]))
    assert set(plain.column("score_type").to_pylist()) == {"score"}
    assert plain.equals(analysis.accuracy(scored))
    nulls = scored.set_column(scored.schema.get_field_index("score_type"), "score_type",
                              pa.nulls(scored.num_rows, pa.string()))  # fmt: skip
    assert analysis.accuracy(nulls).equals(plain)


def test_table7_and_table14_when_the_run_has_their_data():
    models = {"clip-b32": {"backend": "open_clip"},
              "negclip": {"backend": "open_clip", "base_model": "clip-b32"}}  # fmt: skip
    cells = [("color", 2, "minimal"), ("color", 3, "minimal"), ("color", 3, "contextual")]
    pred = predictions(models, cells, 5, seed=1)
    acc = analysis.accuracy(pred)
    layout = layout_of(models, KINDS)
    t7 = hard_negative_table(acc, layout)
    assert [r.label for r in t7.rows] == ["clip-b32", "negclip"]
    assert {k[1] for k in t7.keys} == {3}  # the family's largest N only
    wide = _keyed(t7)
    for r in acc.to_pylist():
        if r["n"] == 3:
            cell = wide[(r["model"], ("color", 3, r["condition"], r["set"]))]
            assert cell.value == r["accuracy"]
    assert sanity_table(acc, layout) is None
    sanity = [{**r, "n": 1, "set": s, "candidates": 20}
              for r in pred.to_pylist() for s in ("vary_attribute", "vary_object")
              if r["set"] == "swap" and r["n"] == 2]  # fmt: skip
    acc14 = analysis.accuracy(pa.Table.from_pylist(sanity, pred.schema))
    t14 = sanity_table(acc14, layout)
    assert t14.columns[0] == ("color (N=1)", "Minimal", "Vary attribute")
    assert t14.rows[0].cells[0].text == "5.0"  # chance 1/20
    wide = _keyed(t14)
    for r in acc14.to_pylist():
        assert wide[(r["model"], ("color", r["condition"], r["set"]))].value == r["accuracy"]
