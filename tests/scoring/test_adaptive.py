"""Adaptive scoring (`score --target-width`) on the tiny CLIP: it stops where the interval
allows, an extended run equals a fresh run at the smaller width, and a full run's predictions
on the items it scored are the same."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import NegativesConfig, ScoreConfig
from autocomp.errors import UsageError
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring import score
from autocomp.scoring.adaptive import order
from autocomp.store.catalog.benchmarks import open_benchmark
from autocomp.store.catalog.runs import read_predictions

KEYS = ("sample_id", "set", "protocol", "score_type", "correct", "predicted", "tie", "failed")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    d = tmp_path_factory.mktemp("adaptive")
    sample_stage("color", 2, 30, 0, d / "c.parquet")
    negatives_stage(d / "c.parquet", d / "b.parquet", NegativesConfig(workers=1))
    table = pq.read_table(d / "b.parquet")
    (d / "images").mkdir()
    for i in range(table.num_rows):
        Image.new("RGB", (32, 32), (8 * i, 90, 200 - 5 * i)).save(d / "images" / f"{i}.png")
    table = table.append_column("image", pa.array([f"{i}.png" for i in range(table.num_rows)]))
    pq.write_table(table, d / "bench.parquet", row_group_size=4)
    return d


def _config(bench, width, **kw):
    kw = {"adaptive_round": 5, **kw}
    return ScoreConfig(images=str(bench / "images"), device="cpu", target_width=width, **kw)


def _rows(folder):
    table = read_predictions(folder)
    return sorted(tuple(r[k] for k in KEYS) for r in table.select(list(KEYS)).to_pylist())


def test_the_order_is_a_seeded_permutation_of_each_cell(bench):
    source = open_benchmark(bench / "bench.parquet")
    a, b, c = order(source, 0), order(source, 0), order(source, 1)
    assert a == b and a.cells != c.cells
    (cell, rows), = a.cells.items()  # fmt: skip
    assert cell == ("color", 2, "minimal") and sorted(rows) == list(range(30))


@pytest.mark.slow
def test_stops_early_extends_exactly_and_agrees_with_the_full_run(bench, tmp_path):
    path = bench / "bench.parquet"
    score("tiny-clip", path, tmp_path / "a", _config(bench, 60))
    cells = pq.read_table(tmp_path / "a" / "tiny-clip" / "adaptive.parquet").to_pylist()
    scored = {c["scored"] for c in cells}
    assert len(scored) == 1 and scored.pop() < 30  # the interval allowed a stop
    assert all(c["closed_early"] and c["upper"] - c["lower"] < 0.6 for c in cells)
    assert all(c["available"] == 30 and c["gpu_hours_saved"] > 0 for c in cells)
    first = _rows(tmp_path / "a" / "tiny-clip")

    score("tiny-clip", path, tmp_path / "a", _config(bench, 25))  # extend the same folder
    score("tiny-clip", path, tmp_path / "b", _config(bench, 25))  # a fresh run at 25
    extended, fresh = _rows(tmp_path / "a" / "tiny-clip"), _rows(tmp_path / "b" / "tiny-clip")
    assert extended == fresh and set(first) < set(fresh)

    score("tiny-clip", path, tmp_path / "full", ScoreConfig(images=str(bench / "images"),
                                                         device="cpu"))  # fmt: skip
    full = _rows(tmp_path / "full" / "tiny-clip")
    assert set(fresh) <= set(full) and len(full) > len(fresh)


def test_bad_settings_are_refused_before_any_work(bench, tmp_path):
    path = bench / "bench.parquet"
    for width, extra, name in ((0, {}, "target_width"), (101, {}, "target_width"),
                               (5, {"limit": 3}, "limit"),
                               (5, {"adaptive_round": 0}, "adaptive_round")):  # fmt: skip
        with pytest.raises(UsageError) as info:
            score("tiny-clip", path, tmp_path / "x", _config(bench, width, **extra))
        assert info.value.what.startswith(name)
    assert not (tmp_path / "x").exists()
    with pytest.raises(UsageError) as info:
        score("tiny-clip", path, tmp_path / "x", _config(bench, 5), store=str(tmp_path / "s"),
              results="results/b")  # fmt: skip
    assert info.value.what == "target_width"
