"""`report --store` checks every benchmark it names before it fetches anything: a --compare
name the store does not hold leaves no output behind (issue 34 item 10's partial outputs)."""

from __future__ import annotations

import pytest

from autocomp.analysis.report import report_from_store
from autocomp.config import NegativesConfig
from autocomp.errors import UsageError
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.store.stores import open_store


def test_an_unknown_compare_name_writes_nothing(tmp_path):
    sample_stage("color", 2, 4, 0, tmp_path / "c.parquet")
    part = tmp_path / "b" / "data" / "test-00000-of-00001.parquet"
    negatives_stage(tmp_path / "c.parquet", part, NegativesConfig(workers=1))
    open_store(tmp_path / "store").put("benchmarks/bench", tmp_path / "b")
    out = tmp_path / "out"
    with pytest.raises(UsageError) as info:
        report_from_store(str(tmp_path / "store"), "bench", out, compare=["nosuch"])
    assert info.value.what == "compare" and info.value.value == "nosuch"
    assert not out.exists()
