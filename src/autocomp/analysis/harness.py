"""Harness benchmarks in the report: the official metric of an imported benchmark from a run's
raw scores, what another harness's rule would give, and one model's profile across benchmarks.

A harness import (importers/harness.py) writes one row per image of a group, its candidates the
group's texts in order, so a model's scores (results/<model>/scores/) of row k, candidate t are
S[k][t]. `outcomes` rebuilds every group's matrix and judges it with the benchmark's rule
(scoring/rules.py) under each tie policy (official, strict, lenient) and for each score type
(score; per_token = the summed log-likelihood over the caption's tokens, generative models
only: lmms-eval's `llava_hf` ranks by mean token loss). A row the model failed on has no scores:
every unit that needs it is wrong and counted in `failed_groups`.

`metrics` turns the outcomes into the benchmark's numbers: per subset the mean of its units,
and the headline ("all") as the benchmark's registry entry says (micro: pool the units; macro:
the mean of the subsets'), each with a percentile-bootstrap interval over groups (the unit the
rule judges together; resampled within each subset; `seed`). `rule_effects` lists where a tie
rule or an aggregation other than the official one gives another number (one model across
benchmarks: analysis/profile.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from autocomp.scoring.rules import RULES, TIES
from autocomp.store.catalog.runs import ScoreRun
from autocomp.store.catalog.schemas import (
    HARNESS_METRICS_SCHEMA,
    HARNESS_OUTCOME_SCHEMA,
    HARNESS_UNSCORED_SCHEMA,
)
from autocomp.store.tables import read_metadata

HARNESS_COLUMNS = (
    "sample_id", "benchmark", "subset", "group_id", "image_index", "group_images", "query",
    "texts", "true_texts",
)  # fmt: skip
RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Harness:
    """An imported harness benchmark as a run holds it: its name, rule, official tie policy,
    aggregation, and the harness columns of its rows."""

    name: str
    rule: str
    tie: str
    aggregate: str
    rows: pa.Table


def harness_of(benchmark_dir: Path) -> Harness | None:
    """The harness benchmark of a run's benchmark folder (None: not a harness import)."""
    from autocomp.store.catalog.benchmarks import open_benchmark

    if not benchmark_dir.is_dir():
        return None
    source = open_benchmark(benchmark_dir)
    if not set(HARNESS_COLUMNS) <= set(source.schema.names):
        return None
    parts = sorted((benchmark_dir / "data").glob("*.parquet")) or sorted(
        benchmark_dir.glob("*.parquet")
    )
    document = read_metadata(parts[0]) if parts else {}
    rule = str(document.get("rule", ""))
    if rule not in RULES:
        return None
    return Harness(
        name=str(document.get("harness")), rule=rule, tie=str(document.get("tie")),
        aggregate=str(document.get("aggregate", "micro")), rows=source.read(list(HARNESS_COLUMNS)),
    )  # fmt: skip


def read_scores(result: Path) -> pa.Table:
    """A model's scores (results/<model>/scores/part-*.parquet), one row per sample and
    candidate (a row scored twice by a resumed run keeps its last score)."""
    import pyarrow.parquet as pq

    parts = sorted(ScoreRun(result).scores.glob("part-*.parquet"))
    if not parts:
        return pa.table({"sample_id": pa.array([], pa.string())})
    return pa.concat_tables(
        [
            pq.read_table(p, columns=["sample_id", "candidate_index", "score", "tokens"])
            for p in parts
        ]
    )


def _score_maps(scores: pa.Table) -> dict[str, dict[tuple[str, int], float]]:
    """score type -> (sample id, candidate) -> score ("per_token" where tokens are known)."""
    out: dict[str, dict[tuple[str, int], float]] = {"score": {}}
    if not scores.num_rows:
        return out
    per_token: dict[tuple[str, int], float] = {}
    for row in scores.to_pylist():
        key = (row["sample_id"], int(row["candidate_index"]))
        out["score"][key] = float(row["score"])
        if row.get("tokens"):
            per_token[key] = float(row["score"]) / int(row["tokens"])
    if per_token:
        out["per_token"] = per_token
    return out


def _groups(rows: pa.Table) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows.to_pylist():
        groups[(row["subset"], row["group_id"])].append(row)
    for members in groups.values():
        members.sort(key=lambda r: r["image_index"])
    return groups


def outcomes(harness: Harness, scores: Mapping[str, pa.Table]) -> pa.Table:
    """Per model (name -> its scores table), score type, tie policy, group and metric: the
    units the rule counts and how many are right (HARNESS_OUTCOME_SCHEMA)."""
    rule = RULES[harness.rule]
    groups = _groups(harness.rows)
    out: list[dict[str, Any]] = []
    for model, table in scores.items():
        for score_type, cells in _score_maps(table).items():
            for (subset, group_id), members in groups.items():
                width = len(members[0]["texts"])
                matrix = [[cells.get((r["sample_id"], t)) for t in range(width)] for r in members]
                failed = any(v is None for row in matrix for v in row)
                truth = [tuple(r["true_texts"]) for r in members]
                for tie in TIES:
                    judged = rule.outcome(matrix, truth, tie, members[0]["query"])
                    for metric, units in judged.items():
                        if not units:
                            continue
                        out.append({
                            "model": model, "score_type": score_type, "tie": tie,
                            "benchmark": harness.name, "subset": subset, "group_id": group_id,
                            "metric": metric, "units": len(units), "correct": sum(units),
                            "failed": failed,
                        })  # fmt: skip
    return pa.Table.from_pylist(out, HARNESS_OUTCOME_SCHEMA)


def _resampled(correct: Any, units: Any, rng: Any) -> tuple[Any, Any]:
    """RESAMPLES bootstrap draws of (correct, units) summed over a subset's groups. Groups of one
    unit each (Winoground, EqBen, MMVP-VLM): the resampled correct count is exactly
    Binomial(groups, accuracy), drawn as such; otherwise groups are resampled, in chunks that
    bound the memory to a few million indices."""
    import numpy as np

    n = len(units)
    if (units == 1).all():
        return rng.binomial(n, correct.sum() / n, RESAMPLES), np.full(RESAMPLES, n)
    sums_c, sums_u = [], []
    step = max(1, 2_000_000 // n)
    for start in range(0, RESAMPLES, step):
        picks = rng.integers(0, n, (min(step, RESAMPLES - start), n))
        sums_c.append(correct[picks].sum(1))
        sums_u.append(units[picks].sum(1))
    return np.concatenate(sums_c), np.concatenate(sums_u)


def _interval(per_subset: list[tuple[Any, Any]], macro: bool, seed: int) -> tuple[float, float]:
    """Percentile bootstrap of the accuracy over groups, resampled within each subset."""
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = [_resampled(correct, units, rng) for correct, units in per_subset]
    if macro:
        values = np.mean([c / u for c, u in draws], axis=0)
    else:
        values = sum(c for c, _ in draws) / sum(u for _, u in draws)
    tail = (1 - CONFIDENCE) / 2 * 100
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def _cell(
    key: tuple, subsets: dict[str, tuple[Any, Any]], macro: bool, seed: int
) -> dict[str, Any]:
    model, score_type, tie, benchmark, metric, subset = key
    pairs = list(subsets.values())
    if macro:
        accuracy = sum(float(c.sum() / u.sum()) for c, u in pairs) / len(pairs)
    else:
        accuracy = float(sum(c.sum() for c, _ in pairs) / sum(u.sum() for _, u in pairs))
    low, high = _interval(pairs, macro, seed)
    return {
        "model": model, "score_type": score_type, "tie": tie, "benchmark": benchmark,
        "subset": subset, "metric": metric, "aggregate": "macro" if macro else "micro",
        "groups": sum(len(u) for _, u in pairs), "units": int(sum(u.sum() for _, u in pairs)),
        "accuracy": accuracy, "low": low, "high": high,
    }  # fmt: skip


def metrics(table: pa.Table, aggregate: str, seed: int = 0) -> pa.Table:
    """The benchmark's numbers from `outcomes`: per subset, and the headline "all" (aggregate
    micro or macro), with intervals; each with the other aggregation as `all (micro)` /
    `all (macro)` where the two differ in kind (several subsets)."""
    import numpy as np

    cells: dict[tuple, dict[str, tuple[list[int], list[int]]]] = defaultdict(dict)
    for row in table.to_pylist():
        key = (row["model"], row["score_type"], row["tie"], row["benchmark"], row["metric"])
        correct, units = cells[key].setdefault(row["subset"], ([], []))
        correct.append(row["correct"])
        units.append(row["units"])
    out = []
    order = {tie: i for i, tie in enumerate(TIES)}
    for key, subsets in sorted(
        cells.items(), key=lambda kv: (kv[0][0], kv[0][1], order[kv[0][2]], kv[0][3], kv[0][4])
    ):
        arrays = {s: (np.array(c), np.array(u)) for s, (c, u) in sorted(subsets.items())}
        for subset, pair in arrays.items():
            out.append(_cell((*key, subset), {subset: pair}, False, seed))
        out.append(_cell((*key, "all"), arrays, aggregate == "macro", seed))
        if len(arrays) > 1:
            other = "micro" if aggregate == "macro" else "macro"
            out.append(_cell((*key, f"all ({other})"), arrays, other == "macro", seed))
    return pa.Table.from_pylist(out, HARNESS_METRICS_SCHEMA)


def rule_effects(table: pa.Table, official_tie: str) -> pa.Table:
    """Where another rule gives another headline than the official one (official tie,
    official aggregation, native scores): a tie policy (strict, lenient), the other
    aggregation, per-token scores; one row per model, metric and alternative, with both
    numbers and the difference."""
    rows = table.to_pylist()
    official = {
        (r["model"], r["metric"]): r for r in rows
        if r["tie"] == "official" and r["score_type"] == "score" and r["subset"] == "all"
    }  # fmt: skip
    out = []
    for r in rows:
        base = official.get((r["model"], r["metric"]))
        if base is None or r is base or not r["subset"].startswith("all"):
            continue
        changed = []
        if r["tie"] != "official":
            changed.append(f"ties {'wrong' if r['tie'] == 'strict' else 'right'}")
        if r["subset"] != "all":
            changed.append(r["subset"][5:-1])
        if r["score_type"] != "score":
            changed.append(r["score_type"])
        if len(changed) != 1 or r["accuracy"] == base["accuracy"]:
            continue
        out.append({
            "model": r["model"], "benchmark": r["benchmark"], "metric": r["metric"],
            "official": base["accuracy"], "official_rule": f"ties {official_tie}, "
            f"{base['aggregate']}", "alternative": changed[0], "accuracy": r["accuracy"],
            "difference": r["accuracy"] - base["accuracy"],
        })  # fmt: skip
    schema = pa.schema(
        [("model", pa.string()), ("benchmark", pa.string()), ("metric", pa.string()),
         ("official", pa.float64()), ("official_rule", pa.string()),
         ("alternative", pa.string()), ("accuracy", pa.float64()), ("difference", pa.float64())]
    )  # fmt: skip
    return pa.Table.from_pylist(out, schema)


def refusal(result: Path) -> str:
    """Why a model's run gives no score matrix ("" when it does): a blind run scores each text
    without the image (every image of a group would get the same scores), a choice run scores
    option labels, not texts."""
    try:
        record = json.loads((result / "run.json").read_text())
    except (OSError, ValueError):
        return ""
    blind = record.get("blind")
    if blind == "choice":
        return (
            "scored with --blind choice: its scores are option labels, not a text per image; "
            "score without --blind for the benchmark's rule"
        )
    if blind:
        return (
            "scored with --blind: each text without the image, so every image of a group gets "
            "the same scores and the rule (text and image side) says nothing; score without "
            "--blind"
        )
    return ""


def run_tables(run: Path, seed: int = 0) -> dict[str, pa.Table] | None:
    """harness_metrics, harness_rules, harness_unscored (models refused, groups that lack
    scores) and harness_groups (per model, group and metric under the official rule: units and
    how many are right) of a run folder whose benchmark is a harness import (None: it is not
    one)."""
    harness = harness_of(run / "benchmark")
    if harness is None:
        return None
    results = sorted(p for p in (run / "results").glob("*") if (p / "scores").is_dir())
    refused = {p.name: refusal(p) for p in results}
    total = len(
        {
            (r["subset"], r["group_id"])
            for r in harness.rows.select(["subset", "group_id"]).to_pylist()
        }
    )
    unscored = [{"model": m, "groups": total, "reason": why} for m, why in refused.items() if why]
    kept = {p.name: read_scores(p) for p in results if not refused[p.name]}
    table = outcomes(harness, kept)
    numbers = metrics(table, harness.aggregate, seed)
    failed = table.filter(
        pc.and_(table["failed"], pc.and_(pc.equal(table["tie"], "official"),
                                         pc.equal(table["score_type"], "score")))
    )  # fmt: skip
    per_model: dict[str, set] = defaultdict(set)
    for row in failed.select(["model", "subset", "group_id"]).to_pylist():
        per_model[row["model"]].add((row["subset"], row["group_id"]))
    unscored += [
        {"model": m, "groups": len(g), "reason": "a row failed or was not scored (see "
         "failed.json / the predictions' reason): every unit needing it counts as wrong"}
        for m, g in sorted(per_model.items())
    ]  # fmt: skip
    rule = pa.array([f"{harness.rule} (ties {harness.tie})"] * numbers.num_rows, pa.string())
    official = pc.and_(pc.equal(table["tie"], "official"), pc.equal(table["score_type"], "score"))
    return {
        "harness_groups": table.filter(official).drop_columns(["tie", "score_type"]),
        "harness_metrics": numbers.append_column("rule", rule),
        "harness_rules": rule_effects(numbers, harness.tie),
        "harness_unscored": pa.Table.from_pylist(unscored, HARNESS_UNSCORED_SCHEMA),
    }


# ----------------------------------------------------------------------------- report tables

Place = Literal["section", "long", "files"]  # analysis/tables.py's
REPORT_TABLES: tuple[tuple[str, str, str, Place], ...] = (  # (key, heading, note, place)
    (
        "harness_metrics", "The benchmark's own metric (harness import)",
        "The imported benchmark's official rule on the group score matrices of each model's raw "
        "scores: per subset and the headline (all) as the benchmark aggregates, under its own "
        "tie policy (official) and with ties counted wrong (strict) or right (lenient); "
        "per_token = summed log-likelihood / tokens (generative models); 95 % percentile "
        "bootstrap over groups. The accuracy tables above judge candidate 0 against the rest "
        "and are not this benchmark's metric.", "section",
    ),
    (
        "harness_rules", "Where another harness's rule gives another number",
        "Each headline under the official rule and under one change: ties counted wrong or "
        "right, the other aggregation of subsets (micro vs macro), per-token scores. Only the "
        "changes that move the number are listed.", "section",
    ),
    (
        "harness_groups", "Per group under the benchmark's rule",
        "Per model, group and metric, under the official rule on native scores: the units the "
        "rule counts and how many are right; failed: a row of the group has no scores.", "files",
    ),
    (
        "harness_unscored", "Models and groups the benchmark's rule could not judge",
        "A model scored in a mode that gives no score matrix (--blind, --blind choice) is left "
        "out of the harness tables; a group with a row that failed counts as wrong.", "section",
    ),
)  # fmt: skip
PROFILE_NOTE = (
    "This run and every --compare run of another benchmark: each model's headline per "
    "benchmark, with that benchmark's own metric, rule and 95 % interval (harness imports: "
    "bootstrap over groups; Auto-Comp: exact binomial over items, paper protocol)."
)
