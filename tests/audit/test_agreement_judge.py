"""Fleiss' kappa (hand-checked), Table 20 counts, and the second-judge CSV with rejected samples
feeding the report's Table 21."""

from __future__ import annotations

import csv
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.analysis.agreement import fleiss_kappa, human_agreement, per_annotator_scores
from autocomp.analysis.report import build_tables, load_run
from autocomp.cli.main import main
from autocomp.store.catalog.schemas import VERDICTS_SCHEMA
from autocomp.store.tables import provenance, write_table
from tests.audit.conftest import write_run

WIKIPEDIA = [  # Fleiss (1971) worked example as on Wikipedia: 10 items, 14 raters, kappa 0.210
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]  # fmt: skip


def test_fleiss_kappa_hand_checked():
    ratings = [[c for c, k in zip("abcde", row) for _ in range(k)] for row in WIKIPEDIA]
    assert fleiss_kappa(ratings) == pytest.approx(0.2099, abs=1e-4)
    assert fleiss_kappa([["y", "y"], ["n", "n"], ["y", "y"]]) == 1.0
    assert fleiss_kappa([["y", "n"], ["n", "y"]]) == pytest.approx(-1.0)
    assert math.isnan(fleiss_kappa([["y", "y"], ["y", "y"]]))  # one category: undefined
    with pytest.raises(ValueError):
        fleiss_kappa([["y", "y"], ["y"]])


def test_per_annotator_scores_and_agreement(bench_root):
    bench = pq.read_table(bench_root / "benchmark.parquet")
    b = bench.to_pylist()
    wrong = b[0]["swap_negatives"][0]
    rows = [
        {"annotator": "V1", "sample_id": b[0]["sample_id"], "task": "swap", "answer": b[0]["caption"]},
        {"annotator": "V2", "sample_id": b[0]["sample_id"], "task": "swap", "answer": wrong},
        {"annotator": "V1", "sample_id": b[1]["sample_id"], "task": "swap", "answer": b[1]["caption"]},
        {"annotator": "V2", "sample_id": b[1]["sample_id"], "task": "swap", "answer": b[1]["caption"]},
        {"annotator": "V1", "sample_id": b[2]["sample_id"], "task": "valid", "answer": "yes"},
    ]  # fmt: skip
    table = per_annotator_scores(rows, bench).to_pylist()
    v1 = [r for r in table if r["annotator"] == "V1"]
    assert sum(r["swap_correct"] for r in v1) == 2 and sum(r["swap_items"] for r in v1) == 2
    assert sum(r["valid_items"] for r in v1) == 1
    v2 = [r for r in table if r["annotator"] == "V2"]
    assert sum(r["swap_correct"] for r in v2) == 1 and sum(r["swap_items"] for r in v2) == 2
    overall = {(r["task"], r["family"]): r for r in human_agreement(rows, bench).to_pylist()}
    swap = overall[("swap", "all")]
    assert swap["items"] == 2 and swap["unanimous"] == 0.5 and swap["items_dropped"] == 0
    # categories right/wrong: [[right, wrong], [right, right]]: P = 0.5, Pe = 10/16
    assert swap["fleiss_kappa"] == pytest.approx(-1 / 3)
    assert overall[("valid", "all")]["items_dropped"] == 1  # only V1 answered it


def _verdicts(folder, bench, fail, name):
    """One verdict shard: the samples in `fail` fail the objects check (later checks skipped)."""
    rows = []
    for b in bench:
        failed = b["sample_id"] in fail
        for step, check in enumerate(("image", "objects", "background", "attributes"), 1):
            outcome = "pass"
            if check == "background" and b["condition"] != "minimal":
                outcome = "n/a"
            elif failed and check == "objects":
                outcome = "fail"
            elif failed and step > 2:
                outcome = "skipped"
            rows.append({"sample_id": b["sample_id"], "concept_id": b["concept_id"],
                         "family": b["family"], "n": b["n"], "condition": b["condition"],
                         "check": check, "step": step, "outcome": outcome, "reason": "",
                         "detail": ""})  # fmt: skip
    folder.mkdir()
    write_table(
        pa.Table.from_pylist(rows, VERDICTS_SCHEMA),
        folder / "verdicts-00000-of-00001.parquet",
        provenance("verdicts", config={"vqa": {"name": name}}, shard=0),
    )
    return folder


def judge_folders(bench_root, tmp_path):
    bench = pq.read_table(bench_root / "benchmark.parquet").to_pylist()
    rejected = {b["sample_id"] for b in bench if not b["accepted"]}
    accepted = sorted({b["sample_id"] for b in bench} - rejected)
    ours = _verdicts(tmp_path / "ours", bench, rejected, "gemma")
    # the second judge rejects one more sample and passes one of the rejected ones
    theirs_fail = (rejected - {sorted(rejected)[0]}) | {accepted[0]}
    theirs = _verdicts(tmp_path / "theirs", bench, theirs_fail, "qwen-big")
    return ours, theirs


def test_judge_csv_and_report_kappa_include_rejected_samples(bench_root, tmp_path, capsys):
    ours, theirs = judge_folders(bench_root, tmp_path)
    run = write_run(bench_root, tmp_path / "run")
    args = ["audit", "judge", "--verdicts", str(ours), "--verdicts", str(theirs)]
    assert main([*args, "--out", str(run / "judges")]) == 0
    assert "judge qwen-big" in capsys.readouterr().out
    with (run / "judges" / "qwen-big.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12 and sum(r["reference_passed"] == "false" for r in rows) == 2
    assert sum(r["passed"] != r["reference_passed"] for r in rows) == 2
    record = json.loads((run / "judges" / "qwen-big.json").read_text())
    assert record["second"]["config"]["vqa"]["name"] == "qwen-big" and record["autocomp_version"]
    table = build_tables(load_run(run)).tables["judge_agreement_qwen-big"]
    overall = next(r for r in table.to_pylist() if r["family"] == "all")
    assert overall["samples"] == 12 and overall["agreement"] == pytest.approx(10 / 12)
    # 2x2: both pass 9, both fail 1, ours pass/theirs fail 1, ours fail/theirs pass 1
    po, pe = 10 / 12, (10 / 12) * (10 / 12) + (2 / 12) * (2 / 12)
    assert overall["kappa"] == pytest.approx((po - pe) / (1 - pe))
    assert overall["a_pass_b_fail"] == pytest.approx(1 / 12)


def test_judge_bad_input(bench_root, tmp_path, capsys):
    ours, theirs = judge_folders(bench_root, tmp_path)
    out = str(tmp_path / "judges")
    assert main(["audit", "judge", "--verdicts", str(ours), "--out", out]) == 2
    assert "exactly two" in capsys.readouterr().err
    args = ["audit", "judge", "--verdicts", str(ours), "--verdicts", str(theirs), "--out", out]
    assert main([*args, "--check", "colour"]) == 2
    assert main([*args, "--name", "../evil"]) == 2
    assert not (tmp_path / "evil.csv").exists()
    assert main([*args, "--check", "attributes"]) == 0
    with (tmp_path / "judges" / "qwen-big.csv").open() as f:
        rows = list(csv.DictReader(f))
    # attributes is skipped after an objects failure: only samples both runs decided count
    assert len(rows) == 9 and {r["passed"] for r in rows} == {"true"}


def test_each_judge_file_keeps_its_own_reference(bench_root, tmp_path):
    """An audit judge CSV (with reference_passed) next to a plain one (sample_id,passed): the
    plain one is compared with the benchmark's accepted flag, not with the other's reference."""
    run = write_run(bench_root, tmp_path / "run")
    bench = pq.read_table(bench_root / "benchmark.parquet").to_pylist()
    (run / "judges").mkdir()
    audit = ["sample_id,family,n,condition,passed,reference_passed"]
    audit += [
        f"{b['sample_id']},{b['family']},{b['n']},{b['condition']},false,false" for b in bench
    ]
    (run / "judges" / "a-audit.csv").write_text("\n".join(audit) + "\n")
    plain = ["sample_id,passed"] + [f"{b['sample_id']},true" for b in bench]
    (run / "judges" / "z-plain.csv").write_text("\n".join(plain) + "\n")
    tables = build_tables(load_run(run)).tables
    overall = {
        name: next(r for r in tables[f"judge_agreement_{name}"].to_pylist() if r["family"] == "all")
        for name in ("a-audit", "z-plain")
    }
    assert overall["a-audit"]["agreement"] == 1.0
    assert overall["z-plain"]["agreement"] == pytest.approx(10 / 12)  # 2 samples not accepted


def test_judge_says_when_the_runs_share_samples_but_neither_decided_the_check(bench_root, tmp_path):
    from autocomp.audit.judge import judge_stage
    from autocomp.errors import UsageError

    bench = pq.read_table(bench_root / "benchmark.parquet").to_pylist()
    every = {b["sample_id"] for b in bench}  # objects fails everywhere: attributes skipped
    ours = _verdicts(tmp_path / "ours", bench, every, "gemma")
    theirs = _verdicts(tmp_path / "theirs", bench, every, "qwen-big")
    with pytest.raises(UsageError, match="share 12 samples, but on none of them did both"):
        judge_stage([ours, theirs], tmp_path / "judges", check="attributes")
    other = _verdicts(tmp_path / "other", [{**b, "sample_id": "x" + b["sample_id"]}
                                           for b in bench], set(), "qwen")  # fmt: skip
    with pytest.raises(UsageError, match="share no sample"):
        judge_stage([ours, other], tmp_path / "judges", check="attributes")
    # some decided: the others are counted as undecided, not as "only in" one run
    half = _verdicts(tmp_path / "half", bench, set(sorted(every)[:6]), "qwen-half")
    done = judge_stage([half, _verdicts(tmp_path / "none", bench, set(), "q")],
                       tmp_path / "judges", check="attributes")  # fmt: skip
    assert done["samples"] == 6 and done["undecided"] == 6
    assert done["only_in_reference"] == done["only_in_second"] == 0


def _human_rows(bench, answered):
    """Every annotator right on Swap, V1 and V2 right on Confusion, V3 wrong; validity yes
    throughout; V3 answered only the samples in `answered`."""
    rows = []
    for b in bench:
        for annotator in ("V1", "V2", "V3"):
            if annotator == "V3" and b["sample_id"] not in answered:
                continue
            wrong = b["confusion_negatives"][0]
            rows += [
                (annotator, b["sample_id"], "swap", b["caption"]),
                (annotator, b["sample_id"], "confusion", wrong if annotator == "V3" else
                 b["caption"]),
                (annotator, b["sample_id"], "valid", "yes"),
            ]  # fmt: skip
    return rows


def test_tables_11_20_21_in_the_papers_layout_say_why_kappa_is_undefined(bench_root, tmp_path):
    from autocomp.analysis.report import report_stage
    from autocomp.audit.judge import judge_stage

    bench = pq.read_table(bench_root / "benchmark.parquet").to_pylist()
    run = write_run(bench_root, tmp_path / "run")
    answered = {b["sample_id"] for b in bench if b["family"] == "color"}
    (run / "human").mkdir()
    for name in ("V1", "V2", "V3"):
        lines = ["annotator,sample_id,task,answer"] + [
            ",".join(f'"{v}"' for v in r) for r in _human_rows(bench, answered) if r[0] == name
        ]
        (run / "human" / f"{name}.csv").write_text("\n".join(lines) + "\n")
    total = 3 * len(bench)
    (run / "human" / "audit.json").write_text(json.dumps({"answers": {
        "V1": {"answered": total, "open": 0}, "V2": {"answered": total, "open": 0},
        "V3": {"answered": 3 * len(answered), "open": total - 3 * len(answered)}}}))  # fmt: skip
    ours, theirs = judge_folders(bench_root, tmp_path)
    judge_stage([ours, theirs], run / "judges")
    done = report_stage(run, tmp_path / "report")
    assert {"paper_table11_concordance", "paper_table11_accuracy", "paper_table20",
            "paper_table21_qwen-big"} <= set(done["paper"])  # fmt: skip
    tables = tmp_path / "report" / "tables"
    with (tables / "paper_table11_accuracy.csv").open() as f:
        t11 = {r["Condition, N"]: r for r in csv.DictReader(f)}
    assert list(t11) == ["Min, N=2", "Ctx, N=2"]
    assert t11["Min, N=2"]["color Swap"] == "100.0"
    assert t11["Min, N=2"]["color Conf."] == "66.7"  # V3 wrong on its 3 Minimal color items
    with (tables / "paper_table20.csv").open() as f:
        t20 = list(csv.DictReader(f))
    color = next(r for r in t20 if r["group"] == "color" and r["N, condition"] == "N=2 Minimal")
    assert color["Swap accuracy V1"] == "3/3" and color["Confusion accuracy V3"] == "0/3"
    position = next(r for r in t20 if r["group"] == "position")
    assert position["Swap accuracy V3"] == "–"  # V3 answered no position item
    with (tables / "paper_table21_qwen-big.csv").open() as f:
        t21 = list(csv.DictReader(f))
    assert [(r["group"], r["Family, N"]) for r in t21] == [
        ("color", "N=2"), ("position", "N=2"), ("Overall", "all")]  # fmt: skip
    assert t21[-1]["Agreement (%)"] == "83.3" and t21[-1]["kappa"] == "0.40"
    # Fleiss' kappa: undefined where every answer agrees, with the reason; "all" rows n null
    kappa = pq.read_table(tables / "human_agreement.parquet").to_pylist()
    valid = next(r for r in kappa if r["task"] == "valid" and r["family"] == "all")
    assert valid["n"] is None and math.isnan(valid["fleiss_kappa"])
    assert "every answer was 'yes'" in valid["kappa_undefined"]
    swap_position = next(r for r in kappa if (r["task"], r["family"]) == ("swap", "position"))
    assert "no item was answered by all 3 annotators" in swap_position["kappa_undefined"]
    page = done["html"].read_text()
    assert f"V3 answered {3 * len(answered)} of {total}" in page  # the incomplete study, stated
    assert "kappa is 0/0" in page
