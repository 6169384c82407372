"""A tiny benchmark with real PNG images (sample -> negatives), a study exported from it, and a
live server of the study on a free loopback port."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image, PngImagePlugin

from autocomp.audit.app import create_app
from autocomp.audit.config import AuditConfig
from autocomp.audit.export import export_study
from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA

FAMILIES = ("color", "position")


REJECTED = {1}  # the concept index (per family) whose Contextual sample the validator rejected


@pytest.fixture(scope="session")
def bench_root(tmp_path_factory):
    """benchmark.parquet (Color and Position N=2, 3 concepts each, both conditions), images/
    with a generator-style text chunk in every PNG, and one model's predictions."""
    root = tmp_path_factory.mktemp("bench")
    (root / "images").mkdir()
    rows = []
    for family in FAMILIES:
        sample_stage(family, 2, 3, 0, root / f"{family}.parquet")
        for i, r in enumerate(pq.read_table(root / f"{family}.parquet").to_pylist()):
            for condition in ("minimal", "contextual"):
                sid = f"{r['concept_id']}/{condition}"
                path = f"images/{r['concept_id']}-{condition}.png"
                info = PngImagePlugin.PngInfo()
                info.add_text("parameters", f"prompt: {r['minimal_caption']}")
                color = (40 * i + 20, 200 if condition == "minimal" else 90, 120)
                Image.new("RGB", (64, 48), color).save(root / path, pnginfo=info)
                accepted = not (condition == "contextual" and i in REJECTED)
                rows.append({**r, "sample_id": sid, "condition": condition,
                             "caption": r["minimal_caption"], "image": path,
                             "accepted": accepted, "paired": i not in REJECTED})  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), root / "curated.parquet")
    negatives_stage(
        root / "curated.parquet", root / "benchmark.parquet", NegativesConfig(workers=1)
    )
    return root


@pytest.fixture(scope="session")
def published(bench_root):
    """The tiny benchmark as `autocomp run` publishes it: data/*.parquet, images embedded."""
    from autocomp.store.publish import build_dataset

    return build_dataset(
        bench_root / "benchmark.parquet", bench_root, bench_root / "published", "tiny"
    )


def write_run(bench_root, run, published=None):
    """A run folder for `autocomp report`: the benchmark (the table, or the published folder
    as benchmark/) and one model's predictions."""
    run.mkdir()
    bench = pq.read_table(bench_root / "benchmark.parquet")
    if published is None:
        pq.write_table(bench, run / "benchmark.parquet")
    else:
        shutil.copytree(published, run / "benchmark")
    preds = []
    for i, b in enumerate(bench.to_pylist()):
        for set_name in ("swap", "confusion"):
            size = len(b[f"{set_name}_negatives"]) + 1
            preds.append({"model": "m", "sample_id": b["sample_id"], "family": b["family"],
                          "n": b["n"], "condition": b["condition"], "set": set_name,
                          "protocol": "paper", "candidates": size, "correct": i % 2 == 0,
                          "tie": False, "predicted": 0, "positive_score": 0.0,
                          "best_negative_score": 0.0, "failed": False, "reason": ""})  # fmt: skip
    folder = run / "results" / "m" / "predictions"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(preds, PREDICTIONS_SCHEMA), folder / "part-00000.parquet")
    (run / "results" / "m" / "run.json").write_text(json.dumps({"entry": {"name": "m"}}))
    return run


@pytest.fixture
def study(bench_root, tmp_path):
    config = AuditConfig(concepts=4, annotators=3, rejected=2, seed=7)
    export_study(bench_root / "benchmark.parquet", tmp_path / "study", config, None)
    return tmp_path / "study"


@pytest.fixture
def demo_study(published, tmp_path):
    """A study of the published benchmark with choice items from rejected samples too, as on
    the tiny demo (whose random-weight validators reject nearly everything)."""
    config = AuditConfig(concepts=6, annotators=3, include_rejected=True, seed=5)
    export_study(published, tmp_path / "study", config, None)
    return tmp_path / "study"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(study):
    """The app on 127.0.0.1:<free port> (uvicorn in a thread); yields its base URL."""
    yield from _serve(study)


@pytest.fixture
def demo_server(demo_study):
    yield from _serve(demo_study)


def _serve(study):
    import uvicorn

    port = _free_port()
    config = uvicorn.Config(create_app(study), host="127.0.0.1", port=port, log_level="warning")
    live = uvicorn.Server(config)
    thread = threading.Thread(target=live.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not live.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    live.should_exit = True
    thread.join(timeout=10)


def tokens(study) -> dict[str, str]:
    manifest = json.loads((study / "study.json").read_text())
    return {name: a["token"] for name, a in manifest["annotators"].items()}
