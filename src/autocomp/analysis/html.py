"""The report page: one self-contained HTML file (inline SVG plots, no scripts)."""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa

from autocomp import __version__
from autocomp.analysis import finetune as finetune_analysis
from autocomp.analysis.escape import escape
from autocomp.analysis.plots import plots


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
    head = "".join(f"<th>{escape(c)}</th>" for c in table.column_names)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(_fmt(r[c]))}</td>" for c in table.column_names) + "</tr>"
        for r in table.slice(0, limit).to_pylist()
    )
    more = (
        f"<p class=note>{table.num_rows - limit} more rows in the CSV.</p>"
        if table.num_rows > limit
        else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


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
    ("per_relation", "Per-relation accuracy, Swap, every relation family (Table 15)", ""),
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
    (
        "human_per_annotator",
        "Per-annotator raw scores (Table 20)",
        "Correct answers per annotator out of the items they answered: Swap, Confusion, and "
        "validity answers that agree with the validator.",
    ),
    (
        "human_agreement",
        "Inter-annotator agreement (Fleiss' kappa)",
        "Items every annotator answered; categories yes/no (validity) and right/wrong (Swap, "
        "Confusion); unanimous = share of items with one answer throughout.",
    ),
    ("table8", "Confusion fine-tuning (Table 8)", finetune_analysis.TABLE8_NOTE),
    ("finetune_deltas", "Fine-tuned vs pretrained (Table 8)", finetune_analysis.DELTAS_NOTE),
]


CSS = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;color:#222}
.warning{background:#fff4d6;border-left:4px solid #e0a800;padding:4px 8px}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.note,.empty{color:#666;font-size:12px}figure{margin:.5rem;display:inline-block}
code{background:#f3f3f3;padding:0 3px}"""


def render_html(data: dict[str, Any], tables: dict[str, pa.Table], seed: int) -> str:
    def entry(name: str, m: dict) -> str:
        weights, backend, score = (
            escape(str(m.get(k, ""))) for k in ("weights", "backend", "score")
        )
        return f"<li><code>{escape(name)}</code>: {weights} ({backend}, score {score})</li>"

    def extra(key: str) -> str:
        note = (data.get("notes") or {}).get(key)
        return f"<p class=warning>{escape(note)}</p>" if note else ""

    models = "".join(entry(name, m) for name, m in sorted(data["models"].items()))
    title = escape(data.get("title") or data["run"].name)
    protocols = (
        sorted(set(tables["accuracy"].column("protocol").to_pylist()))
        if tables["accuracy"].num_rows
        else []
    )
    meta = data["meta"]
    provenance = escape(json.dumps(meta, indent=1, sort_keys=True, default=str)[:50000])
    sections = []
    for key, heading, note in SECTIONS:
        if key in tables:
            sections.append(
                f'<h2 id="{escape(key, "id")}">{escape(heading)}</h2>'
                f"<p class=note>{escape(note)}</p>{extra(key)}{html_table(tables[key])}"
            )
    for key in sorted(k for k in tables if k.startswith("judge_agreement_")):
        sections.append(
            f'<h2 id="{escape(key, "id")}">Agreement with judge {escape(key[16:])} (Table 21)</h2>'
            f"<p class=note>a = this run's verdicts, b = the other judge; Cohen's kappa.</p>"
            f"{html_table(tables[key])}"
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>autocomp report: {title}</title>
<style>{CSS}</style></head><body>
<h1>autocomp report: {title}</h1>
<p>Protocols: {escape(", ".join(protocols))} (paper keeps candidates that describe the
positive's scene, strict drops them). autocomp {__version__}; analysis seed {seed};
benchmark protocol {escape(str(meta.get("protocol", "?")))}, made by autocomp
{escape(str(meta.get("autocomp_version", "?")))}.</p>
<p>Models and weights:</p><ul>{models}</ul>
{plots(tables)}
{"".join(sections)}
<h2 id=provenance>Provenance</h2>
<p class=note>The benchmark's own record (configs, seeds, versions), from its Parquet metadata.</p>
<details><summary>benchmark metadata</summary><pre>{provenance}</pre></details>
</body></html>
"""
