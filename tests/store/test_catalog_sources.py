"""Every stage reads a benchmark through store/catalog, so each accepts the same sources -- a
table, a published folder (data/*.parquet, images embedded), a plain folder of *.parquet parts,
a name published in a store -- and reads the same rows from each."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.audit.config import AuditConfig
from autocomp.audit.export import export_study
from autocomp.cli.main import main
from autocomp.config import NegativesConfig, get_profile
from autocomp.finetune.stage import split
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.store.catalog import ids
from autocomp.store.catalog.benchmarks import resolve_benchmark
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA
from autocomp.store.publish import build_dataset, publish_stage
from autocomp.store.stores import open_store

SOURCES = ("table", "published", "parts", "store")
NAME = "tiny-run"  # the published name


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The one benchmark (Color and Position N=2, 3 concepts, both conditions, PNG images) as
    each source: where it is, and the --images root it needs (None: embedded)."""
    root = tmp_path_factory.mktemp("sources")
    rows = []
    for family in ("color", "position"):
        sample_stage(family, 2, 3, 0, root / f"{family}.parquet")
        for i, r in enumerate(pq.read_table(root / f"{family}.parquet").to_pylist()):
            for condition in ("minimal", "contextual"):
                image = f"images/{r['concept_id']}-{condition}.png"
                (root / image).parent.mkdir(exist_ok=True)
                Image.new("RGB", (32, 24), (60 * i, 90, 30)).save(root / image)
                rows.append({**r, "sample_id": ids.sample_id(r["concept_id"], condition),
                             "condition": condition, "caption": r["minimal_caption"],
                             "image": image, "accepted": True, "paired": True})  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), root / "curated.parquet")
    table = root / "benchmark.parquet"
    negatives_stage(root / "curated.parquet", table, NegativesConfig(workers=1))
    store = root / "store"
    publish_stage(table, root, root / "work", str(store), NAME)
    build_dataset(table, root, root / "published", NAME)  # the layout publish puts in the store
    (root / "parts").mkdir()
    whole = pq.read_table(table)
    pq.write_table(whole.slice(0, 5), root / "parts" / "part-0.parquet")
    pq.write_table(whole.slice(5), root / "parts" / "part-1.parquet")
    return {
        "root": root,
        "store": str(store),
        "table": (table, root),
        "published": (root / "published", None),
        "parts": (root / "parts", root),
    }


def _predictions(bench: pa.Table) -> pa.Table:
    rows = [
        {"model": "m", "sample_id": b["sample_id"], "family": b["family"], "n": b["n"],
         "condition": b["condition"], "set": name, "protocol": "paper",
         "candidates": len(b[f"{name}_negatives"]) + 1, "correct": i % 2 == 0, "tie": False,
         "predicted": 0, "positive_score": 0.0, "best_negative_score": 0.0, "failed": False,
         "reason": ""}
        for i, b in enumerate(bench.to_pylist()) for name in ("swap", "confusion")
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, PREDICTIONS_SCHEMA)


def _model_run(folder, bench: pa.Table):
    (folder / "predictions").mkdir(parents=True)
    pq.write_table(_predictions(bench), folder / "predictions" / "part-00000.parquet")
    (folder / "run.json").write_text(json.dumps({"entry": {"name": "m"}}))
    return folder


def _report(kind, sources, tmp_path):
    """`autocomp report` of a run whose benchmark is `kind` (a store: --store/--name)."""
    bench = pq.read_table(sources["root"] / "benchmark.parquet")
    out = tmp_path / "report"
    if kind == "store":
        results = _model_run(tmp_path / "m", bench)
        open_store(sources["store"]).put(f"results/{NAME}/m", results)
        argv = ["report", "--store", sources["store"], "--name", NAME, "--out", str(out)]
    else:
        run = tmp_path / "run"
        _model_run(run / "results" / "m", bench)
        if kind == "table":
            shutil.copyfile(sources[kind][0], run / "benchmark.parquet")
        else:
            shutil.copytree(sources[kind][0], run / "benchmark")
        argv = ["report", "--run", str(run), "--out", str(out)]
    assert main(argv) == 0
    return pq.read_table(out / "tables" / "accuracy.parquet")


def _study(kind, sources, tmp_path):
    config = AuditConfig(concepts=2, annotators=2, rejected=0, confusion_options=4, seed=3)
    out = tmp_path / "study"
    if kind == "store":  # from Python: the published name, opened (fetched) by the catalog
        fetched = resolve_benchmark(NAME, sources["store"], tmp_path / "cache")
        export_study(fetched, out, config, None)
    else:
        path, images = sources[kind]
        argv = ["audit", "export", "--benchmark", str(path), "--out", str(out),
                "--concepts", "2", "--annotators", "2", "--rejected", "0",
                "--confusion-options", "4", "--seed", "3"]  # fmt: skip
        assert main(argv + (["--images", str(images)] if images else [])) == 0
    key = pq.read_table(out / "key.parquet")
    images = sorted(p.read_bytes() for p in (out / "images").iterdir())
    return key, images


def _split(kind, sources, tmp_path):
    out = tmp_path / "split"
    if kind == "store":
        fetched = resolve_benchmark(NAME, sources["store"], tmp_path / "cache")
        split(fetched, out, get_profile("tiny").finetune, 0)
    else:
        argv = ["finetune", "split", "--benchmark", str(sources[kind][0]), "--out", str(out),
                "--profile", "tiny"]  # fmt: skip
        assert main(argv) == 0
    evaluation = pq.read_table(out / "evaluation.parquet").select(["sample_id", "caption"])
    return pq.read_table(out / "split.parquet"), evaluation


def test_audit_export_report_and_the_finetune_split_read_every_source_alike(sources, tmp_path):
    seen = {}
    for kind in SOURCES:
        folder = tmp_path / kind
        folder.mkdir()
        seen[kind] = (
            _report(kind, sources, folder),
            _study(kind, sources, folder),
            _split(kind, sources, folder),
        )
    accuracy, (key, images), (split_table, evaluation) = seen["table"]
    assert accuracy.num_rows and key.num_rows and split_table.num_rows and evaluation.num_rows
    for kind in SOURCES[1:]:
        other_accuracy, (other_key, other_images), (other_split, other_evaluation) = seen[kind]
        assert other_accuracy.equals(accuracy), kind
        assert other_key.equals(key) and other_images == images, kind
        assert other_split.equals(split_table) and other_evaluation.equals(evaluation), kind


@pytest.mark.slow
def test_score_reads_every_source_alike(sources, tmp_path):
    accuracy = {}
    for kind in SOURCES:
        out = tmp_path / kind
        if kind == "store":
            argv = ["--benchmark", NAME, "--store", sources["store"]]
        else:
            path, images = sources[kind]
            argv = ["--benchmark", str(path)] + (["--images", str(images)] if images else [])
        assert main(["score", "--model", "tiny-clip", *argv, "--out", str(out)]) == 0
        summary = pq.read_table(out / "summary.parquet")
        accuracy[kind] = summary.select(["family", "n", "condition", "set", "protocol",
                                         "items", "accuracy"]).to_pylist()  # fmt: skip
    assert all(accuracy[kind] == accuracy["table"] for kind in SOURCES), accuracy
