"""Both pipelines end to end under kfp.local with the tiny profile (what `make demo` runs)."""

from __future__ import annotations

import glob
import os
import re
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
    printed = io.StringIO()  # not a terminal: one line per change
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
    name = Path(os.readlink(out / "benchmark")).name
    assert name.startswith("local-")  # run-unique: the hash of the run's parameters
    assert os.readlink(out / "results") == f"store/results/{name}"  # relative: the folder moves
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
        # conditions x sets x protocols, per score type: generative models add per-token rows
        types = ["per_token", "score"] if run == "tiny-qwen2.5-vl" else ["score"]
        assert sorted(set(summary.column("score_type").to_pylist())) == types
        assert summary.num_rows == 2 * 2 * 2 * len(types)
    # the evaluation pipeline ends with the report, copied into the run folder
    page = _report_page(printed)
    assert page == out / "report" / "index.html"
    assert page.is_file() and "<svg" in page.read_text()  # the Output[HTML] artifact
    assert sorted(p.name for p in (out / "report" / "tables").glob("accuracy.*")) == [
        "accuracy.csv", "accuracy.parquet", "accuracy.tex",
    ]  # fmt: skip
    # the paper's figures come along from the report step's artifact, in each format
    figures = {p.suffix for p in (out / "report" / "figures").iterdir()}
    assert figures == {".svg", ".pdf", ".png"}
    assert not (out / "report" / "tables" / "figures").exists()
    # a second run resumes: published outputs are complete, nothing is redone
    before = (benchmark / "_manifest.json").read_text()
    assert main(["run", "--out", str(out), "--specs", "color:2", "--count", "2"]) == 0
    assert (benchmark / "_manifest.json").read_text() == before


def test_the_printed_output_is_short_and_ends_with_the_report(local_run):
    out, printed = local_run
    lines = printed.splitlines()
    assert len(lines) < 60, printed
    assert lines[-1].endswith(str(out / "report" / "index.html"))
    assert "executorInput" not in printed and "KFP Executor" not in printed  # kfp's JSON: logs
    # the summary: one row per model x set, Minimal and Contextual side by side
    table = [line for line in lines if line.startswith("tiny-")]
    assert len(table) == 3 * 2 and all(len(line.split()) == 8 for line in table)


def test_every_task_has_its_log(local_run):
    out, printed = local_run
    done = set(re.findall(r"^([^\s:]+) +done ", printed, flags=re.M))
    logs = {p.stem for p in (out / "logs").glob("*.log")}
    assert logs == done | {"kfp"}
    assert {"sample", "caption", "render-0", "render-1", "validate-0", "validate-1", "publish",
            "score-cpu-tiny-clip", "score-cpu-tiny-siglip", "score-cpu-tiny-qwen2.5-vl",
            "report"} <= logs  # fmt: skip
    assert "Executing task 'render'" in (out / "logs" / "render-1.log").read_text()
    assert "rendering" not in (out / "logs" / "sample.log").read_text().lower()
    raw = (out / "logs" / "kfp.log").read_text()
    assert raw.count("Executing task") >= len(done)


def test_report_reads_the_run_folder(local_run, tmp_path, capsys):
    out, _ = local_run
    assert main(["report", "--run", str(out), "--out", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "index.html").is_file()
    assert "report:" in capsys.readouterr().out


def test_local_run_report_renders_in_chromium(local_run, tmp_path):
    assert_renders_in_chromium(_report_page(local_run[1]), tmp_path / "demo-report.png")


def test_a_failed_task_prints_its_log_tail_and_one_error(tmp_path, capsys, monkeypatch):
    """A captioner the registry does not know, with the library's checks skipped (they refuse
    it before anything starts), passes kfp.local's checks and fails inside the caption task:
    its name, the end of its log and the log's path are printed, then the error (a UsageError:
    exit 2 from the CLI)."""
    from autocomp.pipelines import checks
    from autocomp.pipelines.local.run import StepFailed, run_local

    monkeypatch.setattr(checks, "check", lambda pipeline, given: dict(given))

    out = tmp_path / "run"
    with pytest.raises(StepFailed) as failed:
        run_local(out, specs="color:2", count=2, captioner="no-such-captioner")
    log = out / "logs" / "caption.log"
    assert failed.value.value == "caption" and str(log) in str(failed.value)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"task caption failed; the end of its log ({log}):"
    tail = [line for line in err[1:] if line.startswith("  | ")]
    assert 5 <= len(tail) <= 20 and len(tail) == len(err) - 1
    assert any("unknown captioner" in line and "no-such-captioner" in line for line in tail)
    assert "unknown captioner" in log.read_text()
    assert not (out / "report").exists()


def test_a_run_that_cannot_work_is_refused_before_any_task(tmp_path, capsys):
    """Shape-Color N=2 has 3,380 distinct concepts: asking for more is refused in one line
    (exit 2) before kfp.local starts a single task."""
    argv = ["run", "--out", str(tmp_path / "run"), "--specs", "shape_color:2", "--count", "5000"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("autocomp run: error: --count: 5000")
    assert "3,380" in err[0] and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "flags",
    [
        ["--model", "clip-vit-z"],
        ["--model", "clip-vit-b-16"],  # registered, but the tiny profile is offline
        ["--specs", "colour:2"],
        ["--count", "0"],
        ["--profile", "huge"],
        ["--profile", "paper", "--specs", "color:9"],
        ["--num-shards", "0"],
        ["--seed", "-1"],
        ["--name", "../elsewhere"],
    ],
)
def test_bad_run_arguments_fail_at_once_before_kfp_starts(flags, tmp_path, capsys, monkeypatch):
    import time

    import autocomp.pipelines.local.run as local

    def never(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("kfp.local was started")

    monkeypatch.setattr(local, "start", never)
    main(["run", "--out", str(tmp_path / "run"), "--model", "x"])  # imports warm: time the check
    capsys.readouterr()
    started = time.monotonic()
    assert main(["run", "--out", str(tmp_path / "run"), *flags]) == 2
    assert time.monotonic() - started < 1.0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"autocomp run: error: {flags[-2]}")


@pytest.mark.parametrize(
    "given, what",
    [
        ({"seed": -1}, "seed"),
        ({"num_shards": 0}, "num_shards"),
        ({"count": 0}, "count"),
        ({"limit": -1}, "limit"),  # an evaluate_models parameter
        ({"captioner": "no-such-captioner", "caption_batch_size": 0}, "captioner"),
        ({"models": ["clip-vit-b-16"]}, "models"),  # the tiny profile is offline
    ],
)
def test_the_python_api_refuses_what_the_cli_refuses(given, what, tmp_path, monkeypatch):
    """run_local and run_finetune_local check every parameter themselves, before kfp.local
    starts and before the run folder exists."""
    import autocomp.pipelines.local.run as local
    from autocomp.errors import UsageError

    def never(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("kfp.local was started")

    monkeypatch.setattr(local, "start", never)
    with pytest.raises(UsageError) as refused:
        local.run_local(tmp_path / "run", **given)
    assert refused.value.what == what and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "given, what",
    [({"steps": 0}, "steps"), ({"models": ["tiny-qwen2.5-vl"]}, "models"),
     ({"seeds": [-2]}, "seeds"), ({"name": "a/b"}, "name")],
)  # fmt: skip
def test_the_finetune_run_checks_before_it_starts(given, what, tmp_path, monkeypatch):
    import autocomp.pipelines.local.run as local
    from autocomp.errors import UsageError

    monkeypatch.setattr(local, "start", lambda *a: pytest.fail("kfp.local was started"))
    with pytest.raises(UsageError) as refused:
        local.run_finetune_local(tmp_path / "ft", **given)
    assert refused.value.what == what and not (tmp_path / "ft").exists()
