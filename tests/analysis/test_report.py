"""The report of a small synthetic run: tables, LaTeX, HTML, and a headless Chromium render."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.cli.main import main
from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring.stage import PREDICTIONS_SCHEMA
from tests.conftest import assert_renders_in_chromium


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
        (root / "results" / model / "run.json").write_text(
            __import__("json").dumps({"entry": entry})
        )
    (root / "human").mkdir()
    first = bench[0]
    (root / "human" / "a1.csv").write_text(
        "annotator,sample_id,task,answer\n"
        f"a1,{first['sample_id']},valid,yes\n"
        f'a1,{first["sample_id"]},swap,"{first["caption"]}"\n'
    )
    return root


def test_report_writes_every_table_in_three_formats(run_dir, tmp_path, capsys):
    assert main(["report", "--run", str(run_dir), "--out", str(tmp_path / "r")]) == 0
    assert "report:" in capsys.readouterr().out
    tables = tmp_path / "r" / "tables"
    for name in ("accuracy", "context_deltas", "hard_negative_deltas", "per_relation",
                 "confusion_taxonomy", "caption_diversity", "human"):  # fmt: skip
        for ext in ("csv", "parquet", "tex"):
            assert (tables / f"{name}.{ext}").is_file(), (name, ext)
    acc = pq.read_table(tables / "accuracy.parquet").to_pylist()
    good_min = [r for r in acc if r["model"] == "good" and r["condition"] == "minimal"]
    assert {r["accuracy"] for r in good_min} == {1.0}
    deltas = pq.read_table(tables / "hard_negative_deltas.parquet").to_pylist()
    assert deltas and all(r["base"] == "base" for r in deltas)
    assert (tables / "accuracy.tex").read_text().startswith("\\begin{table}")
    page = (tmp_path / "r" / "index.html").read_text()
    assert "<script" not in page and page.count("<svg") >= 3
    assert "org/good" in page and "Protocols: paper" in page


def test_report_needs_a_run(tmp_path, capsys):
    assert main(["report", "--run", str(tmp_path / "none"), "--out", str(tmp_path / "r")]) == 2
    assert main(["report", "--out", str(tmp_path / "r")]) == 2
    assert "--store with --name" in capsys.readouterr().err


@pytest.mark.slow
def test_report_renders_in_headless_chromium(run_dir, tmp_path):
    main(["report", "--run", str(run_dir), "--out", str(tmp_path / "r")])
    assert_renders_in_chromium(tmp_path / "r" / "index.html", tmp_path / "report.png")


def test_report_compares_generators_on_matched_concepts(run_dir, tmp_path):
    other = tmp_path / "flux"
    shutil.copytree(run_dir, other)
    out = tmp_path / "r"
    assert main(["report", "--run", str(run_dir), "--compare", str(other), "--out", str(out)]) == 0
    cross = pq.read_table(out / "tables" / "cross_generator.parquet").to_pylist()
    assert {r["generator"] for r in cross} == {run_dir.name, "flux"}
    order = pq.read_table(out / "tables" / "generator_order.parquet").to_pylist()
    assert order and {r["kendall_tau"] for r in order} <= {1.0}
    assert "Provenance" in (out / "index.html").read_text()
