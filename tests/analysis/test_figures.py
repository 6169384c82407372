"""The report's figures and the survival funnel: a model keeps its colour everywhere, the chance
line is drawn and labelled, one N gives points (no lines to overprint), the funnel never rises."""

from __future__ import annotations

import random
import re

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from autocomp.analysis import statistics as analysis
from autocomp.analysis.paper_tables import layout_of, survival_table
from autocomp.analysis.plots import PALETTE, PANEL_W, plots, series_styles, svg_accuracy_vs_n
from autocomp.analysis.survival import survival_funnel
from autocomp.generation.curate import survival
from tests.analysis.test_paper_tables import HTML_HOSTILE, KINDS, predictions

CHECKS = ("image", "objects", "background", "attributes")


def _accuracy_rows(models: dict, ns: list[int]) -> list[dict]:
    cells = [("color", n, c) for n in ns for c in ("minimal", "contextual")]
    return analysis.accuracy(predictions(models, cells, 5, seed=2)).to_pylist()


def test_one_n_draws_points_and_a_labelled_chance_line():
    models = {f"model-{i}": {"backend": "open_clip"} for i in range(3)}
    rows = _accuracy_rows(models, [2])
    styles = series_styles(rows, None)
    svg = svg_accuracy_vs_n("color", rows, styles)
    assert "<polyline" not in svg  # one N: nothing to join
    panels = 4  # Swap / Confusion x Minimal / Contextual
    assert svg.count("stroke-dasharray") == panels and svg.count(">chance 50.0<") == 2
    assert svg.count(">chance 6.3<") == 2  # Confusion N=2 attribute chance
    points = re.findall(r'cx="([\d.]+)" cy="[\d.]+" r="3.5" fill="[^"]+"><title>model-\d: ', svg)
    assert len(points) == panels * len(models)
    first_column = {x for x in points if float(x) < PANEL_W}
    assert len(first_column) == len(models)  # dodged: each model at its own x in the band
    for name in models:  # the legend names every model once
        assert svg.count(f"<title>{name}</title>") == 1


def test_several_n_join_each_model_with_a_line():
    models = {"a": {"backend": "open_clip"}, "b": {"backend": "transformers_vlm"}}
    rows = _accuracy_rows(models, [2, 3])
    svg = svg_accuracy_vs_n("color", rows, series_styles(rows, None))
    series = 3  # a, b, b (per-token)
    assert svg.count("<polyline") == 4 * series
    assert ">N=2<" in svg and ">N=3<" in svg and ">chance 16.7<" in svg


def test_a_model_keeps_one_colour_in_every_figure_and_colours_differ():
    models = {f"m{i}": {"backend": "open_clip"} for i in range(10)}
    rows = _accuracy_rows(models, [2])
    styles = series_styles(rows, None)
    assert len(set(styles.values())) == len(models)  # colour x marker unique beyond 8
    assert {c for c, _ in styles.values()} == set(PALETTE)
    cells = [("color", 2, c) for c in ("minimal", "contextual")]
    cells += [("position", 2, c) for c in ("minimal", "contextual")]
    pred = predictions(models, cells, 5, seed=4)
    tables = {"accuracy": analysis.accuracy(pred), "context_deltas": analysis.context_deltas(pred)}
    page = plots(tables, layout_of(models, KINDS))
    assert page.count("<svg") == 2 + 2 + 2  # accuracy vs N per family, gap per condition, deltas
    for name in models:
        legend = re.findall(rf'fill="(#[0-9A-Fa-f]+)"><title>{name}</title>', page)
        assert len(legend) == 6 and len(set(legend)) == 1, (name, legend)


@st.composite
def verdict_runs(draw):
    """Verdicts and captions of a small curation: Contextual samples exist for the concepts that
    kept a caption; checks after a failure are run or skipped at random."""
    rng = random.Random(draw(st.integers(0, 10_000)))
    verdicts, captions = [], []
    for family, n in draw(st.lists(st.sampled_from([("color", 2), ("color", 3), ("position", 2)]),
                                   min_size=1, max_size=3, unique=True)):  # fmt: skip
        for concept in range(draw(st.integers(1, 12))):
            kept = rng.random() < 0.7
            captions.append({"family": family, "n": n, "status": "accepted" if kept else "x"})
            for condition in ("minimal", "contextual") if kept else ("minimal",):
                alive = True
                for step, check in enumerate(CHECKS, 1):
                    if check == "background" and condition == "contextual":
                        outcome = "n/a"
                    elif not alive and rng.random() < 0.5:
                        continue  # a later check skipped after a failure
                    else:
                        outcome = "pass" if rng.random() < 0.75 else "fail"
                        alive = alive and outcome == "pass"
                    verdicts.append({"sample_id": f"{family}{n}-{concept}/{condition}",
                                     "family": family, "n": n, "condition": condition,
                                     "check": check, "step": step, "outcome": outcome})  # fmt: skip
    return verdicts, captions


@settings(max_examples=60, deadline=None)
@given(verdict_runs())
def test_the_survival_funnel_never_rises(run):
    verdicts, captions = run
    funnel = survival_funnel(survival(verdicts, captions)).to_pylist()
    cells: dict[tuple, list[dict]] = {}
    for r in funnel:
        cells.setdefault((r["family"], r["n"], r["condition"]), []).append(r)
    for (family, n, condition), stages in cells.items():
        stages.sort(key=lambda r: r["order"])
        survivors = [r["survivors"] for r in stages]
        assert survivors == sorted(survivors, reverse=True), stages  # monotone non-increasing
        assert stages[0]["stage"] == "sampled" and stages[0]["share"] == 1.0
        assert all(0 <= r["share"] <= 1 and 0 <= r["rate"] <= 1 for r in stages)
        if condition == "contextual":  # the caption stage first: concepts -> kept captions
            assert stages[1]["stage"] == "caption"
        samples = {v["sample_id"] for v in verdicts
                   if (v["family"], v["n"], v["condition"]) == (family, n, condition)}  # fmt: skip
        failed = {v["sample_id"] for v in verdicts if v["outcome"] == "fail"}
        assert survivors[-1] == len(samples - failed)  # the last stage = accepted samples
    table = survival_table(pa.Table.from_pylist(funnel), layout_of({}, KINDS))
    for row in table.rows:
        shares = [c.value for k, c in zip(table.keys, row.cells) if k[1] == "share"]
        shown = [v for v in shares if v is not None]
        assert shown == sorted(shown, reverse=True)


def test_figures_escape_model_and_family_names():
    models = {name: {"backend": "open_clip"} for name in HTML_HOSTILE}
    cells = [("a<b>&c", 2, "minimal"), ("a<b>&c", 2, "contextual")]
    pred = predictions(models, cells, 3, seed=5)
    tables = {"accuracy": analysis.accuracy(pred), "context_deltas": analysis.context_deltas(pred)}
    page = plots(tables, layout_of(models, KINDS))
    assert page.count("<svg") == 1 + 2 + 2
    for raw in [*HTML_HOSTILE, "a<b>&c"]:
        assert raw not in page
    assert "a&lt;b&gt;&amp;c: accuracy vs N" in page
