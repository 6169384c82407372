"""CLIP_benchmark (`clip-benchmark` from PyPI, in the peers environment: `make test-peers`):
its own `image_caption_selection` metric, on an exported Auto-Comp family, with the tiny
open_clip model loaded by its own `load_clip`, gives autocomp's accuracy on every family, N and
set (amp off, as `--no_amp`; CLIP_benchmark counts a tie at the top right and autocomp wrong, so
the items are checked to have none)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.config import ExportConfig, ScoreConfig
from autocomp.exports import export
from autocomp.exports.questions import slug
from autocomp.scoring import score
from autocomp.scoring.registry import get_model
from tests.exports.conftest import build_bench

pytestmark = [pytest.mark.peers, pytest.mark.slow]


def test_clip_benchmark_metric_gives_autocomps_accuracy(tmp_path):
    import importlib.util

    from clip_benchmark.datasets.builder import image_captions_collate_fn
    from clip_benchmark.metrics import image_caption_selection
    from clip_benchmark.models import load_clip
    from torch.utils.data import DataLoader

    from autocomp.tiny.scoring import ensure_open_clip_weights

    bench = build_bench(tmp_path / "bench", count=6)
    images = str(bench.parent / "images")
    entry = get_model("tiny-clip")
    score([entry], bench, tmp_path / "scores", ScoreConfig(images=images, device="cpu"))
    predictions = pa.concat_tables(
        [
            pq.read_table(p)
            for p in sorted((tmp_path / "scores" / "tiny-clip" / "predictions").glob("*.parquet"))
        ]
    ).to_pylist()
    paper = [p for p in predictions if p["protocol"] == "paper" and p["score_type"] == "score"]
    assert not any(p["tie"] for p in paper)
    out = tmp_path / "clip"
    export("clip-benchmark", bench, out, ExportConfig(images=images, sets=("swap", "confusion")))
    spec = importlib.util.spec_from_file_location("autocomp_dataset", out / "autocomp_dataset.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    weights = ensure_open_clip_weights(entry)  # also registers the tiny architecture
    model, transform, tokenizer = load_clip(
        "open_clip", entry.architecture, str(weights), None, "cpu"
    )
    model.eval()
    record = json.loads((out / "autocomp_export.json").read_text())
    checked = 0
    for rel in record["wrote"]["annotation_files"]:
        n, set_name = int(rel.split("/")[1][1:].split("_")[0]), rel.split("/")[1].split("_")[1]
        dataset = module.AutoCompCaptions(out / rel, transform=transform)
        loader = DataLoader(dataset, batch_size=4, collate_fn=image_captions_collate_fn)
        metrics = image_caption_selection.evaluate(model, loader, tokenizer, "cpu", amp=False)
        ours = [p["correct"] for p in paper if p["set"] == set_name and p["n"] == n
                and slug(p["family"]) == rel.split("/")[0]]  # fmt: skip
        assert len(ours) == len(dataset) > 0
        # the metric's mean is float32 (torch.Tensor(...).float().mean()): the same count
        assert round(metrics["text_acc"] * len(ours)) == sum(ours), rel
        assert metrics["text_acc"] == pytest.approx(sum(ours) / len(ours), abs=1e-6), rel
        checked += 1
    assert checked == 2
