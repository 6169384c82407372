"""`autocomp report`: every analysis of a run as a self-contained HTML page, CSV, Parquet and
LaTeX, from stored tables only.

A run folder holds:

    benchmark/            the published benchmark (data/*.parquet, concepts.parquet,
                          survival.parquet) or a folder of *.parquet parts; or benchmark.parquet
    results/<model>/      one `autocomp score` output per model
    human/*.csv           optional: annotations, columns annotator,sample_id,task,answer with
                          task `valid` (answer yes/no: the image shows its caption), `swap` or
                          `confusion` (answer: the caption the annotator chose)
    judges/<name>.csv     optional: another judge's decisions, columns sample_id,passed

A store holds the same pieces as outputs named after the benchmark: benchmarks/<name>,
results/<name>/<model>, and optionally human/<name> (the human/ folder) and judges/<name> (the
judges/ folder); `report_from_store` assembles them into a run folder first.

Written: tables/<name>.{csv,parquet,tex} for every long table (fractions, one row per cell),
tables/paper_*.{csv,tex} for the paper-layout tables (percent, analysis/paper_tables.py) and
figures/<name>.{svg,pdf,png} for every figure (matplotlib, analysis/plots.py). The page embeds
the figures as inline SVG and has no scripts, so it renders anywhere offline. Every table and
figure states what it was computed on when that is not the accepted benchmark
(analysis/scope.py), and an analysis that does not apply to the run's families is left out with
a one-line note.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.analysis import draw
from autocomp.analysis.audit_tables import audit_tables
from autocomp.analysis.html import render_html
from autocomp.analysis.latex import to_latex, wide_to_latex
from autocomp.analysis.load import RunData, load_run
from autocomp.analysis.paper_tables import paper_tables
from autocomp.analysis.plots import report_plots
from autocomp.analysis.survival import fallback_note
from autocomp.analysis.tables import ReportTables, build_tables, specs
from autocomp.analysis.wide import WideTable, to_csv
from autocomp.errors import UsageError
from autocomp.store.atomic import scratch_folder, sweep_stale
from autocomp.store.catalog.ids import check_component
from autocomp.store.outputs import check_output
from autocomp.store.paths import check_apart

if TYPE_CHECKING:
    from autocomp.store.storage import Store


class Written(TypedDict):
    """What a report wrote: the page, the long tables (and their row counts), the paper-layout
    tables, the figures, the notes of what was left out and the caveats of the whole run."""

    html: Path
    tables: list[str]
    rows: dict[str, int]
    paper: list[str]
    figures: list[str]
    omitted: list[str]
    computed_on: list[str]


REPORT_FOLDER = (
    "report"  # <run>/report: where a run's report goes (`report --run R`, `autocomp run`)
)


def _concepts(predictions: pa.Table | None) -> set[str]:
    """The concepts a predictions table holds items of."""
    from autocomp.store.catalog.ids import concept_of

    if predictions is None or "sample_id" not in predictions.column_names:
        return set()
    return {concept_of(str(s)) for s in predictions.column("sample_id").unique().to_pylist()}


def check_seed(seed: int) -> None:
    """The bootstrap seed: a whole number, 0 or more, as every stage's seed."""
    if type(seed) is not int or seed < 0:
        raise UsageError("seed", seed, "must be a whole number, 0 or more")


def report_stage(
    run: str | Path,
    out: str | Path,
    seed: int = 0,
    title: str | None = None,
    compare: list[str | Path] | None = None,
) -> Written:
    """`autocomp report --run`: index.html, tables/ and figures/ of a run folder, from its
    stored tables only (no model is re-run).

    Args:
        run: a run folder: `benchmark/` (or `benchmark.parquet`) and `results/<model>/`.
        out: the folder to write (index.html, tables/<name>.{csv,parquet,tex}, figures/).
        seed: the bootstrap seed of every interval.
        title: the page's title (default: the run folder's name).
        compare: run folders, each named by its folder name: of the same concept set rendered
            by other generators (Table 9), or of other benchmarks (a harness import, or no
            concept shared: the benchmark profile, each model across benchmarks).

    Returns:
        What was written (Written): the page, the long tables and their rows, the paper-layout
        tables, the figures, what was left out and why, and the caveats the page opens with.
    """
    check_seed(seed)
    others = {Path(c).resolve().name: Path(c) for c in compare or []}
    if len(others) != len(compare or []) or Path(run).resolve().name in others:
        raise UsageError("compare", [str(c) for c in compare or []], "run folder names must differ")
    # RUN/report, the default, is the run's own report folder: the report reads none of it
    own = Path(out).resolve() == (Path(run) / REPORT_FOLDER).resolve()
    check_apart(out, {"run": None if own else run, "compare": list(compare or [])})
    return _write_report(run, out, seed, title or Path(run).resolve().name, others)


def _write_report(
    run: str | Path, out: str | Path, seed: int, title: str, compare: dict[str, Path]
) -> Written:
    """The report of the run folder `run`, its generator named `title` in the comparison with
    `compare` (generator name -> run folder)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError("out", str(out), "is a file; give a folder for the report")
    check_output(out)  # not under a file; missing parents are made with it (store/outputs.py)
    data = load_run(run)
    same, other = _split(data, compare)
    profile = {title: Path(run), **other} if other else {}
    report = build_tables(data, seed, _compared(data, title, run, same), profile)
    tables = report.tables
    funnel = tables.get("survival_funnel")
    funnel_caveats = tuple(fallback_note(funnel)) if funnel is not None else ()
    wide, omitted = paper_tables(tables, report.layout, report.scope, funnel_caveats)
    wide += audit_tables(tables, report.layout, data.human_progress)
    plots, plot_notes = report_plots(tables, report.layout, report.scope)
    plots = [replace(plot, name=name) for plot, name in zip(plots, unique_names(plots))]
    # everything is written into a staging folder first, then swapped in: a failed report leaves
    # the previous one whole, and a new report never keeps an older report's extra files
    sweep_stale(out.parent)
    with scratch_folder(out) as staging:
        write_tables(report, wide, staging / "tables")
        drawn = [(p, draw.write_figure(p.figure, staging / "figures", p.name)) for p in plots]
        html = render_html(data, report, seed, title, wide, omitted, drawn, plot_notes)
        (staging / "index.html").write_text(html, encoding="utf-8")
        out.mkdir(exist_ok=True)
        for kind in ("tables", "figures"):
            shutil.rmtree(out / kind, ignore_errors=True)
            if (staging / kind).is_dir():
                os.replace(staging / kind, out / kind)
        os.replace(staging / "index.html", out / "index.html")
    return {
        "html": out / "index.html",
        "tables": sorted(tables),
        "rows": {k: t.num_rows for k, t in tables.items()},
        "paper": [t.name for t in wide],
        "figures": [p.name for p in plots],
        "omitted": omitted + plot_notes + section_notes(tables, report.notes),
        "computed_on": [line for line, caveat in report.scope.summary() if caveat],
    }


def _split(data: RunData, compare: dict[str, Path]) -> tuple[dict[str, Path], dict[str, Path]]:
    """`compare` split into runs of this run's concept set (Table 9) and runs of another
    benchmark (a harness import, or no scored concept shared: the benchmark profile)."""
    from autocomp.analysis.harness import harness_of

    ours = _concepts(data.predictions)
    mine = harness_of(data.run / "benchmark") is not None
    same: dict[str, Path] = {}
    other: dict[str, Path] = {}
    for name, folder in compare.items():
        theirs = _concepts(load_run(folder, "compare").predictions)
        harness = mine or harness_of(folder / "benchmark") is not None
        (other if harness or not ours & theirs else same)[name] = folder
    return same, other


def _compared(
    data: RunData, title: str, run: str | Path, compare: dict[str, Path]
) -> dict[str, pa.Table]:
    """Generator name -> predictions for Table 9: this run's (named `title`) and each of
    `compare`, every one sharing a scored concept with this run; {} without `compare`."""
    if not compare:
        return {}
    runs = {title: data.predictions}
    ours = _concepts(data.predictions)
    for name, folder in compare.items():
        runs[name] = load_run(folder, "compare").predictions
        if not ours & _concepts(runs[name]):  # the cross-generator table would be empty
            raise UsageError("compare", str(folder), f"shares no scored concept with {run}; "
                             "compare runs of the same concept set")  # fmt: skip
    return runs


def write_tables(report: ReportTables, wide: list[WideTable], folder: Path) -> None:
    """tables/<key>.{parquet,csv,tex} of every long table, tables/<name>.{csv,tex} of every
    paper-layout table, into the new folder `folder`; reads its inputs only."""
    import pyarrow.csv as pcsv

    folder.mkdir()
    for name, table in report.tables.items():
        pq.write_table(table, folder / f"{name}.parquet")
        pcsv.write_csv(table, folder / f"{name}.csv")
        latex = to_latex(table, name.replace("_", " "))
        (folder / f"{name}.tex").write_text(latex, encoding="utf-8")
    for table in wide:
        (folder / f"{table.name}.csv").write_text(to_csv(table), encoding="utf-8")
        (folder / f"{table.name}.tex").write_text(wide_to_latex(table), encoding="utf-8")


def section_notes(tables: dict[str, pa.Table], notes: dict[str, str]) -> list[str]:
    """The one-line notes of the analyses left out (no table, or an empty one, with a reason)."""
    return [
        f"{spec.heading} left out: {notes[spec.key]}"
        for spec in specs("section")
        if spec.key in notes and (spec.key not in tables or not tables[spec.key].num_rows)
    ]


def unique_names(plots: list[draw.Plot]) -> list[str]:
    """The plots' file-safe names, made unique (two families may escape alike)."""
    from autocomp.analysis.escape import escape

    seen: set[str] = set()
    names = []
    for plot in plots:
        name = escape(plot.name, "id")
        stem, i = name, 2
        while name in seen:
            name, i = f"{stem}-{i}", i + 1
        seen.add(name)
        names.append(name)
    return names


def _not_scores(path: str) -> bool:
    return not path.startswith("scores/")


def assemble_run(store: Store, name: str, run: Path, option: str = "name") -> Path:
    """Fetch benchmark `name` of a store into a run folder: benchmarks/<name> as benchmark/,
    every results/<name>/<model> as results/<model>, and human/<name>, judges/<name> when the
    store has them."""
    if store.manifest(f"benchmarks/{name}") is None:
        raise UsageError(option, name, f"is not a benchmark in {store.uri}; give a name under "
                         "benchmarks/ there")  # fmt: skip
    from autocomp.store.catalog.benchmarks import fetch_view

    # only what the report reads: the benchmark's table without its images, and each run
    # without its per-candidate scores
    fetch_view(store.uri, f"benchmarks/{name}", run / "benchmark")
    prefix = f"results/{name}/"
    for key in store.outputs(prefix):
        store.get(key, run / "results" / key[len(prefix) :], only=_not_scores)
    for extra in ("human", "judges"):
        if store.manifest(f"{extra}/{name}") is not None:
            store.get(f"{extra}/{name}", run / extra)
    return run


def report_from_store(
    store: str, name: str | None, out: str | Path, seed: int = 0, compare: list[str] | None = None
) -> Written:
    """Assemble the run folder of benchmark `name` from the store under out/run (and each
    benchmark named in `compare` under out/compare/<other>), then write the report into out."""
    from autocomp.store.stores import local_root, open_store

    check_seed(seed)
    check_apart(out, {"store": local_root(store)})  # never into the store or what it publishes
    if not name:
        raise UsageError("name", None, "give the benchmark name in the store")
    check_component("name", name)
    for other in compare or []:
        check_component("compare", other)
    compare = list(compare or [])
    if len(set(compare)) != len(compare) or name in compare:
        raise UsageError("compare", compare, "benchmark names must differ from --name and "
                         "from each other")  # fmt: skip
    target = open_store(store)
    for shown, wanted in (("name", name), *(("compare", other) for other in compare)):
        if target.manifest(f"benchmarks/{wanted}") is None:  # all checked before any fetch
            raise UsageError(shown, wanted, f"is not a benchmark in {target.uri}; give a name "
                             "under benchmarks/ there")  # fmt: skip
    run = assemble_run(target, name, Path(out) / "run")
    others = {
        other: assemble_run(target, other, Path(out) / "compare" / other, "compare")
        for other in compare
    }
    return _write_report(run, out, seed, name, others)
