"""A run made by sample -> negatives -> score --blind (no curation, no images) reports."""

from __future__ import annotations

import pytest

from autocomp.cli.main import main

pytestmark = pytest.mark.slow


def test_report_of_a_blind_run_from_concepts(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    steps = [
        ["sample", "--family", "color", "--n", "2", "--count", "3", "--out", f"{tmp_path}/c.parquet"],
        ["negatives", "--input", f"{tmp_path}/c.parquet", "--out", f"{run}/benchmark.parquet"],
        ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", f"{run}/benchmark.parquet",
         "--blind", "--out", f"{run}/results/tiny-qwen2.5-vl"],
        ["report", "--run", str(run), "--out", f"{tmp_path}/report"],
    ]  # fmt: skip
    for argv in steps:
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    page = (tmp_path / "report" / "index.html").read_text()
    assert "tiny-qwen2.5-vl" in page and "minimal" in page
