"""VLMEvalKit round trip: export, predictions written as VLMEvalKit writes them (its inference
keeps the dataset's columns but the image and adds `prediction`; vlmeval/smp/file.py dump_xlsx:
pandas to_excel with xlsxwriter), read back by `autocomp import vlmevalkit-results` into a
score-run folder whose counts are the hand-checked ones; VLMEvalKit's exact-matching reader."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest

from autocomp.cli.main import main
from autocomp.config import ExportConfig
from autocomp.exports import export
from autocomp.exports.vlmevalkit_results import can_infer
from autocomp.store.catalog.runs import ScoreRun


def _predictions(tsv, out, reply):
    frame = pd.read_csv(tsv, sep="\t")
    frame = frame.drop(columns=["image"])
    frame["prediction"] = [reply(row) for row in frame.to_dict("records")]
    with pd.ExcelWriter(out, engine="xlsxwriter") as writer:
        frame.to_excel(writer, index=False)
    return frame


def test_can_infer_reads_replies_as_vlmevalkit_does():
    choices = {"A": "a red cup", "B": "a blue cup", "C": "a red mug"}
    assert can_infer("B", choices) == "B"
    assert can_infer("(C) a red mug", choices) == "C"
    assert can_infer("The answer is A.", choices) == "A"
    assert can_infer("a blue cup", choices) == "B"  # the one option whose text it holds
    assert can_infer("a red", choices) is None  # two options hold it... neither is read
    assert can_infer("A or B", choices) is None
    assert can_infer("Cannot determine the answer", choices) == "Z"


@pytest.mark.parametrize("circular", [False, True])
def test_predictions_round_trip_into_a_score_run(bench, tmp_path, circular, capsys):
    out = tmp_path / "vlm"
    export("vlmevalkit", bench, out, ExportConfig(images=str(bench.parent / "images")))
    name = "AutoComp_circular" if circular else "AutoComp"
    key = pq.read_table(out / "AutoComp_key.parquet").to_pandas()
    # the model: right on Swap questions; on Confusion right except in rotation 1; and one reply
    # it cannot read at all
    first = int(key[key["dataset"] == name]["index"].min())

    def reply(row):
        if row["index"] == first:
            return "I do not know"
        if row["l2-category"] == "swap":
            return f"The answer is ({row['answer']})" if row["answer"] in "ABCD" else row["answer"]
        right = row["answer"]
        wrong = "B" if right == "A" else "A"
        return wrong if row["index"] // 1_000_000 == 1 else right

    predictions = tmp_path / f"tiny_{name}.xlsx"
    frame = _predictions(out / f"{name}.tsv", predictions, reply)
    code = main(["import", "vlmevalkit-results", "--source", str(predictions), "--key",
                 str(out / "AutoComp_key.parquet"), "--out", str(tmp_path / "runs"),
                 "--model", "tiny"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    run = ScoreRun(tmp_path / "runs" / "tiny")
    rows = run.read_predictions().to_pylist()
    groups = frame.groupby(frame["index"] % 1_000_000)
    assert len(rows) == groups.ngroups
    expected = {}
    for g, group in groups:
        hits = [
            reply(r) == r["answer"] or r["answer"] in str(reply(r))
            for r in group.to_dict("records")
        ]
        hits = [h and r["index"] != first for h, r in zip(hits, group.to_dict("records"))]
        expected[g] = all(hits)
    key_rows = key[key["dataset"] == name]
    sample_of = {int(r.g_index): (r.sample_id, r.set) for r in key_rows.itertuples()}
    got = {(r["sample_id"], r["set"]): r["correct"] for r in rows}
    assert got == {sample_of[g]: v for g, v in expected.items()}
    swap = [r for r in rows if r["set"] == "swap"]
    confusion = [r for r in rows if r["set"] == "confusion"]
    assert sum(r["correct"] for r in swap) == len(swap) - (
        1 if sample_of[first % 1_000_000][1] == "swap" else 0
    )
    assert (
        not any(r["correct"] for r in confusion)
        if circular
        else all(r["correct"] for r in confusion if not r["reason"])
    )
    assert sum(1 for r in rows if r["reason"]) == 1
    summary = run.read_summary().to_pylist()
    assert {r["score_type"] for r in summary} == {
        "vlmevalkit_circular" if circular else "vlmevalkit"
    }
    assert sum(r["items"] for r in summary) == len(rows)


def test_a_wrong_file_is_one_line(bench, tmp_path, capsys):
    out = tmp_path / "vlm"
    export("vlmevalkit", bench, out, ExportConfig(images=str(bench.parent / "images")))
    bad = tmp_path / "bad.xlsx"
    pd.DataFrame({"index": [0], "answer": ["A"]}).to_excel(bad, index=False)
    code = main(["import", "vlmevalkit-results", "--source", str(bad), "--key",
                 str(out / "AutoComp_key.parquet"), "--out", str(tmp_path / "r"), "--model", "m"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "lacks the columns prediction" in err and err.count("\n") == 1
    code = main(
        ["import", "vlmevalkit-results", "--source", str(bad), "--out", str(tmp_path / "r")]
    )
    assert code == 2 and "--key" in capsys.readouterr().err
