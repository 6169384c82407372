"""Publishing a benchmark to a store and reading it back (reuse of its concept set, fetch)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from autocomp.config import NegativesConfig, SampleConfig
from autocomp.protocol.stages import negatives_stage, reuse_or_sample, sample_many
from autocomp.scoring.images import load_image
from autocomp.store.publish import fetch_benchmark, publish_stage


def _benchmark(tmp_path):
    sample_many(SampleConfig("color:2,position:2", 3, 7), tmp_path / "concepts.parquet")
    rows = []
    for i, r in enumerate(pq.read_table(tmp_path / "concepts.parquet").to_pylist()):
        for condition in ("minimal", "contextual"):
            path = f"images/{r['concept_id']}/{condition}.png"
            (tmp_path / "render" / path).parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (16, 16), (i * 20, 0, 0)).save(tmp_path / "render" / path)
            rows.append({**r, "sample_id": f"{r['concept_id']}/{condition}",
                         "condition": condition, "caption": r["minimal_caption"], "image": path})  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "curated.parquet")
    negatives_stage(
        tmp_path / "curated.parquet", tmp_path / "benchmark.parquet", NegativesConfig(workers=1)
    )
    return tmp_path / "benchmark.parquet"


def test_publish_fetch_and_reuse_the_concept_set(tmp_path):
    bench = _benchmark(tmp_path)
    store = str(tmp_path / "store")
    uri = publish_stage(bench, tmp_path / "render", tmp_path / "work", store, "run-1",
                        tmp_path / "concepts.parquet")  # fmt: skip
    assert uri.endswith("/benchmarks/run-1")
    card = (tmp_path / "store" / "benchmarks" / "run-1" / "README.md").read_text()
    assert "| color | 2 | minimal | 3 |" in card and "data/test-*.parquet" in card
    # a published name is never rebuilt: a second publish leaves it as it is
    before = (tmp_path / "store" / "benchmarks" / "run-1" / "_manifest.json").read_text()
    publish_stage(bench, tmp_path / "render", tmp_path / "work2", store, "run-1")
    assert (tmp_path / "store" / "benchmarks" / "run-1" / "_manifest.json").read_text() == before
    # fetch: the same rows, images embedded and decodable, provenance kept
    fetched = fetch_benchmark(store, "run-1", tmp_path / "f", tmp_path / "fetched.parquet")
    table = pq.read_table(fetched)
    assert table.num_rows == 12
    original = pq.read_table(bench)
    assert (
        table.column("confusion_negatives").to_pylist()
        == original.column("confusion_negatives").to_pylist()
    )
    first = table.column("image")[0].as_py()
    assert first["path"].endswith("/minimal.png") and load_image(None, first).size == (16, 16)
    assert b"autocomp" in pq.read_schema(fetched).metadata
    # a re-run with a new generator reuses the concept set, concept by concept
    reused = reuse_or_sample(
        SampleConfig("color:3", 99, 0), store, "run-1", tmp_path / "reused.parquet"
    )
    assert (
        reused.column("concept_id").to_pylist()
        == pq.read_table(tmp_path / "concepts.parquet").column("concept_id").to_pylist()
    )


def test_the_card_names_the_generators_and_says_when_their_weights_are_random(tmp_path):
    from autocomp.pipelines.definitions.artifacts import generated_by

    bench = _benchmark(tmp_path)
    tiny = generated_by({"captioner": "tiny-llm", "renderer": "tiny-sd3", "detector": "",
                         "segmenter": "tiny-sam2", "vqa": "tiny-qwen2.5-vl"})  # fmt: skip
    real = generated_by({"renderer": "flux-dev", "vqa": "qwen2.5-vl-7b"})
    assert "detector" not in tiny and real["renderer"] == {"model": "flux-dev",
                                                           "weights": "pretrained"}  # fmt: skip
    cards = {}
    for name, made in (("tiny", tiny), ("flux", real)):
        publish_stage(bench, tmp_path / "render", tmp_path / "work", str(tmp_path / "store"),
                      name, generated_by=made)  # fmt: skip
        cards[name] = (tmp_path / "store" / "benchmarks" / name / "README.md").read_text()
    assert "| renderer | tiny-sd3 | random |" in cards["tiny"]
    assert "| renderer | flux-dev | pretrained |" in cards["flux"]  # runs told apart by the card
    said = "**Untrained models: captioner tiny-llm, renderer tiny-sd3, segmenter tiny-sam2, vqa "
    assert said + "tiny-qwen2.5-vl have random weights**" in cards["tiny"]
    assert "Untrained" not in cards["flux"] and "random" not in cards["flux"]
