"""A small rendered benchmark (a table, its images) for the exports' tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage

# captions that break naive YAML, TSV, JSON and Python writers
TRICKY = [
    'A "quoted" cup: red # not a comment',
    "it's a cup\twith a tab",
    "two\nlines and a \\backslash",
    "{{ braces }} & 'single' ; DROP",
    "ünïcödé cup — 杯子",
]


def build_bench(folder: Path, family: str = "color", n: int = 2, count: int = 4) -> Path:
    """benchmark.parquet (image paths) and images/ in `folder`."""
    sample_stage(family, n, count, 0, folder / "c.parquet")
    negatives_stage(folder / "c.parquet", folder / "b.parquet", NegativesConfig(workers=1))
    table = pq.read_table(folder / "b.parquet")
    (folder / "images").mkdir()
    for i in range(table.num_rows):
        Image.new("RGB", (16, 16), (50 * i % 256, 90, 200 - 30 * i)).save(
            folder / "images" / f"{i}.png"
        )
    table = table.append_column("image", pa.array([f"{i}.png" for i in range(table.num_rows)]))
    table = table.append_column("condition", pa.array(["minimal"] * table.num_rows))
    pq.write_table(table, folder / "bench.parquet")
    return folder / "bench.parquet"


def trick(path: Path) -> Path:
    """The benchmark with tricky captions: every positive and its Confusion negatives."""
    table = pq.read_table(path)
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        row["caption"] = TRICKY[i % len(TRICKY)]
        row["confusion_negatives"] = [
            f"{TRICKY[(i + k + 1) % len(TRICKY)]} #{k}"
            for k in range(len(row["confusion_negatives"]))
        ]
        row["family"] = 'color "odd": family'
    out = path.with_name("tricky.parquet")
    pq.write_table(pa.Table.from_pylist(rows, table.schema), out)
    return out


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return build_bench(tmp_path_factory.mktemp("bench"))
