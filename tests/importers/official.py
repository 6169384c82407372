"""Transcriptions of the official scoring scripts of ARO, SugarCrepe++, CREPE and NaturalBench.

Kept in the tests, apart from autocomp's own rules (autocomp.importers.*), so a golden test
scores one fixture twice: through these (the authors' logic, line for line, on the raw score
arrays their scripts build) and through autocomp, and asserts both give the same numbers.
Each function cites the file and lines it transcribes (commits as fetched):

- ARO: github.com/mertyg/vision-language-models-are-bows @ 81fdd20
  dataset_zoo/aro_datasets.py and notebooks/Replicate ARO! VG-Relation, VG-Attribution.ipynb
- SugarCrepe++: github.com/Sri-Harsha/scpp @ c083bbf, VLMs/test_Variants_CLIP.py
- CREPE: github.com/RAIVNLab/CREPE @ 1fa81c4, crepe_eval_utils.py
- NaturalBench: github.com/Baiqi-Li/NaturalBench @ 9967605, naturalbench_vqa.py
"""

from __future__ import annotations

import re

import numpy as np

# notebooks/Replicate ARO! ... .ipynb, cell 4: the relations left out of the VG-Relation macro
ARO_SYMMETRIC = [
    "adjusting", "attached to", "between", "bigger than", "biting", "boarding", "brushing",
    "chewing", "cleaning", "climbing", "close to", "coming from", "coming out of", "contain",
    "crossing", "dragging", "draped over", "drinking", "drinking from", "driving",
    "driving down", "driving on", "eating from", "eating in", "enclosing", "exiting", "facing",
    "filled with", "floating in", "floating on", "flying", "flying above", "flying in",
    "flying over", "flying through", "full of", "going down", "going into", "going through",
    "grazing in", "growing in", "growing on", "guiding", "hanging from", "hanging in",
    "hanging off", "hanging over", "higher than", "holding onto", "hugging", "in between",
    "jumping off", "jumping on", "jumping over", "kept in", "larger than", "leading",
    "leaning over", "leaving", "licking", "longer than", "looking in", "looking into",
    "looking out", "looking over", "looking through", "lying next to", "lying on top of",
    "making", "mixed with", "mounted on", "moving", "on the back of", "on the edge of",
    "on the front of", "on the other side of", "opening", "painted on", "parked at",
    "parked beside", "parked by", "parked in", "parked in front of", "parked near",
    "parked next to", "perched on", "petting", "piled on", "playing", "playing in",
    "playing on", "playing with", "pouring", "reaching for", "reading", "reflected on",
    "riding on", "running in", "running on", "running through", "seen through",
    "sitting behind", "sitting beside", "sitting by", "sitting in front of", "sitting near",
    "sitting next to", "sitting under", "skiing down", "skiing on", "sleeping in",
    "sleeping on", "smiling at", "sniffing", "splashing", "sprinkled on", "stacked on",
    "standing against", "standing around", "standing behind", "standing beside",
    "standing in front of", "standing near", "standing next to", "staring at", "stuck in",
    "surrounding", "swimming in", "swinging", "talking to", "topped with", "touching",
    "traveling down", "traveling on", "tying", "typing on", "underneath", "wading in",
    "waiting for", "walking across", "walking by", "walking down", "walking next to",
    "walking through", "working in", "working on", "worn on", "wrapped around", "wrapped in",
    "by", "of", "near", "next to", "with", "beside", "on the side of", "around",
]  # fmt: skip


def aro_vg_relation(scores: np.ndarray, relations: list[str]) -> float:
    """aro_datasets.py:75-101 (VG_Relation.evaluate_scores) then the notebook's cell 4.

    `scores`: N x 1 x 2, caption options [false, true] (aro_datasets.py:63)."""
    preds = np.argmax(np.squeeze(scores, axis=1), axis=-1)
    correct_mask = preds == 1
    all_relations = np.array(relations)
    records = []
    for relation in np.unique(all_relations):
        relation_mask = all_relations == relation
        if relation_mask.sum() == 0:
            continue
        records.append({"Relation": relation, "Accuracy": correct_mask[relation_mask].mean()})
    kept = [r["Accuracy"] for r in records if r["Relation"] not in ARO_SYMMETRIC]
    return float(np.mean(kept))


def aro_vg_attribution(scores: np.ndarray, attributes: list[list[str]]) -> float:
    """aro_datasets.py:138 (the pair key), 166-190 (VG_Attribution.evaluate_scores: pairs with
    fewer than 25 items left out) and the notebook's cell 6 (the mean of the records)."""
    all_attributes = np.array([f"{a[0]}_{a[1]}" for a in attributes])
    preds = np.argmax(np.squeeze(scores, axis=1), axis=-1)
    correct_mask = preds == 1
    records = []
    for attr in np.unique(all_attributes):
        attr_mask = all_attributes == attr
        if attr_mask.sum() < 25:
            continue
        records.append(correct_mask[attr_mask].mean())
    return float(np.mean(records))


def aro_order(scores: np.ndarray) -> float:
    """aro_datasets.py:269-281 (COCO_Order; Flickr30k_Order 336-347 is the same): Precision@1,
    the true caption at index 0 of 5 options. np.argmax returns the first maximum, so a tie
    with the true caption counts as right."""
    preds = np.argmax(np.squeeze(scores, axis=1), axis=-1)
    return float(np.mean(preds == 0))


def scpp(items: list[dict[str, float]]) -> dict[str, float]:
    """VLMs/test_Variants_CLIP.py:44-99: per item the cosines image-P1, image-P2, image-Neg and
    text-text P1-P2, P1-Neg, P2-Neg; strict > everywhere (a tie counts as wrong)."""
    total = correct_full = correct_img_p1 = correct_img_p2 = correct_text = 0
    for s in items:
        total += 1
        if s["cos_p1"] > s["cos_neg"] and s["cos_p2"] > s["cos_neg"]:
            correct_full += 1
        if s["cos_p1"] > s["cos_neg"]:
            correct_img_p1 += 1
        if s["cos_p2"] > s["cos_neg"]:
            correct_img_p2 += 1
        if s["cos_p1p2"] > s["cos_p1_neg"] and s["cos_p1p2"] > s["cos_p2_neg"]:
            correct_text += 1
    return {
        "itt": correct_full / total,
        "p1_neg": correct_img_p1 / total,
        "p2_neg": correct_img_p2 / total,
        "tot": correct_text / total,
    }


def crepe_rank(scores: np.ndarray) -> int:
    """crepe_eval_utils.py:60-65 (get_one2many_rank) for one image: the 0-based rank of the
    ground truth (index 0) when the options are sorted by descending score. The script sorts
    with torch.argsort(descending=True), whose order among equal scores is unspecified; a
    stable sort is used here, so the golden fixtures hold no ties."""
    ranking = np.argsort(-np.asarray(scores), kind="stable")
    return int(np.where(ranking == 0)[0][0])


def crepe_metrics(ranks: list[int]) -> dict[str, float]:
    """crepe_eval_utils.py:67-76 (get_one2many_metrics)."""
    preds = np.array(ranks)
    metrics = {"mean_rank": float(preds.mean() + 1)}
    for k in [1, 3, 5, 10]:
        metrics[f"R@{k}"] = float(np.mean(preds < k))
    return metrics


def extract_answer(output_string: str, task_type: str = "yes_no") -> int:
    """naturalbench_vqa.py:9-48: 1 for yes / A, 0 for no / B, -1 when neither is found."""

    def find_word_position(string: str, word: str) -> int:
        pattern = r"\b" + re.escape(word) + r"\b"
        match = re.search(pattern, string, re.IGNORECASE)
        if match:
            return match.start()
        return -1

    if task_type == "yes_no":
        position_yes_and_a = find_word_position(output_string, "yes")
        position_no_and_b = find_word_position(output_string, "no")
    else:
        position_yes_and_a = find_word_position(output_string, "A")
        position_no_and_b = find_word_position(output_string, "B")
    if position_yes_and_a == -1 and position_no_and_b == -1:
        return -1
    if position_yes_and_a != -1 and position_no_and_b != -1:
        return 1 if position_yes_and_a < position_no_and_b else 0
    return 0 if position_yes_and_a == -1 else 1


def naturalbench_scores(answers: list[dict[str, int]]) -> dict[str, float]:
    """naturalbench_vqa.py:50-148 (get_scores) on the dict form {q0_i0, q0_i1, q1_i0, q1_i1}.
    The script never reads the gold answers: it relies on the release's layout (q0_i0 and q1_i1
    are answered yes / A, q0_i1 and q1_i0 no / B)."""

    def image(r: dict[str, int]) -> int:
        return int(r["q0_i0"] == 1.0 and r["q1_i0"] == 0.0) + int(
            r["q1_i1"] == 1.0 and r["q0_i1"] == 0.0
        )

    def question(r: dict[str, int]) -> int:
        return int(r["q0_i0"] == 1.0 and r["q0_i1"] == 0.0) + int(
            r["q1_i1"] == 1.0 and r["q1_i0"] == 0.0
        )

    def binary(r: dict[str, int]) -> int:
        return (
            int(r["q0_i0"] == 1.0)
            + int(r["q0_i1"] == 0.0)
            + int(r["q1_i0"] == 0.0)
            + int(r["q1_i1"] == 1.0)
        )

    n = len(answers)
    return {
        "Q_Acc": sum(question(r) for r in answers) / float(n * 2),
        "I_Acc": sum(image(r) for r in answers) / float(n * 2),
        "Acc": sum(binary(r) for r in answers) / float(n * 4),
        "G_Acc": sum(int(question(r) == 2 and image(r) == 2) for r in answers) / n,
    }
