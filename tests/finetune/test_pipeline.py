"""The finetune_models pipeline: compiled with its GPU requests, and run under kfp.local with
the tiny profile on a published benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from autocomp.cli.main import main
from tests.conftest import pinned_images


def _executor_of(spec: dict, task: str) -> dict:
    for comp in spec["components"].values():
        tasks = comp.get("dag", {}).get("tasks", {})
        if task in tasks:
            label = spec["components"][tasks[task]["componentRef"]["name"]]["executorLabel"]
            return spec["deploymentSpec"]["executors"][label]
    tasks = spec["root"]["dag"]["tasks"]
    label = spec["components"][tasks[task]["componentRef"]["name"]]["executorLabel"]
    return spec["deploymentSpec"]["executors"][label]


def test_pipeline_compiles_with_gpu_requests_and_paper_defaults(tmp_path):
    with pinned_images(tmp_path):  # compile names pullable images in a dirty checkout too
        assert main(["compile", "--out", str(tmp_path / "dist")]) == 0
    tmp_path = tmp_path / "dist"
    docs = list(yaml.safe_load_all((tmp_path / "finetune_models.yaml").read_text()))
    spec = docs[0]
    for task in ("train", "score-finetuned", "score-pretrained"):
        resources = _executor_of(spec, task)["container"]["resources"]
        assert resources["accelerator"]["resourceType"] == "nvidia.com/gpu"
        assert int(resources["accelerator"]["resourceCount"]) == 1
        assert resources["memoryLimit"] >= 64  # GB: the floor in resources.STEPS, or the plan
    for task in ("split", "plan", "report"):
        assert "accelerator" not in _executor_of(spec, task)["container"].get("resources", {})
    platform = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert any("tolerations" in e for e in platform.values())
    for task in ("split", "train", "report"):  # the store steps get the S3 Secret
        label = next(
            lbl
            for lbl, e in spec["deploymentSpec"]["executors"].items()
            if e is _executor_of(spec, task)
        )
        assert platform[label]["secretAsEnv"][0]["secretName"] == "autocomp-s3"
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["negatives"]["defaultValue"] == ["swap", "confusion"]
    assert params["seeds"]["defaultValue"] == [0, 1, 2]
    assert params["models"]["defaultValue"] == ["clip-vit-b-16", "siglip-b-16-224"]
    # the fine-tuning settings are parameters (resolved at compile/submit time, not in the image)
    assert "profile" not in params and params["steps"]["defaultValue"] == 5000
    assert params["peak_lr"]["defaultValue"] == 1e-6 and params["betas"]["defaultValue"] == [
        0.9,
        0.98,
    ]


@pytest.mark.slow
def test_pipeline_runs_under_kfp_local_with_the_tiny_profile(tmp_path):
    from autocomp.pipelines.local.run import run_finetune_local
    from autocomp.store.publish import publish_stage
    from tests.finetune.conftest import make_benchmark

    bench = make_benchmark(tmp_path / "bench", 12, families=(("color", 2), ("shape_color", 2)))
    store = str(tmp_path / "store")
    publish_stage(bench, bench.parent / "images", tmp_path / "work", store, "ft")
    done = run_finetune_local(tmp_path / "run", name="ft", store=store, models=["tiny-siglip"])
    folder = tmp_path / "run" / "kfp"
    table8 = pq.read_table(next(folder.rglob("table8.parquet"))).to_pylist()
    # every family x condition of the evaluation benchmark, both variants paired on seed 0
    cells = {(r["family"], r["condition"]) for r in table8}
    assert cells == {(f, c) for f in ("color", "shape_color") for c in ("minimal", "contextual")}
    assert all(r["model"] == "tiny-siglip" and r["seeds"] == 1 for r in table8)
    shape = next(r for r in table8 if r["family"] == "shape_color")
    assert shape["samples"] == 12  # other families are scored in full
    color = next(r for r in table8 if r["family"] == "color")
    assert color["samples"] == 2  # held-out Color N=2 concepts only (20 % of 12)
    deltas = pq.read_table(next(folder.rglob("finetune_deltas.parquet")))
    assert set(deltas["variant"].to_pylist()) == {"swap", "confusion"}
    assert done["report"] == str(tmp_path / "run" / "report" / "report.html")  # a stated path
    html = Path(done["report"]).read_text()
    assert "Table 8" in html and html.count("<svg") == 2  # one training curve per run
    index = Path(done["full_report"]).read_text()
    assert "Confusion fine-tuning (Table 8)" in index and "Main results" in index
    published = list((tmp_path / "store" / "finetune" / "ft").iterdir())
    assert len(published) == 1 and (published[0] / "table8.csv").is_file()
    runs = [json.loads(p.read_text()) for p in folder.rglob("checkpoint/run.json")]
    assert sorted(r["negatives"] for r in runs) == ["confusion", "swap"]
    assert all(r["config"]["steps"] == 8 and r["seed"] == 0 for r in runs)
