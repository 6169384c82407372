"""Winoground: a fixture in the release's exact format (facebook/winoground data/examples.jsonl
and images/<stem>.png, as its loading script winoground.py reads them), scored by a
transcription of the dataset card's text_correct / image_correct / group_correct and by
autocomp: equal, with ties (the card's `>`: a tie is wrong)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from tests.importers.harness_support import png, run_scores, tied_scorer, write_winoground


@pytest.fixture
def winoground(tmp_path):
    return write_winoground(tmp_path)


# ----------------------------------------------------------------- the official logic, transcribed


def text_correct(result):
    return result["c0_i0"] > result["c1_i0"] and result["c1_i1"] > result["c0_i1"]


def image_correct(result):
    return result["c0_i0"] > result["c0_i1"] and result["c1_i1"] > result["c1_i0"]


def group_correct(result):
    return image_correct(result) and text_correct(result)


def official(examples_file, score):
    results = []
    for line in examples_file.read_text().splitlines():
        example = json.loads(line)
        i0, i1 = example["image_0"] + ".png", example["image_1"] + ".png"
        c0, c1 = example["caption_0"], example["caption_1"]
        results.append(
            {
                "c0_i0": score(i0, c0),
                "c0_i1": score(i1, c0),
                "c1_i0": score(i0, c1),
                "c1_i1": score(i1, c1),
            }
        )
    n = len(results)
    return {
        "text": sum(map(text_correct, results)) / n,
        "image": sum(map(image_correct, results)) / n,
        "group": sum(map(group_correct, results)) / n,
    }


# ----------------------------------------------------------------- tests


@pytest.mark.parametrize("seed", range(6))
def test_autocomp_equals_the_official_scores(winoground, tmp_path, seed):
    data, images = winoground
    out = tmp_path / "bench"
    report = import_benchmark("winoground", data, out, images)
    assert report["groups"] == 12 and report["samples"] == 24 and report["tie"] == "strict"
    score = tied_scorer(seed)
    harness = harness_of(out)
    table = metrics(outcomes(harness, {"m": run_scores(out, score)}), harness.aggregate)
    got = {
        r["metric"]: r["accuracy"]
        for r in table.to_pylist()
        if r["subset"] == "all" and r["tie"] == "official" and r["score_type"] == "score"
    }
    assert got == pytest.approx(official(data / "examples.jsonl", score))


def test_ties_counted_right_give_another_number(winoground, tmp_path):
    data, images = winoground
    import_benchmark("winoground", data, tmp_path / "bench", images)
    harness = harness_of(tmp_path / "bench")
    equal = run_scores(tmp_path / "bench", lambda image, text: 0.5)  # every cell tied
    rows = metrics(outcomes(harness, {"m": equal}), harness.aggregate).to_pylist()
    group = {
        r["tie"]: r["accuracy"] for r in rows if r["subset"] == "all" and r["metric"] == "group"
    }
    assert group == {"official": 0.0, "strict": 0.0, "lenient": 1.0}


def test_the_parquet_conversion_imports_with_embedded_images(tmp_path):
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({
        "id": [0, 1], "image_0": pa.array([{"bytes": png(1), "path": None}] * 2, image),
        "image_1": pa.array([{"bytes": png(2), "path": None}] * 2, image),
        "caption_0": ["a b", "c d"], "caption_1": ["b a", "d c"],
        "tag": ["x", "y"], "secondary_tag": ["", ""], "num_main_preds": [1, 1],
        "collapsed_tag": ["Object", "Both"],
    })  # fmt: skip
    pq.write_table(table, tmp_path / "test-00000.parquet")
    report = import_benchmark("winoground", tmp_path / "test-00000.parquet", tmp_path / "b")
    assert report["groups_by_subset"] == {"Both": 1, "Object": 1}


def test_another_benchmarks_file_names_the_columns(tmp_path):
    bad = tmp_path / "examples.jsonl"
    bad.write_text(json.dumps({"filename": "x.jpg", "caption": "a", "negative_caption": "b"}))
    (tmp_path / "images").mkdir()
    with pytest.raises(UsageError, match="lacks column.*caption_0.*not this release"):
        import_benchmark("winoground", bad, tmp_path / "out", tmp_path / "images")
    assert not (tmp_path / "out").exists()


def test_a_missing_image_stops_or_is_dropped_with_skip_missing(winoground, tmp_path):
    data, images = winoground
    (images / "ex_3_img_1.png").unlink()
    (images / "ex_4_img_0.png").write_bytes(png(1)[:30])  # cut: the header only
    with pytest.raises(UsageError, match="ex_3_img_1.png.*is missing.*--skip-missing"):
        import_benchmark("winoground", data, tmp_path / "out", images)
    assert not (tmp_path / "out").exists()
    report = import_benchmark(
        "winoground", data, tmp_path / "out", images, ImportConfig(skip_missing=True)
    )
    assert report["groups"] == 10
    assert sum(report["groups_dropped"].values()) == 2


def test_an_existing_folder_is_kept_without_force(winoground, tmp_path):
    data, images = winoground
    import_benchmark("winoground", data, tmp_path / "out", images)
    with pytest.raises(UsageError, match="exists.*--force"):
        import_benchmark("winoground", data, tmp_path / "out", images)
    import_benchmark("winoground", data, tmp_path / "out", images, ImportConfig(force=True))


def test_the_verb_prints_the_rule_and_refuses_bad_input_in_one_line(winoground, tmp_path, capsys):
    from autocomp.cli.main import main

    data, images = winoground
    (images / "ex_5_img_0.png").unlink()
    argv = ["import", "winoground", "--source", str(data), "--images", str(images),
            "--out", str(tmp_path / "wg")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "ex_5_img_0.png" in err and "--skip-missing" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert main([*argv, "--skip-missing"]) == 0
    printed = capsys.readouterr().out
    assert f"imported 22 samples into {tmp_path / 'wg'} (winoground)" in printed
    for line in ("groups: 11", "rule: text-image-group", "tie: strict", "aggregate: micro",
                 "groups dropped: 1 (Both: image missing)"):  # fmt: skip
        assert line in printed


def test_scoring_a_harness_benchmark_blind_is_refused_before_a_model_loads(winoground, tmp_path):
    from autocomp.config import ScoreConfig
    from autocomp.scoring.stage import score

    data, images = winoground
    import_benchmark("winoground", data, tmp_path / "wg", images)
    blind = ScoreConfig(device="cpu", blind="likelihood")
    with pytest.raises(UsageError, match="harness benchmark winoground.*without --blind"):
        score("tiny-llava", tmp_path / "wg", tmp_path / "runs", blind)
    assert not (tmp_path / "runs").exists()
