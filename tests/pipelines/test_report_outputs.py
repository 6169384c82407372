"""The report step's metrics: one per model x family-N x condition x set, and per score type when
the summary has the column (per-token and A.8 choice never overwrite the summed score)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.pipelines.definitions.report_outputs import accuracy_metrics


def _summary(path, rows):
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_metrics_keep_score_types_apart_and_absent_means_score(tmp_path):
    base = {"family": "color", "n": 2, "condition": "minimal", "set": "swap", "protocol": "paper"}
    _summary(tmp_path / "results" / "clip" / "summary.parquet",
             [{**base, "model": "clip", "accuracy": 0.5},
              {**base, "model": "clip", "protocol": "strict", "accuracy": 0.9}])  # fmt: skip
    _summary(tmp_path / "results" / "qwen" / "summary.parquet",
             [{**base, "model": "qwen", "score_type": t, "accuracy": a}
              for t, a in (("score", 0.25), ("per_token", 0.75), ("choice", 0.5))])  # fmt: skip
    assert accuracy_metrics(tmp_path) == {
        "clip/color-2/minimal/swap": 0.5,
        "qwen/color-2/minimal/swap": 0.25,
        "qwen/color-2/minimal/swap/per_token": 0.75,
        "qwen/color-2/minimal/swap/choice": 0.5,
    }
