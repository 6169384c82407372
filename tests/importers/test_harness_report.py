"""Harness imports through the real score stage (tiny random-weight CLIP) and the report: the
official metric recomputed from the run's own scores equals the script's logic, and `report
--compare` over runs of different benchmarks shows each model's profile."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from autocomp.analysis.report import report_stage
from autocomp.config import ScoreConfig
from autocomp.importers import import_benchmark
from autocomp.scoring.stage import score
from tests.importers.harness_support import write_spec, write_winoground

pytestmark = pytest.mark.slow


def _run(tmp_path, name, fmt, source, images=None, model="tiny-clip"):
    run = tmp_path / name
    import_benchmark(fmt, source, run / "benchmark", images)
    score(model, run / "benchmark", run / "results", ScoreConfig(device="cpu"))
    return run


def test_winoground_through_the_score_stage_and_the_report(tmp_path):
    data, images = write_winoground(tmp_path / "src")
    wino = _run(tmp_path, "wino", "winoground", data, images)
    spec = _run(tmp_path, "spec", "spec", write_spec(tmp_path / "src"))
    release = _run(tmp_path, "autocomp", "autocomp-release", _color_release(tmp_path))
    # the card's logic on the run's own scores, keyed by (image file, caption)
    scores = pq.read_table(wino / "results" / "tiny-clip" / "scores").to_pylist()
    rows = pq.read_table(wino / "benchmark" / "data").to_pylist()
    by_id = {r["sample_id"]: r for r in rows}
    cell = {(by_id[s["sample_id"]]["image_ref"], by_id[s["sample_id"]]["texts"][s["candidate_index"]]):
            s["score"] for s in scores}  # fmt: skip
    text = image = group = 0
    examples = [json.loads(line) for line in (data / "examples.jsonl").read_text().splitlines()]
    for ex in examples:
        i0, i1 = ex["image_0"] + ".png", ex["image_1"] + ".png"
        r = {"c0_i0": cell[i0, ex["caption_0"]], "c0_i1": cell[i1, ex["caption_0"]],
             "c1_i0": cell[i0, ex["caption_1"]], "c1_i1": cell[i1, ex["caption_1"]]}  # fmt: skip
        t = r["c0_i0"] > r["c1_i0"] and r["c1_i1"] > r["c0_i1"]
        i = r["c0_i0"] > r["c0_i1"] and r["c1_i1"] > r["c1_i0"]
        text, image, group = text + t, image + i, group + (t and i)
    written = report_stage(wino, tmp_path / "report", compare=[spec, release])
    metrics = pq.read_table(tmp_path / "report" / "tables" / "harness_metrics.parquet").to_pylist()
    ours = {
        m["metric"]: m["accuracy"]
        for m in metrics
        if m["subset"] == "all" and m["tie"] == "official" and m["score_type"] == "score"
    }
    n = len(examples)
    assert ours == pytest.approx({"text": text / n, "image": image / n, "group": group / n})
    groups = pq.read_table(tmp_path / "report" / "tables" / "harness_groups.parquet").to_pylist()
    assert len(groups) == 3 * n and {g["metric"] for g in groups} == {"text", "image", "group"}
    assert sum(g["correct"] for g in groups if g["metric"] == "group") == group
    profile = pq.read_table(tmp_path / "report" / "tables" / "benchmark_profile.parquet")
    seen = {(r["benchmark"], r["metric"]) for r in profile.to_pylist()}
    assert {("winoground", "group"), ("spec", "i2t"), ("spec", "t2i")} <= seen
    assert ("autocomp", "confusion") in seen
    assert all(r["low"] <= r["accuracy"] <= r["high"] for r in profile.to_pylist())
    assert any("A harness benchmark" in line for line in written["computed_on"])
    html = written["html"].read_text()
    assert (
        "Each model across benchmarks" in html
        and "The benchmark&#x27;s own metric" in html
        or ("The benchmark's own metric" in html)
    )


def _color_release(tmp_path):
    import pyarrow.parquet as pq2

    from tests.importers.conftest import COLOR_ROWS, release_table

    path = tmp_path / "color.parquet"
    pq2.write_table(release_table(COLOR_ROWS, "colors"), path)
    return path


def _card(data, run, model, per_token=False):
    """The card's text / image / group counts on a run's own scores of `model`."""
    scores = pq.read_table(run / "results" / model / "scores").to_pylist()
    by_id = {r["sample_id"]: r for r in pq.read_table(run / "benchmark" / "data").to_pylist()}
    cell = {}
    for s in scores:
        row = by_id[s["sample_id"]]
        value = s["score"] / s["tokens"] if per_token else s["score"]
        cell[row["image_ref"], row["texts"][s["candidate_index"]]] = value
    counts = {"text": 0, "image": 0, "group": 0}
    examples = [json.loads(line) for line in (data / "examples.jsonl").read_text().splitlines()]
    for ex in examples:
        i0, i1, c0, c1 = (
            ex["image_0"] + ".png",
            ex["image_1"] + ".png",
            ex["caption_0"],
            ex["caption_1"],
        )
        t = cell[i0, c0] > cell[i0, c1] and cell[i1, c1] > cell[i1, c0]
        i = cell[i0, c0] > cell[i1, c0] and cell[i1, c1] > cell[i0, c1]
        counts["text"] += t
        counts["image"] += i
        counts["group"] += t and i
    return {k: v / len(examples) for k, v in counts.items()}


def test_a_generative_model_gets_both_score_types_and_a_blind_run_is_refused(tmp_path):
    """(Scoring a harness benchmark --blind is refused: test_harness_winoground.py.)"""
    from autocomp.analysis.harness import run_tables

    data, images = write_winoground(tmp_path / "src", groups=4)
    run = _run(tmp_path, "wg", "winoground", data, images, model="tiny-llava")
    # a run made before scoring refused --blind on harness benchmarks: the report refuses it
    shutil.copytree(run / "results" / "tiny-llava", run / "results" / "tiny-qwen2.5-vl")
    record = run / "results" / "tiny-qwen2.5-vl" / "run.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "blind": "likelihood"}))
    tables = run_tables(run)
    rows = tables["harness_metrics"].to_pylist()
    for score_type in ("score", "per_token"):
        ours = {r["metric"]: r["accuracy"] for r in rows if r["subset"] == "all"
                and r["tie"] == "official" and r["score_type"] == score_type}  # fmt: skip
        assert ours == pytest.approx(_card(data, run, "tiny-llava", score_type == "per_token"))
    assert {r["model"] for r in rows} == {"tiny-llava"}
    refused = tables["harness_unscored"].to_pylist()
    assert [(r["model"], r["groups"]) for r in refused] == [("tiny-qwen2.5-vl", 4)]
    assert "--blind" in refused[0]["reason"]
