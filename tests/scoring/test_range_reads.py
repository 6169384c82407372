"""What a score pod reads from the store (issue 32, item 3): a model scored by K range pods reads
the published benchmark about once between them, not once per pod. Bytes are counted at the
store's file layer: the local store's objects are opened as the S3 store opens its own (a
RangeFile over ranged reads, store/s3.py open), each read's length counted."""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import NegativesConfig, SampleConfig, ScoreConfig
from autocomp.pipelines.cluster.capacity import FOOTER_READ, footer_bytes, score_read
from autocomp.protocol.stages import negatives_stage, sample_many
from autocomp.scoring import score
from autocomp.scoring.ranges import COUNTED, merge
from autocomp.scoring.registry import get_model
from autocomp.store import publish, storage
from autocomp.store.catalog import benchmarks
from autocomp.store.catalog.benchmarks import open_published
from autocomp.store.local import LocalStore
from autocomp.store.transfer import RangeFile

MAX = 24  # candidates per part: many parts to cut into ranges


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A benchmark of 96 rows with 64 px noise images (they do not compress: the images are
    most of its bytes, as in a real benchmark), published in 8 parts of 12 rows, row groups of
    4 rows."""
    return _publish(tmp_path_factory.mktemp("reads"))


def _publish(d: Path) -> Path:
    sample_many(SampleConfig("color:2,position:2", 24, 3), d / "concepts.parquet")
    rng, rows = random.Random(0), []
    for r in pq.read_table(d / "concepts.parquet").to_pylist():
        for condition in ("minimal", "contextual"):
            path = f"images/{r['concept_id']}/{condition}.png"
            (d / "render" / path).parent.mkdir(parents=True, exist_ok=True)
            Image.frombytes("RGB", (64, 64), rng.randbytes(64 * 64 * 3)).save(d / "render" / path)
            rows.append({**r, "sample_id": f"{r['concept_id']}/{condition}",
                         "condition": condition, "caption": r["minimal_caption"], "image": path})  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), d / "curated.parquet")
    negatives_stage(d / "curated.parquet", d / "benchmark.parquet", NegativesConfig(workers=1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(publish, "ROWS_PER_SHARD", 12)
        patch.setattr(publish, "ROWS_PER_GROUP", 4)
        publish.publish_stage(
            d / "benchmark.parquet", d / "render", d / "work", str(d / "store"), "b"
        )
    return d


def _counted(monkeypatch) -> dict[str, int]:
    """Bytes read from the benchmark's objects in the local store, opened as the S3 store
    opens them."""
    counts = {"read": 0}

    def open_ranged(self, key: str, size: int | None = None):
        path = self._path(key)
        size = path.stat().st_size if size is None else size

        def fetch(offset: int, length: int) -> bytes:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(length)
            if key.startswith("benchmarks/"):  # not the committed parts read back
                counts["read"] += len(data)
            return data

        return RangeFile(fetch, size, key)

    monkeypatch.setattr(LocalStore, "open", open_ranged)
    return counts


def _pods(store: str, count: int, out: Path, monkeypatch) -> int:
    """What the evaluate_models score pods of one model read between them (K = `count`), each
    as the score component runs it in a process of its own (nothing verified before)."""
    counts, total = _counted(monkeypatch), 0
    config = ScoreConfig(device="cpu", max_candidates=MAX)
    for k in range(1, count + 1):
        monkeypatch.setattr(storage, "_VERIFIED", set())  # a pod is a fresh process
        monkeypatch.setattr(benchmarks, "_FOOTERS", {})
        counts["read"] = 0
        ranged = dataclasses.replace(config, part_range=f"{k}/{count}" if count > 1 else "")
        source = open_published(store, "b")
        score([get_model("tiny-clip")], source, out / f"{k}", ranged, store=store,
              results="results/b")  # fmt: skip
        total += counts["read"]
    if count > 1:
        assert merge(get_model("tiny-clip"), open_published(store, "b"), config, store, "results/b")
    return total


def _glance(data: Path) -> tuple[int, int]:
    """What every pod reads of every part before it scores: (footers: pyarrow's first read
    of one is 64 KiB, the id and candidate list columns' chunks)."""
    footers = columns = 0
    for path in data.glob("*.parquet"):
        meta = pq.ParquetFile(path).metadata
        footers += max(meta.serialized_size + 8, FOOTER_READ)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                name = group.column(c).path_in_schema.split(".")[0]
                if name in ("sample_id", "concept_id", "condition", *COUNTED):
                    columns += group.column(c).total_compressed_size
    return footers, columns


@pytest.mark.slow
def test_k_range_pods_read_the_benchmark_once_between_them(published, tmp_path, monkeypatch):
    data = published / "store" / "benchmarks" / "b" / "data"
    sizes = [p.stat().st_size for p in data.glob("*.parquet")]
    benchmark, footers, columns = sum(sizes), *_glance(data)
    assert len(sizes) == 8 and footers + columns < benchmark / 3
    read = {}
    for count in (1, 4):
        store = tmp_path / f"k{count}"
        shutil.copytree(published / "store", store)
        read[count] = _pods(str(store), count, tmp_path / f"out{count}", monkeypatch)
    # one pod: each part verified (read whole), then streamed; the footers and the id columns
    # (pyarrow coalesces a row group's id chunks across gaps of up to 8 KiB: 2 gaps a group)
    holes = 2 * 8192 * 8 * 3
    assert 2 * benchmark + footers <= read[1] <= 2 * benchmark + footers + columns + holes, read
    # four pods: each reads the footers and the glance columns of every part, and verifies and
    # streams its own parts; a part that two ranges share is read by both (three boundaries)
    extra = read[4] - read[1]
    assert extra <= 3 * (footers + columns + holes) + 3 * 2 * max(sizes), (footers, read)
    assert read[4] < 2 * read[1]  # was 4.3x: every pod verified every part
    # the capacity plan's figure (its footer and id estimates, the measured caption bytes)
    image = sum(len(p.read_bytes()) for p in (published / "render").rglob("*.png")) / 96
    footer = footer_bytes(12, image)
    for count in (1, 4):
        planned = score_read(benchmark, len(sizes), 96, columns, count, footer)
        assert abs(planned / read[count] - 1) <= 0.10, (count, planned, read)
