"""The rules of ARO, SugarCrepe++, CREPE and NaturalBench (scoring/group_rules.py, as
scoring.rules.RULES runs them) against the transcriptions of their authors' scripts
(tests/importers/official.py), on hand-checked cases and on random score arrays with frequent
ties (where the script's tie policy is defined)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocomp.importers import aro
from autocomp.scoring import group_rules
from autocomp.scoring.rules import RULES
from tests.importers import official

SCORE = st.integers(-3, 3).map(float)  # small integers: ties are frequent
EXAMPLES = settings(max_examples=80, deadline=None)


def units(rule: str, matrix, truth, tie="official") -> dict[str, list[bool]]:
    return RULES[rule].outcome(matrix, truth, tie, "image")


def test_the_symmetric_relations_are_the_notebooks():
    assert set(official.ARO_SYMMETRIC) == aro.SYMMETRIC
    assert len(official.ARO_SYMMETRIC) == len(aro.SYMMETRIC)


@EXAMPLES
@given(st.lists(st.tuples(SCORE, SCORE), min_size=1, max_size=30))
def test_vg_items_are_judged_as_argmax_over_false_true(items):
    """aro_datasets.py: np.argmax over [false, true] == 1; autocomp scores [true, false]."""
    ours = [units("image-to-text", [[t, f]], [(0,)])["accuracy"][0] for t, f in items]
    script = np.argmax(np.array([[f, t] for t, f in items]), axis=-1) == 1
    assert ours == list(script)


@EXAMPLES
@given(st.lists(st.lists(SCORE, min_size=5, max_size=5), min_size=1, max_size=20))
def test_order_items_are_judged_as_argmax_at_zero(items):
    """COCO / Flickr Order: np.argmax == 0 (the true caption first wins a tie)."""
    ours = [units("image-to-text-first", [row], [(0,)])["accuracy"][0] for row in items]
    assert np.mean(ours) == official.aro_order(np.array([[row] for row in items]))


@EXAMPLES
@given(st.lists(st.tuples(SCORE, SCORE, SCORE), min_size=1, max_size=30))
def test_scpp_equals_the_script(items):
    ours = [units("two-positives", [list(s)], [(0, 1)]) for s in items]
    script = official.scpp(
        [{"cos_p1": a, "cos_p2": b, "cos_neg": c, "cos_p1p2": 0, "cos_p1_neg": 0,
          "cos_p2_neg": 0} for a, b, c in items]
    )  # fmt: skip
    for metric in ("itt", "p1_neg", "p2_neg"):
        assert sum(o[metric][0] for o in ours) / len(ours) == script[metric]


def test_recall_by_hand():
    def ranks(row, tie="official"):
        return units("recall-at-k", [row], [(0,)], tie)

    assert ranks([0.9, 0.1, 0.5])["R@1"] == [True]
    assert ranks([0.4, 0.1, 0.5, 0.6]) == {
        "R@1": [False], "R@3": [True], "R@5": [True], "R@10": [True]
    }  # fmt: skip
    assert ranks([0.5, 0.5, 0.1])["R@1"] == [False]  # a tie ranks the negative first
    assert ranks([0.5, 0.5, 0.1], "lenient")["R@1"] == [True]
    assert ranks([None, 0.5])["R@10"] == [False]  # a failed row


@EXAMPLES
@given(
    st.lists(
        st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=14, unique=True),
        min_size=1,
        max_size=20,
    )
)
def test_recall_equals_the_script_without_ties(sets):
    ours = [units("recall-at-k", [row], [(0,)]) for row in sets]
    script = official.crepe_metrics([official.crepe_rank(np.array(row)) for row in sets])
    for k in group_rules.KS:
        assert sum(o[f"R@{k}"][0] for o in ours) / len(ours) == script[f"R@{k}"]


LAYOUT_GOLD = [(0,), (1,), (1,), (0,)]  # q0 i0 yes, q0 i1 no, q1 i0 no, q1 i1 yes


@settings(max_examples=120, deadline=None)
@given(st.lists(st.lists(st.tuples(SCORE, SCORE), min_size=4, max_size=4), min_size=1, max_size=12))
def test_naturalbench_equals_the_script(groups):
    """The script extracts 1 (yes) / 0 (no) / -1 from a reply; autocomp answers option 0 / 1 /
    none from two scores. Each answer is written out as the reply a model would give, so both
    run on the same answers."""
    reply = {0: "Yes.", 1: "No, it is not.", -1: "I cannot tell."}
    totals: dict[str, list[bool]] = {m: [] for m in RULES["yes-no-groups"].metrics}
    answers = []
    for cells in groups:
        for metric, got in units("yes-no-groups", [list(c) for c in cells], LAYOUT_GOLD).items():
            totals[metric] += got
        said = [
            reply[group_rules.answer(list(c), g[0], "strict")] for c, g in zip(cells, LAYOUT_GOLD)
        ]
        keys = ("q0_i0", "q0_i1", "q1_i0", "q1_i1")
        answers.append({k: official.extract_answer(t) for k, t in zip(keys, said)})
    script = official.naturalbench_scores(answers)
    for metric, got in totals.items():
        assert sum(got) / len(got) == pytest.approx(script[metric], rel=1e-12)


def test_naturalbench_by_hand():
    right = [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]]
    assert units("yes-no-groups", right, LAYOUT_GOLD) == {
        "Acc": [True] * 4, "Q_Acc": [True, True], "I_Acc": [True, True], "G_Acc": [True]
    }  # fmt: skip
    always_yes = [[1.0, 0.0]] * 4  # half the answers, no question, no image, no group
    assert units("yes-no-groups", always_yes, LAYOUT_GOLD) == {
        "Acc": [True, False, False, True], "Q_Acc": [False, False], "I_Acc": [False, False],
        "G_Acc": [False],
    }  # fmt: skip
    tied = [[0.0, 0.0]] * 4  # no answer: all wrong, unless ties count right
    assert units("yes-no-groups", tied, LAYOUT_GOLD)["Acc"] == [False] * 4
    assert units("yes-no-groups", tied, LAYOUT_GOLD, "lenient")["G_Acc"] == [True]


@EXAMPLES
@given(st.lists(st.tuples(SCORE, SCORE, SCORE), min_size=1, max_size=30))
def test_scpp_text_only_equals_the_script(items):
    """TOT from the two text-only rows: P1 x [P1, P2, Neg] and P2 x [P1, P2, Neg] (cosine is
    symmetric: the P1-P2 cell is one value in both rows, as the script's cos_p1p2)."""
    ours = [
        units("text-only", [[1.0, p1p2, p1n], [p1p2, 1.0, p2n]], [(1,), (0,)])["tot"][0]
        for p1p2, p1n, p2n in items
    ]
    script = official.scpp(
        [{"cos_p1": 0, "cos_p2": 0, "cos_neg": 0, "cos_p1p2": a, "cos_p1_neg": b,
          "cos_p2_neg": c} for a, b, c in items]
    )  # fmt: skip
    assert sum(ours) / len(ours) == script["tot"]
