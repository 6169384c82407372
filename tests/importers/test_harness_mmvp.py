"""MMVP-VLM: a fixture in the release's layout (Questions.csv + 'MLLM_VLM Images/<type>/<qid>.jpg',
as github.com/tsb0601/MMVP scripts/evaluate_vlm.py reads it), scored by a transcription of that
script (softmax over the pair's images per statement, `img1 if prob > 0.5 else img2`, gt by qid
parity, category = pairs // 15, pair accuracy x 100 / (pairs // 9)) and by autocomp: equal."""

from __future__ import annotations

import csv
import math

import pytest

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from autocomp.importers.mmvp import CATEGORIES
from tests.importers.harness_support import png, run_scores, tied_scorer

TYPES = ["Orientation", "Features", "State", "Count", "Position", "Color", "Structure",
         "Text", "Viewpoint"]  # fmt: skip


@pytest.fixture(scope="module")
def mmvp(tmp_path_factory):
    root = tmp_path_factory.mktemp("mmvp") / "MMVP_VLM"
    rows = [["Question ID", "Question Type", "Statement"]]
    for p in range(135):
        kind = TYPES[p // 15]
        folder = root / "MLLM_VLM Images" / kind
        folder.mkdir(parents=True, exist_ok=True)
        for k in (1, 2):
            qid = 2 * p + k
            (folder / f"{qid}.jpg").write_bytes(png(qid, "JPEG"))
            rows.append(
                [str(qid), kind, f"the dog {'faces left' if k == 1 else 'faces right'} {p}"]
            )
    with (root / "Questions.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return root


def official(root, score):
    """scripts/evaluate_vlm.py benchmark_model, the model's logits given by `score`."""
    categories = list(CATEGORIES)
    pair_accuracies = {category: 0 for category in categories}
    num_pairs = 0
    with open(root / "Questions.csv") as f:
        reader = csv.reader(f)
        next(reader)
        for row in reader:
            qid1, qtype1, statement1 = row
            row = next(reader, None)
            if not row:
                break
            qid2, _qtype2, statement2 = row
            qid1, qid2 = int(qid1), int(qid2)
            img1, img2 = f"{qtype1}/{qid1}.jpg", f"{qtype1}/{qid2}.jpg"
            text1, text2 = "a photo of " + statement1, "a photo of " + statement2

            def softmax(values):
                exps = [math.exp(v) for v in values]
                return [e / sum(exps) for e in exps]

            probs1 = softmax([100 * score(img1, text1), 100 * score(img2, text1)])
            probs2 = softmax([100 * score(img1, text2), 100 * score(img2, text2)])
            pred1 = "img1" if probs1[0] > 0.5 else "img2"
            pred2 = "img1" if probs2[0] > 0.5 else "img2"
            gt1 = "img1" if qid1 % 2 == 1 else "img2"
            gt2 = "img1" if qid2 % 2 == 1 else "img2"
            current_category = categories[num_pairs // 15]
            if pred1 == gt1 and pred2 == gt2:
                pair_accuracies[current_category] += 1
            num_pairs += 1
    for category in pair_accuracies:
        pair_accuracies[category] = pair_accuracies[category] / (num_pairs // len(categories)) * 100
    return pair_accuracies


@pytest.fixture(scope="module")
def imported(mmvp, tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "mmvp"
    report = import_benchmark("mmvp-vlm", mmvp, out)
    assert report["groups"] == 135 and report["tie"] == "last"
    return out


@pytest.mark.parametrize("seed", range(5))
def test_pair_accuracy_per_category_equals_the_script(mmvp, imported, seed):
    score = tied_scorer(seed, levels=3)
    harness = harness_of(imported)
    rows = metrics(outcomes(harness, {"m": run_scores(imported, score)}), "macro").to_pylist()
    ours = {
        r["subset"]: 100 * r["accuracy"]
        for r in rows
        if r["tie"] == "official" and r["score_type"] == "score" and r["subset"] in CATEGORIES
    }
    assert ours == pytest.approx(official(mmvp, score))
    average = next(r for r in rows if r["subset"] == "all" and r["tie"] == "official")
    assert 100 * average["accuracy"] == pytest.approx(sum(ours.values()) / 9)


def test_a_tie_goes_to_the_second_image(imported):
    harness = harness_of(imported)
    rows = metrics(outcomes(harness, {"m": run_scores(imported, lambda i, t: 0.0)}), "macro")
    got = {r["tie"]: r["accuracy"] for r in rows.to_pylist() if r["subset"] == "all"}
    # every statement picks image 2: right for the even qid only, so no pair is right
    assert got == {"official": 0.0, "strict": 0.0, "lenient": 1.0}


def test_a_csv_of_other_columns_is_refused(tmp_path):
    (tmp_path / "Questions.csv").write_text("Index,Question,Options,Correct Answer,x\n1,a,b,c,d\n")
    with pytest.raises(UsageError, match="has 5 columns, not 3 .qid, type, statement."):
        import_benchmark("mmvp-vlm", tmp_path, tmp_path.parent / "out-mmvp")
