"""A run folder's prediction parts are counted once each: a copy of a part under a new number
is left out (and said), parts that share only some items are refused (issue 34, item 2)."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.errors import UsageError
from autocomp.store.catalog.runs import ScoreRun
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA


def _part(folder, index, ids, right=True):
    rows = [{"model": "m", "sample_id": s, "family": "color", "n": 2, "condition": "minimal",
             "set": "swap", "protocol": "paper", "candidates": 2, "correct": right, "tie": False,
             "predicted": 0, "positive_score": 0.0, "best_negative_score": 0.0, "failed": False,
             "reason": "", "score_type": "score"} for s in ids]  # fmt: skip
    (folder / "predictions").mkdir(parents=True, exist_ok=True)
    path = folder / "predictions" / f"part-{index:05d}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, PREDICTIONS_SCHEMA), path)
    return path


def test_a_copied_part_is_counted_once(tmp_path, capsys):
    run = tmp_path / "run"
    first = _part(run, 0, ["a/minimal", "b/minimal", "c/minimal"])
    _part(run, 1, ["d/minimal"], right=False)
    shutil.copy(first, run / "predictions" / "part-00002.parquet")  # the same items again
    summary = ScoreRun(run).summarize().to_pylist()
    assert [(r["items"], r["correct"]) for r in summary] == [(4, 3)]
    err = capsys.readouterr().err
    assert "part-00002.parquet" in err and "same 3 items as part-00000.parquet" in err


def test_parts_sharing_some_items_are_refused(tmp_path):
    run = tmp_path / "run"
    _part(run, 0, ["a/minimal", "b/minimal"])
    _part(run, 1, ["b/minimal", "c/minimal"])
    with pytest.raises(UsageError) as info:
        ScoreRun(run).read_predictions()
    assert "share 1 items" in info.value.fix and "part-00001.parquet" in info.value.fix
