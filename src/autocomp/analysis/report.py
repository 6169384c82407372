"""`autocomp report`: every analysis of a run as a self-contained HTML page, CSV, Parquet and
LaTeX, from stored tables only.

A run folder holds:

    benchmark/            the published benchmark (data/*.parquet, concepts.parquet,
                          survival.parquet), or benchmark.parquet
    results/<model>/      one `autocomp score` output per model
    human/*.csv           optional: annotations, columns annotator,sample_id,task,answer with
                          task `valid` (answer yes/no: the image shows its caption), `swap` or
                          `confusion` (answer: the caption the annotator chose)
    judges/<name>.csv     optional: another judge's decisions, columns sample_id,passed

The page embeds its plots as inline SVG and has no scripts, so it renders anywhere offline.
"""

from __future__ import annotations

import csv
import html
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp import __version__
from autocomp.analysis import finetune as finetune_analysis
from autocomp.analysis import statistics as analysis
from autocomp.errors import UsageError

BENCH_COLUMNS = [
    "sample_id",
    "family",
    "n",
    "condition",
    "caption",
    "objects",
    "attributes",
    "confusion_arrangements",
    "confusion_same_scene",
    "paired",
    "accepted",
]


# ----------------------------------------------------------------------------- inputs


def load_run(run: str | Path) -> dict[str, Any]:
    run = Path(run)
    if not run.is_dir():
        raise UsageError(
            "--run", str(run), "no such folder; give a run folder (see autocomp report --help)"
        )
    bench_dir = run / "benchmark"
    files = sorted((bench_dir / "data").glob("*.parquet")) if bench_dir.is_dir() else []
    if not files and (run / "benchmark.parquet").is_file():
        files = [run / "benchmark.parquet"]
    if not files:
        raise UsageError("--run", str(run), "holds no benchmark/ folder or benchmark.parquet")
    available = pq.read_schema(files[0]).names
    columns = [c for c in BENCH_COLUMNS if c in available]
    benchmark = pa.concat_tables([pq.read_table(f, columns=columns) for f in files])
    results = sorted(p for p in (run / "results").glob("*") if (p / "predictions").is_dir())
    if not results:
        raise UsageError("--run", str(run), "holds no results/<model>/ score outputs")
    predictions = pa.concat_tables(
        [pq.read_table(p / "predictions") for p in results], promote_options="default"
    )
    models = {}
    for p in results:
        record = json.loads((p / "run.json").read_text()) if (p / "run.json").is_file() else {}
        models[p.name] = record.get("entry") or {"name": p.name}
    optional = {name: bench_dir / f"{name}.parquet" for name in ("concepts", "survival")}
    return {
        "run": run,
        "benchmark": benchmark,
        "predictions": predictions,
        "models": models,
        "meta": json.loads((pq.read_schema(files[0]).metadata or {}).get(b"autocomp", b"{}")),
        **{k: pq.read_table(v) if v.is_file() else None for k, v in optional.items()},
        "human": _read_csvs(sorted((run / "human").glob("*.csv"))),
        "judges": {p.stem: _read_csvs([p]) for p in sorted((run / "judges").glob("*.csv"))},
        "finetune": finetune_analysis.load_runs(results),  # score runs with finetune.json
    }


def _read_csvs(paths: list[Path]) -> list[dict[str, str]]:
    rows = []
    for path in paths:
        with path.open(newline="", encoding="utf-8") as f:
            rows += list(csv.DictReader(f))
    return rows


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
    paired = None
    if "paired" in bench.column_names:
        paired = {
            analysis.concept_of(r["sample_id"])
            for r in bench.select(["sample_id", "paired"]).to_pylist()
            if r["paired"]
        }
    bases = {name: m.get("base_model") for name, m in data["models"].items() if m.get("base_model")}
    tables = {
        "accuracy": analysis.accuracy(pred),
        "context_deltas": analysis.context_deltas(pred, paired or None, seed),
        "hard_negative_deltas": analysis.model_deltas(pred, bases, seed),
        "per_relation": analysis.per_relation(pred, bench),
        "confusion_taxonomy": analysis.confusion_taxonomy(
            pred, bench, families=("color", "shape_color")
        ),
        "caption_diversity": analysis.caption_diversity(bench),
    }
    if data.get("finetune"):
        tables.update(finetune_analysis.finetune_tables(data["finetune"], seed))
    if data["survival"] is not None:
        tables["survival"] = data["survival"]
    if data["concepts"] is not None:
        tables["filter_shift"] = analysis.filter_shift(data["concepts"], bench)
    if data["human"]:
        tables["human"] = human_results(data["human"], bench)
    if data["judges"]:
        keys = {r["sample_id"]: (r["family"], r["n"], r["condition"]) for r in bench.to_pylist()}
        ours = {r["sample_id"]: bool(r.get("accepted", True)) for r in bench.to_pylist()}
        for name, rows in data["judges"].items():
            theirs = {
                r["sample_id"]: r["passed"].strip().lower() in ("1", "true", "yes", "pass")
                for r in rows
                if r["sample_id"] in keys
            }
            tables[f"judge_agreement_{name}"] = analysis.judge_agreement(ours, theirs, keys)
    return tables


def to_latex(table: pa.Table, caption: str) -> str:
    """A booktabs LaTeX table."""
    cols = table.column_names

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "--" if math.isnan(v) else f"{v:.3f}"
        return str(v).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")

    lines = [
        r"\begin{table}[t]",
        r"\centering",
        f"\\caption{{{cell(caption)}}}",
        f"\\begin{{tabular}}{{{'l' * len(cols)}}}",
        r"\toprule",
        " & ".join(cell(c) for c in cols) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(cell(r[c]) for c in cols) + r" \\" for r in table.to_pylist()]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- HTML


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "–" if math.isnan(v) else f"{v:.3f}"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


def html_table(table: pa.Table, limit: int = 400) -> str:
    if table.num_rows == 0:
        return "<p class=empty>No rows: this run has no data for this analysis.</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.column_names)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_fmt(r[c]))}</td>" for c in table.column_names)
        + "</tr>"
        for r in table.slice(0, limit).to_pylist()
    )
    more = (
        f"<p class=note>{table.num_rows - limit} more rows in the CSV.</p>"
        if table.num_rows > limit
        else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


PALETTE = ["#1b6ca8", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#2e4057", "#c97b84"]


def svg_bars(
    title: str,
    bars: list[tuple[str, float, float | None, float | None]],
    lo: float = 0.0,
    hi: float = 1.0,
) -> str:
    """Horizontal bars (label, value, ci low, ci high) with whiskers; values in [lo, hi]."""
    if not bars:
        return ""
    width, row, left = 640, 18, 230
    height = row * len(bars) + 40
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return left + (min(max(v, lo), hi) - lo) / span * (width - left - 20)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{html.escape(title)}">',
        f'<text x="4" y="14" font-size="13" font-weight="bold">{html.escape(title)}</text>',
        f'<line x1="{x(0 if lo < 0 else lo)}" y1="22" x2="{x(0 if lo < 0 else lo)}" '
        f'y2="{height - 10}" stroke="#999"/>',
    ]
    for i, (label, value, low, high) in enumerate(bars):
        y = 26 + i * row
        x0, x1 = sorted((x(0 if lo < 0 else lo), x(value)))
        parts.append(f'<text x="4" y="{y + 11}" font-size="11">{html.escape(label[:38])}</text>')
        parts.append(
            f'<rect x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 0.5):.1f}" '
            f'height="{row - 6}" fill="{PALETTE[i % len(PALETTE)]}"/>'
        )
        if low is not None and high is not None and not math.isnan(low):
            parts.append(
                f'<line x1="{x(low):.1f}" y1="{y + row / 2}" x2="{x(high):.1f}" '
                f'y2="{y + row / 2}" stroke="#222" stroke-width="1.5"/>'
            )
        parts.append(
            f'<text x="{width - 16}" y="{y + 11}" font-size="10" text-anchor="end">'
            f"{value:+.3f}</text>"
            if lo < 0
            else f'<text x="{width - 16}" y="{y + 11}" font-size="10" text-anchor="end">'
            f"{value:.3f}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def svg_lines(title: str, series: dict[str, list[tuple[int, float]]]) -> str:
    """Accuracy vs N, one line per series."""
    if not series:
        return ""
    width, height, left, bottom = 640, 260, 50, 40
    ns = sorted({n for pts in series.values() for n, _ in pts})
    if not ns:
        return ""
    n_lo, n_hi = ns[0], ns[-1]

    def x(n: int) -> float:
        return left + (0.5 if n_hi == n_lo else (n - n_lo) / (n_hi - n_lo)) * (width - left - 190)

    def y(v: float) -> float:
        return 20 + (1 - v) * (height - bottom - 20)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{html.escape(title)}">',
        f'<text x="4" y="14" font-size="13" font-weight="bold">{html.escape(title)}</text>',
    ]
    for v in (0, 0.5, 1):
        parts.append(
            f'<line x1="{left}" y1="{y(v)}" x2="{width - 190}" y2="{y(v)}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y(v) + 4}" font-size="10" text-anchor="end">{v:g}</text>'
        )
    for n in ns:
        parts.append(
            f'<text x="{x(n)}" y="{height - bottom + 16}" font-size="10" '
            f'text-anchor="middle">N={n}</text>'
        )
    for i, (name, pts) in enumerate(sorted(series.items())):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(pts)
        path = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        parts += [f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>' for n, v in pts]
        parts.append(
            f'<text x="{width - 180}" y="{30 + 14 * i}" font-size="11" fill="{color}">'
            f"{html.escape(name[:30])}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


SECTIONS = [
    (
        "accuracy",
        "Main results (Tables 5, 12, 13, 14)",
        "Accuracy per model, family, N, condition, set and protocol, with the 95 % bootstrap "
        "interval over concepts (exact: the bootstrap distribution of an accuracy is binomial) and "
        "the chance baseline of the actual candidate sets. Sets vary_attribute / vary_object are "
        "the N=1 sanity split (Table 14).",
    ),
    (
        "context_deltas",
        "Minimal vs Contextual on the paired set (Table 6)",
        "accuracy_a = Minimal, accuracy_b = Contextual, delta = b - a on concepts whose two "
        "samples both passed validation; 95 % paired bootstrap interval; exact McNemar p-value.",
    ),
    (
        "hard_negative_deltas",
        "Hard-negative-trained models vs their base (Table 7)",
        "accuracy_a = base model, accuracy_b = the fine-tuned model, same items; McNemar p-value.",
    ),
    ("per_relation", "Per-relation accuracy, Position N=2 Swap (Table 15)", ""),
    (
        "confusion_taxonomy",
        "Confusion error taxonomy (Table 10)",
        "Each wrong Confusion choice (paper protocol) classified from its arrangement: the swap of "
        "the attributes; a repeated (object, attribute) pair; one object twice with different "
        "attributes; an attribute shared by distinct objects; or a same-scene candidate.",
    ),
    (
        "survival",
        "Validation survival (Table 3)",
        "A sample enters a check when it passed all earlier ones.",
    ),
    (
        "filter_shift",
        "Filter-induced distribution shift (Tables 4, 16)",
        "Total variation between the retained and the sampled (target) label / object frequencies, "
        "and the share of labels / objects kept within 0.5-1.5x and below 0.25x of target.",
    ),
    ("caption_diversity", "Contextual caption diversity (Table 17)", "Distinct-n of word n-grams."),
    (
        "human",
        "Human validation (Tables 11, 20)",
        "Concordance between annotators and the automated verdicts; human Swap / Confusion "
        "accuracy.",
    ),
    ("table8", "Confusion fine-tuning (Table 8)", finetune_analysis.TABLE8_NOTE),
    ("finetune_deltas", "Fine-tuned vs pretrained (Table 8)", finetune_analysis.DELTAS_NOTE),
]


def _plots(tables: dict[str, pa.Table]) -> str:
    acc = [r for r in tables["accuracy"].to_pylist() if r["protocol"] == "paper"]
    out = []
    by_family: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in acc:
        if r["set"] in ("swap", "confusion"):
            by_family[(r["family"], r["set"])][f"{r['model']} ({r['condition'][:3]})"].append(
                (r["n"], r["accuracy"])
            )
    for (family, set_name), series in sorted(by_family.items()):
        out.append(svg_lines(f"{family}: {set_name} accuracy vs N", series))
    gaps = defaultdict(dict)
    for r in acc:
        gaps[(r["model"], r["family"], r["n"], r["condition"])][r["set"]] = r["accuracy"]
    bars = [
        (f"{m} {f} N={n} {c[:3]}", v["swap"] - v["confusion"], None, None)
        for (m, f, n, c), v in sorted(gaps.items())
        if "swap" in v and "confusion" in v
    ]
    out.append(svg_bars("Swap minus Confusion accuracy", bars, -1, 1))
    deltas = [r for r in tables["context_deltas"].to_pylist() if r["protocol"] == "paper"]
    out.append(
        svg_bars(
            "Contextual minus Minimal (95 % CI)",
            [
                (
                    f"{r['model']} {r['family']} N={r['n']} {r['set']}",
                    r["delta"],
                    r["ci_low"],
                    r["ci_high"],
                )
                for r in deltas
            ],
            -1,
            1,
        )
    )
    if "survival" in tables:
        funnel = [
            (
                f"{r['family']} N={r['n']} {r['condition'][:3]} {r['check']}",
                r["cumulative"],
                None,
                None,
            )
            for r in tables["survival"].to_pylist()
        ]
        out.append(svg_bars("Survival funnel (cumulative share)", funnel))
    return "".join(f"<figure>{svg}</figure>" for svg in out if svg)


CSS = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;color:#222}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.note,.empty{color:#666;font-size:12px}figure{margin:.5rem;display:inline-block}
code{background:#f3f3f3;padding:0 3px}"""


def render_html(data: dict[str, Any], tables: dict[str, pa.Table], seed: int) -> str:
    def entry(name: str, m: dict) -> str:
        weights, backend, score = (
            html.escape(str(m.get(k, ""))) for k in ("weights", "backend", "score")
        )
        return f"<li><code>{html.escape(name)}</code>: {weights} ({backend}, score {score})</li>"

    models = "".join(entry(name, m) for name, m in sorted(data["models"].items()))
    title = html.escape(data.get("title") or data["run"].name)
    protocols = (
        sorted(set(tables["accuracy"].column("protocol").to_pylist()))
        if tables["accuracy"].num_rows
        else []
    )
    meta = data["meta"]
    provenance = html.escape(json.dumps(meta, indent=1, sort_keys=True, default=str)[:50000])
    sections = []
    for key, heading, note in SECTIONS:
        if key in tables:
            sections.append(
                f"<h2 id={key}>{html.escape(heading)}</h2>"
                f"<p class=note>{html.escape(note)}</p>{html_table(tables[key])}"
            )
    for key in sorted(k for k in tables if k.startswith("judge_agreement_")):
        sections.append(
            f"<h2 id={key}>Agreement with judge {html.escape(key[16:])} (Table 21)</h2>"
            f"<p class=note>a = this run's verdicts, b = the other judge; Cohen's kappa.</p>"
            f"{html_table(tables[key])}"
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>autocomp report: {title}</title>
<style>{CSS}</style></head><body>
<h1>autocomp report: {title}</h1>
<p>Protocols: {html.escape(", ".join(protocols))} (paper keeps candidates that describe the
positive's scene, strict drops them). autocomp {__version__}; analysis seed {seed};
benchmark protocol {html.escape(str(meta.get("protocol", "?")))}, made by autocomp
{html.escape(str(meta.get("autocomp_version", "?")))}.</p>
<p>Models and weights:</p><ul>{models}</ul>
{_plots(tables)}
{"".join(sections)}
<h2 id=provenance>Provenance</h2>
<p class=note>The benchmark's own record (configs, seeds, versions), from its Parquet metadata.</p>
<details><summary>benchmark metadata</summary><pre>{provenance}</pre></details>
</body></html>
"""


def report_stage(
    run: str | Path,
    out: str | Path,
    seed: int = 0,
    title: str | None = None,
    compare: list[str | Path] | None = None,
) -> dict[str, Any]:
    """Write index.html, tables/<name>.{csv,parquet,tex} into `out`; return what was written.
    `compare`: run folders of the same concept set rendered by other generators (Table 9)."""
    import pyarrow.csv as pcsv

    data = load_run(run)
    data["title"] = title or Path(run).resolve().name
    tables = build_tables(data, seed)
    if compare:
        runs = {Path(run).resolve().name: data["predictions"]}
        for other in compare:
            runs[Path(other).resolve().name] = load_run(other)["predictions"]
        if len(runs) != len(compare) + 1:
            raise UsageError("--compare", [str(c) for c in compare], "run folder names must differ")
        tables["cross_generator"], tables["generator_order"] = analysis.cross_generator(runs)
    out = Path(out)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        pq.write_table(table, out / "tables" / f"{name}.parquet")
        pcsv.write_csv(table, out / "tables" / f"{name}.csv")
        (out / "tables" / f"{name}.tex").write_text(to_latex(table, name.replace("_", " ")))
    page = out / "index.html"
    tmp = page.with_suffix(".tmp")
    tmp.write_text(render_html(data, tables, seed), encoding="utf-8")
    tmp.replace(page)
    return {
        "html": page,
        "tables": sorted(tables),
        "rows": {k: t.num_rows for k, t in tables.items()},
    }


def report_from_store(store: str, name: str, out: str | Path, seed: int = 0) -> dict[str, Any]:
    """Assemble the run folder of benchmark `name` from the store (benchmarks/<name> and every
    results/<name>/<model>) under out/run, then write the report into out."""
    from autocomp.store.storage import open_store

    target = open_store(store)
    run = Path(out) / "run"
    target.get(f"benchmarks/{name}", run / "benchmark")
    prefix = f"results/{name}/"
    for key in target.outputs(prefix):
        target.get(key, run / "results" / key[len(prefix) :])
    return report_stage(run, out, seed, title=name)
