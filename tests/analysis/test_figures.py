"""The report's figures (matplotlib): every figure passes the text-overlap check, also with long
model names and many models; a model keeps its colour and marker everywhere; the chance line is
dashed and labelled; one N gives points (no lines to overprint); hostile names stay text; the
same data gives the same bytes; the survival funnel never rises and says where nothing entered."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocomp.analysis import draw
from autocomp.analysis import statistics as analysis
from autocomp.analysis.finetune import curve_figure
from autocomp.analysis.paper_tables import layout_of, survival_table
from autocomp.analysis.plots import report_plots, series_styles
from autocomp.analysis.scope import Sample, Scope
from autocomp.analysis.survival import fallback_note, funnel_plot, survival_funnel
from autocomp.generation.curate import survival
from tests.analysis.test_paper_tables import HTML_HOSTILE, KINDS, predictions

CHECKS = ("image", "objects", "background", "attributes")
LONG = "org/an-extremely-long-model-name-with-many-parts_and_a-suffix-vit-h-14-378-quickgelu"
FAMILIES = ["color", "shape_color", "position", "relative_size"]


def scope_for(pred: pa.Table, kinds: dict = KINDS, single: set | None = None) -> Scope:
    """The scope of the samples the predictions cover (all accepted, no fallback)."""
    kind_of = {f: k for k, fs in kinds.items() for f in fs}
    samples = {
        r["sample_id"]: Sample(r["sample_id"].rsplit("/", 1)[0],
                               (r["family"], r["n"], r["condition"]), False, False)
        for r in pred.select(["sample_id", "family", "n", "condition"]).to_pylist()
    }  # fmt: skip
    families = {s.key[0] for s in samples.values()}
    return Scope(samples, {f: kind_of.get(f) for f in families}, None, single or set())


def tables_of(pred: pa.Table) -> dict[str, pa.Table]:
    return {"accuracy": analysis.accuracy(pred), "context_deltas": analysis.context_deltas(pred)}


def run_plots(models: dict, cells: list[tuple], concepts: int = 5, seed: int = 2):
    pred = predictions(models, cells, concepts, seed)
    return report_plots(tables_of(pred), layout_of(models, KINDS), scope_for(pred))


def both(family: str, ns: list[int]) -> list[tuple]:
    return [(family, n, c) for n in ns for c in ("minimal", "contextual")]


def legend_styles(fig) -> dict[str, tuple[str, str]]:
    """label -> (colour, marker) of the figure's legend (model entries only)."""
    from matplotlib.colors import to_hex

    out = {}
    for legend in fig.legends:
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            if handle.get_marker() not in (None, "None", ""):
                out[text.get_text().replace("\n", "")] = (to_hex(handle.get_color()),
                                                          handle.get_marker())  # fmt: skip
    return out


# ----------------------------------------------------------------------------- the check itself


def test_the_overlap_check_finds_overlaps_cut_titles_and_text_over_plots():
    with draw.style():
        fig = draw.new_figure(3, 2)
        ax = fig.subplots()
        ax.set_xticks(
            [0, 1], ["a long tick label that runs on and on", "another long tick label, as long"]
        )
        ax.set_xlim(-0.1, 1.1)
        fig.suptitle("a title far too long to fit in a figure three inches wide, cut " * 2)
    problems = draw.text_overlaps(fig)
    assert any(p.startswith("overlap:") for p in problems), problems
    assert any(p.startswith("cut by the figure's edge") for p in problems), problems
    with draw.style():
        fig = draw.new_figure(4, 2)
        fig.set_layout_engine("none")  # placed by hand
        left, right = fig.subplots(1, 2)
        left.text(1.05, 0.5, "spills into the next panel", transform=left.transAxes)
        right.bar([0], [1])
        right.text(0, 0.5, "on the bar")
    problems = draw.text_overlaps(fig)
    assert any(p.startswith("over another panel's plot") for p in problems), problems
    assert any(p.startswith("over a bar") for p in problems), problems


def test_the_overlap_check_ignores_tick_labels_it_does_not_draw():
    with draw.style():
        fig = draw.new_figure(3, 2)
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1])
        ax.set_xticks([])
        ax.set_ylim(0.05, 0.95)  # the locator keeps ticks 0.0 and 1.0 outside the view
    texts = [t.get_text() for t in draw.drawn_texts(fig)]
    assert any(t.get_loc() == 0.0 for t in ax.yaxis.get_major_ticks())  # kept, not drawn
    assert "0.0" not in texts and "1.0" not in texts and draw.text_overlaps(fig) == []


def test_wrap_breaks_at_separators_and_keeps_every_character():
    for text in (LONG, "sugarcrepe-replace_att", "x" * 70, "a b c", 'q"wen&<i>'):
        wrapped = draw.wrap(text, 20)
        assert all(len(line) <= 20 for line in wrapped.split("\n")), wrapped
        assert wrapped.replace("\n", "").replace(" ", "") == text.replace(" ", "")
    assert draw.wrap("sugarcrepe-replace_att", 14) == "sugarcrepe-\nreplace_att"


# ----------------------------------------------------------------------------- every figure


CASES = {
    "three models, one N": ({f"model-{i}": {"backend": "open_clip"} for i in range(3)},
                            both("color", [2])),
    "generative and contrastive, two N": (
        {"clip": {"backend": "open_clip"}, "qwen": {"backend": "transformers_vlm"}},
        both("color", [2, 3]) + both("position", [2, 3])),
    "long names": ({LONG: {"backend": "open_clip"}, LONG + "-ft": {"backend": "transformers_vlm"}},
                   both("shape_color", [2, 3])),
    "twenty models, four families, two N": (
        {f"model-{i:02d}-{'x' * (i % 5)}": {"backend": "open_clip"} for i in range(20)},
        [c for f in FAMILIES for c in both(f, [2, 3])]),
    "hostile names": ({name: {"backend": "open_clip"} for name in [*HTML_HOSTILE, "$x^2$ a$b"]},
                      both("a<b>&c", [2])),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_every_figure_passes_the_overlap_check(case):
    models, cells = CASES[case]
    plots, notes = run_plots(models, cells)
    families = {f for f, _, _ in cells}
    assert len(plots) == len(families) + 2 + 1, [p.name for p in plots]  # per family, gap, delta
    for plot in plots:
        assert draw.text_overlaps(plot.figure) == [], (case, plot.name)
    assert notes == ["Survival funnel left out: the run's benchmark has no survival table "
                     "(survival.parquet from the curate stage)."]  # fmt: skip


def test_one_n_draws_points_and_a_labelled_chance_line():
    from matplotlib.collections import LineCollection

    models = {f"model-{i}": {"backend": "open_clip"} for i in range(3)}
    plots, _ = run_plots(models, both("color", [2]))
    fig = next(p.figure for p in plots if p.name == "accuracy_vs_n_color")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 4  # Swap / Confusion x Minimal / Contextual
    for ax in panels:
        dashed = [c for c in ax.collections if isinstance(c, LineCollection)
                  and c.get_linestyle()[0][1] is not None]  # fmt: skip
        assert dashed, ax.get_title()  # the chance segment
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert ticks in (["N=2\nchance 50.0 %"], ["N=2\nchance 6.3 %"]), ticks
        xs = [line.get_xdata()[0] for line in ax.lines if line.get_marker() not in ("None", "")]
        assert len(xs) == len(set(xs)) == 3  # dodged: each model at its own x
        assert all(line.get_linestyle() == "None" for line in ax.lines)  # one N: no line
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert legend == [*models, "chance (1 / candidates)"]


def test_several_n_join_each_model_with_a_line():
    models = {"a": {"backend": "open_clip"}, "b": {"backend": "transformers_vlm"}}
    plots, _ = run_plots(models, both("color", [2, 3]))
    fig = plots[0].figure
    for ax in fig.axes:
        joined = [line for line in ax.lines if line.get_linestyle() == "-"]
        assert len(joined) == 3  # a, b, b (per-token)
        assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == ["N=2", "N=3"]


def test_a_model_keeps_one_colour_and_marker_in_every_figure():
    models = {f"m{i}": {"backend": "open_clip"} for i in range(10)}
    plots, _ = run_plots(models, both("color", [2]) + both("position", [2]))
    expected = series_styles([{"model": m} for m in models], layout_of(models, KINDS))
    assert len(set(expected.values())) == len(models)  # colour x marker unique beyond eight
    assert {c for c, _ in expected.values()} == set(draw.PALETTE)
    for plot in plots:
        got = legend_styles(plot.figure)
        assert got == {k: (c.lower(), m) for k, (c, m) in expected.items()}, plot.name


def test_figures_keep_hostile_names_as_text_and_escape_them_in_svg():
    models = {name: {"backend": "open_clip"} for name in [*HTML_HOSTILE, "</svg><script>x()"]}
    plots, _ = run_plots(models, both("a<b>&c", [2]))
    for plot in plots:
        svg = draw.figure_bytes(plot.figure, "svg").decode()
        ET.fromstring(svg.encode())  # well-formed: nothing from data broke out of the markup
        inline = draw.inline_svg(svg, plot.name, plot.title)
        for raw in [*models, "a<b>&c"]:
            assert raw not in inline  # text is drawn as glyphs; the labels' comments are gone
            assert raw not in svg or not set(raw) & set("<>&")  # the file keeps them escaped
        assert "<script" not in inline and "&lt;/svg&gt;&lt;script&gt;" in svg
    texts = {t.get_text() for p in plots for t in draw.drawn_texts(p.figure)}
    flat = {t.replace("\n", "") for t in texts}
    assert set(HTML_HOSTILE) <= flat and any(t.startswith("a<b>&cchance") for t in flat)


def test_dollar_signs_are_drawn_as_typed():
    plots, _ = run_plots({"a$b": {"backend": "open_clip"}, "$x^2$": {"backend": "open_clip"}},
                         both("color", [2]))  # fmt: skip
    for plot in plots:
        assert draw.text_overlaps(plot.figure) == []
        assert {"a$b", "$x^2$"} <= set(legend_styles(plot.figure))


def test_the_same_figure_gives_the_same_bytes_in_every_format():
    models = {"clip": {"backend": "open_clip"}, "qwen": {"backend": "transformers_vlm"}}
    first, _ = run_plots(models, both("color", [2, 3]))
    again, _ = run_plots(models, both("color", [2, 3]))
    for a, b in zip(first, again):
        for fmt in draw.FORMATS:
            assert draw.figure_bytes(a.figure, fmt) == draw.figure_bytes(b.figure, fmt), fmt
    svg = draw.figure_bytes(first[0].figure, "svg").decode()
    assert "<dc:date>" not in svg and "CreationDate" not in draw.figure_bytes(
        first[0].figure, "pdf").decode("latin-1")  # fmt: skip


def test_inline_figures_have_unique_ids_on_one_page():
    models = {"clip": {"backend": "open_clip"}}
    plots, _ = run_plots(models, both("color", [2]) + both("position", [2]))
    page = "".join(
        draw.inline_svg(draw.figure_bytes(p.figure, "svg").decode(), p.name, p.title) for p in plots
    )
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)) > 0
    refs = set(re.findall(r'(?:href="#|url\(#)([^")]+)', page))
    assert refs <= set(ids)  # every reference points at its own figure's element
    assert "<metadata>" not in page and "<?xml" not in page and "<!DOCTYPE" not in page


def test_the_fine_tuning_curve_is_readable():
    curve = [{"step": s, "lr": 1e-5, "loss": 2.0 / (s + 1), "val_swap": None,
              "val_confusion": None} for s in range(1, 40)]  # fmt: skip
    curve += [{"step": s, "lr": 1e-5, "loss": None, "val_swap": 0.4 + s / 100,
               "val_confusion": 0.1 + s / 200} for s in (0, 10, 20, 30, 39)]  # fmt: skip
    fig = curve_figure(curve, f"{LONG}: training curve")
    assert draw.text_overlaps(fig) == []
    labels = {t.get_text() for t in draw.drawn_texts(fig)}
    assert {"training loss", "accuracy (%)", "training step", "validation Swap",
            "validation Confusion"} <= labels  # fmt: skip
    assert draw.text_overlaps(curve_figure([], "empty")) == []


# ----------------------------------------------------------------------------- survival funnel


@st.composite
def verdict_runs(draw_, fallback: bool = False):
    """Verdicts and captions of a small curation: Contextual samples exist for the concepts that
    kept a caption (and, with `fallback`, for the others too, as fallback samples); checks after
    a failure are run or skipped at random."""
    rng = random.Random(draw_(st.integers(0, 10_000)))
    verdicts, captions = [], []
    cells = draw_(st.lists(st.sampled_from([("color", 2), ("color", 3), ("position", 2)]),
                           min_size=1, max_size=3, unique=True))  # fmt: skip
    for family, n in cells:
        for concept in range(draw_(st.integers(1, 12))):
            kept = rng.random() < 0.7
            captions.append({"family": family, "n": n, "status": "accepted" if kept else "x"})
            for condition in ("minimal", "contextual") if kept or fallback else ("minimal",):
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
        for r in stages:
            if r["entered"]:
                assert 0 <= r["share"] <= 1 and 0 <= r["rate"] <= 1
            else:  # nothing entered: neither share nor rate, never 0 or 100
                assert r["share"] != r["share"] and r["rate"] != r["rate"]
        if condition == "contextual":  # the caption stage first: concepts -> kept captions
            assert stages[1]["stage"] == "caption"
        samples = {v["sample_id"] for v in verdicts
                   if (v["family"], v["n"], v["condition"]) == (family, n, condition)}  # fmt: skip
        failed = {v["sample_id"] for v in verdicts if v["outcome"] == "fail"}
        assert survivors[-1] == len(samples - failed)  # the last stage = accepted samples
        assert all(r["fallback"] == 0 for r in stages)
    table = survival_table(pa.Table.from_pylist(funnel), layout_of({}, KINDS))
    for row in table.rows:
        shares = [c.value for k, c in zip(table.keys, row.cells) if k[1] == "share"]
        shown = [v for v in shares if v is not None and v == v]
        assert shown == sorted(shown, reverse=True)


def _fallback_survival(kept: int, concepts: int = 4):
    """A curation where `kept` of `concepts` concepts kept an LLM caption, every other one went
    on with a fallback caption; every sample passes the image check, none the objects check."""
    verdicts, captions = [], []
    for i in range(concepts):
        captions.append({"family": "color", "n": 2, "status": "accepted" if i < kept else "x"})
        for condition in ("minimal", "contextual"):
            for step, check, outcome in ((1, "image", "pass"), (2, "objects", "fail")):
                verdicts.append({"sample_id": f"c{i}/{condition}", "family": "color", "n": 2,
                                 "condition": condition, "check": check, "step": step,
                                 "outcome": outcome})  # fmt: skip
    return survival(verdicts, captions)


def test_a_funnel_of_fallback_captions_only_shows_nothing_entered():
    funnel = survival_funnel(_fallback_survival(kept=0))
    ctx = {r["stage"]: r for r in funnel.to_pylist() if r["condition"] == "contextual"}
    assert (ctx["caption"]["survivors"], ctx["caption"]["share"]) == (0, 0.0)
    for stage in ("image", "objects"):  # the survival table counts 4 fallback samples there
        assert ctx[stage]["entered"] == 0 and ctx[stage]["fallback"] == 4
        assert ctx[stage]["share"] != ctx[stage]["share"]  # NaN: "–", not 100.0
    table = survival_table(funnel, layout_of({}, KINDS), tuple(fallback_note(funnel)))
    row = next(r for r in table.rows if r.label == "N=2 Contextual")
    shown = dict(zip(table.keys, (c.text for c in row.cells)))
    assert shown[("caption", "share")] == "0.0"
    assert shown[("image", "share")] == shown[("image", "rate")] == "–"
    assert "left out" in table.caveats[0] and "4 fallback samples" in table.caveats[0]
    plot = funnel_plot(funnel, layout_of({}, KINDS))
    texts = [t.get_text() for t in draw.drawn_texts(plot.figure)]
    assert texts.count("– nothing entered") == 2 and tuple(plot.caveats) == table.caveats
    assert draw.text_overlaps(plot.figure) == []


def test_a_funnel_with_some_fallback_captions_says_they_are_counted():
    funnel = survival_funnel(_fallback_survival(kept=1))
    ctx = {r["stage"]: r for r in funnel.to_pylist() if r["condition"] == "contextual"}
    assert ctx["caption"]["survivors"] == 1 and ctx["image"]["survivors"] == 4
    assert ctx["image"]["fallback"] == 3
    (note,) = fallback_note(funnel)
    assert "count 3 fallback samples" in note and "can rise" in note


def test_the_funnel_figure_passes_the_check_with_many_cells():
    verdicts, captions = [], []
    for family in ["a-family-with-a-rather-long-name-of-its-own", *FAMILIES]:
        for n in (2, 3, 4):
            captions.append({"family": family, "n": n, "status": "accepted"})
            for condition in ("minimal", "contextual"):
                for step, check in enumerate(CHECKS, 1):
                    outcome = "n/a" if check == "background" and condition == "contextual" else (
                        "pass" if step < 3 else "fail")  # fmt: skip
                    verdicts.append({"sample_id": f"{family}{n}/{condition}", "family": family,
                                     "n": n, "condition": condition, "check": check,
                                     "step": step, "outcome": outcome})  # fmt: skip
    plot = funnel_plot(survival_funnel(survival(verdicts, captions)), None)
    assert len([ax for ax in plot.figure.axes if ax.get_visible()]) == 5 * 3 * 2
    assert draw.text_overlaps(plot.figure) == []
