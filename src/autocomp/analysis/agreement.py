"""Agreement among human annotators: Fleiss' kappa, the per-annotator raw scores of the
paper's Table 20, and the human results per cell (concordance with the validator, human Swap /
Confusion accuracy: the long table of Table 11).

Input rows are the human annotation CSVs' rows (annotator, sample_id, task, answer; see
analysis/report.py) and the benchmark table (sample_id, family, n, condition, caption).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import pyarrow as pa

from autocomp.analysis.statistics import rows_table
from autocomp.errors import UsageError

TASKS = ("valid", "swap", "confusion")


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float:
    """Fleiss' kappa of items rated by the same number of raters (each item: its raters'
    categories). NaN when undefined: fewer than 2 raters or items, or one category throughout
    (expected agreement 1)."""
    if len(ratings) < 1 or any(len(r) != len(ratings[0]) for r in ratings):
        raise ValueError("every item needs the same number of ratings")
    raters = len(ratings[0])
    if raters < 2:
        return float("nan")
    totals: Counter = Counter()
    observed = 0.0
    for item in ratings:
        counts = Counter(item)
        totals.update(counts)
        observed += (sum(c * c for c in counts.values()) - raters) / (raters * (raters - 1))
    observed /= len(ratings)
    all_ratings = len(ratings) * raters
    expected = sum((c / all_ratings) ** 2 for c in totals.values())
    if expected >= 1.0:
        return float("nan")
    return (observed - expected) / (1 - expected)


def kappa_undefined(ratings: Sequence[Sequence[str]], raters: int, dropped: int = 0) -> str:
    """Why Fleiss' kappa of these items is undefined ("" when it is defined)."""
    if raters < 2:
        return "one annotator: agreement needs two or more"
    if not ratings:
        return (
            f"no item was answered by all {raters} annotators ({dropped} answered by some: "
            "the study is incomplete)"
        )
    said = {c for item in ratings for c in item}
    if len(said) == 1:
        return (
            f"every answer was {next(iter(said))!r}: chance agreement is 1, so kappa is 0/0 "
            "(unanimous counts the agreement)"
        )
    return ""


def _cells(benchmark: pa.Table) -> dict[str, tuple]:
    return {
        r["sample_id"]: (r["family"], r["n"], r["condition"])
        for r in benchmark.select(["sample_id", "family", "n", "condition"]).to_pylist()
    }


def human_agreement(rows: list[dict[str, str]], benchmark: pa.Table) -> pa.Table:
    """Fleiss' kappa per task x family x N x condition (and per task overall: family and
    condition "all", n null) on the items that every annotator of the study answered;
    `items_dropped` counts the others; `kappa_undefined` says why a kappa is undefined (NaN).
    Categories: yes / no for validity; right / wrong for Swap and Confusion (their options differ
    from item to item, so the chosen caption itself is no category shared across items)."""
    cells = _cells(benchmark)
    captions = dict(zip(benchmark.column("sample_id").to_pylist(),
                        benchmark.column("caption").to_pylist()))  # fmt: skip
    annotators = sorted({r["annotator"] for r in rows})
    answers: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for r in rows:
        if r["sample_id"] in cells and r["task"] in TASKS:
            answer = r["answer"].strip()
            if r["task"] == "valid":
                said = answer.lower() in ("yes", "y", "1", "true", "valid")
                category = "yes" if said else "no"
            else:
                category = "right" if answer == captions[r["sample_id"]] else "wrong"
            answers[(r["task"], r["sample_id"])][r["annotator"]] = category
    groups: dict[tuple, list[list[str]]] = defaultdict(list)
    dropped: Counter = Counter()
    for (task, sample), by_annotator in sorted(answers.items()):
        keys = [(task, *cells[sample]), (task, "all", None, "all")]
        if len(by_annotator) < len(annotators):
            dropped.update(keys)
            continue
        for key in keys:
            groups[key].append([by_annotator[a] for a in annotators])
    out = []
    for key in sorted(set(groups) | set(dropped), key=lambda k: (k[1] == "all", str(k))):
        items = groups.get(key, [])
        agree = sum(len(set(i)) == 1 for i in items) / len(items) if items else float("nan")
        out.append({
            "task": key[0], "family": key[1], "n": key[2], "condition": key[3],
            "annotators": len(annotators), "items": len(items), "items_dropped": dropped[key],
            "unanimous": agree,
            "fleiss_kappa": fleiss_kappa(items) if items else float("nan"),
            "kappa_undefined": kappa_undefined(items, len(annotators), dropped[key]),
        })  # fmt: skip
    return rows_table(
        out,
        ["task", "family", "n", "condition", "annotators", "items", "items_dropped", "unanimous",
         "fleiss_kappa", "kappa_undefined"],
    )  # fmt: skip


def per_annotator_scores(rows: list[dict[str, str]], benchmark: pa.Table) -> pa.Table:
    """Table 20: per family x N x condition and annotator, raw correct counts on Swap and
    Confusion (out of the items that annotator answered), and concordance counts of the
    validity answers with the validator (`accepted`)."""
    info = {r["sample_id"]: r for r in benchmark.to_pylist()}
    cells: dict[tuple, Counter] = defaultdict(Counter)
    for r in rows:
        sample = info.get(r["sample_id"])
        if sample is None or r["task"] not in TASKS:
            continue
        if r["task"] == "valid":
            said = r["answer"].strip().lower() in ("yes", "y", "1", "true", "valid")
            right = said == bool(sample.get("accepted", True))
        else:
            right = r["answer"].strip() == sample["caption"]
        key = (sample["family"], sample["n"], sample["condition"], r["annotator"])
        cells[key][f"{r['task']}_items"] += 1
        cells[key][f"{r['task']}_correct"] += int(right)
    columns = ["swap_correct", "swap_items", "confusion_correct", "confusion_items",
               "valid_correct", "valid_items"]  # fmt: skip
    out = [
        {"family": f, "n": n, "condition": c, "annotator": a, **{k: counts[k] for k in columns}}
        for (f, n, c, a), counts in sorted(cells.items(), key=str)
    ]
    return rows_table(out, ["family", "n", "condition", "annotator", *columns])


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
        if r["task"] not in TASKS:
            raise UsageError(
                f"human annotations row {i + 2}",
                r["task"],
                f"task must be one of {', '.join(TASKS)}",
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
    return rows_table(
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
