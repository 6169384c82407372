"""`autocomp score` end to end: a registered model and an ad-hoc one (hf: an open_clip export
of the same tiny weights) on a published benchmark folder, with --limit, then extended."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.cli.main import main
from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring.registry import get_model
from autocomp.store import publish
from autocomp.tiny.scoring import TINY_CONFIGS, ensure_open_clip_weights


def _benchmark_folder(tmp_path, monkeypatch):
    """A published benchmark folder (data/test-*.parquet, images embedded) in 2 parts."""
    sample_stage("color", 2, 6, 0, tmp_path / "c.parquet")
    negatives_stage(tmp_path / "c.parquet", tmp_path / "b.parquet", NegativesConfig(workers=1))
    table = pq.read_table(tmp_path / "b.parquet")
    (tmp_path / "images").mkdir()
    for i in range(table.num_rows):
        Image.new("RGB", (40, 40), (40 * i, 120, 255 - 40 * i)).save(
            tmp_path / "images" / f"{i}.png"
        )
    table = table.append_column("image", pa.array([f"{i}.png" for i in range(table.num_rows)]))
    table = table.append_column("condition", pa.array(["minimal"] * table.num_rows))
    pq.write_table(table, tmp_path / "bench.parquet")
    monkeypatch.setattr(publish, "ROWS_PER_SHARD", 4)
    folder = publish.build_dataset(tmp_path / "bench.parquet", tmp_path / "images",
                                   tmp_path / "published", "tiny")  # fmt: skip
    return folder, [f"{c}/minimal" for c in table.column("concept_id").to_pylist()]


def _open_clip_export(tmp_path):
    """tiny-siglip's weights saved as an open_clip export (open_clip_config.json + weights)."""
    folder = tmp_path / "my-siglip"
    folder.mkdir()
    shutil.copy(ensure_open_clip_weights(get_model("tiny-siglip")),
                folder / "open_clip_model.safetensors")  # fmt: skip
    model_cfg = json.loads((TINY_CONFIGS / "autocomp-tiny-sigmoid.json").read_text())
    preprocess = {"mean": [0.5] * 3, "std": [0.5] * 3, "interpolation": "bicubic",
                  "resize_mode": "squash"}  # fmt: skip
    config = {"model_cfg": model_cfg, "preprocess_cfg": preprocess}
    (folder / "open_clip_config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.slow
def test_two_models_on_a_benchmark_folder_with_a_limit(tmp_path, monkeypatch, capsys):
    folder, ids = _benchmark_folder(tmp_path, monkeypatch)
    assert len(list((folder / "data").glob("*.parquet"))) == 2
    export = _open_clip_export(tmp_path)
    out = tmp_path / "runs"
    argv = ["score", "--model", f"tiny-siglip,hf:{export}", "--benchmark", str(folder),
            "--out", str(out), "--device", "cpu", "--batch-size", "3"]  # fmt: skip
    assert main([*argv, "--limit", "4"]) == 0
    printed = capsys.readouterr().out
    models = ["tiny-siglip", "hf-my-siglip"]
    assert sorted(p.name for p in out.iterdir()) == sorted([*models, "summary.parquet"])
    for model in models:
        assert {p.name for p in (out / model).iterdir()} >= {
            "run.json", "scores", "predictions", "summary.parquet",
        }  # fmt: skip
    runs = {m: json.loads((out / m / "run.json").read_text()) for m in models}
    assert runs["tiny-siglip"]["entry"] == get_model("tiny-siglip").record()
    adhoc = runs["hf-my-siglip"]["entry"]
    assert (adhoc["backend"], adhoc["score"], adhoc["architecture"], adhoc["spec"]) == (
        "open_clip", "sigmoid", f"local-dir:{export}", f"hf:{export}",
    )  # fmt: skip
    assert adhoc["preprocess"]["resize_mode"] == "squash"
    for run in runs.values():
        assert (run["limit"], run["batch_size"]) == (4, 3)
        assert run["benchmark_source"] == {"kind": "folder", "path": str(folder), "parts": 2}
    # the first 4 items in table order, each model; the same weights give the same scores
    scores = {m: pq.read_table(out / m / "scores").sort_by([("sample_id", "ascending"),
              ("candidate_index", "ascending")]) for m in models}  # fmt: skip
    assert sorted(set(scores["tiny-siglip"]["sample_id"].to_pylist())) == sorted(ids[:4])
    a, b = (scores[m]["score"].to_pylist() for m in models)
    assert len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) < 1e-4
    # one combined table: both models, the paper protocol, accuracy and chance
    summary = pq.read_table(out / "summary.parquet")
    assert set(summary["model"].to_pylist()) == set(models)
    assert set(summary["protocol"].to_pylist()) == {"paper", "strict"}
    header = printed.splitlines()[0].split()
    assert header == ["model", "family", "N", "condition", "set", "score", "items", "acc", "%",
                      "chance", "%", "failed"]  # fmt: skip
    lines = [line.split() for line in printed.splitlines()[2:] if line.startswith(tuple(models))]
    assert len(lines) == 4  # 2 models x (swap, confusion), paper protocol only
    paper = {(r["model"], r["set"]): r for r in summary.to_pylist() if r["protocol"] == "paper"}
    for line in lines:
        row = paper[(line[0], line[4])]
        assert line[5] == row["score_type"] == "score"  # contrastive: the native score only
        assert line[6] == "4" and line[6] == str(row["items"])
        assert line[7] == f"{100 * row['accuracy']:.1f}" and line[8] == f"{100 * row['chance']:.2f}"
    # a larger limit extends the runs: only the new items are scored, the first parts are kept
    first = {m: sorted((out / m / "predictions").iterdir()) for m in models}
    inodes = {m: [p.stat().st_ino for p in first[m]] for m in models}
    assert main([*argv, "--limit", "6"]) == 0
    for model in models:
        kept = [p.stat().st_ino for p in first[model]]
        assert kept == inodes[model]
        predictions = pq.read_table(out / model / "predictions")
        assert sorted(set(predictions["sample_id"].to_pylist())) == sorted(ids[:6])
        assert json.loads((out / model / "run.json").read_text())["limit"] == 6
    # a smaller one is refused: the summary would count items outside it
    capsys.readouterr()
    assert main([*argv, "--limit", "5"]) == 2
    assert "already holds the first 6 items" in capsys.readouterr().err
