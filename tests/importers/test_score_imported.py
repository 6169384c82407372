"""An imported benchmark scores end to end with the tiny random-weight CLIP."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from autocomp.config import ScoreConfig
from autocomp.importers import import_benchmark
from autocomp.scoring.registry import get_model
from autocomp.scoring.stage import score_stage

pytestmark = pytest.mark.slow


def _score(part: Path, out: Path) -> list[dict]:
    entry = get_model("tiny-clip")
    summary = score_stage(entry, part, out, ScoreConfig(device="cpu"))
    return summary.to_pylist()


def test_an_imported_release_scores(color_release, tmp_path):
    import_benchmark("autocomp-release", color_release, tmp_path / "bench")
    part = tmp_path / "bench" / "data" / "test-00000-of-00001.parquet"
    rows = _score(part, tmp_path / "run")
    total = pq.read_metadata(part).num_rows
    for protocol in ("paper", "strict"):
        for name in ("swap", "confusion"):
            cells = [r for r in rows if r["set"] == name and r["protocol"] == protocol]
            assert sum(r["items"] for r in cells) == total
    assert all(0.0 <= r["accuracy"] <= 1.0 and r["failed"] == 0 for r in rows)
    assert {r["condition"] for r in rows} == {"minimal", "contextual"}


def test_an_imported_sugarcrepe_scores(sugarcrepe, tmp_path):
    source, images = sugarcrepe
    import_benchmark("sugarcrepe", source, tmp_path / "bench", images)
    part = tmp_path / "bench" / "data" / "test-00000-of-00001.parquet"
    rows = _score(part, tmp_path / "run")
    assert {(r["family"], r["set"]) for r in rows} == {
        (f, s)
        for f in ("sugarcrepe-replace_att", "sugarcrepe-swap_obj")
        for s in ("swap", "confusion")
    }
    assert sum(r["items"] for r in rows if r["set"] == "swap" and r["protocol"] == "paper") == 3
    assert all(
        0.0 <= r["accuracy"] <= 1.0 and r["chance"] == 0.5 and r["failed"] == 0 for r in rows
    )
