"""The generation verbs end to end through the CLI with the tiny profile."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from autocomp.cli.main import main


@pytest.mark.slow
def test_tiny_chain_from_concepts_to_scores(tmp_path, capsys):
    d = tmp_path
    steps = [
        ["sample", "--family", "relative_size", "--n", "2", "--count", "2", "--out", f"{d}/c.parquet"],
        ["caption", "--concepts", f"{d}/c.parquet", "--out", f"{d}/cap", "--profile", "tiny",
         "--fallback", "minimal", "--num-shards", "2"],
        ["render", "--captions", f"{d}/cap", "--out", f"{d}/img", "--profile", "tiny",
         "--num-shards", "2", "--set", "num_inference_steps=4"],
        ["validate", "--render", f"{d}/img", "--out", f"{d}/ver", "--profile", "tiny",
         "--num-shards", "2", "--set", "detector.box_threshold=0.9"],
        ["curate", "--render", f"{d}/img", "--verdicts", f"{d}/ver", "--captions", f"{d}/cap",
         "--out", f"{d}/cur", "--keep-rejected"],
        ["negatives", "--input", f"{d}/cur/curated.parquet", "--out", f"{d}/bench.parquet",
         "--workers", "1"],
        ["score", "--model", "tiny-siglip", "--benchmark", f"{d}/bench.parquet",
         "--out", f"{d}/scores", "--images", f"{d}/img"],
    ]  # fmt: skip
    for argv in steps:
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert "3 fallback" not in out and "2 fallback" in out
    assert "B_min 0, B_ctx 0, B_paired 0 of 4 samples" in out
    bench = pq.read_table(f"{d}/bench.parquet")
    assert bench.num_rows == 4 and set(bench.column("condition").to_pylist()) == {
        "minimal", "contextual",
    }  # fmt: skip
    summary = pq.read_table(f"{d}/scores/summary.parquet").to_pylist()
    assert {r["failed"] for r in summary} == {0}  # every image was found and scored
    # a second run of a finished stage skips its shards without loading a model
    for argv in steps[1:4]:
        assert main(argv) == 0
        assert "2 finished shard(s) skipped" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["render", "--captions", "x", "--out", "y", "--renderer", "dalle"], "unknown renderer"),
        (["render", "--captions", "x", "--out", "y", "--set", "steps=3"], "unknown setting"),
        (["render", "--captions", "x", "--out", "y", "--set", "steps"], "key=value"),
        (["caption", "--concepts", "x.parquet", "--out", "y", "--shard", "3"], "between 0 and 0"),
        (["validate", "--render", "x", "--out", "y", "--vqa", "tiny-clip"], "generative VLM"),
        (["validate", "--render", "x", "--out", "y", "--profile", "fast"], "paper, tiny"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
