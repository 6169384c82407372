"""Analyses of stored tables (no model is re-run): the paper's tables with uncertainty.

Inputs are the tables the stages write: predictions (autocomp score), the benchmark table, the
concept set, survival, verdicts. Every function returns a pyarrow Table.

Statistics
- Accuracy intervals: the percentile bootstrap that resamples concepts. Within one cell (model x
  family x N x condition x set x protocol) each concept contributes one item, so the number of
  correct items in a bootstrap sample is Binomial(n, k/n): the bootstrap distribution is known
  exactly, and its 2.5 / 97.5 % quantiles are computed, not simulated (no resampling noise).
- Paired Minimal-vs-Contextual deltas (Table 6) and hard-negative-vs-base deltas (Table 7): on
  the concepts both sides have; interval by a seeded paired bootstrap over concepts (the per-
  concept differences are -1, 0 or +1, so a resample is one multinomial draw); p-value by the
  exact McNemar test (a binomial test on the discordant pairs, scipy).
- Agreement between two judges: Cohen's kappa (scikit-learn), with the directional split of the
  disagreements (Table 21).

Score types: predictions may carry a `score_type` column: "score" (the model's native score),
"per_token" (generative: summed log-likelihood / caption tokens) or "choice" (the A.8 blind
multiple-choice test). Every analysis keeps them apart (it is a key of every cell and pair); a
table without the column is all "score".

Over 450 lines because it is a library of small independent analyses, one function per paper
table; each one is short and reads only the long tables."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from autocomp.protocol.negatives import arrangements
from autocomp.store.catalog.ids import concept_of

CELL = ("model", "family", "n", "condition", "set", "protocol", "score_type")
CONFIDENCE = 0.95
DEFAULT_SCORE_TYPE = "score"


def rows_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> pa.Table:
    """A table of `rows` with exactly `columns` (null-typed columns when there is no row)."""
    if not rows:
        return pa.table({c: pa.array([], pa.null()) for c in columns})
    return pa.Table.from_pylist(rows).select(list(columns))


def with_score_type(predictions: pa.Table) -> pa.Table:
    """The predictions with a string `score_type` column: added as "score" where the table has
    none, its missing values read as "score"."""
    if "score_type" not in predictions.column_names:
        column = pa.array([DEFAULT_SCORE_TYPE] * predictions.num_rows, pa.string())
        return predictions.append_column("score_type", column)
    i = predictions.schema.get_field_index("score_type")
    filled = pc.fill_null(pc.cast(predictions["score_type"], pa.string()), DEFAULT_SCORE_TYPE)
    return predictions.set_column(i, "score_type", filled)


def binomial_interval(correct: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact percentile-bootstrap interval of an accuracy (see the module doc)."""
    from scipy.stats import binom

    if n == 0:
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2
    p = correct / n
    return float(binom.ppf(tail, n, p) / n), float(binom.ppf(1 - tail, n, p) / n)


def _as_int(table: pa.Table, *names: str) -> pa.Table:
    for name in names:
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.cast(table[name], pa.int64()))
    return table


def accuracy(predictions: pa.Table) -> pa.Table:
    """Accuracy with its 95 % interval per cell, plus the chance baseline of the actual sets
    (one vectorised group-by: paper scale is tens of millions of prediction rows)."""
    import numpy as np
    from scipy.stats import binom

    t = _as_int(
        with_score_type(predictions).select([*CELL, "correct", "failed", "tie", "candidates"]),
        "correct",
        "failed",
        "tie",
    )
    t = t.append_column("inverse", pc.divide(1.0, pc.cast(t["candidates"], pa.float64())))
    g = t.group_by(list(CELL)).aggregate(
        [
            ("correct", "count"),
            ("correct", "sum"),
            ("failed", "sum"),
            ("tie", "sum"),
            ("inverse", "mean"),
        ]
    )
    n = np.asarray(g["correct_count"], dtype=float)
    k = np.asarray(g["correct_sum"], dtype=float)
    tail = (1 - CONFIDENCE) / 2
    p = np.divide(k, n, out=np.zeros_like(k), where=n > 0)
    out = g.select(list(CELL)).append_column("items", g["correct_count"])
    out = out.append_column("correct", g["correct_sum"]).append_column("accuracy", pa.array(p))
    out = out.append_column("ci_low", pa.array(binom.ppf(tail, n, p) / n))
    out = out.append_column("ci_high", pa.array(binom.ppf(1 - tail, n, p) / n))
    out = out.append_column("chance", g["inverse_mean"]).append_column("failed", g["failed_sum"])
    out = out.append_column("ties", g["tie_sum"])
    return out.sort_by([(c, "ascending") for c in CELL])


# ----------------------------------------------------------------------------- paired tests


def mcnemar(only_a: int, only_b: int) -> float:
    """Exact McNemar p-value from the discordant pairs (a right & b wrong, a wrong & b right)."""
    from scipy.stats import binomtest

    total = only_a + only_b
    return 1.0 if total == 0 else float(binomtest(only_a, total, 0.5).pvalue)


def paired_interval_counts(
    minus: int, same: int, plus: int, seed: int = 0, resamples: int = 10_000
) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean of per-concept differences in {-1, 0, +1}, from
    their counts: a resample of n concepts is one multinomial draw of the three counts."""
    import numpy as np

    n = minus + same + plus
    if n == 0:
        return float("nan"), float("nan")
    draws = np.random.default_rng(seed).multinomial(
        n, [minus / n, same / n, plus / n], size=resamples
    )
    means = (draws[:, 2] - draws[:, 0]) / n
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def paired_interval(diffs: Sequence[int], seed: int = 0) -> tuple[float, float]:
    """The same interval from the differences themselves."""
    counts = Counter(diffs)
    return paired_interval_counts(counts[-1], counts[0], counts[1], seed)


PAIRED_COLUMNS = [
    "concepts",
    "accuracy_a",
    "accuracy_b",
    "delta",
    "ci_low",
    "ci_high",
    "only_a",
    "only_b",
    "p_value",
]


def with_concept(predictions: pa.Table) -> pa.Table:
    """The predictions with a `concept` column (the sample id without its /condition)."""
    concept = pc.replace_substring_regex(
        predictions["sample_id"], pattern="/[^/]*$", replacement=""
    )
    return predictions.append_column("concept", concept)


def _paired(a: pa.Table, b: pa.Table, keys: list[str], seed: int) -> list[dict[str, Any]]:
    """Join side a and side b (keys + concept + correct) on their shared concepts and compare
    each group: accuracies, delta b - a, paired interval, McNemar."""
    a = a.select([*keys, "concept", "correct"]).rename_columns([*keys, "concept", "a"])
    b = b.select([*keys, "concept", "correct"]).rename_columns([*keys, "concept", "b"])
    j = a.join(b, keys=[*keys, "concept"], join_type="inner")
    j = j.append_column("only_a", pc.and_(j["a"], pc.invert(j["b"])))
    j = j.append_column("only_b", pc.and_(pc.invert(j["a"]), j["b"]))
    j = _as_int(j, "a", "b", "only_a", "only_b")
    g = j.group_by(keys).aggregate(
        [("concept", "count"), ("a", "sum"), ("b", "sum"), ("only_a", "sum"), ("only_b", "sum")]
    )
    rows = []
    for r in g.sort_by([(k, "ascending") for k in keys]).to_pylist():
        n, only_a, only_b = r["concept_count"], r["only_a_sum"], r["only_b_sum"]
        low, high = paired_interval_counts(only_a, n - only_a - only_b, only_b, seed)
        rows.append(
            {
                **{k: r[k] for k in keys},
                "concepts": n,
                "accuracy_a": r["a_sum"] / n,
                "accuracy_b": r["b_sum"] / n,
                "delta": (only_b - only_a) / n,
                "ci_low": low,
                "ci_high": high,
                "only_a": only_a,
                "only_b": only_b,
                "p_value": mcnemar(only_a, only_b),
            }
        )
    return rows


def context_deltas(
    predictions: pa.Table, paired: set[str] | None = None, seed: int = 0
) -> pa.Table:
    """Contextual minus Minimal accuracy per model x family x N x set x protocol on the paired
    set (concepts whose both samples passed validation; all shared concepts if not given)."""
    t = with_concept(with_score_type(predictions))
    if paired is not None:
        t = t.filter(pc.is_in(t["concept"], pa.array(sorted(paired), pa.string())))
    keys = ["model", "family", "n", "set", "protocol", "score_type"]
    minimal = t.filter(pc.equal(t["condition"], "minimal"))
    contextual = t.filter(pc.equal(t["condition"], "contextual"))
    return rows_table(_paired(minimal, contextual, keys, seed), [*keys, *PAIRED_COLUMNS])


def model_deltas(predictions: pa.Table, pairs: dict[str, str], seed: int = 0) -> pa.Table:
    """Each model against its base model (pairs: model -> base), same items (Table 7)."""
    keys = ["model", "base", "family", "n", "condition", "set", "protocol", "score_type"]
    columns = [*keys, *PAIRED_COLUMNS]
    if not pairs:
        return rows_table([], columns)
    t = with_concept(with_score_type(predictions))
    links = pa.table({"model": list(pairs), "base": list(pairs.values())})
    mine = t.join(links, keys="model", join_type="inner")
    bases = t.filter(pc.is_in(t["model"], pa.array(sorted(set(pairs.values())), pa.string())))
    bases = bases.rename_columns(["base" if c == "model" else c for c in bases.column_names])
    bases = bases.join(links, keys="base", join_type="inner")
    return rows_table(_paired(bases, mine, keys, seed), columns)


# ----------------------------------------------------------------------------- breakdowns


def _join(predictions: pa.Table, benchmark: pa.Table, columns: Sequence[str]) -> list[dict]:
    wanted = ["sample_id", *[c for c in columns if c != "sample_id"]]
    info = {r["sample_id"]: r for r in benchmark.select(wanted).to_pylist()}
    return [
        {**r, **info[r["sample_id"]]} for r in predictions.to_pylist() if r["sample_id"] in info
    ]


def per_relation(
    predictions: pa.Table,
    benchmark: pa.Table,
    families: Iterable[str],
    set_name: str = "swap",
) -> pa.Table:
    """Accuracy per relation in every relation-kind family and N (Table 15: Position N=2 Swap),
    with intervals. `families`: the relation families (select by kind, never by name)."""
    families = set(families)
    cells: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    columns = ["model", "family", "n", "condition", "protocol", "score_type", "relation"]
    columns += ["items", "accuracy", "ci_low", "ci_high"]
    if not families or "attributes" not in benchmark.column_names:
        return rows_table([], columns)  # no relation family: nothing to break down
    predictions = predictions.filter(pc.is_in(predictions["family"], pa.array(sorted(families))))
    for r in _join(with_score_type(predictions), benchmark, ["sample_id", "attributes"]):
        if r["family"] in families and r["set"] == set_name:
            key = (r["model"], r["family"], r["n"], r["condition"], r["protocol"], r["score_type"])
            cell = cells[key + (r["attributes"][0],)]
            cell[0] += 1
            cell[1] += bool(r["correct"])
    rows = []
    for cell_key, (items, k) in sorted(cells.items()):
        model, family, n, condition, protocol, score_type, relation = cell_key
        low, high = binomial_interval(k, items)
        rows.append(
            {
                "model": model,
                "family": family,
                "n": n,
                "condition": condition,
                "protocol": protocol,
                "score_type": score_type,
                "relation": relation,
                "items": items,
                "accuracy": k / items,
                "ci_low": low,
                "ci_high": high,
            }
        )
    return rows_table(rows, columns)


ERROR_TYPES = (
    "swapped attributes",  # the objects once each, the attributes permuted (a Swap negative)
    "repeated pair",  # one (object, attribute) pair twice: "a red cup and a red cup"
    "shared object",  # an object twice with different attributes: "a red cup and a blue cup"
    "shared attribute",  # distinct objects, an attribute on two of them: "a red cup, a red lamp"
    "same scene",  # describes the positive's scene (flagged; the strict protocol drops it)
)


def error_type(n: int, arrangement: int, same_scene: bool) -> str:
    """The kind of a wrong Confusion choice in an attribute family, from its arrangement."""
    if same_scene:
        return "same scene"
    arr = arrangements(False, n)
    objects, labels = arr.objects[arrangement], arr.labels[arrangement]
    pairs = Counter(zip(objects, labels))
    if max(pairs.values()) > 1:
        return "repeated pair"
    if len(set(objects)) < n:
        return "shared object"
    if len(set(labels)) < n:
        return "shared attribute"
    return "swapped attributes"


def confusion_taxonomy(
    predictions: pa.Table, benchmark: pa.Table, families: Iterable[str]
) -> pa.Table:
    """Shares of each error type among wrong Confusion choices (Table 10), per model x family x
    N x condition (paper protocol: the strict one has no same-scene choices). `families`: the
    attribute-kind families (select by kind, never by name)."""
    families = set(families)
    counts: dict[tuple, Counter] = defaultdict(Counter)
    columns = ["model", "family", "n", "condition", "score_type", "error_type", "errors", "share"]
    needed = {"confusion_arrangements", "confusion_same_scene"}
    if not families or not needed <= set(benchmark.column_names):
        return rows_table([], columns)  # no attribute family: no taxonomy
    predictions = predictions.filter(pc.is_in(predictions["family"], pa.array(sorted(families))))
    joined = _join(
        with_score_type(predictions),
        benchmark,
        ["sample_id", "confusion_arrangements", "confusion_same_scene"],
    )
    for r in joined:
        if (
            r["set"] != "confusion"
            or r["protocol"] != "paper"
            or r["correct"]
            or r["failed"]
            or r["family"] not in families
            or r["predicted"] is None
            or r["predicted"] < 1
        ):
            continue
        i = r["predicted"] - 1
        kind = error_type(r["n"], r["confusion_arrangements"][i], r["confusion_same_scene"][i])
        counts[(r["model"], r["family"], r["n"], r["condition"], r["score_type"])][kind] += 1
    rows = []
    for (model, family, n, condition, score_type), kinds in sorted(counts.items()):
        total = sum(kinds.values())
        for kind in ERROR_TYPES:
            rows.append(
                {
                    "model": model,
                    "family": family,
                    "n": n,
                    "condition": condition,
                    "score_type": score_type,
                    "error_type": kind,
                    "errors": kinds[kind],
                    "share": kinds[kind] / total,
                }
            )
    return rows_table(rows, columns)


# ----------------------------------------------------------------------------- benchmark itself


def filter_shift(concepts: pa.Table, benchmark: pa.Table) -> pa.Table:
    """How validation moved the label and object distributions away from the sampled (target)
    prior (Tables 4 and 16): total variation, share of labels within 0.5-1.5x of their target
    frequency and below 0.25x, per family x N x condition. Retained = the accepted samples (a
    sample with accepted = false is not); a cell that retained none has NaN ("–"), never 0."""
    target: dict[tuple, dict[str, Counter]] = defaultdict(
        lambda: {"label": Counter(), "object": Counter()}
    )
    for r in concepts.to_pylist():
        t = target[(r["family"], r["n"])]
        t["label"].update(r["attributes"])
        t["object"].update(r["objects"])
    kept: dict[tuple, dict[str, Counter]] = defaultdict(
        lambda: {"label": Counter(), "object": Counter()}
    )
    cells = set()
    for r in benchmark.select(
        [c for c in ("family", "n", "condition", "objects", "attributes", "accepted")
         if c in benchmark.column_names]
    ).to_pylist():  # fmt: skip
        key = (r["family"], r["n"], r.get("condition") or "minimal")
        cells.add(key)
        if r.get("accepted") is False:
            continue  # retained = accepted: a rejected sample kept for the run is not retained
        kept[key]["label"].update(r["attributes"])
        kept[key]["object"].update(r["objects"])
    rows = []
    for family, n, condition in sorted(cells):
        got = kept[(family, n, condition)]
        row = {"family": family, "n": n, "condition": condition}
        for kind in ("label", "object"):
            want = target[(family, n)][kind]
            row.update({f"{kind}_{k}": v for k, v in _shift(want, got[kind]).items()})
        rows.append(row)
    columns = ["family", "n", "condition"] + [
        f"{k}_{m}" for k in ("label", "object") for m in ("tv", "within_0_5_1_5", "below_0_25")
    ]
    return rows_table(rows, columns)


def _shift(target: Counter, kept: Counter) -> dict[str, float]:
    t_total, k_total = sum(target.values()), sum(kept.values())
    if not t_total or not k_total:
        return {"tv": float("nan"), "within_0_5_1_5": float("nan"), "below_0_25": float("nan")}
    names = set(target) | set(kept)
    p = {x: target[x] / t_total for x in names}
    q = {x: kept[x] / k_total for x in names}
    ratios = [q[x] / p[x] for x in target]
    return {
        "tv": 0.5 * sum(abs(p[x] - q[x]) for x in names),
        "within_0_5_1_5": sum(0.5 <= r <= 1.5 for r in ratios) / len(ratios),
        "below_0_25": sum(r < 0.25 for r in ratios) / len(ratios),
    }


def distinct_n(texts: Iterable[str], n: int) -> float:
    """Distinct-n: distinct word n-grams over all word n-grams (lower-cased, Table 17)."""
    import re

    total, seen = 0, set()
    for text in texts:
        words = re.findall(r"[\w'-]+", text.lower())
        grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
        total += len(grams)
        seen.update(grams)
    return len(seen) / total if total else float("nan")


def caption_diversity(benchmark: pa.Table, families: Iterable[str] | None = None) -> pa.Table:
    """Distinct-2/3/4 of the Contextual captions per family x N (one per concept); `families`:
    the families whose Contextual captions are LLM-written (None: all)."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    wanted = None if families is None else set(families)
    for r in benchmark.select(["family", "n", "condition", "caption"]).to_pylist():
        if r["condition"] == "contextual" and (wanted is None or r["family"] in wanted):
            groups[(r["family"], r["n"])].append(r["caption"])
    rows = [
        {
            "family": f,
            "n": n,
            "captions": len(texts),
            **{f"distinct_{k}": distinct_n(texts, k) for k in (2, 3, 4)},
        }
        for (f, n), texts in sorted(groups.items())
    ]
    return rows_table(rows, ["family", "n", "captions", "distinct_2", "distinct_3", "distinct_4"])


# ----------------------------------------------------------------------------- agreement


def judge_agreement(a: dict[str, bool], b: dict[str, bool], keys: dict[str, tuple]) -> pa.Table:
    """Two judges' pass/fail decisions on the same samples (sample -> passed), per cell given by
    `keys` (sample -> (family, n, condition)), per family x N over both conditions (condition
    "all": the rows of the paper's Table 21) and overall (family "all", n null): agreement,
    Cohen's kappa (`kappa_undefined`: why it is undefined), directional split (a passes & b
    fails, a fails & b passes)."""
    from sklearn.metrics import cohen_kappa_score

    cells: dict[tuple, list[str]] = defaultdict(list)
    for sample in sorted(set(a) & set(b)):
        family, n, condition = keys[sample]
        cells[(family, n, condition)].append(sample)
        cells[(family, n, "all")].append(sample)
        cells[("all", None, "all")].append(sample)
    rows = []
    for (family, n, condition), samples in sorted(
        cells.items(), key=lambda kv: (kv[0][0] == "all", str(kv[0]))
    ):
        x = [a[s] for s in samples]
        y = [b[s] for s in samples]
        agree = sum(i == j for i, j in zip(x, y)) / len(samples)
        defined = len(set(x) | set(y)) > 1
        kappa = float(cohen_kappa_score(x, y)) if defined else float("nan")
        said = "pass" if x[0] else "fail"
        rows.append(
            {
                "family": family,
                "n": n,
                "condition": condition,
                "samples": len(samples),
                "agreement": agree,
                "kappa": kappa,
                "kappa_undefined": ""
                if defined
                else f"both judges decided {said} on every "
                "sample: chance agreement is 1, so kappa is 0/0",
                "a_pass_b_fail": sum(i and not j for i, j in zip(x, y)) / len(samples),
                "a_fail_b_pass": sum(j and not i for i, j in zip(x, y)) / len(samples),
            }
        )
    columns = ["family", "n", "condition", "samples", "agreement", "kappa", "kappa_undefined",
               "a_pass_b_fail", "a_fail_b_pass"]  # fmt: skip
    return rows_table(rows, columns)


ORDER_KEYS = ("family", "n", "condition", "set", "protocol", "score_type")


def cross_generator(runs: dict[str, pa.Table]) -> tuple[pa.Table, pa.Table]:
    """One concept set rendered by several generators (Table 9): accuracy per generator x model
    x family x N x condition x set x protocol on the concepts every run kept, and the Kendall
    rank correlation of the model orderings between each pair of generators."""
    from scipy.stats import kendalltau

    concepts = [
        {concept_of(s) for s in table.column("sample_id").to_pylist()} for table in runs.values()
    ]
    shared = set.intersection(*concepts) if concepts else set()
    rows = []
    for generator, table in runs.items():
        keep = [concept_of(s) in shared for s in table.column("sample_id").to_pylist()]
        for r in accuracy(table.filter(pa.array(keep, pa.bool_()))).to_pylist():
            rows.append({"generator": generator, **r})
    columns = ["generator", *CELL, "items", "accuracy", "ci_low", "ci_high", "chance"]
    table = rows_table(rows, columns)
    scores: dict[tuple, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        cell = (r["family"], r["n"], r["condition"], r["set"], r["protocol"], r["score_type"])
        scores[cell][r["generator"]][r["model"]] = r["accuracy"]
    names = list(runs)
    orders = []
    for cell, by_gen in sorted(scores.items()):
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                models = sorted(set(by_gen.get(a, {})) & set(by_gen.get(b, {})))
                if len(models) < 2:
                    continue
                tau = kendalltau([by_gen[a][m] for m in models], [by_gen[b][m] for m in models])
                orders.append(
                    {
                        **dict(zip(ORDER_KEYS, cell)),
                        "generator_a": a,
                        "generator_b": b,
                        "models": len(models),
                        "kendall_tau": float(tau.statistic),
                    }
                )
    order_columns = [
        *ORDER_KEYS,
        "generator_a",
        "generator_b",
        "models",
        "kendall_tau",
    ]
    return table, rows_table(orders, order_columns)
