from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def make_benchmark(folder: Path, count: int = 20, families=(("color", 2),), seed: int = 0) -> Path:
    """A benchmark of `count` concepts per (family, N), Minimal and Contextual rows, with one
    coloured PNG per row."""
    from PIL import Image

    from autocomp.config import NegativesConfig
    from autocomp.protocol.stages import negatives_stage, sample_stage

    folder.mkdir(parents=True, exist_ok=True)
    tables = []
    for family, n in families:
        sample_stage(family, n, count, seed, folder / f"c-{family}{n}.parquet")
        negatives_stage(
            folder / f"c-{family}{n}.parquet",
            folder / f"b-{family}{n}.parquet",
            NegativesConfig(workers=1),
        )
        tables.append(
            pq.read_table(folder / f"b-{family}{n}.parquet").replace_schema_metadata(None)
        )
    table = pa.concat_tables(tables, promote_options="default")
    # both conditions, as curated benchmarks have them (the Contextual caption is the Minimal one
    # here: what the tiny profile's caption fallback produces)
    ids = table["concept_id"].to_pylist()
    table = pa.concat_tables(
        table.append_column("condition", pa.array([c] * table.num_rows)).append_column(
            "sample_id", pa.array([f"{i}/{c}" for i in ids])
        )
        for c in ("minimal", "contextual")
    )
    root = folder / "images"
    root.mkdir(exist_ok=True)
    rand = random.Random(seed)
    names = []
    for i in range(table.num_rows):
        name = f"img{i}.png"
        Image.new("RGB", (40, 40), tuple(rand.randrange(256) for _ in range(3))).save(root / name)
        names.append(name)
    pq.write_table(table.append_column("image", pa.array(names)), folder / "bench.parquet")
    return folder / "bench.parquet"


@pytest.fixture(scope="session")
def color_bench(tmp_path_factory):
    path = make_benchmark(tmp_path_factory.mktemp("bench"), 20)
    return path, path.parent / "images"
