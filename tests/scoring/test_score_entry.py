"""`autocomp.scoring.score`, the one scoring entry (the CLI, the pipeline's score step and the
Python example call it): it builds each scorer with the configuration's device and batch size,
checks every input once before any model loads, and publishes/fetches runs under `results`."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import autocomp.scoring
from autocomp.config import NegativesConfig, ScoreConfig
from autocomp.errors import UsageError
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring import score, stage
from autocomp.scoring.items import item_from_row, prediction_row
from autocomp.scoring.modes import score_row
from autocomp.scoring.registry import get_model
from autocomp.store.catalog.benchmarks import open_benchmark
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA, SCORES_SCHEMA


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    sample_stage("color", 2, 4, 0, d / "c.parquet")
    negatives_stage(d / "c.parquet", d / "b.parquet", NegativesConfig(workers=1))
    table = pq.read_table(d / "b.parquet")
    (d / "images").mkdir()
    for i in range(table.num_rows):
        Image.new("RGB", (32, 32), (60 * i, 90, 200)).save(d / "images" / f"{i}.png")
    table = table.append_column("image", pa.array([f"{i}.png" for i in range(table.num_rows)]))
    pq.write_table(table, d / "bench.parquet")
    return d


@pytest.fixture
def loads(monkeypatch):
    """Every scorer `score` builds: (model, device, batch size, the scorer)."""
    made = []
    real = stage.load_scorer

    def spy(entry, device=None, batch_size=None, **options):
        made.append((entry.name, device, batch_size, real(entry, device, batch_size, **options)))
        return made[-1][3]

    monkeypatch.setattr(stage, "load_scorer", spy)
    return made


def _count_checks(monkeypatch) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in ("check_config", "check_out", "check_images", "check_mode", "check_device",
                 "check_benchmark"):  # fmt: skip
        real = getattr(stage, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            counts[_name] = counts.get(_name, 0) + 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(stage, name, counted)
    return counts


def test_the_package_exports_the_stage_entry():
    assert autocomp.scoring.score is stage.score is score


def test_every_row_builder_fills_its_schema():
    row = {"family": "color", "n": 2, "caption": "a", "confusion_negatives": ["b", "c"],
           "swap_in_confusion": [0], "confusion_same_scene": [False, True],
           "vary_attribute_negatives": [], "vary_object_negatives": []}  # fmt: skip
    item = item_from_row(row, 0)
    built = prediction_row("m", item, "swap", "paper", [1], [0.5, 0.2, 0.1], options="1,0")
    assert list(built) == PREDICTIONS_SCHEMA.names  # every column, in schema order
    assert pa.Table.from_pylist([built], PREDICTIONS_SCHEMA).num_rows == 1
    plain = score_row("m", item, 0, 0.5, tokens=3)
    chosen = score_row("m", item, 1, 0.2, score_type="choice", set="swap", protocol="paper",
                       option=1)  # fmt: skip
    assert set(plain) | set(chosen) == set(SCORES_SCHEMA.names)


@pytest.mark.slow
def test_device_and_batch_size_reach_every_scorer_and_each_check_runs_once(
    bench, tmp_path, loads, monkeypatch
):
    counts = _count_checks(monkeypatch)
    out = tmp_path / "runs"
    config = ScoreConfig(images=str(bench / "images"), device="cpu", batch_size=3)
    summary = score([get_model("tiny-clip"), "tiny-siglip"], bench / "bench.parquet", out, config)
    assert [(m, d, b) for m, d, b, _ in loads] == [
        ("tiny-clip", "cpu", 3),
        ("tiny-siglip", "cpu", 3),
    ]
    assert all(s.text_batch == 3 for *_, s in loads)  # the backend's own batch option
    assert counts == {"check_config": 1, "check_out": 1, "check_images": 1, "check_mode": 2,
                      "check_device": 1, "check_benchmark": 1}  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == ["summary.parquet", "tiny-clip", "tiny-siglip"]
    assert summary.equals(pq.read_table(out / "summary.parquet").replace_schema_metadata(None))
    assert list(dict.fromkeys(summary["model"].to_pylist())) == ["tiny-clip", "tiny-siglip"]
    for model in ("tiny-clip", "tiny-siglip"):
        run = json.loads((out / model / "run.json").read_text())
        assert (run["model"], run["batch_size"]) == (model, 3)


def test_every_run_folder_is_checked_before_the_first_model_loads(bench, tmp_path, loads):
    out = tmp_path / "runs"
    (out / "tiny-siglip").mkdir(parents=True)
    (out / "tiny-siglip" / "run.json").write_text(json.dumps({"format": 2, "model": "other"}))
    config = ScoreConfig(images=str(bench / "images"), device="cpu")
    with pytest.raises(UsageError, match="another model"):
        score("tiny-clip,tiny-siglip", bench / "bench.parquet", out, config)
    assert loads == [] and sorted(p.name for p in out.iterdir()) == ["tiny-siglip"]


def test_a_call_that_fails_leaves_no_output_folder(bench, tmp_path):
    with pytest.raises(UsageError, match="^device: "):
        score(["tiny-clip"], bench / "bench.parquet", tmp_path / "new", ScoreConfig(device="tpu"))
    with pytest.raises(UsageError, match="results.*store"):
        score(["tiny-clip"], bench / "bench.parquet", tmp_path / "new", results="results/x")
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_runs_are_published_under_results_and_fetched_instead_of_scored(bench, tmp_path, loads):
    store = tmp_path / "store"
    config = ScoreConfig(images=str(bench / "images"), device="cpu")
    table = open_benchmark(bench / "bench.parquet")  # opened: `store` is only where runs go
    first = score(["tiny-clip"], table, tmp_path / "a", config, store=str(store),
                  results="results/b1")  # fmt: skip
    manifest = json.loads((store / "results/b1/tiny-clip/_manifest.json").read_text())
    assert manifest["made_by"] == {"stage": "score", "model": "tiny-clip", "benchmark": "b1"}
    again = score(["tiny-clip"], table, tmp_path / "b", config, store=str(store),
                  results="results/b1")  # fmt: skip
    assert len(loads) == 1  # the second call fetched the run: no model loaded
    assert again.equals(first)
    files = sorted(p.relative_to(tmp_path / "a" / "tiny-clip")
                   for p in (tmp_path / "a" / "tiny-clip").rglob("*") if p.is_file())  # fmt: skip
    for rel in files:
        assert (tmp_path / "b" / "tiny-clip" / rel).read_bytes() == (
            tmp_path / "a" / "tiny-clip" / rel
        ).read_bytes()
