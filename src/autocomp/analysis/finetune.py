"""The fine-tuning report (paper A.9, Table 8): the Table 8 page with its training curves, the
project's whole report over the fine-tuning score runs, and their publication to a store.

The tables themselves are computed in analysis/finetune_tables.py (re-exported here, so
`autocomp.analysis.finetune.finetune_tables` keeps working); this module sits above the report
(analysis/report.py, html.py), which never imports it: no import circle.

Training curves are drawn with matplotlib (analysis/draw.py) from each checkpoint's
curve.parquet: training loss on top, validation Swap and Confusion accuracy below, on one step
axis. The page embeds them as inline SVG; figures/curve_<model>.{svg,pdf,png} are for the paper.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocomp.analysis import draw
from autocomp.analysis.escape import escape
from autocomp.analysis.finetune_tables import (  # noqa: F401 (the public names of this module)
    DELTA_COLUMNS,
    DELTAS_NOTE,
    RUN_FILE,
    TABLE8_COLUMNS,
    TABLE8_NOTE,
    finetune_tables,
    load_runs,
    mean_interval,
    table8_empty_reason,
)
from autocomp.errors import UsageError

NO_CURVES = "<p class=note>No checkpoint with a curve.parquet was given (--checkpoints).</p>"
CURVE_COLORS = {"loss": "#444444", "val_swap": draw.PALETTE[0], "val_confusion": draw.PALETTE[1]}


def curve_figure(curve: list[dict[str, Any]], title: str = "training curve") -> Any:
    """Training loss per step (top) and the validation accuracies at each evaluation (bottom),
    as a matplotlib figure."""
    losses = [(r["step"], r["loss"]) for r in curve if r.get("loss") is not None]
    swap = [(r["step"], 100 * r["val_swap"]) for r in curve if r.get("val_swap") is not None]
    confusion = [
        (r["step"], 100 * r["val_confusion"]) for r in curve if r.get("val_confusion") is not None
    ]
    with draw.style():
        fig = draw.new_figure(5.6, 3.6)
        top, bottom = fig.subplots(2, 1, sharex=True)
        if losses:
            top.plot(*zip(*losses), color=CURVE_COLORS["loss"], linewidth=1.2, label="train loss")
        top.set_ylabel("training loss")
        for points, key, marker, label in (
            (swap, "val_swap", "o", "validation Swap"),
            (confusion, "val_confusion", "s", "validation Confusion"),
        ):
            if points:
                bottom.plot(
                    *zip(*points),
                    color=CURVE_COLORS[key],
                    marker=marker,
                    markersize=4,
                    linewidth=1.2,
                    label=label,
                )
        bottom.set_ylim(-3, 103)
        bottom.set_yticks([0, 25, 50, 75, 100])
        bottom.set_ylabel("accuracy (%)")
        bottom.set_xlabel("training step")
        handles = [h for ax in (top, bottom) for h in ax.get_legend_handles_labels()[0]]
        labels = [lab for ax in (top, bottom) for lab in ax.get_legend_handles_labels()[1]]
        if handles:
            fig.legend(handles, labels, loc="outside right center", frameon=False)
        if not curve:
            top.text(
                0.5,
                0.5,
                "no training step recorded",
                transform=top.transAxes,
                ha="center",
                va="center",
                color="#888888",
            )
        fig.suptitle(draw.wrap(title, 60))
    return fig


def svg_curve(curve: list[dict], title: str = "training curve") -> str:
    """The training curve as a standalone SVG document (a checkpoint's curve.svg), starting at
    its <svg> element (the XML prolog is optional)."""
    svg = draw.figure_bytes(curve_figure(curve, title), "svg").decode("utf-8")
    return svg[svg.index("<svg") :]


def _curves(checkpoints: Sequence[str | Path], figures: Path) -> list[str]:
    """Each checkpoint's curve drawn from its curve.parquet, written to figures/ and returned as
    page sections."""
    import pyarrow.parquet as pq

    sections = []
    for folder in checkpoints:
        table, meta = Path(folder) / "curve.parquet", Path(folder) / "run.json"
        if not (table.is_file() and meta.is_file()):
            continue
        name = str(json.loads(meta.read_text(encoding="utf-8"))["entry"])
        title = f"{name}: training curve"
        svg = draw.write_figure(
            curve_figure(pq.read_table(table).to_pylist(), title),
            figures,
            "curve_" + escape(name, "id"),
        )
        inline = draw.inline_svg(svg, f"curve-{escape(name, 'id')}", title)
        sections.append(f"<h3>{escape(name)}</h3><figure>{inline}</figure>")
    return sections


def write_report(
    folders: Sequence[str | Path],
    out: str | Path,
    checkpoints: Sequence[str | Path] = (),
    seed: int = 0,
) -> dict[str, Path]:
    """table8 / finetune_deltas as Parquet and CSV, report.html with the training curves, and
    the curves as figures/curve_<model>.{svg,pdf,png}."""
    import pyarrow.csv as pacsv

    from autocomp.analysis.html import CSS, html_table
    from autocomp.store.tables import provenance, write_table

    for folder in folders:
        if not Path(folder).is_dir():
            raise UsageError("folders", str(folder), "no such folder; give finetune score outputs")
    if Path(out).exists() and not Path(out).is_dir():
        raise UsageError("out", str(out), "is a file; give a folder")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = load_runs(folders)
    tables = finetune_tables(runs, seed)
    paths: dict[str, Path] = {}
    for name, table in tables.items():
        write_table(table, out / f"{name}.parquet", provenance(name, runs=len(runs), seed=seed))
        pacsv.write_csv(table, out / f"{name}.csv")
        paths[name] = out / f"{name}.parquet"
    curves = _curves(checkpoints, out / "figures")
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>autocomp fine-tuning (Table 8)</title><style>{CSS}</style></head><body>"
        f"<h1>Confusion fine-tuning (Table 8)</h1><p class=note>{escape(TABLE8_NOTE)}</p>"
        f"{html_table(tables['table8'])}{_empty_note(runs)}<h2>Against the pretrained model</h2>"
        f"<p class=note>{escape(DELTAS_NOTE)}</p>{html_table(tables['finetune_deltas'])}"
        f"<h2>Training curves</h2>{''.join(curves) or NO_CURVES}"
        f'<p class=note><a href="full/index.html">The whole report over these runs</a></p>'
        "</body></html>"
    )
    (out / "report.html").write_text(page, encoding="utf-8")
    paths["html"] = out / "report.html"
    return paths


def full_report(
    runs: Sequence[str | Path],
    evaluation: str | Path,
    out: str | Path,
    seed: int = 0,
    title: str = "fine-tuning",
) -> Path:
    """The project's whole report (autocomp.analysis.report) over the fine-tuning score runs on
    their evaluation benchmark: accuracy per model, fine-tuned-vs-base deltas, Table 8, ...
    Written to out/full/index.html (the run folder it reads is out/full/run)."""
    import json
    import shutil

    from autocomp.analysis.report import _write_report, check_seed

    check_seed(seed)
    run = Path(out) / "full" / "run"
    (run / "results").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(evaluation, run / "benchmark.parquet")
    for folder in runs:
        meta = Path(folder) / RUN_FILE
        if meta.is_file():
            target = run / "results" / json.loads(meta.read_text())["entry"]
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(folder, target)
    # the run folder is this stage's own, inside its output: report_stage's check that an
    # output stays apart from its inputs is for a user's run folder
    _write_report(run, Path(out) / "full", seed, title or run.resolve().name, {})
    return Path(out) / "full" / "index.html"


def publish_report(
    runs: Sequence[str | Path],
    checkpoints: Sequence[str | Path],
    evaluation: str | Path,
    out: str | Path,
    store: str = "",
    name: str = "",
    seed: int = 0,
) -> str:
    """Write the Table 8 page and the whole report into `out` and, with a store, publish them as
    finetune/<name>/report-<hash of the tables> (a re-run with other results never collides);
    return the path of the Table 8 page."""
    import hashlib

    paths = write_report(runs, out, checkpoints, seed)
    full_report(runs, evaluation, out, seed, title=f"{name} fine-tuning")
    if store:
        from autocomp.store.stores import open_store

        digest = hashlib.sha256()
        for key in ("table8", "finetune_deltas"):
            digest.update(Path(out, f"{key}.csv").read_bytes())
        key = f"finetune/{name}/report-{digest.hexdigest()[:12]}"
        open_store(store).put(key, out, {"stage": "finetune_report", "benchmark": name})
    return str(paths["html"])


def _empty_note(runs: list[dict[str, Any]]) -> str:
    """Under an empty Table 8, why it is empty."""
    reason = table8_empty_reason(runs)
    return f"<p class=caveat>Empty: {escape(reason)}.</p>" if reason else ""
