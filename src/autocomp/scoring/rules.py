"""The official scoring rules of imported benchmarks, each a function of a group's score matrix.

A harness benchmark (importers/harness.py) is a set of groups of images x texts. A model's run
holds, per row (one image of a group), the score of every text of the group in group order: the
group's matrix S[image][text] (cosine or sigmoid for contrastive backends, summed log-likelihood
for generative ones; the same matrix gives text-side and image-side scores). `truth[i]` lists
the texts true for image i. A rule turns one group into outcomes: per metric, a list of booleans,
one per unit the benchmark's script counts (a group, an image query, a text query). How a
benchmark's subsets combine (micro or macro) is its registry entry's (importers/benchmarks.py).

Rules (RULES):
    text-image-group  Winoground / EqBen `text_correct`, `image_correct`, `group_correct`: text
                      = every image scores its true text above the others; image = every text
                      scores its true image above the others; group = both. One unit per group.
    pair              MMVP-VLM: every text of the pair retrieves its true image (one unit per
                      pair).
    retrieval         SPEC: i2t = each querying image retrieves its true text (one unit per
                      image), t2i = each querying text retrieves its true image (one unit per
                      text); `query` (image | text | both) says which side of a group queries.

Ties (TIES): each rule runs under its benchmark's own policy ("official": the one its script
applies, recorded beside every number) and under `strict` (a tie at the top is wrong) and
`lenient` (a tie counts right), so a report can say where another harness's tie rule gives
another number. Policies: strict (`>`: Winoground, EqBen), first (the first maximal index wins,
as torch.argmax: SPEC), last (a tie goes to the later candidate: MMVP-VLM's `img1 if prob >
0.5 else img2`). A missing score (the row failed) makes every unit that needs it wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autocomp.scoring import group_rules

Matrix = Sequence[Sequence[float | None]]
Truth = Sequence[Sequence[int]]
Outcome = dict[str, list[bool]]  # metric -> one boolean per unit
POLICIES = ("strict", "lenient", "first", "last")
TIES = ("official", "strict", "lenient")
QUERIES = ("image", "text", "both")


def retrieves(scores: Sequence[float | None], index: int, policy: str) -> bool:
    """Whether candidate `index` is the one retrieved from `scores` under the tie `policy`."""
    if any(s is None or math.isnan(s) for s in scores):
        return False
    values = [float(s) for s in scores if s is not None]
    top = max(values)
    mine = values[index]
    others = [v for i, v in enumerate(values) if i != index]
    if policy == "strict":
        return all(mine > v for v in others)
    if policy == "lenient":
        return mine == top
    if policy == "first":
        return values.index(top) == index
    if policy == "last":
        return len(values) - 1 - values[::-1].index(top) == index
    raise ValueError(f"unknown tie policy {policy!r}")


def _column(matrix: Matrix, text: int) -> list[float | None]:
    return [row[text] for row in matrix]


def _true_image(truth: Truth, text: int) -> int | None:
    """The one image text `text` is true for (None: none, or several)."""
    images = [i for i, texts in enumerate(truth) if text in texts]
    return images[0] if len(images) == 1 else None


def image_queries(matrix: Matrix, truth: Truth, policy: str) -> list[bool]:
    """Per image with one true text: does it retrieve that text among the group's texts?"""
    return [
        retrieves(matrix[i], texts[0], policy) for i, texts in enumerate(truth) if len(texts) == 1
    ]


def text_queries(matrix: Matrix, truth: Truth, policy: str) -> list[bool]:
    """Per text true for one image: does it retrieve that image among the group's images?"""
    width = len(matrix[0]) if matrix else 0
    out = []
    for t in range(width):
        image = _true_image(truth, t)
        if image is not None:
            out.append(retrieves(_column(matrix, t), image, policy))
    return out


def text_image_group(matrix: Matrix, truth: Truth, policy: str, query: str) -> Outcome:
    """Winoground's three scores for one group (one unit each)."""
    text = all(image_queries(matrix, truth, policy))
    image = all(text_queries(matrix, truth, policy))
    return {"text": [text], "image": [image], "group": [text and image]}


def pair(matrix: Matrix, truth: Truth, policy: str, query: str) -> Outcome:
    """MMVP-VLM's pair accuracy for one pair (one unit)."""
    return {"pair": [all(text_queries(matrix, truth, policy))]}


def retrieval(matrix: Matrix, truth: Truth, policy: str, query: str) -> Outcome:
    """SPEC's image-to-text and text-to-image accuracy: one unit per querying image / text."""
    out: Outcome = {"i2t": [], "t2i": []}
    if query in ("image", "both"):
        out["i2t"] = image_queries(matrix, truth, policy)
    if query in ("text", "both"):
        out["t2i"] = text_queries(matrix, truth, policy)
    return out


Judge = Callable[[Matrix, Truth, str, str], Outcome]


@dataclass(frozen=True)
class Rule:
    """One official rule: its metrics (the first is the headline), the judge of one group, the
    tie policy its authors' script applies, and the script it transcribes. Image-side scores (one
    text against several images) need nothing of a backend: every backend scores a row's image
    against its texts, so a group's matrix gives them; a text-only rule needs text-text
    similarity, which the score stage checks before a model loads."""

    name: str
    metrics: tuple[str, ...]
    judge: Judge
    official_tie: str
    source: str  # the script whose logic this is

    def outcome(
        self, matrix: Matrix, truth: Truth, tie: str = "official", query: str = "both"
    ) -> Outcome:
        """The group's units per metric under `tie` (official, strict or lenient)."""
        policy = self.official_tie if tie == "official" else tie
        if policy not in POLICIES:
            raise ValueError(f"unknown tie policy {tie!r}")
        return self.judge(matrix, truth, policy, query)


RULES: dict[str, Rule] = {
    "text-image-group": Rule(
        "text-image-group", ("group", "text", "image"), text_image_group, "strict",
        "facebook/winoground (HF card's text_correct / image_correct / group_correct); "
        "Wangt-CN/EqBen src/eqben/eqben_acc.py cal_wino_score",
    ),
    "pair": Rule(
        "pair", ("pair",), pair, "last",
        "tsb0601/MMVP scripts/evaluate_vlm.py (pair_accuracies per category)",
    ),
    "retrieval": Rule(
        "retrieval", ("i2t", "t2i"), retrieval, "first",
        "wjpoom/SPEC spec/models/clip_wrapper.py i2t_evaluate / t2i_evaluate (argmax)",
    ),
    # scoring/group_rules.py: ARO, SugarCrepe++, CREPE, NaturalBench
    "image-to-text": Rule(
        "image-to-text", ("accuracy",), group_rules.image_to_text, "strict",
        "mertyg/vision-language-models-are-bows dataset_zoo/aro_datasets.py evaluate_scores "
        "(np.argmax over [false, true]: a tie picks the false caption)",
    ),
    "image-to-text-first": Rule(
        "image-to-text-first", ("accuracy",), group_rules.image_to_text, "first",
        "mertyg/vision-language-models-are-bows dataset_zoo/aro_datasets.py COCO_Order / "
        "Flickr30k_Order evaluate_scores (np.argmax, the true caption first: a tie is right)",
    ),
    "two-positives": Rule(
        "two-positives", ("itt", "p1_neg", "p2_neg"), group_rules.two_positives, "strict",
        "Sri-Harsha/scpp VLMs/test_Variants_CLIP.py (cos_p1 > cos_neg, ...)",
    ),
    "text-only": Rule(
        "text-only", ("tot",), group_rules.text_only, "strict",
        "Sri-Harsha/scpp VLMs/test_Variants_CLIP.py (cos_p1p2 > cos_p1_neg and > cos_p2_neg)",
    ),
    "recall-at-k": Rule(
        "recall-at-k", tuple(f"R@{k}" for k in group_rules.KS), group_rules.recall_at_k,
        "strict", "RAIVNLab/CREPE crepe_eval_utils.py get_one2many_rank / "
        "get_one2many_metrics (torch.argsort leaves ties unordered: counted against)",
    ),
    "yes-no-groups": Rule(
        "yes-no-groups", ("Acc", "Q_Acc", "I_Acc", "G_Acc"), group_rules.yes_no_groups,
        "strict", "Baiqi-Li/NaturalBench naturalbench_vqa.py get_scores (an answer "
        "neither yes nor no, here a tie, is wrong)",
    ),
}  # fmt: skip
