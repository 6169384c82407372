"""The report page: one self-contained HTML file (inline SVG figures drawn by matplotlib, no
scripts). It opens with what the report is computed on (analysis/scope.py); the paper-layout
tables (percent, with intervals) come next, then the figures, then every other analysis; the
long tables the paper tables are cut from are folded away (they are in tables/*.csv). Every
table and figure shows its caveats (rejected samples kept, fallback captions, empty input) right
under its title. The analyses, their titles, notes and order come from the table registry
(analysis/tables.py); the page reads the run (RunData) and its tables (ReportTables) only."""

from __future__ import annotations

import json
import math

import pyarrow as pa

from autocomp import __version__
from autocomp.analysis.draw import Plot, inline_svg
from autocomp.analysis.escape import escape
from autocomp.analysis.load import Json, RunData
from autocomp.analysis.tables import ReportTables, specs
from autocomp.analysis.wide import Cell, WideTable, percent

# columns of the long tables that hold fractions: shown in percent on the page (the CSV and
# Parquet files keep the fractions)
PERCENT_COLUMNS = {
    "accuracy", "ci_low", "ci_high", "chance", "accuracy_a", "accuracy_b", "delta", "share",
    "survival", "cumulative", "rate", "concordance", "swap_accuracy", "confusion_accuracy",
    "agreement", "a_pass_b_fail", "a_fail_b_pass", "unanimous", "confusion_swap_only",
    "confusion_confusion", "delta_c", "pretrained", "finetuned",
}  # fmt: skip


def _fmt(v: object, column: str = "") -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return percent(v, chance=column == "chance") if column in PERCENT_COLUMNS else f"{v:.3f}"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


def _heading(column: str) -> str:
    return f"{column} %" if column in PERCENT_COLUMNS else column


def html_table(table: pa.Table, limit: int = 400) -> str:
    if table.num_rows == 0:
        return "<p class=empty>No rows: this run has no data for this analysis.</p>"
    head = "".join(f"<th>{escape(_heading(c))}</th>" for c in table.column_names)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(_fmt(r[c], c))}</td>" for c in table.column_names) + "</tr>"
        for r in table.slice(0, limit).to_pylist()
    )
    more = (
        f"<p class=note>{table.num_rows - limit} more rows in the CSV.</p>"
        if table.num_rows > limit
        else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


CSS = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;color:#222}
.warning{background:#fff4d6;border-left:4px solid #e0a800;padding:4px 8px}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.note,.empty{color:#666;font-size:12px}
.caveat{display:block;background:#fff4d6;border-left:4px solid #e0a800;padding:2px 6px;
margin:2px 0;font-size:12px;font-weight:normal;color:#5a4300}
figure{margin:1rem 0;display:block}figure svg{max-width:100%;height:auto;display:block}
figcaption{font-weight:bold;font-size:14px;margin-bottom:4px}
code{background:#f3f3f3;padding:0 3px}
.scroll{overflow-x:auto;max-width:100%}
table.paper{font-size:12px;margin-top:.3rem}
.tablebox{margin-top:1.2rem}.tablebox .title{font-weight:bold;font-size:14px;margin:4px 0}
table.paper thead th{text-align:center}table.paper th.stub{text-align:left;vertical-align:bottom}
table.paper tr.group th{text-align:left;font-style:italic;background:#fafafa}
table.paper tr.chance{color:#555;background:#f7f7f7}table.paper tbody th{font-weight:normal}
table.paper .ci{color:#777;font-size:10px;white-space:nowrap}
.omitted{color:#7a5c00;font-size:12px}"""


def _wide_cell(cell: Cell) -> str:
    interval = cell.interval
    ci = f" <span class=ci>{escape(interval)}</span>" if interval else ""
    return f"<td><span class=v>{escape(cell.text)}</span>{ci}</td>"


def wide_html(table: WideTable) -> str:
    """A paper-layout table: a header row per level (rowspan / colspan), group rows, the chance
    row first; every label escaped."""
    levels = table.header_levels()
    head = []
    for depth, runs in enumerate(levels):
        stub = (
            f'<th class=stub rowspan="{len(levels)}">{escape(table.stub)}</th>'
            if depth == 0
            else ""
        )
        cells = "".join(f'<th colspan="{span}">{escape(label)}</th>' for label, span in runs)
        head.append(f"<tr>{stub}{cells}</tr>")
    body = []
    width = 1 + len(table.columns)
    for group, rows in table.groups():
        if group:
            body.append(f'<tr class=group><th colspan="{width}">{escape(group)}</th></tr>')
        for row in rows:
            kind = "chance" if row.chance else "model"
            cells = "".join(_wide_cell(c) for c in row.cells)
            body.append(f"<tr class={kind}><th>{escape(row.label)}</th>{cells}</tr>")
    ident = escape(table.name, "id")
    return (
        f'<div class=tablebox><p class=title id="{ident}-title">{escape(table.title)}</p>'
        f'{caveats_html(table.caveats)}<div class=scroll><table class=paper id="{ident}" '
        f'aria-labelledby="{ident}-title"><thead>{"".join(head)}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></div></div>"
    )


def caveats_html(caveats: tuple[str, ...] | list[str]) -> str:
    """Each caveat as a highlighted line (class caveat)."""
    return "".join(f"<p class=caveat>{escape(c)}</p>" for c in caveats)


def paper_section(wide: list[WideTable], omitted: list[str]) -> str:
    parts = ['<h2 id="paper-tables">Paper tables</h2>']
    for table in wide:
        parts.append(f"{wide_html(table)}<p class=note>{escape(table.note)}</p>")
    parts += [f"<p class=omitted>{escape(note)}</p>" for note in omitted]
    return "".join(parts)


def figure_section(plots: list[tuple[Plot, str]], omitted: list[str]) -> str:
    """The figures (each: title, caveats, the inline SVG, its files) and the notes of those left
    out. `plots`: (plot, its saved SVG text)."""
    parts = ["<h2 id=figures>Figures</h2>"]
    for plot, svg in plots:
        parts.append(
            f'<figure id="fig-{escape(plot.name, "id")}"><figcaption>{escape(plot.title)}'
            f"</figcaption>{caveats_html(plot.caveats)}{inline_svg(svg, plot.name, plot.title)}"
            f"<p class=note>figures/{escape(plot.name)}.svg, .pdf, .png</p></figure>"
        )
    parts += [f"<p class=omitted>{escape(note)}</p>" for note in omitted]
    return "".join(parts)


def long_section(tables: dict[str, pa.Table], caveats: dict[str, list[str]]) -> str:
    parts = []
    for spec in specs("long"):
        key = spec.key
        if key in tables:
            parts.append(
                f'<details id="{escape(key, "id")}"><summary>{escape(key)} '
                f"({tables[key].num_rows} rows; tables/{escape(key)}.csv)</summary>"
                f"<p class=note>{escape(spec.note)}</p>"
                f"{caveats_html(caveats.get(key, []))}{html_table(tables[key])}</details>"
            )
    if not parts:
        return ""
    return '<h2 id="long-tables">Long tables</h2>' + "".join(parts)


def sections(report: ReportTables) -> str:
    """Every other analysis, in the registry's order (analysis/tables.py): its title, note,
    caveats and table, or the one-line note saying why it is left out."""
    tables, notes, caveats = report.tables, report.notes, report.caveats
    parts = []
    for spec in specs("section"):
        for key in spec.keys(tables) or [spec.key]:
            heading = spec.heading_of(key)
            present = key in tables and tables[key].num_rows > 0
            if key in notes and not present:  # left out, with its one-line note
                parts.append(
                    f"<p class=omitted>{escape(heading)} left out: {escape(notes[key])}</p>"
                )
            elif key in tables:
                why = notes.get(key, "")
                warning = f"<p class=warning>{escape(why[:1].upper() + why[1:])}</p>" if why else ""
                parts.append(
                    f'<h2 id="{escape(key, "id")}">{escape(heading)}</h2>'
                    f"<p class=note>{escape(spec.note)}</p>{caveats_html(caveats.get(key, []))}"
                    f"{warning}{html_table(tables[key])}"
                )
    return "".join(parts)


def _model_entry(name: str, m: Json) -> str:
    weights, backend, score = (escape(str(m.get(k, ""))) for k in ("weights", "backend", "score"))
    return f"<li><code>{escape(name)}</code>: {weights} ({backend}, score {score})</li>"


def render_html(
    data: RunData,
    report: ReportTables,
    seed: int,
    title: str | None = None,
    wide: list[WideTable] | None = None,
    omitted: list[str] | None = None,
    plots: list[tuple[Plot, str]] | None = None,
    plot_notes: list[str] | None = None,
) -> str:
    """The page of a run (`title`: its name, default the run folder's); reads its inputs only."""
    tables = report.tables
    models = "".join(_model_entry(name, m) for name, m in sorted(data.models.items()))
    heading = escape(title or data.run.name)
    protocols = (
        sorted(set(tables["accuracy"].column("protocol").to_pylist()))
        if tables["accuracy"].num_rows
        else []
    )
    meta = data.meta
    provenance = escape(json.dumps(meta, indent=1, sort_keys=True, default=str)[:50000])
    computed_on = "".join(
        f"<p class={'caveat' if caveat else 'note'}>{escape(line)}</p>"
        for line, caveat in report.scope.summary()
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>autocomp report: {heading}</title>
<style>{CSS}</style></head><body>
<h1>autocomp report: {heading}</h1>
<p>Protocols: {escape(", ".join(protocols))} (paper keeps candidates that describe the
positive's scene, strict drops them). autocomp {__version__}; analysis seed {seed};
benchmark protocol {escape(str(meta.get("protocol", "?")))}, made by autocomp
{escape(str(meta.get("autocomp_version", "?")))}.</p>
<h2 id=computed-on>What this report is computed on</h2>
{computed_on}
<p>Models and weights:</p><ul>{models}</ul>
{paper_section(wide or [], omitted or [])}
{figure_section(plots or [], plot_notes or [])}
{sections(report)}
{long_section(tables, report.caveats)}
<h2 id=provenance>Provenance</h2>
<p class=note>The benchmark's own record (configs, seeds, versions), from its Parquet metadata.</p>
<details><summary>benchmark metadata</summary><pre>{provenance}</pre></details>
</body></html>
"""
