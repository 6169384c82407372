"""EqBen: fixtures in the three annotation shapes its loaders read (github.com/Wangt-CN/EqBen
src/eqben/eqben_utils.py: a list of pairs as EqBenKubric / EqBenSD / the 10 % subset, {video:
[pairs]} as EqBenGEBC / EqBenYoucook2 with .npy frames, {video: {subject: [pairs with caption
lists]}} as EqBenAG), scored by a transcription of src/eqben/eqben_acc.py cal_wino_score per
subset and by autocomp: equal (`>`: ties wrong)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from tests.importers.harness_support import png, run_scores, tied_scorer


@pytest.fixture
def eqben(tmp_path):
    root = tmp_path / "image"
    pairs = []
    for i in range(40):
        subset = ("eqbensd", "eqbenkubric_cnt")[i % 2]
        (root / subset).mkdir(parents=True, exist_ok=True)
        for k in (0, 1):
            (root / subset / f"{i}_{k}.png").write_bytes(png(3 * i + k))
        pairs.append(
            {
                "image0": f"{subset}/{i}_0.png",
                "caption0": f"two red cubes {i}",
                "image1": f"{subset}/{i}_1.png",
                "caption1": f"three red cubes {i}",
            }
        )
    listed = tmp_path / "eqben_subset_10percent_final.json"
    listed.write_text(json.dumps(pairs))
    (root / "eqbenyoucook2").mkdir()
    videos = {}
    for v in range(3):
        frames = []
        for f in range(2):
            for k in (0, 1):
                array = np.full((6, 6, 3), (v * 40 + f * 9 + k * 3) % 256, dtype=np.uint8)
                array[0, 0] = (k, f, v)
                np.save(root / "eqbenyoucook2" / f"v{v}_{f}_{k}.npy", array)
            frames.append(
                {
                    "image0": f"eqbenyoucook2/v{v}_{f}_0.npy",
                    "caption0": f"cut {v}{f}",
                    "image1": f"eqbenyoucook2/v{v}_{f}_1.npy",
                    "caption1": f"stir {v}{f}",
                }
            )
        videos[f"video{v}"] = frames
    video_file = tmp_path / "eqbenyoucook2.json"
    video_file.write_text(json.dumps(videos))
    return root, listed, video_file


def cal_wino_score(result):  # src/eqben/eqben_acc.py, numpy for torch
    def text_correct(r):
        return np.logical_and(r["c0_i0"] > r["c1_i0"], r["c1_i1"] > r["c0_i1"])

    def image_correct(r):
        return np.logical_and(r["c0_i0"] > r["c0_i1"], r["c1_i1"] > r["c1_i0"])

    def group_correct(r):
        return np.logical_and(image_correct(r), text_correct(r))

    def cal_score(list_correct):
        return list_correct.sum() / len(list_correct)

    return (
        cal_score(text_correct(result)),
        cal_score(image_correct(result)),
        cal_score(group_correct(result)),
    )


def official(pairs, score, subset_of):
    """Per subset (text, image, group), the clip_forward_batch scores fed to cal_wino_score."""
    by_subset: dict[str, dict[str, list[float]]] = {}
    for pair in pairs:
        cells = by_subset.setdefault(
            subset_of(pair), {k: [] for k in ("c0_i0", "c0_i1", "c1_i0", "c1_i1")}
        )
        for c in (0, 1):
            for i in (0, 1):
                cells[f"c{c}_i{i}"].append(score(pair[f"image{i}"], pair[f"caption{c}"]))
    return {
        s: cal_wino_score({k: np.array(v) for k, v in cells.items()})
        for s, cells in by_subset.items()
    }


def _ours(out, score):
    harness = harness_of(out)
    rows = metrics(outcomes(harness, {"m": run_scores(out, score)}), harness.aggregate).to_pylist()
    found: dict[str, dict[str, float]] = {}
    for r in rows:
        if (
            r["tie"] == "official"
            and r["score_type"] == "score"
            and not r["subset"].startswith("all")
        ):
            found.setdefault(r["subset"], {})[r["metric"]] = r["accuracy"]
    return {s: (m["text"], m["image"], m["group"]) for s, m in found.items()}


def _equal(ours, expected):
    assert set(ours) == set(expected)
    for subset, values in expected.items():
        assert ours[subset] == pytest.approx(tuple(float(v) for v in values))


@pytest.mark.parametrize("seed", range(5))
def test_a_list_file_equals_cal_wino_score_per_subset(eqben, tmp_path, seed):
    root, listed, _ = eqben
    import_benchmark("eqben", listed, tmp_path / "out", root)
    score = tied_scorer(seed, levels=4)
    pairs = json.loads(listed.read_text())
    expected = official(pairs, score, lambda p: p["image0"].split("/")[0])
    assert set(expected) == {"eqbensd", "eqbenkubric_cnt"}
    assert any(v > 0 for values in expected.values() for v in values)  # not all-wrong
    _equal(_ours(tmp_path / "out", score), expected)


@pytest.mark.parametrize("seed", range(3))
def test_a_video_file_with_npy_frames_equals_cal_wino_score(eqben, tmp_path, seed):
    root, _, video_file = eqben
    report = import_benchmark("eqben", video_file, tmp_path / "out", root)
    assert report["groups"] == 6
    score = tied_scorer(seed, levels=4)
    pairs = [p for frames in json.loads(video_file.read_text()).values() for p in frames]
    expected = official(pairs, score, lambda p: "eqbenyoucook2")
    _equal(_ours(tmp_path / "out", score), expected)


def test_ag_caption_lists_take_the_first_caption(tmp_path):
    root = tmp_path / "img"
    (root / "eqbenag").mkdir(parents=True)
    for k in (0, 1):
        (root / "eqbenag" / f"{k}.png").write_bytes(png(k))
    ann = {
        "video": {
            "person": [
                {
                    "image0": "eqbenag/0.png",
                    "image1": "eqbenag/1.png",
                    "caption0": ["holds a cup", "other"],
                    "caption1": ["drinks from a cup", "x"],
                }
            ]
        }
    }
    (tmp_path / "ag.json").write_text(json.dumps(ann))
    import_benchmark("eqben", tmp_path / "ag.json", tmp_path / "out", root)
    from tests.importers.harness_support import imported_rows

    rows = imported_rows(tmp_path / "out")
    assert rows[0]["texts"] == ["holds a cup", "drinks from a cup"]
    assert rows[0]["subset"] == "eqbenag"


def test_a_winoground_file_is_not_an_eqben_annotation(tmp_path):
    (tmp_path / "a.json").write_text(
        json.dumps([{"id": 0, "image_0": "ex_0_img_0", "caption_0": "a", "caption_1": "b"}])
    )
    (tmp_path / "img").mkdir()
    with pytest.raises(UsageError, match="lacks image0, caption0, image1, caption1: not an EqBen"):
        import_benchmark("eqben", tmp_path / "a.json", tmp_path / "out", tmp_path / "img")


def test_the_randomized_annotation_is_refused_naming_why(tmp_path):
    (tmp_path / "ann.json").write_text(json.dumps([{"image": "eqbensd/a.png", "caption": "x"}]))
    (tmp_path / "img").mkdir()
    with pytest.raises(UsageError, match="randomized annotation.*pairing is private"):
        import_benchmark("eqben", tmp_path / "ann.json", tmp_path / "out", tmp_path / "img")


def test_a_subset_named_all_keeps_apart_from_the_headline(eqben, tmp_path):
    root, listed, _ = eqben
    pairs = [{k: v.replace("eqbensd/", "x/") if k.startswith("image") else v for k, v in p.items()}
             for p in json.loads(listed.read_text()) if p["image0"].startswith("eqbensd/")]  # fmt: skip
    (root / "x").symlink_to(root / "eqbensd")
    (tmp_path / "all.json").write_text(json.dumps(pairs))
    report = import_benchmark("eqben", tmp_path / "all.json", tmp_path / "out", root)
    assert report["groups_by_subset"] == {"all (subset)": 20}
