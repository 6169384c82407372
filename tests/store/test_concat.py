"""Parquet parts joined without decoding: the same bytes one writer writes with the same row
groups, and files that cannot be joined this way are refused."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.store.concat import concat_parquet
from autocomp.store.tables import with_metadata

SCHEMA = with_metadata(
    pa.schema([("id", pa.int64()), ("words", pa.list_(pa.string())), ("score", pa.float64())]),
    {"table": "test", "note": "x" * 5000},  # a long footer, as a benchmark's provenance is
)
OPTIONS = {"compression": "zstd", "use_dictionary": ["id"], "write_statistics": ["id", "score"]}


def batch(k: int, rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"id": k * 1000 + i, "words": [f"w{k}-{i}-{j}" for j in range(i % 4)],
          "score": None if i % 3 else i / 7} for i in range(rows)],
        schema=SCHEMA,
    )  # fmt: skip


def write(path, batches, schema=SCHEMA, **options):
    with pq.ParquetWriter(path, schema, **(OPTIONS | options)) as writer:
        for b in batches:
            writer.write_batch(b)


@pytest.mark.parametrize("parts", [1, 3, 20])  # 20: more than 15 row groups (a long list header)
def test_joined_parts_are_the_file_one_writer_writes(tmp_path, parts):
    batches = [batch(k, 1 + (k * 7) % 40) for k in range(parts)]
    write(tmp_path / "one.parquet", batches)
    paths = []
    for k, b in enumerate(batches):
        paths.append(tmp_path / f"part-{k}.parquet")
        write(paths[-1], [b])
    concat_parquet(paths, tmp_path / "joined.parquet")
    assert (tmp_path / "joined.parquet").read_bytes() == (tmp_path / "one.parquet").read_bytes()
    table = pq.read_table(tmp_path / "joined.parquet")
    assert table.equals(pa.Table.from_batches(batches))
    assert pq.ParquetFile(tmp_path / "joined.parquet").metadata.num_row_groups == parts


def test_files_that_cannot_be_joined_are_refused(tmp_path):
    write(tmp_path / "a.parquet", [batch(0, 5)])
    write(tmp_path / "indexed.parquet", [batch(1, 5)], write_page_index=True)
    other = SCHEMA.with_metadata({"autocomp": "another document"})
    write(tmp_path / "other.parquet", [batch(2, 5).replace_schema_metadata(None)], other)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    for bad, why in (("indexed", "page indexes"), ("other", "another schema"), ("junk", "not a")):
        with pytest.raises(ValueError, match=why):
            concat_parquet([tmp_path / "a.parquet", tmp_path / f"{bad}.parquet"], tmp_path / "o")
    with pytest.raises(ValueError, match="no Parquet file"):
        concat_parquet([], tmp_path / "o")
