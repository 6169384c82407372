"""SPEC: a fixture in the release's layout (one folder per subset with image2text.json and
text2image.json, image paths relative to the subset folder, as github.com/wjpoom/SPEC
spec/dataset.py reads it), scored by a transcription of spec/models/clip_wrapper.py's
i2t_evaluate / t2i_evaluate (argmax, the first maximal candidate wins) and by autocomp: equal."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from tests.importers.harness_support import run_scores, tied_scorer, write_spec


@pytest.fixture
def spec(tmp_path):
    return write_spec(tmp_path)


def official(root, subset, score):
    """i2t_evaluate / t2i_evaluate: accuracy = 100 * (argmax == label) over the items."""
    folder = root / subset
    correct = total = 0
    for item in json.loads((folder / "image2text.json").read_text()):
        scores = np.array([score(f"{subset}/{item['query']}", t) for t in item["keys"]])
        correct += int(scores.argmax() == item["label"])
        total += 1
    i2t = 100 * correct / total
    correct = total = 0
    for item in json.loads((folder / "text2image.json").read_text()):
        scores = np.array([score(f"{subset}/{i}", item["query"]) for i in item["keys"]])
        correct += int(scores.argmax() == item["label"])
        total += 1
    return {"i2t": i2t, "t2i": 100 * correct / total}


@pytest.mark.parametrize("seed", range(6))
def test_i2t_and_t2i_per_subset_equal_the_wrapper(spec, tmp_path, seed):
    out = tmp_path / "out"
    report = import_benchmark("spec", spec, out)
    assert report["tie"] == "first"
    score = tied_scorer(seed, levels=3)
    harness = harness_of(out)
    rows = metrics(outcomes(harness, {"m": run_scores(out, score)}), harness.aggregate).to_pylist()
    for subset in ("absolute_size", "count"):
        ours = {
            r["metric"]: 100 * r["accuracy"]
            for r in rows
            if r["subset"] == subset and r["tie"] == "official"
        }
        assert ours == pytest.approx(official(spec, subset, score))


def test_one_subset_folder_imports_alone(spec, tmp_path):
    report = import_benchmark("spec", spec / "count", tmp_path / "out")
    assert list(report["groups_by_subset"]) == ["count"]


def test_a_label_outside_its_keys_is_refused(spec, tmp_path):
    file = spec / "count" / "image2text.json"
    items = json.loads(file.read_text())
    items[2]["label"] = 7
    file.write_text(json.dumps(items))
    with pytest.raises(UsageError, match="count/image2text.json item 2.*label 7"):
        import_benchmark("spec", spec, tmp_path / "out")


def test_a_folder_without_subsets_names_the_files(tmp_path):
    (tmp_path / "src").mkdir()
    with pytest.raises(UsageError, match="image2text.json.*text2image.json"):
        import_benchmark("spec", tmp_path / "src", tmp_path / "out")
