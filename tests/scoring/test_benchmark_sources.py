"""Where `score --benchmark` reads from: a table, a folder of parts, or a published name."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import NegativesConfig, ScoreConfig
from autocomp.errors import UsageError
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring.checks import check_benchmark
from autocomp.scoring.images import load_image
from autocomp.store import publish
from autocomp.store.catalog.benchmarks import locate, open_benchmark, resolve_benchmark


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    sample_stage("color", 2, 5, 0, d / "c.parquet")
    negatives_stage(d / "c.parquet", d / "b.parquet", NegativesConfig(workers=1))
    table = pq.read_table(d / "b.parquet")
    (d / "images").mkdir()
    for i in range(table.num_rows):
        Image.new("RGB", (8, 8), (40 * i, 0, 0)).save(d / "images" / f"{i}.png")
    table = table.append_column("image", pa.array([f"{i}.png" for i in range(table.num_rows)]))
    table = table.append_column("condition", pa.array(["minimal"] * table.num_rows))
    pq.write_table(table, d / "bench.parquet")
    return d


def test_a_folder_of_parts_reads_as_one_table(bench, tmp_path):
    table = pq.read_table(bench / "bench.parquet")
    for layout in ("data", "flat"):
        parts = tmp_path / layout / ("data" if layout == "data" else "")
        parts.mkdir(parents=True)
        pq.write_table(table.slice(0, 2), parts / "part-0.parquet")
        pq.write_table(table.slice(2), parts / "part-1.parquet")
        found = open_benchmark(tmp_path / layout)
        assert found.rows == table.num_rows and len(found.files) == 2
        rows = pa.Table.from_batches(list(found.batches(batch_size=2)))
        assert rows.column("caption").to_pylist() == table.column("caption").to_pylist()
        assert found.source()["kind"] == "folder"
        check_benchmark(found, ScoreConfig(images=str(bench / "images")))
    # the digest is of the rows' files: the same parts in another folder give the same digest
    assert open_benchmark(tmp_path / "data").digest == open_benchmark(tmp_path / "flat").digest
    single = open_benchmark(bench / "bench.parquet")
    assert single.rows == table.num_rows and single.source()["kind"] == "table"


def test_folders_without_parquet_or_with_mixed_schemas_are_refused(bench, tmp_path):
    (tmp_path / "empty" / "data").mkdir(parents=True)
    with pytest.raises(UsageError, match="without Parquet parts"):
        open_benchmark(tmp_path / "empty")
    table = pq.read_table(bench / "bench.parquet")
    (tmp_path / "mixed").mkdir()
    pq.write_table(table, tmp_path / "mixed" / "a.parquet")
    pq.write_table(table.drop_columns(["image"]), tmp_path / "mixed" / "b.parquet")
    with pytest.raises(UsageError, match=r"mixes schemas: b.parquet and a.parquet: columns differ \(image\)"):  # fmt: skip
        open_benchmark(tmp_path / "mixed")
    (tmp_path / "typed").mkdir()
    pq.write_table(table, tmp_path / "typed" / "a.parquet")
    n = table.column("n").cast(pa.int64())
    pq.write_table(table.set_column(table.schema.get_field_index("n"), "n", n),
                   tmp_path / "typed" / "b.parquet")  # fmt: skip
    with pytest.raises(UsageError, match="column n is int64"):
        open_benchmark(tmp_path / "typed")


def test_names_need_a_store_and_must_be_published(bench, tmp_path):
    with pytest.raises(UsageError, match="give its store with --store"):
        locate("color-run", None)
    store = str(tmp_path / "store")
    with pytest.raises(UsageError, match=r"published: none"):
        locate("color-run", store)
    publish.publish_stage(bench / "bench.parquet", bench / "images", tmp_path / "w", store, "run-1")
    publish.publish_stage(
        bench / "bench.parquet", bench / "images", tmp_path / "w2", store, "run-2"
    )
    with pytest.raises(UsageError, match=r"'color-run': is not a benchmark published in .*"
                       r"\(published: run-1, run-2\)"):  # fmt: skip
        locate("color-run", store)
    with pytest.raises(UsageError, match="is not a benchmark name"):
        locate("../run-1", store)


def test_a_published_benchmark_is_fetched_once_into_the_output_folder(bench, tmp_path):
    store = str(tmp_path / "store")
    publish.publish_stage(bench / "bench.parquet", bench / "images", tmp_path / "w", store, "run-1")
    found = resolve_benchmark("run-1", store, tmp_path / "out")
    assert found.path == tmp_path / "out" / "benchmark" / "run-1"
    assert found.source() == {"kind": "store", "path": str(found.path), "parts": 1,
                              "store": store, "name": "run-1"}  # fmt: skip
    check_benchmark(found, ScoreConfig())  # embedded images: no --images needed
    first = next(found.batches()).to_pylist()[0]["image"]
    assert load_image(None, first).size == (8, 8)
    digest, part = found.digest, found.files[0]
    inode = part.stat().st_ino
    again = resolve_benchmark("run-1", store, tmp_path / "out")
    assert part.stat().st_ino == inode and again.digest == digest  # a complete fetch is reused
    part.unlink()  # a damaged cache is fetched again
    assert resolve_benchmark("run-1", store, tmp_path / "out").digest == digest


@pytest.mark.slow
def test_score_resolves_its_benchmark_once(bench, tmp_path, monkeypatch):
    """`score` turns its benchmark argument into one checked value at its edge: a table is
    opened once, a published name checked in its store once and fetched without a second
    check; the mode's checks read the rows once."""
    from collections import Counter

    from autocomp.scoring import score
    from autocomp.store.catalog import benchmarks, published

    store = str(tmp_path / "store")
    publish.publish_stage(bench / "bench.parquet", bench / "images", tmp_path / "w", store, "run-1")
    calls: Counter = Counter()

    def spy(module, name):
        real = getattr(module, name)

        def counted(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    spy(benchmarks, "open_benchmark")
    spy(published, "check_published")
    spy(benchmarks.Benchmark, "read")
    config = ScoreConfig(limit=1, images=str(bench / "images"))
    score("tiny-clip", bench / "bench.parquet", tmp_path / "local", config)
    assert calls == {"open_benchmark": 1, "read": 1}
    calls.clear()
    score("tiny-clip", "run-1", tmp_path / "stored", ScoreConfig(limit=1), store=store)
    assert calls == {"check_published": 1, "open_benchmark": 1, "read": 1}
    run = (tmp_path / "stored" / "tiny-clip" / "run.json").read_text()
    assert '"name": "run-1"' in run and '"kind": "store"' in run
