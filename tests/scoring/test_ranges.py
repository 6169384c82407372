"""Data-parallel scoring (scoring.ranges): a model's parts cut into K ranges, one pod each,
merged by the collect step into exactly what one pod publishes; a pod reads only its rows; a
retried range scores only what it lacks; two pods on one range commit it once; parts of another
configuration are never merged."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import NegativesConfig, ScoreConfig
from autocomp.errors import UsageError
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring import load_scorer, score
from autocomp.scoring.items import chunks, stream_items
from autocomp.scoring.modes import run_record
from autocomp.scoring.ranges import (
    PartRange,
    loop_items,
    merge,
    parse_range,
    part_starts,
    range_batches,
    ranged_key,
    score_range,
    split_item,
)
from autocomp.scoring.registry import get_model
from autocomp.scoring.runstore import StoredRun
from autocomp.store.catalog.benchmarks import open_benchmark
from autocomp.store.catalog.runs import ScoreRun
from autocomp.store.stores import open_store

MAX = 40  # candidates per part: color:2 rows (16 candidates) two a part, position:2 (4) ten


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    """A benchmark folder of two Parquet parts in row groups of 3 rows (20 color:2 rows, then
    20 position:2 rows; 12 parts of at most MAX candidates, one across the two files), with its images."""
    d = tmp_path_factory.mktemp("ranges")
    (d / "bench" / "data").mkdir(parents=True)
    (d / "images").mkdir()
    tables = []
    for i, (family, n) in enumerate((("color", 2), ("position", 2))):
        sample_stage(family, n, 20, 0, d / f"c{i}.parquet")
        negatives_stage(d / f"c{i}.parquet", d / f"b{i}.parquet", NegativesConfig(workers=1))
        tables.append(pq.read_table(d / f"b{i}.parquet"))
    row = 0
    for i, table in enumerate(tables):
        names = [f"{row + j}.png" for j in range(table.num_rows)]
        for j, name in enumerate(names):
            Image.new("RGB", (32, 32), (7 * (row + j) % 256, 90, 200)).save(d / "images" / name)
        row += table.num_rows
        table = table.append_column("image", pa.array(names))
        pq.write_table(table, d / "bench" / "data" / f"part-{i}.parquet", row_group_size=3)
    return d


def _config(bench: Path, **changes) -> ScoreConfig:
    settings = {"images": str(bench / "images"), "device": "cpu", "max_candidates": MAX}
    return ScoreConfig(**{**settings, **changes})


def _published(store: Path) -> dict[str, bytes]:
    folder = store / "results" / "b" / "tiny-clip"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}  # fmt: skip


def test_range_syntax_and_loop_items():
    assert parse_range("") is None
    assert parse_range("2/7") == PartRange(2, 7)
    for bad in ("0/3", "4/3", "1", "a/b", "1/0", "-1/2"):
        with pytest.raises(UsageError, match="^part_range: "):
            parse_range(bad)
    assert loop_items("clip", 1) == ["clip"]
    assert loop_items("clip", 3) == ["clip@1-of-3", "clip@2-of-3", "clip@3-of-3"]
    assert [split_item(i) for i in loop_items("clip", 2)] == [("clip", "1/2"), ("clip", "2/2")]
    assert split_item("clip") == ("clip", "")


@pytest.mark.parametrize("total", [0, 1, 5, 12, 97])
def test_ranges_cover_every_part_once_in_order(total):
    for count in range(1, 12):
        parts = [p for k in range(1, count + 1) for p in PartRange(k, count).parts(total)]
        assert parts == list(range(total))
        sizes = [len(PartRange(k, count).parts(total)) for k in range(1, count + 1)]
        assert max(sizes) - min(sizes) <= 1  # as even as the parts allow


def test_part_starts_are_the_boundaries_one_run_writes(bench):
    source = open_benchmark(bench / "bench")
    assert part_starts(source, None, MAX) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 22, 32, 40]
    rng = random.Random(0)
    for _ in range(25):
        limit, most = rng.choice([None, 1, 7, 21, 39, 40, 99]), rng.randint(1, 90)
        sizes = [len(c) for c in chunks(stream_items(source, limit), most)]
        bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        assert part_starts(source, limit, most) == (bounds if sizes else [0])


def test_a_range_reads_its_rows_from_its_row_groups_only(bench, monkeypatch):
    source = open_benchmark(bench / "bench")
    every = pa.Table.from_batches(list(source.batches())).to_pylist()
    asked: list[tuple[str, int]] = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *args, row_groups=None, **kwargs):
        asked.extend((id(self), g) for g in row_groups or ())
        return real(self, *args, row_groups=row_groups, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    for start, stop in ((0, 40), (0, 1), (5, 7), (19, 21), (20, 40), (38, 40), (3, 3)):
        asked.clear()
        rows = [r for b in range_batches(source, start, stop) for r in b.to_pylist()]
        assert rows == every[start:stop]
        groups = (stop - 1) // 3 - start // 3 + 1 if stop > start else 0
        # the 20-row parts: row groups of 3 rows, and a 2-row group closing each part
        assert len(asked) <= groups + 1


@pytest.mark.slow
def test_k_ranges_merge_into_the_bytes_one_pod_publishes(bench, tmp_path):
    """K = 1, 2, 3, 7 pods, then collect's merge: the published run (predictions, scores,
    summary, run.json, manifest) is byte-identical to one pod scoring everything."""
    source = open_benchmark(bench / "bench")
    config = _config(bench)
    score(["tiny-clip"], source, tmp_path / "one", config, store=str(tmp_path / "s1"),
          results="results/b")  # fmt: skip
    expected = _published(tmp_path / "s1")
    assert sum(k.startswith("predictions/part-") for k in expected) == 12
    entry = get_model("tiny-clip")
    for count in (1, 2, 3, 7):
        store = tmp_path / f"k{count}"
        for k in range(1, count + 1):
            ranged = dataclasses.replace(config, part_range=f"{k}/{count}")
            table = score(["tiny-clip"], source, tmp_path / f"k{count}-{k}", ranged,
                          store=str(store), results="results/b")  # fmt: skip
            assert table.num_rows == 0  # a range publishes nothing: collect merges
            assert not (store / "results").exists()
        assert merge(entry, source, config, str(store), "results/b")
        assert _published(store) == expected, count
        assert not (store / "work").exists() or not any((store / "work").rglob("*.parquet"))
        assert not merge(entry, source, config, str(store), "results/b")  # published already


def _stored(store: Path, source, config: ScoreConfig, folder: Path) -> StoredRun:
    entry = get_model("tiny-clip")
    record = run_record(entry, source, config)
    run = ScoreRun(folder / "tiny-clip")
    return StoredRun(open_store(str(store)), run, record, ranged=ranged_key(record, config))


@pytest.mark.slow
def test_a_retried_range_scores_only_what_it_lacks_and_two_pods_commit_once(bench, tmp_path):
    source = open_benchmark(bench / "bench")
    config = _config(bench, part_range="2/3")  # parts 4..7
    entry = get_model("tiny-clip")
    loads = []

    def loader():
        loads.append(1)
        return load_scorer(entry, "cpu")

    store = tmp_path / "s"
    racing = _stored(store, source, config, tmp_path / "b")  # claims the range before A ends
    first = _stored(store, source, config, tmp_path / "a")
    assert score_range(entry, source, first, config, loader) == [4, 5, 6, 7]
    log = first.log
    manifests = {p: open_store(str(store)).manifest(log.name(p)) for p in range(4, 8)}
    # the racing pod read the committed parts before A committed any: it commits none of them
    assert score_range(entry, source, racing, config, loader) == []
    assert {p: open_store(str(store)).manifest(log.name(p)) for p in range(4, 8)} == manifests
    # a retry after part 6 was lost (a preempted pod) scores only part 6
    open_store(str(store)).delete(log.name(6))
    retry = _stored(store, source, config, tmp_path / "c")
    loads.clear()
    assert score_range(entry, source, retry, config, loader) == [6]
    assert len(loads) == 1
    again = _stored(store, source, config, tmp_path / "d")
    loads.clear()
    assert score_range(entry, source, again, config, loader) == []
    assert not loads  # nothing to score: no model loaded


@pytest.mark.slow
def test_parts_of_another_configuration_are_never_merged(bench, tmp_path):
    source = open_benchmark(bench / "bench")
    entry = get_model("tiny-clip")
    store = tmp_path / "s"
    other = _config(bench, max_candidates=30)  # another part plan
    for k in (1, 2):
        score(["tiny-clip"], source, tmp_path / f"o{k}", dataclasses.replace(other, part_range=f"{k}/2"),
              store=str(store), results="results/b")  # fmt: skip
    config = _config(bench)
    with pytest.raises(UsageError, match=r"^models: 'tiny-clip': 12 of its 12 parts are not"):
        merge(entry, source, config, str(store), "results/b")
    score(["tiny-clip"], source, tmp_path / "r1", dataclasses.replace(config, part_range="1/2"),
          store=str(store), results="results/b")  # fmt: skip
    with pytest.raises(UsageError, match=r"6 of its 12 parts are not committed \(part 6, 7, 8"):
        merge(entry, source, config, str(store), "results/b")
    assert not (store / "results").exists()
    with pytest.raises(UsageError, match="^part_range: '3/2': must be k/K"):
        score(["tiny-clip"], source, tmp_path / "x", dataclasses.replace(config, part_range="3/2"),
              store=str(store), results="results/b")  # fmt: skip
    with pytest.raises(UsageError, match="^part_range: '1/2': scores one range"):
        score(["tiny-clip"], source, tmp_path / "y", dataclasses.replace(config, part_range="1/2"))
