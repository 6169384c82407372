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
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.analysis import agreement, draw
from autocomp.analysis import statistics as analysis
from autocomp.analysis.audit_tables import audit_tables, progress_caveats
from autocomp.analysis.finetune_tables import finetune_tables
from autocomp.analysis.html import SECTIONS, render_html
from autocomp.analysis.latex import to_latex, wide_to_latex
from autocomp.analysis.load import family_kinds, load_run
from autocomp.analysis.paper_tables import layout_of, paper_tables
from autocomp.analysis.plots import report_plots
from autocomp.analysis.scope import Scope, scope_of
from autocomp.analysis.survival import fallback_note, survival_funnel
from autocomp.analysis.wide import to_csv
from autocomp.errors import UsageError
from autocomp.store.atomic import scratch_folder, sweep_stale
from autocomp.store.catalog.ids import check_component
from autocomp.store.outputs import check_output
from autocomp.store.paths import check_apart

REPORT_FOLDER = (
    "report"  # <run>/report: where a run's report goes (`report --run R`, `autocomp run`)
)

# ----------------------------------------------------------------------------- human studies


HUMAN_TASKS = ("valid", "swap", "confusion")


def human_results(rows: list[dict[str, str]], benchmark: pa.Table) -> pa.Table:
    """Concordance with the automated verdicts and human accuracy per family x N x condition."""
    info = {r["sample_id"]: r for r in benchmark.to_pylist()}
    cells: dict[tuple, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    annotators: dict[tuple, set] = defaultdict(set)
    for i, r in enumerate(rows):
        missing = {"annotator", "sample_id", "task", "answer"} - r.keys()
        if missing:
            raise UsageError(
                "human annotations",
                sorted(missing),
                "missing column(s); the format is annotator,sample_id,task,answer",
            )
        if r["task"] not in HUMAN_TASKS:
            raise UsageError(
                f"human annotations row {i + 2}",
                r["task"],
                f"task must be one of {', '.join(HUMAN_TASKS)}",
            )
        sample = info.get(r["sample_id"])
        if sample is None:
            raise UsageError(
                f"human annotations row {i + 2}",
                r["sample_id"],
                "is not a sample of this benchmark",
            )
        key = (sample["family"], sample["n"], sample["condition"])
        annotators[key].add(r["annotator"])
        if r["task"] == "valid":
            said = r["answer"].strip().lower() in ("yes", "y", "1", "true", "valid")
            right = said == bool(sample.get("accepted", True))
        else:
            right = r["answer"].strip() == sample["caption"]
        cell = cells[key][r["task"]]
        cell[0] += 1
        cell[1] += right
    out = []
    for key, tasks in sorted(cells.items()):
        row = {
            "family": key[0],
            "n": key[1],
            "condition": key[2],
            "annotators": len(annotators[key]),
        }
        for task, name in (
            ("valid", "concordance"),
            ("swap", "swap_accuracy"),
            ("confusion", "confusion_accuracy"),
        ):
            n, k = tasks.get(task, (0, 0))
            row[name] = k / n if n else None
            row[f"{task}_items"] = n
        out.append(row)
    return analysis.rows_table(
        out,
        [
            "family",
            "n",
            "condition",
            "annotators",
            "concordance",
            "swap_accuracy",
            "confusion_accuracy",
            "valid_items",
            "swap_items",
            "confusion_items",
        ],
    )


# ----------------------------------------------------------------------------- tables


def build_tables(data: dict[str, Any], seed: int = 0) -> dict[str, pa.Table]:
    """Every long table of a loaded run; sets data["scope"] (what it is computed on),
    data["layout"], and data["notes"] / data["caveats"] (per table: why it is empty or left out,
    and what it was computed on)."""
    bench, pred = data["benchmark"], data["predictions"]
    kinds = family_kinds(data["meta"], bench.column("family").unique().to_pylist())
    scope = scope_of(bench, kinds, data["meta"])
    data["scope"] = scope
    data["layout"] = layout_of(data["models"], kinds)
    bases = {name: m.get("base_model") for name, m in data["models"].items() if m.get("base_model")}
    ours = sorted(f for f in scope.kinds if scope.autocomp(f))
    tables = {
        "accuracy": analysis.accuracy(pred),
        "context_deltas": analysis.context_deltas(pred, scope.paired, seed),
        "hard_negative_deltas": analysis.model_deltas(pred, bases, seed),
        "per_relation": analysis.per_relation(pred, bench, kinds["relation"]),
        "confusion_taxonomy": analysis.confusion_taxonomy(pred, bench, kinds["attribute"]),
        "caption_diversity": analysis.caption_diversity(bench, ours),
    }
    if data.get("finetune"):
        tables.update(finetune_tables(data["finetune"], seed))
    if data["survival"] is not None:
        tables["survival"] = data["survival"]
        tables["survival_funnel"] = survival_funnel(data["survival"])
    if data["concepts"] is not None:
        tables["filter_shift"] = analysis.filter_shift(data["concepts"], bench)
    if data["human"]:
        tables["human"] = human_results(data["human"], bench)
        tables["human_per_annotator"] = agreement.per_annotator_scores(data["human"], bench)
        tables["human_agreement"] = agreement.human_agreement(data["human"], bench)
    if data["judges"]:
        keys = {r["sample_id"]: (r["family"], r["n"], r["condition"]) for r in bench.to_pylist()}
        ours_ok = {r["sample_id"]: bool(r.get("accepted", True)) for r in bench.to_pylist()}
        for name, rows in data["judges"].items():
            yes, cells, reference = ("1", "true", "yes", "pass"), keys, ours_ok
            if rows and "reference_passed" in rows[0]:  # audit judge: verdicts with rejections
                cells = {**keys, **{r["sample_id"]: (r["family"], int(r["n"]), r["condition"])
                                    for r in rows}}  # fmt: skip
                reference = {r["sample_id"]: r["reference_passed"].strip().lower() in yes
                             for r in rows}  # fmt: skip
            theirs = {
                r["sample_id"]: r["passed"].strip().lower() in yes
                for r in rows
                if r["sample_id"] in cells
            }
            tables[f"judge_agreement_{name}"] = analysis.judge_agreement(reference, theirs, cells)
    data["notes"], data["caveats"] = table_notes(tables, scope, kinds, data["concepts"] is None)
    for key in ("human", "human_per_annotator", "human_agreement"):
        if key in tables:
            data["caveats"][key] = progress_caveats(data.get("human_progress"))
    return tables


def table_notes(
    tables: dict[str, pa.Table], scope: Scope, kinds: dict[str, list[str]], no_concepts: bool
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Per long table: why it is empty or left out (notes), and what it was computed on
    (caveats; see analysis/scope.py)."""
    notes: dict[str, str] = {}
    ours = {f for f in scope.kinds if scope.autocomp(f)}
    others = sorted(set(scope.kinds) - ours)
    relation, attribute = set(kinds.get("relation", [])), set(kinds.get("attribute", []))
    caveats = {
        "accuracy": scope.caveats(),
        "hard_negative_deltas": scope.caveats(),
        "context_deltas": scope.caveats(paired=True, compare=True),
        "per_relation": scope.caveats(lambda k: k[0] in relation),
        "confusion_taxonomy": scope.caveats(lambda k: k[0] in attribute),
        "caption_diversity": scope.caveats(lambda k: k[0] in ours and k[2] == "contextual"),
    }
    if not tables["context_deltas"].num_rows:
        caveats["context_deltas"] = ["Empty: " + scope.paired_reason()]
    if not relation & set(scope.kinds):
        notes["per_relation"] = (
            "no relation family in this run (Table 15 breaks Swap accuracy down per relation of "
            "the relation-kind Auto-Comp families, such as position)."
        )
        caveats["per_relation"] = []
    if not attribute & set(scope.kinds):
        notes["confusion_taxonomy"] = (
            "no attribute family in this run (Table 10 classifies wrong Confusion choices by "
            "their Auto-Comp arrangement, which only attribute-kind families have)."
        )
        caveats["confusion_taxonomy"] = []
    if others:
        notes["caption_diversity"] = (
            f"not computed for {', '.join(others)}: not Auto-Comp families, their captions are "
            "not LLM-written Contextual captions of an Auto-Comp concept."
        )
        if not ours:
            caveats["caption_diversity"] = []
    if "filter_shift" in tables:
        rejected = sum(s.rejected for s in scope.samples.values())
        shift = []
        if rejected:
            shift.append(
                f"Retained = the accepted samples: the {rejected:,} rejected samples "
                "kept in this benchmark are not counted."
            )
        if rejected == len(scope.samples):
            shift.append(
                "No sample was accepted, so nothing was retained: the shift is "
                "undefined (–), not 0 (which would claim perfect balance)."
            )
        caveats["filter_shift"] = shift
    elif no_concepts:
        notes["filter_shift"] = (
            "the benchmark has no concept set (concepts.parquet, the sampled concepts the "
            "retained ones are compared with)."
        )
    if "survival_funnel" in tables:
        caveats["survival"] = caveats["survival_funnel"] = fallback_note(tables["survival_funnel"])
    return notes, caveats


def _concepts(predictions: Any) -> set[str]:
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
) -> dict[str, Any]:
    """Write index.html, tables/<name>.{csv,parquet,tex} into `out`; return what was written.
    `compare`: run folders of the same concept set rendered by other generators (Table 9), each
    named by its folder name."""
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
) -> dict[str, Any]:
    """The report of the run folder `run`, its generator named `title` in the comparison with
    `compare` (generator name -> run folder)."""
    import pyarrow.csv as pcsv

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError("out", str(out), "is a file; give a folder for the report")
    check_output(out)  # not under a file; missing parents are made with it (store/outputs.py)
    data = load_run(run)
    data["title"] = title
    tables = build_tables(data, seed)
    if compare:
        runs = {title: data["predictions"]}
        ours = _concepts(data["predictions"])
        for name, folder in compare.items():
            runs[name] = load_run(folder, "compare")["predictions"]
            if not ours & _concepts(runs[name]):  # the cross-generator table would be empty
                raise UsageError("compare", str(folder), f"shares no scored concept with {run}; "
                                 "compare runs of the same concept set")  # fmt: skip
        tables["cross_generator"], tables["generator_order"] = analysis.cross_generator(runs)
    funnel = tables.get("survival_funnel")
    funnel_caveats = tuple(fallback_note(funnel)) if funnel is not None else ()
    wide, omitted = paper_tables(tables, data["layout"], data["scope"], funnel_caveats)
    wide += audit_tables(tables, data["layout"], data.get("human_progress"))
    plots, plot_notes = report_plots(tables, data["layout"], data["scope"])
    # everything is written into a staging folder first, then swapped in: a failed report leaves
    # the previous one whole, and a new report never keeps an older report's extra files
    sweep_stale(out.parent)
    with scratch_folder(out) as staging:
        (staging / "tables").mkdir()
        for name, table in tables.items():
            pq.write_table(table, staging / "tables" / f"{name}.parquet")
            pcsv.write_csv(table, staging / "tables" / f"{name}.csv")
            latex = to_latex(table, name.replace("_", " "))
            (staging / "tables" / f"{name}.tex").write_text(latex, encoding="utf-8")
        for table in wide:
            (staging / "tables" / f"{table.name}.csv").write_text(to_csv(table), encoding="utf-8")
            latex = wide_to_latex(table)
            (staging / "tables" / f"{table.name}.tex").write_text(latex, encoding="utf-8")
        drawn = []
        for plot in _unique_names(plots):
            drawn.append((plot, draw.write_figure(plot.figure, staging / "figures", plot.name)))
        html = render_html(data, tables, seed, wide, omitted, drawn, plot_notes)
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
        "omitted": omitted + plot_notes + section_notes(tables, data["notes"]),
        "computed_on": [line for line, caveat in data["scope"].summary() if caveat],
    }


def section_notes(tables: dict[str, pa.Table], notes: dict[str, str]) -> list[str]:
    """The one-line notes of the analyses left out (no table, or an empty one, with a reason)."""
    return [
        f"{heading} left out: {notes[key]}"
        for key, heading, _ in SECTIONS
        if key in notes and (key not in tables or not tables[key].num_rows)
    ]


def _unique_names(plots: list[draw.Plot]) -> list[draw.Plot]:
    """The plots with file-safe names, made unique (two families may escape alike)."""
    from autocomp.analysis.escape import escape

    seen: set[str] = set()
    for plot in plots:
        name = escape(plot.name, "id")
        stem, i = name, 2
        while name in seen:
            name, i = f"{stem}-{i}", i + 1
        seen.add(name)
        plot.name = name
    return plots


def _not_scores(path: str) -> bool:
    return not path.startswith("scores/")


def assemble_run(store: Any, name: str, run: Path, option: str = "name") -> Path:
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
) -> dict[str, Any]:
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
    run = assemble_run(target, name, Path(out) / "run")
    others = {
        other: assemble_run(target, other, Path(out) / "compare" / other, "compare")
        for other in compare
    }
    return _write_report(run, out, seed, name, others)
