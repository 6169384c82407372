"""Harness imports through the real score stage (tiny random-weight CLIP) and the report: the
official metric recomputed from the run's own scores equals the script's logic, and `report
--compare` over runs of different benchmarks shows each model's profile."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from autocomp.analysis.report import report_stage
from autocomp.config import ScoreConfig
from autocomp.importers import import_benchmark
from autocomp.scoring.stage import score
from tests.importers.harness_support import write_spec, write_winoground

pytestmark = pytest.mark.slow


def _run(tmp_path, name, fmt, source, images=None):
    run = tmp_path / name
    import_benchmark(fmt, source, run / "benchmark", images)
    score("tiny-clip", run / "benchmark", run / "results", ScoreConfig(device="cpu"))
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
    profile = pq.read_table(tmp_path / "report" / "tables" / "benchmark_profile.parquet")
    seen = {(r["benchmark"], r["metric"]) for r in profile.to_pylist()}
    assert {("winoground", "group"), ("spec", "i2t"), ("spec", "t2i")} <= seen
    assert ("autocomp", "confusion") in seen
    assert all(r["low"] <= r["accuracy"] <= r["high"] for r in profile.to_pylist())
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
