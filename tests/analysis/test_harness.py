"""The harness rules and tables, by hand-checked matrices and properties (no model)."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from autocomp.analysis.harness import Harness, metrics, outcomes, refusal, rule_effects
from autocomp.scoring.rules import RULES, retrieves

TWO = ((0,), (1,))  # image k: text k is true


@pytest.mark.parametrize(
    ("scores", "index", "policy", "expected"),
    [
        ([1, 1, 0], 0, "strict", False),
        ([1, 1, 0], 0, "lenient", True),
        ([1, 1, 0], 0, "first", True),
        ([1, 1, 0], 1, "first", False),
        ([1, 1, 0], 1, "last", True),
        ([1, 1, 0], 0, "last", False),
        ([0, 2, 1], 1, "strict", True),
        ([0, None, 1], 2, "lenient", False),  # a missing score: wrong
        ([0, float("nan"), 1], 2, "strict", False),
    ],
)
def test_retrieves(scores, index, policy, expected):
    assert retrieves(scores, index, policy) is expected


def test_winoground_by_hand():
    rule = RULES["text-image-group"]
    assert rule.outcome([[2, 1], [1, 2]], TWO) == {"text": [True], "image": [True], "group": [True]}
    # both images prefer caption 0: the text score fails; caption 0 ties between the images
    assert rule.outcome([[2, 1], [2, 1]], TWO) == {
        "text": [False],
        "image": [False],
        "group": [False],
    }
    # image score only: each caption picks its image, but image 1 prefers caption 0
    assert rule.outcome([[3, 0], [2, 1]], TWO) == {
        "text": [False],
        "image": [True],
        "group": [False],
    }
    assert rule.outcome([[1, 1], [1, 1]], TWO, "lenient")["group"] == [True]


def test_mmvp_pair_gives_a_tie_to_the_second_image():
    rule = RULES["pair"]
    assert rule.outcome([[1, 1], [1, 1]], TWO)["pair"] == [False]  # text 0 -> image 2: wrong
    assert rule.outcome([[2, 0], [1, 0]], TWO)["pair"] == [True]  # text 1 tied -> image 2: right
    assert rule.outcome([[2, 0], [1, 0]], TWO, "strict")["pair"] == [False]


def test_spec_retrieval_counts_one_unit_per_query():
    rule = RULES["retrieval"]
    matrix = [[3, 2, 1], [2, 2, 0], [0, 1, 5]]  # row 1 and column 1 tie at the top
    truth = ((0,), (1,), (2,))
    got = rule.outcome(matrix, truth, query="image")
    assert got == {"i2t": [True, False, True], "t2i": []}  # row 1 ties: argmax takes text 0
    assert rule.outcome(matrix, truth, query="text")["t2i"] == [True, False, True]


SQUARE = [RULES[name] for name in ("text-image-group", "pair", "retrieval")]  # any k x k group


@pytest.mark.parametrize("seed", range(20))
def test_lenient_is_never_below_strict_and_ties_alone_separate_them(seed):
    rng = random.Random(seed)
    size = rng.randint(2, 4)
    matrix = [[rng.randint(0, 2) for _ in range(size)] for _ in range(size)]
    truth = tuple((i,) for i in range(size))
    for rule in SQUARE:
        strict = rule.outcome(matrix, truth, "strict", "both")
        lenient = rule.outcome(matrix, truth, "lenient", "both")
        official = rule.outcome(matrix, truth, "official", "both")
        for metric in strict:
            assert all(
                s <= o <= lenient_
                for s, o, lenient_ in zip(strict[metric], official[metric], lenient[metric])
            )
    distinct = [
        [v + 0.001 * (i * size + j) for j, v in enumerate(row)] for i, row in enumerate(matrix)
    ]
    for rule in SQUARE:
        results = {
            t: rule.outcome(distinct, truth, t, "both") for t in ("strict", "lenient", "official")
        }
        assert results["strict"] == results["lenient"] == results["official"]


def _harness(groups):
    rows = []
    for subset, gid, matrix in groups:
        for k in range(len(matrix)):
            rows.append(
                {
                    "sample_id": f"{subset}-{gid}/image-{k}",
                    "benchmark": "toy",
                    "subset": subset,
                    "group_id": gid,
                    "image_index": k,
                    "group_images": len(matrix),
                    "query": "both",
                    "texts": [f"t{t}" for t in range(len(matrix[0]))],
                    "true_texts": [k],
                }
            )
    return Harness("toy", "text-image-group", "strict", "micro", pa.Table.from_pylist(rows))


def _scores(groups, tokens=None, skip=()):
    out = []
    for subset, gid, matrix in groups:
        for k, row in enumerate(matrix):
            if (subset, gid, k) in skip:
                continue
            for t, value in enumerate(row):
                out.append(
                    {
                        "sample_id": f"{subset}-{gid}/image-{k}",
                        "candidate_index": t,
                        "score": value,
                        "tokens": tokens[t] if tokens else None,
                    }
                )
    return pa.Table.from_pylist(out)


GROUPS = [("a", "0", [[2, 1], [1, 2]]), ("a", "1", [[1, 1], [1, 2]]), ("a", "2", [[0, 1], [1, 0]]),
          ("b", "0", [[2, 1], [1, 2]])]  # fmt: skip


def test_micro_macro_and_ties_by_hand():
    harness = _harness(GROUPS)
    table = metrics(outcomes(harness, {"m": _scores(GROUPS)}), "micro")
    got = {(r["tie"], r["subset"], r["metric"]): r["accuracy"] for r in table.to_pylist()}
    assert got["official", "a", "group"] == pytest.approx(1 / 3)
    assert got["official", "b", "group"] == 1.0
    assert got["official", "all", "group"] == 0.5  # 2 of 4 groups
    assert got["official", "all (macro)", "group"] == pytest.approx((1 / 3 + 1) / 2)
    assert got["lenient", "all", "group"] == 0.75  # group a/1 wins only with ties counted right
    effects = rule_effects(table, "strict").to_pylist()
    found = {(r["metric"], r["alternative"]): r["difference"] for r in effects}
    assert found["group", "ties right"] == pytest.approx(0.25)
    assert found["group", "macro"] == pytest.approx((1 / 3 + 1) / 2 - 0.5)
    for r in table.to_pylist():
        assert r["low"] <= r["accuracy"] + 1e-12 and r["accuracy"] <= r["high"] + 1e-12


def test_per_token_scores_are_judged_too():
    groups = [("a", "0", [[-4.0, -3.0], [-4.0, -3.0]])]
    harness = _harness(groups)
    # summed: text 1 wins both rows; per token (2 and 1 tokens... -2 vs -3): text 0 wins both
    table = outcomes(harness, {"m": _scores(groups, tokens=[2, 1])})
    text = {
        r["score_type"]: r["correct"]
        for r in table.to_pylist()
        if r["metric"] == "text" and r["tie"] == "official"
    }
    assert set(text) == {"score", "per_token"}
    assert text == {"score": 0, "per_token": 0}


def test_a_row_without_scores_makes_its_group_wrong_and_is_counted():
    harness = _harness(GROUPS)
    table = outcomes(harness, {"m": _scores(GROUPS, skip={("b", "0", 1)})})
    failed = [r for r in table.to_pylist() if r["failed"]]
    assert {r["group_id"] for r in failed} == {"0"} and {r["subset"] for r in failed} == {"b"}
    assert all(r["correct"] == 0 for r in failed)


def test_a_blind_run_is_refused_with_one_line(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"blind": "likelihood"}))
    assert "--blind" in refusal(tmp_path) and "\n" not in refusal(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"blind": "choice"}))
    assert "option labels" in refusal(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"blind": ""}))
    assert refusal(tmp_path) == ""


def test_a_large_benchmark_s_interval_holds_its_accuracy():
    import numpy as np

    from autocomp.analysis.harness import _interval

    rng = np.random.default_rng(0)
    ones = (rng.integers(0, 2, 50_000), np.ones(50_000, dtype=int))
    several = (rng.integers(0, 4, 20_000), np.full(20_000, 3))
    low, high = _interval([ones, several], macro=True, seed=0)
    mean = (ones[0].mean() + several[0].sum() / several[1].sum()) / 2
    assert low < mean < high and high - low < 0.02
