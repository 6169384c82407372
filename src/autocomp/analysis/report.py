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

Written: tables/<name>.{csv,parquet,tex} for every long table (fractions, one row per cell) and
tables/paper_*.{csv,tex} for the paper-layout tables (percent, analysis/paper_tables.py). The page
embeds its plots as inline SVG and has no scripts, so it renders anywhere offline.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.analysis import agreement
from autocomp.analysis import finetune as finetune_analysis
from autocomp.analysis import statistics as analysis
from autocomp.analysis.html import render_html
from autocomp.analysis.latex import to_latex, wide_to_latex
from autocomp.analysis.load import family_kinds, load_run
from autocomp.analysis.paper_tables import layout_of, paper_tables
from autocomp.analysis.survival import survival_funnel
from autocomp.analysis.wide import to_csv
from autocomp.errors import UsageError
from autocomp.store.atomic import scratch_folder, sweep_stale

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
    return analysis._table(
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
    bench, pred = data["benchmark"], data["predictions"]
    kinds = family_kinds(data["meta"], bench.column("family").unique().to_pylist())
    paired = None
    notes: dict[str, str] = {}
    if "paired" in bench.column_names:
        paired = {
            analysis.concept_of(r["sample_id"])
            for r in bench.select(["sample_id", "paired"]).to_pylist()
            if r["paired"]
        }
        if not paired:
            notes["context_deltas"] = (
                "B_paired is empty: no concept has both its Minimal and its Contextual sample "
                "accepted, so there is no paired comparison (the table is empty on purpose)."
            )
    data["notes"] = notes
    data["layout"] = layout_of(data["models"], kinds)
    bases = {name: m.get("base_model") for name, m in data["models"].items() if m.get("base_model")}
    tables = {
        "accuracy": analysis.accuracy(pred),
        "context_deltas": analysis.context_deltas(pred, paired, seed),
        "hard_negative_deltas": analysis.model_deltas(pred, bases, seed),
        "per_relation": analysis.per_relation(pred, bench, kinds["relation"]),
        "confusion_taxonomy": analysis.confusion_taxonomy(pred, bench, kinds["attribute"]),
        "caption_diversity": analysis.caption_diversity(bench),
    }
    if data.get("finetune"):
        tables.update(finetune_analysis.finetune_tables(data["finetune"], seed))
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
        ours = {r["sample_id"]: bool(r.get("accepted", True)) for r in bench.to_pylist()}
        for name, rows in data["judges"].items():
            yes, cells, reference = ("1", "true", "yes", "pass"), keys, ours
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
    return tables


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
    others = {Path(c).resolve().name: Path(c) for c in compare or []}
    if len(others) != len(compare or []) or Path(run).resolve().name in others:
        raise UsageError(
            "--compare", [str(c) for c in compare or []], "run folder names must differ"
        )
    return _write_report(run, out, seed, title or Path(run).resolve().name, others)


def _write_report(
    run: str | Path, out: str | Path, seed: int, title: str, compare: dict[str, Path]
) -> dict[str, Any]:
    """The report of the run folder `run`, its generator named `title` in the comparison with
    `compare` (generator name -> run folder)."""
    import pyarrow.csv as pcsv

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError("--out", str(out), "is a file; give a folder for the report")
    data = load_run(run)
    data["title"] = title
    tables = build_tables(data, seed)
    if compare:
        runs = {title: data["predictions"]}
        for name, folder in compare.items():
            runs[name] = load_run(folder, "--compare")["predictions"]
        tables["cross_generator"], tables["generator_order"] = analysis.cross_generator(runs)
    wide, omitted = paper_tables(tables, data["layout"])
    # everything is written into a staging folder first, then swapped in: a failed report leaves
    # the previous one whole, and a new report never keeps an older report's extra tables
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
        html = render_html(data, tables, seed, wide, omitted)
        (staging / "index.html").write_text(html, encoding="utf-8")
        out.mkdir(exist_ok=True)
        shutil.rmtree(out / "tables", ignore_errors=True)
        os.replace(staging / "tables", out / "tables")
        os.replace(staging / "index.html", out / "index.html")
    return {
        "html": out / "index.html",
        "tables": sorted(tables),
        "rows": {k: t.num_rows for k, t in tables.items()},
        "paper": [t.name for t in wide],
        "omitted": omitted,
    }


def assemble_run(store: Any, name: str, run: Path, option: str = "--name") -> Path:
    """Fetch benchmark `name` of a store into a run folder: benchmarks/<name> as benchmark/,
    every results/<name>/<model> as results/<model>, and human/<name>, judges/<name> when the
    store has them."""
    if store.manifest(f"benchmarks/{name}") is None:
        raise UsageError(option, name, f"is not a benchmark in {store.uri}; give a name under "
                         "benchmarks/ there")  # fmt: skip
    store.get(f"benchmarks/{name}", run / "benchmark")
    prefix = f"results/{name}/"
    for key in store.outputs(prefix):
        store.get(key, run / "results" / key[len(prefix) :])
    for extra in ("human", "judges"):
        if store.manifest(f"{extra}/{name}") is not None:
            store.get(f"{extra}/{name}", run / extra)
    return run


def report_from_store(
    store: str, name: str, out: str | Path, seed: int = 0, compare: list[str] | None = None
) -> dict[str, Any]:
    """Assemble the run folder of benchmark `name` from the store under out/run (and each
    benchmark named in `compare` under out/compare/<other>), then write the report into out."""
    from autocomp.store.storage import open_store

    compare = list(compare or [])
    if len(set(compare)) != len(compare) or name in compare:
        raise UsageError("--compare", compare, "benchmark names must differ from --name and "
                         "from each other")  # fmt: skip
    target = open_store(store)
    run = assemble_run(target, name, Path(out) / "run")
    others = {
        other: assemble_run(target, other, Path(out) / "compare" / other, "--compare")
        for other in compare
    }
    return _write_report(run, out, seed, name, others)
