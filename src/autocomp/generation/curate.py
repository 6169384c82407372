"""The curate stage: the benchmark sets and the survival table from render rows and verdicts.

- B_min / B_ctx: Minimal / Contextual samples that passed every check of their condition.
- B_paired: concepts whose Minimal *and* Contextual samples both passed (the A/B set).
A sample passes when every verdict is `pass` or `n/a`; `failed_check` names its first failure.

Outputs, in the --out folder:
    curated.parquet   one row per accepted sample (render columns, then accepted, failed_check,
                      in_min, in_ctx, paired); `keep_rejected=True` keeps rejected samples too,
                      marked accepted = false, for audits and for pipeline tests with
                      random-weight models. Image paths stay relative to the render folder
                      (recorded as `images` in the metadata).
    survival.parquet  per family x N x condition x check: entered, passed, survival (passed /
                      entered), cumulative (passed / all samples of that cell): the paper's
                      Table 3. With the captions folder, a `caption` row per family x N counts
                      the concepts that kept a Contextual caption.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.config import CurateConfig
from autocomp.errors import UsageError
from autocomp.generation.validate import CHECKS
from autocomp.store.catalog.schemas import CURATED_FIELDS, SURVIVAL_SCHEMA
from autocomp.store.shards import input_digest, prepare_folder, read_stage
from autocomp.store.tables import provenance, write_table


def sample_outcomes(verdicts: list[dict[str, Any]]) -> dict[str, str | None]:
    """sample_id -> first failed check (None: passed every check)."""
    first: dict[str, tuple[int, str | None]] = {}
    for v in verdicts:
        sid = v["sample_id"]
        step, failed = first.get(sid, (99, None))
        if v["outcome"] == "fail" and v["step"] < step:
            first[sid] = (v["step"], v["check"])
        else:
            first.setdefault(sid, (99, None))
    return {sid: failed for sid, (_, failed) in first.items()}


def survival(verdicts: list[dict[str, Any]], captions: list[dict[str, Any]] | None) -> pa.Table:
    """Survival per family x N x condition x check. A sample *enters* a check when it passed
    every earlier check (so the figures are the same whether later checks were skipped or run
    on every sample for an audit); n/a checks are left out."""
    by_sample: dict[str, dict[str, Any]] = {}
    for v in verdicts:
        entry = by_sample.setdefault(
            v["sample_id"], {"key": (v["family"], v["n"], v["condition"]), "outcomes": {}}
        )
        entry["outcomes"][v["check"]] = v["outcome"]
    cells: dict[tuple, dict[str, int]] = defaultdict(lambda: {"entered": 0, "passed": 0})
    totals: dict[tuple, int] = defaultdict(int)
    for entry in by_sample.values():
        totals[entry["key"]] += 1
        alive = True
        for check in CHECKS:
            outcome = entry["outcomes"].get(check, "n/a")
            if outcome == "n/a" or not alive:
                continue
            cell = cells[tuple(entry["key"]) + (check,)]
            cell["entered"] += 1
            alive = outcome == "pass"
            cell["passed"] += alive
    rows = []
    for (family, n, condition, check), cell in cells.items():
        total = totals[(family, n, condition)]
        rows.append(
            {
                "family": family,
                "n": n,
                "condition": condition,
                "check": check,
                "step": CHECKS.index(check) + 1,
                **cell,
                "survival": cell["passed"] / cell["entered"],
                "cumulative": cell["passed"] / total,
            }
        )
    for (family, n), (kept, total) in _caption_cells(captions or []).items():
        rows.append(
            {
                "family": family,
                "n": n,
                "condition": "both",
                "check": "caption",
                "step": 0,
                "entered": total,
                "passed": kept,
                "survival": kept / total,
                "cumulative": kept / total,
            }
        )
    rows.sort(key=lambda r: (r["family"], r["n"], r["condition"], r["step"]))
    return pa.Table.from_pylist(rows, SURVIVAL_SCHEMA)


def _caption_cells(captions: list[dict[str, Any]]) -> dict[tuple, tuple[int, int]]:
    cells: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for c in captions:
        cell = cells[(c["family"], c["n"])]
        cell[0] += c["status"] == "accepted"
        cell[1] += 1
    return {k: (v[0], v[1]) for k, v in cells.items()}


def curate_stage(
    render: str | Path,
    verdicts: str | Path,
    out: str | Path,
    captions: str | Path | None = None,
    config: CurateConfig = CurateConfig(),
) -> dict[str, int]:
    """`autocomp curate`: the curated table and the survival table (the paper's Table 3).

    Args:
        render: the render folder.
        verdicts: the verdicts folder, holding a verdict for every rendered sample.
        out: the folder for curated.parquet and survival.parquet.
        captions: the captions folder (marks fallback Contextual captions); optional.
        config: whether rejected samples are kept, marked (`keep_rejected`: random weights).

    Returns:
        The set sizes: samples, B_min, B_ctx, B_paired and the rows kept.
    """
    folder = prepare_folder(out)
    render_table, render_meta = read_stage(render, "render", "render")
    verdict_table, verdict_meta = read_stage(verdicts, "verdicts", "verdicts")
    caption_rows = read_stage(captions, "captions", "captions")[0].to_pylist() if captions else None
    vrows = verdict_table.to_pylist()
    outcomes = sample_outcomes(vrows)
    samples = render_table.to_pylist()
    unvalidated = [s["sample_id"] for s in samples if s["sample_id"] not in outcomes]
    if unvalidated:
        raise UsageError(
            "verdicts",
            str(verdicts),
            f"has no verdicts for {len(unvalidated)} rendered sample(s) "
            f"(first: {unvalidated[0]}); validate every render shard first",
        )
    passed = {s["sample_id"] for s in samples if outcomes[s["sample_id"]] is None}
    by_concept: dict[str, set[str]] = defaultdict(set)
    for s in samples:
        if s["sample_id"] in passed:
            by_concept[s["concept_id"]].add(s["condition"])
    rows = []
    counts = {"samples": len(samples), "b_min": 0, "b_ctx": 0, "b_paired": 0, "kept": 0}
    for s in samples:
        ok = s["sample_id"] in passed
        paired = {"minimal", "contextual"} <= by_concept[s["concept_id"]]
        row = {
            **s,
            "accepted": ok,
            "failed_check": outcomes[s["sample_id"]],
            "in_min": ok and s["condition"] == "minimal",
            "in_ctx": ok and s["condition"] == "contextual",
            "paired": paired,
        }
        counts["b_min"] += row["in_min"]
        counts["b_ctx"] += row["in_ctx"]
        counts["b_paired"] += paired and s["condition"] == "minimal"
        if ok or config.keep_rejected:
            rows.append(row)
    counts["kept"] = len(rows)
    schema = pa.schema(list(render_table.schema) + [pa.field(n, t) for n, t in CURATED_FIELDS])
    made_by = {
        "render": render_meta.get("config"),
        "validation": verdict_meta.get("config"),
        "keep_rejected": config.keep_rejected,
        "render_sha256": input_digest(render, "render", "render"),
        "verdicts_sha256": input_digest(verdicts, "verdicts", "verdicts"),
    }
    write_table(
        pa.Table.from_pylist(rows, schema),
        folder / "curated.parquet",
        provenance(
            "curated", **made_by, sets={k: counts[k] for k in ("b_min", "b_ctx", "b_paired")}
        ),
    )
    write_table(
        survival(vrows, caption_rows),
        folder / "survival.parquet",
        provenance("survival", **made_by),
    )
    return counts
