"""The Python API example of docs/architecture.md runs as written (with the tiny CLIP)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

pytestmark = pytest.mark.slow


def test_architecture_api_example_runs(tmp_path, monkeypatch, capsys):
    sample_stage("color", 2, 3, 0, tmp_path / "c.parquet")
    negatives_stage(tmp_path / "c.parquet", tmp_path / "b.parquet", NegativesConfig(workers=1))
    table = pq.read_table(tmp_path / "b.parquet")
    (tmp_path / "images").mkdir()
    names = [f"{i}.png" for i in range(table.num_rows)]
    for i, name in enumerate(names):
        Image.new("RGB", (32, 32), (40 * i, 255, 255)).save(tmp_path / "images" / name)
    pq.write_table(table.append_column("image", pa.array(names)), tmp_path / "benchmark.parquet")
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert code.count("\n") <= 10  # the example stays short
    monkeypatch.chdir(tmp_path)
    exec(compile(code.replace('"clip-vit-b-16"', '"tiny-clip"'), str(DOC), "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 * 2  # swap and confusion x paper and strict
    assert all(line.startswith("color 2 ") for line in printed)
