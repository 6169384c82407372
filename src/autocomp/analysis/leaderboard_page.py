"""The leaderboard's files (`autocomp leaderboard`): index.html, one self-contained page (inline
style and a few lines of inline script that sort a table by a clicked column; nothing is
fetched), every value from a store passed through `escape`; leaderboard.csv (one row per run
and cell), generators.csv (the same model's paired differences between generators) and
leaderboard.json (runs with their provenance, cells, models, generators), written at once."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autocomp import __version__
from autocomp.analysis.escape import escape
from autocomp.analysis.leaderboard import CELL_KEYS, Board, Run, build, cell_rows
from autocomp.errors import UsageError
from autocomp.store.atomic import atomic_folder
from autocomp.store.outputs import check_output

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
th { background: #f0f0f0; cursor: pointer; user-select: none; }
th:hover { background: #e0e8f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.stale td, tr.superseded td { color: #888; } tr.damaged td { color: #a00; }
.note { color: #555; max-width: 60em; }
"""

# Sort a table by the clicked header: numbers as numbers (data-v holds the value), text as text;
# a second click reverses.
SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0];
    var up = th.dataset.dir !== "up"; th.dataset.dir = up ? "up" : "down";
    var rows = Array.prototype.slice.call(body.rows);
    function key(row) {
      var cell = row.cells[col];
      var v = cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent;
      var n = parseFloat(v); return isNaN(n) ? v : n;
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), r = x < y ? -1 : x > y ? 1 : 0; return up ? r : -r;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def _td(value: Any, number: float | None = None) -> str:
    if number is None:
        return f"<td>{escape(value)}</td>"
    return f'<td class="num" data-v="{number:.6f}">{escape(value)}</td>'


def _table(headers: Sequence[str], rows: list[str], caption: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    body = "\n".join(rows)
    head = f"<thead><tr>{head}</tr></thead>"
    return f'<table class="sortable">{cap}{head}<tbody>\n{body}\n</tbody></table>'


def _models(board: Board) -> str:
    rows = []
    for m in board.models:
        rate = m["mean_win_rate"]
        shown = "-" if rate is None else f"{100 * rate:.1f}"
        rows.append(
            f"<tr>{_td(m['label'])}{_td(m['model'])}"
            f"{_td(shown, -1.0 if rate is None else rate)}{_td(m['cells'], m['cells'])}</tr>"
        )
    return _table(("model (configuration)", "model", "mean win rate (%)", "cells"), rows)


def _cells(rows: list[dict[str, Any]]) -> str:
    out = []
    for r in rows:
        interval = f"{r['accuracy']:.1f} [{r['lower']:.1f}, {r['upper']:.1f}]"
        ranks = "-" if r["best_rank"] is None else f"{r['best_rank']}-{r['worst_rank']}"
        out.append(
            f'<tr class="{escape(r["status"])}">{_td(r["label"])}{_td(r["benchmark"])}'
            f"{_td(r['generator'])}"
            + "".join(_td(r[k]) for k in CELL_KEYS)
            + f"{_td(r['items'], r['items'])}{_td(interval, r['accuracy'])}"
            f"{_td(ranks, r['best_rank'] or 0)}{_td(r['status'])}</tr>"
        )
    headers = ("model", "benchmark", "generator", *CELL_KEYS, "items", "accuracy % [95 % CI]",
               "rank interval", "status")  # fmt: skip
    return _table(headers, out)


def _nothing(board: Board, stores: list[str]) -> str:
    """What an empty board means, said first: no run at all, or none that counts."""
    if not board.runs:
        return (
            f'<p class="note"><b>No score run:</b> {escape(", ".join(stores))} holds nothing under '
            "results/&lt;benchmark&gt;/&lt;model&gt; (what <code>autocomp run</code> and the "
            "evaluate_models pipeline publish).</p>"
        )
    if not board.cells:
        return (
            '<p class="note"><b>No current run:</b> every run found is stale, superseded or '
            "damaged (see Runs and provenance); none is counted.</p>"
        )
    return ""


def _generator_row(g: dict[str, Any]) -> str:
    delta = f"{100 * g['delta']:+.1f} [{100 * g['ci_low']:+.1f}, {100 * g['ci_high']:+.1f}]"
    side_a = f"{g['benchmark_a']} ({g['generator_a']})"
    side_b = f"{g['benchmark_b']} ({g['generator_b']})"
    accuracy_a = f"{100 * g['accuracy_a']:.1f}"
    p_value = f"{g['p_value']:.3g}"
    cells = "".join(_td(g[k]) for k in CELL_KEYS)
    return (
        f"<tr>{_td(g['label'])}{_td(side_a)}{_td(side_b)}{cells}"
        f"{_td(g['concepts'], g['concepts'])}{_td(accuracy_a, g['accuracy_a'])}"
        f"{_td(delta, g['delta'])}{_td(p_value, g['p_value'])}</tr>"
    )


def _generators(board: Board) -> str:
    if not board.generators:
        return '<p class="note">No model has current runs on benchmarks of two generators.</p>'
    headers = ("model", "benchmark a (generator)", "benchmark b (generator)", *CELL_KEYS,
               "concepts", "accuracy a %", "b - a, points [95 % CI]", "McNemar p")  # fmt: skip
    return _table(headers, [_generator_row(g) for g in board.generators])


def _run_row(r: Run) -> str:
    p = r.provenance
    if r.status == "damaged":  # nothing of it could be read: say so, invent nothing
        return (
            f'<tr class="damaged">{_td(r.model)}{_td(r.benchmark)}<td></td>{_td(r.status)}'
            f"{_td(r.problem)}" + "<td></td>" * 7 + f"{_td(r.store)}</tr>"
        )
    return (
        f'<tr class="{escape(r.status)}">{_td(r.label or r.model)}{_td(r.benchmark)}'
        f"{_td(r.generator)}{_td(r.status)}{_td(r.problem)}{_td(p.get('weights'))}"
        f"{_td(p.get('revision') or 'main')}{_td(p.get('dtype'))}{_td(p.get('batch_size'))}"
        f"{_td((r.digest or '')[:12])}{_td(p.get('autocomp_version'))}"
        f"{_td(p.get('autocomp_commit') or 'not recorded')}{_td(r.store)}</tr>"
    )


def page(board: Board, rows: list[dict[str, Any]], stores: list[str]) -> str:
    """The whole page."""
    counts: dict[str, int] = {}
    for r in board.runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no run"
    generators = sorted({r.generator for r in board.runs if r.generator})
    runs = _table(
        ("model", "benchmark", "generator", "status", "why", "weights", "revision", "dtype",
         "batch size", "benchmark digest", "autocomp", "commit", "store"),
        [_run_row(r) for r in board.runs],
    )  # fmt: skip
    untrained = sorted({r.model for r in board.runs if r.provenance.get("weights") == "tiny"})
    honesty = (
        f'<p class="note"><b>Random weights:</b> {escape(", ".join(untrained))} '
        "are tiny models with random, untrained weights: their numbers show the machinery, "
        "not a model.</p>"
        if untrained
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>autocomp leaderboard</title>
<style>{STYLE}</style></head><body>
<h1>autocomp leaderboard</h1>
<p class="note">Stores: {escape(", ".join(stores))}. Runs: {escape(summary)}. Generators:
{escape(", ".join(generators) or "none")}. autocomp {escape(__version__)}.</p>
{honesty}{_nothing(board, stores)}
<p class="note">Accuracy with the report's 95 % interval; the rank interval is every rank a run
could hold in its cell given the intervals; the mean win rate is the share of the other runs it
beats in a cell (ties count half), averaged over its cells. Stale runs (their benchmark was
published again), superseded runs (the registry now names other weights) and damaged runs are
listed and counted in nothing. Click a column to sort.</p>
<h2>Models</h2>
{_models(board)}
<h2>Cells</h2>
{_cells(rows)}
<h2>Generators: the same model on benchmarks drawn by different generators</h2>
<p class="note">Paired on the concepts both benchmarks hold (b minus a), with the report's paired
bootstrap interval and McNemar's exact test.</p>
{_generators(board)}
<h2>Runs and provenance</h2>
{runs}
<script>{SCRIPT}</script>
</body></html>
"""


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def write_leaderboard(stores: list[str], out: str | Path, force: bool = False) -> dict[str, Any]:
    """Build the leaderboard of `stores` and write it into the folder `out` (index.html,
    leaderboard.csv, leaderboard.json), all at once or not at all.

    Args:
        stores: store URIs or folders holding results/<benchmark>/<model> runs.
        out: the output folder; an existing one is replaced only with `force`.
        force: replace an existing `out`.

    Returns:
        The paths written and the counts of runs by status.
    """
    out = check_output(out)
    if out.exists() and not force:
        raise UsageError("out", str(out), "exists already; choose a new folder or pass --force")
    board = build(stores)
    rows = cell_rows(board)
    document = {
        "autocomp_version": __version__,
        "stores": stores,
        "models": board.models,
        "runs": [{k: v for k, v in asdict(r).items() if k != "summary"} for r in board.runs],
        "cells": rows,
        "generators": board.generators,
    }
    with atomic_folder(out, replace=force) as tmp:
        (tmp / "leaderboard.csv").write_text(_csv(rows), encoding="utf-8")
        (tmp / "generators.csv").write_text(_csv(board.generators), encoding="utf-8")
        (tmp / "leaderboard.json").write_text(
            json.dumps(document, indent=1, sort_keys=True, default=str), encoding="utf-8"
        )
        (tmp / "index.html").write_text(page(board, rows, stores), encoding="utf-8")
    counts: dict[str, int] = {}
    for r in board.runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {"html": out / "index.html", "runs": counts, "models": len(board.models)}
