"""The report step's KFP outputs: the HTML page (`Output[HTML]`, shown in the KFP UI), the
report's tables (a Dataset: tables only, never the benchmark's images) and one accuracy metric
per model x family x N x condition x set (`Output[Metrics]`, comparable across runs in the UI).

No kfp here: the report component imports this module inside the image.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq


def accuracy_metrics(run: str | Path) -> dict[str, float]:
    """`model/family-N/condition/set` -> accuracy (paper protocol) from every score run under
    run/results/<model>/summary.parquet; a score type other than "score" (summary column
    `score_type`, absent = "score") is appended: `.../set/per_token`, `.../set/choice`."""
    metrics = {}
    for summary in sorted(Path(run, "results").glob("*/summary.parquet")):
        for r in pq.read_table(summary).to_pylist():
            if r["protocol"] == "paper":
                key = f"{r['model']}/{r['family']}-{r['n']}/{r['condition']}/{r['set']}"
                score_type = r.get("score_type") or "score"
                if score_type != "score":  # per-token and A.8 choice: their own metrics
                    key += f"/{score_type}"
                metrics[key] = float(r["accuracy"])
    return metrics


def write_report_outputs(
    store: str,
    name: str,
    seed: int,
    tables: str | Path,
    page: str | Path,
    log_metric: Callable[[str, float], None],
) -> dict[str, float]:
    """Build the report from the store in a scratch folder; keep the page, the tables (with the
    figures in tables/figures/) and the metrics."""
    from autocomp.analysis.report import report_from_store

    work = Path(tempfile.mkdtemp(prefix="report-"))
    try:
        done = report_from_store(store, name, work, seed)
        shutil.copytree(work / "tables", Path(tables), dirs_exist_ok=True)
        if (work / "figures").is_dir():  # the paper's figures (SVG, PDF, PNG) beside the tables
            shutil.copytree(work / "figures", Path(tables) / "figures", dirs_exist_ok=True)
        Path(page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(done["html"], page)
        metrics = accuracy_metrics(work / "run")
        for key, value in metrics.items():
            log_metric(key, value)
        return metrics
    finally:
        shutil.rmtree(work, ignore_errors=True)
