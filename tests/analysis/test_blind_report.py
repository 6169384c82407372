"""A run made by sample -> negatives -> score --blind (no curation, no images) reports, with
either blind mode (caption likelihood, or the paper's A.8 multiple choice)."""

from __future__ import annotations

import pytest

from autocomp.analysis.load import load_run
from autocomp.cli.main import main

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", [[], ["likelihood"], ["choice", "--choice-negatives", "3"]])
def test_report_of_a_blind_run_from_concepts(tmp_path, capsys, mode):
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    steps = [
        ["sample", "--family", "color", "--n", "2", "--count", "3", "--out", f"{tmp_path}/c.parquet"],
        ["negatives", "--input", f"{tmp_path}/c.parquet", "--out", f"{run}/benchmark.parquet"],
        ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", f"{run}/benchmark.parquet",
         "--blind", *mode, "--out", f"{run}/results"],  # results/<model>/
        ["report", "--run", str(run), "--out", f"{tmp_path}/report"],
    ]  # fmt: skip
    for argv in steps:
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    page = (tmp_path / "report" / "index.html").read_text()
    assert "tiny-qwen2.5-vl" in page and "minimal" in page
    # the report keeps the score types apart: summed and per-token, or the choice rows
    predictions = load_run(run).predictions.to_pylist()
    choice = mode[:1] == ["choice"]
    assert {p["score_type"] for p in predictions} == (
        {"choice"} if choice else {"score", "per_token"}
    )
    paper = {p["candidates"] for p in predictions if p["protocol"] == "paper"}
    assert paper == ({4, 2} if choice else {16, 2})  # Swap N=2: one negative
    assert ("Blind multiple choice (A.8)" in page) == choice
