"""The analysis tests' shared run: a small synthetic run folder built by the real stages."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """benchmark.parquet (Color and Position N=2, both conditions) and two models' predictions
    with a known pattern: `good` is right on every Minimal item, `base` on none."""
    root = tmp_path_factory.mktemp("run")
    tables = []
    for family in ("color", "position"):
        sample_stage(family, 2, 6, 0, root / f"{family}.parquet")
        tables.append(pq.read_table(root / f"{family}.parquet"))
    concepts = pa.concat_tables(tables)
    rows = []
    for r in concepts.to_pylist():
        for condition in ("minimal", "contextual"):
            rows.append({**r, "sample_id": f"{r['concept_id']}/{condition}", "condition": condition,
                         "caption": r["minimal_caption"], "paired": True, "accepted": True})  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), root / "curated.parquet")
    negatives_stage(
        root / "curated.parquet", root / "benchmark.parquet", NegativesConfig(workers=1)
    )
    bench = pq.read_table(root / "benchmark.parquet").to_pylist()
    for model, rule in (("good", lambda i, c: c == "minimal" or i % 2 == 0),
                        ("base", lambda i, c: i % 3 == 0)):  # fmt: skip
        preds = []
        for i, b in enumerate(bench):
            for set_name, size in (
                ("swap", len(b["swap_negatives"])),
                ("confusion", len(b["confusion_negatives"])),
            ):
                ok = rule(i, b["condition"])
                preds.append({"model": model, "sample_id": b["sample_id"], "family": b["family"],
                              "n": b["n"], "condition": b["condition"], "set": set_name,
                              "protocol": "paper", "candidates": size + 1, "correct": ok,
                              "tie": False, "predicted": 0 if ok else 1, "positive_score": 0.0,
                              "best_negative_score": 0.0, "failed": False, "reason": ""})  # fmt: skip
        folder = root / "results" / model / "predictions"
        folder.mkdir(parents=True)
        pq.write_table(
            pa.Table.from_pylist(preds, PREDICTIONS_SCHEMA), folder / "part-00000.parquet"
        )
        entry = {
            "name": model,
            "weights": f"org/{model}",
            "backend": "open_clip",
            "score": "cosine",
        }
        if model == "good":
            entry["base_model"] = "base"
        (root / "results" / model / "run.json").write_text(json.dumps({"entry": entry}))
    (root / "human").mkdir()
    first = bench[0]
    (root / "human" / "a1.csv").write_text(
        "annotator,sample_id,task,answer\n"
        f"a1,{first['sample_id']},valid,yes\n"
        f'a1,{first["sample_id"]},swap,"{first["caption"]}"\n'
    )
    return root
