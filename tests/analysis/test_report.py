"""The report of a small synthetic run: tables, LaTeX, HTML, and a headless Chromium render."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.cli.main import main
from tests.conftest import assert_renders_in_chromium
from tests.infra.test_storage import s3_env, s3_server  # noqa: F401 (fixtures)


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


def test_report_goes_into_the_run_by_default(run_dir, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--run", str(run)]) == 0
    assert (run / "report" / "index.html").is_file()
    assert not (tmp_path / "report").exists()
    assert str(run / "report" / "index.html") in capsys.readouterr().out


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


# ----------------------------------------------------------------------------- paper layout


def test_report_writes_the_paper_layout_tables(run_dir, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["report", "--run", str(run_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Table 14 left out" in printed and "Table 3 left out" in printed
    tables = out / "tables"
    for name in ("paper_table5_minimal", "paper_table5_contextual", "paper_table6_n2",
                 "paper_table7"):  # fmt: skip
        assert (tables / f"{name}.csv").is_file() and (tables / f"{name}.tex").is_file(), name
    lines = list(csv.reader((tables / "paper_table5_minimal.csv").open()))
    assert lines[1][:3] == ["", "Random chance", "50.0"]
    assert [line[1] for line in lines[2:]] == ["base", "good"]  # one row per model
    assert lines[3][2:5] == ["100.0", "100.0", "100.0"]  # good: right on every Minimal item
    page = (out / "index.html").read_text()
    assert page.index('id="paper_table5_minimal"') < page.index("id=figures")
    assert "Table 14 left out" in page and "<details" in page  # long tables folded away


def _publish(store, run_dir: Path, name: str, tmp: Path) -> None:
    """A run folder's pieces as the store holds them: benchmarks/<name> (data/*.parquet),
    results/<name>/<model>, human/<name>, judges/<name>."""
    bench = tmp / f"{name}-benchmark"
    (bench / "data").mkdir(parents=True)
    shutil.copy(run_dir / "benchmark.parquet", bench / "data" / "test-00000-of-00001.parquet")
    store.put(f"benchmarks/{name}", bench)
    for model in sorted((run_dir / "results").iterdir()):
        store.put(f"results/{name}/{model.name}", model)
    store.put(f"human/{name}", run_dir / "human")
    judges = tmp / f"{name}-judges"
    judges.mkdir()
    ids = pq.read_table(run_dir / "benchmark.parquet").column("sample_id").to_pylist()
    (judges / "qwen.csv").write_text(
        "sample_id,passed\n" + "".join(f"{s},{i % 2}\n" for i, s in enumerate(ids))
    )
    store.put(f"judges/{name}", judges)


def _report_from(store_uri: str, out: Path, capsys) -> None:
    argv = ["report", "--store", store_uri, "--name", "sd35", "--compare", "flux", "--out"]
    assert main([*argv, str(out)]) == 0, capsys.readouterr().err
    tables = out / "tables"
    assert pq.read_table(tables / "human.parquet").num_rows > 0  # human/<name> was read
    assert pq.read_table(tables / "judge_agreement_qwen.parquet").num_rows > 0  # judges/<name>
    cross = pq.read_table(tables / "cross_generator.parquet").to_pylist()
    assert {r["generator"] for r in cross} == {"sd35", "flux"}
    assert (tables / "paper_table5_minimal.csv").is_file()
    assert main(["report", "--store", store_uri, "--name", "sd35", "--compare", "nope",
                 "--out", str(out.parent / "bad")]) == 2  # fmt: skip
    assert "--compare" in capsys.readouterr().err


def test_report_from_a_local_store_reads_compare_human_and_judges(run_dir, tmp_path, capsys):
    from autocomp.store.stores import open_store

    store = open_store(tmp_path / "store")
    for name in ("sd35", "flux"):
        _publish(store, run_dir, name, tmp_path)
    _report_from(str(tmp_path / "store"), tmp_path / "r", capsys)


@pytest.mark.infra
@pytest.mark.usefixtures("s3_env")
def test_report_from_an_s3_store_reads_compare_human_and_judges(run_dir, tmp_path, capsys):
    from autocomp.store.stores import open_store

    store = open_store("s3://autocomp/reports")
    for name in ("sd35", "flux"):
        _publish(store, run_dir, name, tmp_path)
    _report_from("s3://autocomp/reports", tmp_path / "r", capsys)


@pytest.mark.slow
def test_paper_tables_are_visible_in_headless_chromium(run_dir, tmp_path):
    """The page in a real browser (Selenium + chromedriver): each paper-layout table is displayed,
    has its rows, and shows the same texts as its CSV."""
    from selenium.webdriver.common.by import By

    from tests.audit.test_browser import _driver

    out = tmp_path / "r"
    assert main(["report", "--run", str(run_dir), "--out", str(out)]) == 0
    driver = _driver()
    try:
        driver.get((out / "index.html").as_uri())
        for name in ("paper_table5_minimal", "paper_table6_n2", "paper_table7"):
            table = driver.find_element(By.ID, name)
            driver.execute_script("arguments[0].scrollIntoView()", table)
            assert table.is_displayed() and table.size["width"] > 200, name
            lines = list(csv.reader((out / "tables" / f"{name}.csv").open()))
            rows = table.find_elements(By.CSS_SELECTOR, "tbody tr.model, tbody tr.chance")
            assert len(rows) == len(lines) - 1, name
            for tr, line in zip(rows, lines[1:]):
                assert tr.find_element(By.TAG_NAME, "th").text == line[1]
                shown = [s.text for s in tr.find_elements(By.CSS_SELECTOR, "span.v")]
                assert shown == line[2::3], (name, line[1])
                assert all(td.is_displayed() for td in tr.find_elements(By.TAG_NAME, "td"))
        figures = driver.find_elements(By.TAG_NAME, "svg")
        assert figures and all(f.size["height"] > 50 for f in figures)
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        driver.quit()


def test_an_empty_paired_set_leaves_table6_out_with_its_reason(run_dir, tmp_path, capsys):
    run = tmp_path / "unpaired"
    shutil.copytree(run_dir, run)
    bench = pq.read_table(run / "benchmark.parquet")
    i = bench.schema.get_field_index("paired")
    pq.write_table(bench.set_column(i, "paired", pa.array([False] * bench.num_rows)),
                   run / "benchmark.parquet")  # fmt: skip
    assert main(["report", "--run", str(run), "--out", str(tmp_path / "r")]) == 0
    assert "Table 6 left out" in capsys.readouterr().out
    page = (tmp_path / "r" / "index.html").read_text()
    assert "B_paired is empty" in page and "Table 6 left out" in page
    assert not list((tmp_path / "r" / "tables").glob("paper_table6*"))


def test_the_same_run_gives_the_same_report_bytes(run_dir, tmp_path):
    """Figures (SVG, PDF, PNG), page and tables: byte-identical from one report to the next."""
    for out in ("a", "b"):
        assert main(["report", "--run", str(run_dir), "--out", str(tmp_path / out)]) == 0
    files = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    assert {f.parts[0] for f in files} == {"index.html", "tables", "figures"}
    assert {f.suffix for f in files if f.parts[0] == "figures"} == {".svg", ".pdf", ".png"}
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    page = (tmp_path / "a" / "index.html").read_text()
    figures = {p.stem for p in (tmp_path / "a" / "figures").glob("*.svg")}
    assert all(f'<figure id="fig-{name}">' in page for name in figures)
