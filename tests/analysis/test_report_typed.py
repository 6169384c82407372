"""The report's data is typed and read-only: `load_run` gives a frozen RunData, `build_tables`
a new ReportTables, and no writer (files, page) changes either; the table registry is the one
place a table's key, heading and note are spelled, and the page and files follow it."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from autocomp.analysis.draw import Plot
from autocomp.analysis.html import render_html
from autocomp.analysis.load import RunData, load_run
from autocomp.analysis.paper_tables import paper_tables
from autocomp.analysis.report import unique_names, write_tables
from autocomp.analysis.tables import TABLES, ReportTables, build_tables, specs


@pytest.fixture(scope="module")
def full_run(run_dir, tmp_path_factory) -> Path:
    """The shared run with a second judge's decisions beside its human annotations."""
    run = tmp_path_factory.mktemp("typed") / "run"
    shutil.copytree(run_dir, run)
    ids = load_run(run).benchmark.column("sample_id").to_pylist()
    (run / "judges").mkdir()
    rows = [f"{s},{'yes' if i % 2 else 'no'}" for i, s in enumerate(ids)]
    (run / "judges" / "other.csv").write_text("sample_id,passed\n" + "\n".join(rows) + "\n")
    return run


def test_load_run_gives_a_frozen_run_data(full_run):
    data = load_run(full_run)
    assert isinstance(data, RunData)
    assert data.run == full_run and data.benchmark.num_rows > 0
    assert sorted(data.models) == ["base", "good"] and data.models["good"]["base_model"] == "base"
    assert list(data.judges) == ["other"] and data.human and data.concepts is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.predictions = pa.table({})  # type: ignore[misc]


def _digest(value: object) -> str:
    """A hash of everything `value` holds (tables by their Arrow buffers)."""
    return hashlib.sha256(pickle.dumps(value)).hexdigest()


def test_no_step_of_the_report_changes_its_inputs(full_run, tmp_path):
    data = load_run(full_run)
    before = _digest(data)
    report = build_tables(
        data, seed=3, compare={"this": data.predictions, "other": data.predictions}
    )
    assert isinstance(report, ReportTables) and _digest(data) == before  # nothing written back
    assert {"cross_generator", "generator_order", "judge_agreement_other"} <= set(report.tables)
    built = _digest(report)
    wide, omitted = paper_tables(report.tables, report.layout, report.scope)
    write_tables(report, wide, tmp_path / "tables")
    page = render_html(data, report, 3, "typed", wide, omitted)
    assert _digest(data) == before and _digest(report) == built
    written = {p.stem for p in (tmp_path / "tables").glob("*.parquet")}
    assert written == set(report.tables)
    assert '<h2 id="judge_agreement_other">Agreement with judge other (Table 21)</h2>' in page


def test_the_page_follows_the_registry(full_run):
    data = load_run(full_run)
    report = build_tables(data)
    page = render_html(data, report, 0)
    keys = [spec.key for spec in TABLES]
    assert len(keys) == len(set(keys))
    # every section the run has, in the registry's order, with its heading and note
    shown = [
        (key, spec)
        for spec in specs("section")
        for key in spec.keys(report.tables)
        if report.tables[key].num_rows
    ]
    assert [key for key, _ in shown] == [
        "per_relation", "confusion_taxonomy", "caption_diversity", "human", "human_per_annotator",
        "human_agreement", "judge_agreement_other",
    ]  # fmt: skip
    at = [page.index(f'<h2 id="{key}">') for key, _ in shown]
    assert at == sorted(at)
    for key, spec in shown:
        assert spec.heading_of(key).replace("'", "&#x27;") in page
    # the long tables folded away, in order; none of the files-only tables on the page
    folded = [
        page.index(f'<details id="{s.key}">') for s in specs("long") if s.key in report.tables
    ]
    assert len(folded) == 3 and folded == sorted(folded) and folded[0] > at[-1]
    assert all(f'id="{s.key}"' not in page for s in specs("files"))


def test_every_paper_table_is_cut_from_a_registered_table(full_run):
    report = build_tables(load_run(full_run))
    wide, _ = paper_tables(report.tables, report.layout, report.scope)
    prefixes = {p: spec.key for spec in TABLES for p in spec.paper}
    assert wide and all(any(t.name.startswith(p) for p in prefixes) for t in wide)


def test_plot_names_are_made_unique_without_renaming_the_plots():
    plots = [Plot("a/b", "one", None), Plot("a b", "two", None), Plot("c", "three", None)]
    assert unique_names(plots) == ["a-b", "a-b-2", "c"]
    assert [p.name for p in plots] == ["a/b", "a b", "c"]
