"""The official rules of ARO, SugarCrepe++, CREPE and NaturalBench as judges of a group's score
matrix (registered in scoring/rules.py RULES; the matrix and tie policies are described there).

    image-to-text  ARO VG-Relation / VG-Attribution (one image x [true, false]) and COCO / Flickr
                   Order (one image x [true, 4 perturbations]): the image retrieves its true
                   text; one unit per image (`accuracy`).
    two-positives  SugarCrepe++ ITT, P1-Neg, P2-Neg: one image x [P1, P2, Neg].
    text-only      SugarCrepe++ TOT: P1 and P2 (text-only rows) x [P1, P2, Neg].
    recall-at-k    CREPE: the rank of the true text among the image's candidates; R@k per image.
    yes-no-groups  NaturalBench: four rows (q0 i0, q0 i1, q1 i0, q1 i1) x [yes / A, no / B];
                   each row answers the option scoring higher; Acc, Q-Acc, I-Acc, G-Acc.

A tie between two candidates is decided by the policy: strict (against the true text / no
answer), lenient (for the true text / the gold answer), first (the lower index wins), last (the
higher index wins). A missing score (the row failed) makes its units wrong.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Row = Sequence[float | None]
Matrix = Sequence[Row]
Truth = Sequence[Sequence[int]]
Outcome = dict[str, list[bool]]
KS = (1, 3, 5, 10)
CELLS = ((0, 0), (0, 1), (1, 0), (1, 1))  # NaturalBench's (question, image) per row


def complete(row: Row) -> bool:
    return all(s is not None and not math.isnan(s) for s in row)


def above(row: Row, index: int, other: int, policy: str) -> bool:
    """Whether candidate `other` ranks above candidate `index` (the true one) under `policy`."""
    mine, theirs = row[index], row[other]
    assert mine is not None and theirs is not None
    if theirs != mine:
        return theirs > mine
    return (
        policy == "strict"
        or (policy == "first" and other < index)
        or (policy == "last" and other > index)
    )


def rank(row: Row, index: int, policy: str) -> int | None:
    """The 0-based rank of candidate `index` among the row's (None: a score is missing)."""
    if not complete(row):
        return None
    return sum(above(row, index, j, policy) for j in range(len(row)) if j != index)


def image_to_text(matrix: Matrix, truth: Truth, policy: str, query: str) -> Outcome:
    """Per image with one true text: it ranks first."""
    return {"accuracy": [rank(r, t[0], policy) == 0 for r, t in zip(matrix, truth) if len(t) == 1]}


def two_positives(matrix: Matrix, truth: Truth, policy: str, query: str) -> Outcome:
    """SugarCrepe++ (test_Variants_CLIP.py:82-87): each positive above the negative."""
    out: Outcome = {"itt": [], "p1_neg": [], "p2_neg": []}
    for row in matrix:
        ok = complete(row)
        p1 = ok and not above(row, 0, 2, policy)
        p2 = ok and not above(row, 1, 2, policy)
        out["itt"].append(p1 and p2)
        out["p1_neg"].append(p1)
        out["p2_neg"].append(p2)
    return out


def text_only(matrix: Matrix, truth: Truth, policy: str, query: str) -> Outcome:
    """SugarCrepe++'s TOT (test_Variants_CLIP.py:88): rows P1 and P2 each query the texts
    [P1, P2, Neg] by text-text similarity; right when P1-P2 is above P1-Neg and P2-Neg."""
    if len(matrix) != 2 or not all(complete(row) for row in matrix):
        return {"tot": [False]}
    return {"tot": [not above(matrix[0], 1, 2, policy) and not above(matrix[1], 0, 2, policy)]}


def recall_at_k(matrix: Matrix, truth: Truth, policy: str, query: str) -> Outcome:
    """CREPE (crepe_eval_utils.py:60-76): R@k = the true text's rank below k, per image."""
    ranks = [rank(r, t[0], policy) for r, t in zip(matrix, truth) if len(t) == 1]
    return {f"R@{k}": [r is not None and r < k for r in ranks] for k in KS}


def answer(row: Row, gold: int, policy: str) -> int:
    """The option a row answers: the higher-scoring of two; on a tie, per policy, none (-1,
    strict: the script's "no answer found"), the gold one (lenient), the first or the last."""
    if not complete(row):
        return -1
    first, second = row
    if first != second:
        return 0 if first > second else 1  # type: ignore[operator]
    return {"strict": -1, "lenient": gold, "first": 0, "last": 1}[policy]


def yes_no_groups(matrix: Matrix, truth: Truth, policy: str, query: str) -> Outcome:
    """NaturalBench's get_scores (naturalbench_vqa.py:50-148) from the four rows' answers, each
    judged against its gold option."""
    gold = [t[0] for t in truth]
    right = {cell: answer(row, g, policy) == g for cell, row, g in zip(CELLS, matrix, gold)}
    questions = [right[(q, 0)] and right[(q, 1)] for q in (0, 1)]
    images = [right[(0, i)] and right[(1, i)] for i in (0, 1)]
    return {
        "Acc": [right[c] for c in CELLS],
        "Q_Acc": questions,
        "I_Acc": images,
        "G_Acc": [all(questions) and all(images)],
    }
