"""The leaderboard over stores: two generators, several models, two configurations of one model,
a stale, a superseded and a damaged run, and hostile names, read from real store layouts."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.analysis.leaderboard import build
from autocomp.analysis.leaderboard_page import write_leaderboard
from autocomp.store.catalog.benchmarks import open_stored
from autocomp.store.catalog.runs import summarize_parts
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA
from autocomp.store.stores import open_store

HOSTILE = '</td><script>alert("g")</script>'
# (benchmark, generator); per model the items it gets right, of 10 Swap items per benchmark
BENCHMARKS = {"bench-a": "sd35-large", "bench-b": HOSTILE}
RIGHT = {
    "bench-a": {"strong": 9, "weak": 3, "tie-a": 3},
    "bench-b": {"strong": 6, "weak": 3, "tie-a": 3},
}


def _benchmark_folder(folder, generator):
    rows = [{"sample_id": f"c{i}/minimal", "family": "color", "n": 2, "condition": "minimal",
             "renderer": generator} for i in range(10)]  # fmt: skip
    (folder / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "data" / "test-00000-of-00001.parquet")
    return folder


def _run_folder(folder, model, right, digest, weights="org/model", batch=None):
    preds = [{"model": model, "sample_id": f"c{i}/minimal", "family": "color", "n": 2,
              "condition": "minimal", "set": "swap", "protocol": "paper", "candidates": 2,
              "correct": i < right, "tie": False, "predicted": 0, "positive_score": 0.0,
              "best_negative_score": 0.0, "failed": False, "reason": "",
              "score_type": "score"} for i in range(10)]  # fmt: skip
    (folder / "predictions").mkdir(parents=True)
    table = pa.Table.from_pylist(preds, PREDICTIONS_SCHEMA)
    pq.write_table(table, folder / "predictions" / "part-00000.parquet")
    pq.write_table(summarize_parts([table]), folder / "summary.parquet")
    record = {"model": model, "benchmark_sha": digest, "batch_size": batch, "limit": None,
              "blind": "", "choice": None, "format": 2, "autocomp_version": "0.1.0",
              "entry": {"name": model, "weights": weights, "dtype": "float32"}}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(record))
    return folder


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("lb")
    first, second = root / "store-1", root / "store-2"
    target = open_store(first)
    digests = {}
    for name, generator in BENCHMARKS.items():
        target.put(f"benchmarks/{name}", _benchmark_folder(root / "src" / name, generator))
        digests[name] = open_stored(str(first), f"benchmarks/{name}").digest
    for name in BENCHMARKS:
        for model, right in RIGHT[name].items():
            target.put(
                f"results/{name}/{model}",
                _run_folder(root / "src" / name / model, model, right, digests[name]),
            )
    # stale: scored on an earlier publication of bench-a
    target.put("results/bench-a/old", _run_folder(root / "src" / "old", "old", 10, "0" * 64))
    # superseded: the registry names other weights for tiny-clip
    target.put(
        "results/bench-a/tiny-clip",
        _run_folder(root / "src" / "tc", "tiny-clip", 10, digests["bench-a"], weights="org/x"),
    )
    # damaged: its summary was changed after it was committed
    target.put(
        "results/bench-b/broken", _run_folder(root / "src" / "br", "broken", 10, digests["bench-b"])
    )
    summary = first / "results" / "bench-b" / "broken" / "summary.parquet"
    summary.write_bytes(summary.read_bytes()[:-8] + b"garbage!")
    # a second store: `weak` scored with another batch size (another configuration)
    other = open_store(second)
    other.put("benchmarks/bench-a", _benchmark_folder(root / "src2" / "bench-a", "sd35-large"))
    digest = open_stored(str(second), "benchmarks/bench-a").digest
    other.put(
        "results/bench-a/weak", _run_folder(root / "src2" / "weak", "weak", 5, digest, batch=8)
    )
    return [str(first), str(second)]


def test_statuses_configurations_and_numbers(stores):
    board = build(stores)
    status = {(r.store.rsplit("/", 1)[-1], r.benchmark, r.model): r.status for r in board.runs}
    assert status[("store-1", "bench-a", "old")] == "stale"
    assert status[("store-1", "bench-a", "tiny-clip")] == "superseded"
    assert status[("store-1", "bench-b", "broken")] == "damaged"
    assert status[("store-1", "bench-a", "strong")] == "current"
    labels = {r.label for r in board.runs if r.model == "weak"}
    assert len(labels) == 2 and all(label.startswith("weak [config ") for label in labels)
    rates = {m["label"]: m["mean_win_rate"] for m in board.models}
    # bench-a: strong 0.9, weak 0.3 (two configs: 0.3 and 0.5), tie-a 0.3; bench-b: 0.9, 0.3, 0.3
    weak_1 = next(label for label in labels if any(
        r.label == label and r.store.endswith("store-1") for r in board.runs))  # fmt: skip
    weak_2 = (labels - {weak_1}).pop()
    assert rates["strong"] == pytest.approx(1.0)
    assert rates["tie-a"] == pytest.approx(((0.5 + 0) / 3 + 0.5 / 2) / 2)
    assert rates[weak_1] == pytest.approx(((0.5 + 0) / 3 + 0.5 / 2) / 2)
    assert rates[weak_2] == pytest.approx(2 / 3)  # beats weak_1 and tie-a, loses to strong
    assert "old" not in rates and "tiny-clip" not in rates and "broken" not in rates
    cells = {(c.label, c.benchmark): c for c in board.cells}
    strong = cells[("strong", "bench-a")]
    assert (strong.items, strong.correct, strong.runs_in_cell) == (10, 9, 4)
    assert strong.lower < 0.9 < strong.upper
    assert 1 <= strong.best_rank <= strong.worst_rank <= 4
    weak = cells[(weak_1, "bench-a")]
    assert weak.best_rank >= 2  # strong's interval lies wholly above weak's? then weak can't be 1st
    assert weak.best_rank == 1 + sum(  # noqa
        o.lower > weak.upper
        for o in board.cells
        if o.benchmark == "bench-a" and o.status == "current"
    )


def test_paired_differences_between_generators(stores):
    board = build(stores)
    strong = [g for g in board.generators if g["label"] == "strong"]
    assert len(strong) == 1
    (g,) = strong
    assert (g["generator_a"], g["generator_b"]) == tuple(sorted(BENCHMARKS.values()))
    # a = sd35-large's bench-a (9 right), b = bench-b (6 right): the same 10 concepts
    a_right, b_right = (9, 6) if g["benchmark_a"] == "bench-a" else (6, 9)
    assert g["concepts"] == 10 and g["delta"] == pytest.approx((b_right - a_right) / 10)
    assert g["only_a"] == max(a_right - b_right, 0) and g["only_b"] == max(b_right - a_right, 0)
    assert g["ci_low"] <= g["delta"] <= g["ci_high"]
    # only current runs of one configuration are paired: weak's two configurations stay apart
    assert {x["label"] for x in board.generators} == {"strong", "tie-a"} | {
        x["label"] for x in board.generators if x["label"].startswith("weak [")
    }


def test_files_are_written_escaped_and_render(stores, tmp_path):
    done = write_leaderboard(stores, tmp_path / "lb")
    html = done["html"].read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    rows = list(csv.DictReader((tmp_path / "lb" / "leaderboard.csv").open()))
    assert {r["generator"] for r in rows} == {"sd35-large", HOSTILE}
    assert {r["status"] for r in rows} == {"current", "stale", "superseded"}
    document = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert {r["status"] for r in document["runs"]} == {"current", "stale", "superseded", "damaged"}
    broken = next(r for r in document["runs"] if r["model"] == "broken")
    assert "SHA-256" in broken["problem"]


def test_an_existing_folder_is_kept_without_force(stores, tmp_path):
    out = tmp_path / "lb"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    done = subprocess.run(
        [sys.executable, "-m", "autocomp.cli.main", "leaderboard", "--store", stores[0], "--out", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--force" in done.stderr and (out / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


@pytest.mark.slow
def test_page_renders_in_headless_chromium(stores, tmp_path):
    from tests.conftest import assert_renders_in_chromium

    done = write_leaderboard(stores, tmp_path / "lb")
    assert_renders_in_chromium(done["html"], tmp_path / "lb.png")


def test_an_empty_store_says_so(tmp_path):
    (tmp_path / "store").mkdir()
    done = write_leaderboard([str(tmp_path / "store")], tmp_path / "lb")
    html = done["html"].read_text()
    assert "No score run:" in html and done["runs"] == {} and done["models"] == 0


def test_a_store_of_only_damaged_runs_counts_nothing_and_says_so(stores, tmp_path):
    import shutil

    root = tmp_path / "store"
    shutil.copytree(stores[0], root)
    for summary in (root / "results").glob("*/*/summary.parquet"):
        summary.write_bytes(summary.read_bytes()[:-8] + b"garbage!")
    done = write_leaderboard([str(root)], tmp_path / "lb")
    assert set(done["runs"]) == {"damaged"} and done["models"] == 0
    assert "No current run:" in done["html"].read_text()
