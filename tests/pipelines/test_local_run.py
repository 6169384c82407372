"""Both pipelines end to end under kfp.local with the tiny profile (what `make demo` runs)."""

from __future__ import annotations

import glob
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from autocomp.cli.main import main
from tests.conftest import assert_renders_in_chromium

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """One local run (both pipelines, tiny profile), shared by the tests of this module."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("local") / "run"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["run", "--out", str(out), "--specs", "color:2", "--count", "2"]) == 0
    return out, printed.getvalue()


def _report_page(printed: str) -> Path:
    report_line = next(line for line in printed.splitlines() if line.startswith("report:"))
    return Path(report_line.split(":", 1)[1].strip())


def test_local_run_generates_publishes_scores_and_reports(local_run):
    out, printed = local_run
    assert "tiny-clip" in printed and "tiny-qwen2.5-vl" in printed and "results:" in printed
    store = out / "store"
    results_line = next(line for line in printed.splitlines() if line.startswith("results:"))
    name = Path(results_line.split(":", 1)[1].strip()).name
    assert name.startswith("local-")  # run-unique: the hash of the run's parameters
    benchmark = store / "benchmarks" / name
    assert (benchmark / "_manifest.json").is_file() and (benchmark / "README.md").is_file()
    # the published benchmark is a Hugging Face dataset with embedded images
    import datasets

    files = sorted(glob.glob(str(benchmark / "data" / "*.parquet")))
    rows = datasets.load_dataset("parquet", data_files=files, split="train")
    assert rows.num_rows == 4 and rows[0]["image"].size == (64, 64)
    assert {r for r in rows["condition"]} == {"minimal", "contextual"}
    # every model's run is in the store; the report step gathered them
    runs = sorted(p.name for p in (store / "results" / name).iterdir())
    assert runs == ["tiny-clip", "tiny-qwen2.5-vl", "tiny-siglip"]
    for run in runs:
        summary = pq.read_table(store / "results" / name / run / "summary.parquet")
        assert set(summary.column("failed").to_pylist()) == {0}
        assert summary.num_rows == 2 * 2 * 2  # conditions x sets x protocols
    # the evaluation pipeline ends with the report
    page = _report_page(printed)
    assert page.is_file() and "<svg" in page.read_text()  # the Output[HTML] artifact
    # a second run resumes: published outputs are complete, nothing is redone
    before = (benchmark / "_manifest.json").read_text()
    assert main(["run", "--out", str(out), "--specs", "color:2", "--count", "2"]) == 0
    assert (benchmark / "_manifest.json").read_text() == before


def test_local_run_report_renders_in_chromium(local_run, tmp_path):
    assert_renders_in_chromium(_report_page(local_run[1]), tmp_path / "demo-report.png")


def test_a_run_that_cannot_work_is_refused_before_any_task(tmp_path, capsys):
    """Shape-Color N=2 has 3,380 distinct concepts: asking for more is refused in one line
    (exit 2) before kfp.local starts a single task."""
    argv = ["run", "--out", str(tmp_path / "run"), "--specs", "shape_color:2", "--count", "5000"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("autocomp run: error: --count: 5000")
    assert "3,380" in err[0] and not (tmp_path / "run").exists()
