"""The column-wise candidate builder and the stage around it write exactly what the row-by-row
`build_candidates` gives (the stage's values before the column-wise builder), for every family
kind, N, protocol and caption kind; worker counts 1 and 2 write the same bytes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.config import NegativesConfig
from autocomp.errors import ProtocolError
from autocomp.protocol import stages
from autocomp.protocol.binding import Hole, Template, bind
from autocomp.protocol.candidate_columns import (
    CaptionRow,
    _prefix_free,
    candidate_columns,
)
from autocomp.protocol.concepts import sample_concepts
from autocomp.protocol.family import load_family
from autocomp.protocol.minimal import minimal_caption, spec_text
from autocomp.protocol.negatives import build_candidates, chance
from autocomp.store.catalog.schemas import BENCHMARK_FIELDS

SPECS = [("color", 1), ("color", 2), ("color", 3), ("shape_color", 1), ("shape_color", 3),
         ("position", 2), ("position", 3), ("relative_size", 2), ("relative_size", 3)]  # fmt: skip


def captions_table(seed: int, count: int = 6) -> pa.Table:
    """Minimal and Contextual captions of every (family, N) in SPECS, as a curated table."""
    columns: dict[str, list] = {k: [] for k in ("family", "n", "objects", "attributes", "caption")}
    for name, n in SPECS:
        family = load_family(name)
        for i, c in enumerate(sample_concepts(family, n, count, seed)):
            minimal = minimal_caption(family, c.objects, c.labels)
            text = spec_text(family, c.objects, c.labels)
            contextual = f"In the {['hall', 'garden'][i % 2]}, {text} in warm evening light."
            if i % 2:  # a wrong article, which the positive puts right ("caption_rewritten")
                contextual = contextual.replace(" an ", " a ", 1)
            for caption in (minimal, contextual):
                columns["family"].append(name)
                columns["n"].append(n)
                columns["objects"].append(list(c.objects))
                columns["attributes"].append(list(c.labels))
                columns["caption"].append(caption)
    return pa.table(columns).cast(
        pa.schema([("family", pa.string()), ("n", pa.int8()), ("objects", pa.list_(pa.string())),
                   ("attributes", pa.list_(pa.string())), ("caption", pa.string())])
    )  # fmt: skip


def reference(rows: list[dict], protocol: str) -> list[dict]:
    """The benchmark columns of each row from `build_candidates`, as the stage built them."""
    out = []
    for r in rows:
        family = load_family(r["family"])
        sets = build_candidates(family, r["objects"], r["attributes"], r["caption"], protocol)
        row = {
            "caption": sets.caption,
            "caption_rewritten": sets.caption != r["caption"],
            "protocol": protocol,
            "swap_negatives": sets.swap,
            "swap_arrangements": sets.swap_arrangements,
            "swap_same_scene": sets.swap_same_scene,
            "swap_in_confusion": sets.swap_in_confusion,
            "confusion_negatives": sets.confusion,
            "confusion_arrangements": sets.confusion_arrangements,
            "confusion_same_scene": sets.confusion_same_scene,
            "vary_attribute_negatives": sets.vary_attribute,
            "vary_object_negatives": sets.vary_object,
        }
        for name in ("swap", "confusion", "vary_attribute", "vary_object"):
            row[f"{name}_chance"] = chance(len(getattr(sets, name)))
        out.append(row)
    return out


@pytest.mark.parametrize("protocol", ["paper", "strict"])
@pytest.mark.parametrize("seed", [0, 7])
def test_columns_equal_build_candidates_row_for_row(protocol, seed):
    rows = captions_table(seed).to_pylist()
    batch = [
        CaptionRow(
            family := load_family(r["family"]),
            r["objects"],
            r["attributes"],
            r["caption"],
            bind(family, r["objects"], r["attributes"], r["caption"]),
        )
        for r in rows
    ]
    columns = candidate_columns(batch, protocol)
    table = pa.table({name: columns[name] for name, _ in BENCHMARK_FIELDS})
    assert table.schema == pa.schema([pa.field(n, t) for n, t in BENCHMARK_FIELDS])
    assert table.to_pylist() == reference(rows, protocol)
    assert any(r["caption_rewritten"] for r in table.to_pylist())  # Contextual: articles redone


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["paper", "strict"])
def test_stage_equals_build_candidates_and_workers_write_the_same_bytes(tmp_path, protocol):
    """The whole stage, in process and with two workers writing their own Parquet parts (batches
    of 5 rows: many parts, the last one short)."""
    source = tmp_path / "curated.parquet"
    pq.write_table(captions_table(3), source)
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    stages.negatives_stage(source, one, NegativesConfig(protocol, workers=1, batch_size=5))
    stages.negatives_stage(source, two, NegativesConfig(protocol, workers=2, batch_size=5))
    assert one.read_bytes() == two.read_bytes()
    assert pq.ParquetFile(one).metadata.num_row_groups == -(-len(captions_table(3)) // 5)
    written = pq.read_table(one).to_pylist()
    rows = captions_table(3).to_pylist()
    expected = reference(rows, protocol)
    for got, source_row, want in zip(written, rows, expected, strict=True):
        assert got["source_caption"] == source_row["caption"]
        assert {k: got[k] for k in want} == want
    assert not list(tmp_path.glob(".*.tmp-*"))  # the parts folder is gone


def test_an_empty_input_gives_the_same_empty_table_with_workers(tmp_path):
    source = tmp_path / "empty.parquet"
    pq.write_table(captions_table(0).slice(0, 0), source)
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    assert stages.negatives_stage(source, one, NegativesConfig(workers=1))["rows"] == 0
    assert stages.negatives_stage(source, two, NegativesConfig(workers=2))["rows"] == 0
    assert one.read_bytes() == two.read_bytes()


def test_prefix_free():
    assert _prefix_free(["a red cup and ", "an orange cup and "])
    assert not _prefix_free(["a cup ", "a cup holder "])  # a prefix of another text
    assert not _prefix_free(["a cup ", "a cup "])  # equal texts
    assert _prefix_free([])


def test_captions_that_collapse_are_refused_as_before():
    """Texts that are not prefix-free take the exact (string) check, which still refuses a
    caption whose candidates coincide, as build_candidates does."""
    color = load_family("color")
    hole = lambda slot, start: Hole("object", slot, start, start + 9, True, "A", " ")  # noqa: E731
    template = Template(("", " and ", "."), (hole(0, 0), hole(1, 14)))
    objects, labels = ["cup", "cup"], ["red", "red"]
    text = "A red cup and a red cup."
    with pytest.raises(ProtocolError, match="collapsed"):
        build_candidates(color, objects, labels, text, template=template)
    with pytest.raises(ProtocolError, match="collapsed"):
        candidate_columns([CaptionRow(color, objects, labels, text, template)], "paper")


def test_default_workers_fit_the_cores(monkeypatch):
    assert 1 <= stages.usable_cores() <= len(stages.os.sched_getaffinity(0))
    monkeypatch.setattr(stages, "_cgroup_cpu_quota", lambda: 1)
    assert stages.usable_cores() == 1 and stages.default_workers() == 1
    monkeypatch.setattr(stages, "_cgroup_cpu_quota", lambda: None)
    assert stages.default_workers() == min(len(stages.os.sched_getaffinity(0)), 16)


def test_the_default_starts_no_pool_for_a_table_of_one_batch(tmp_path, monkeypatch):
    source = tmp_path / "curated.parquet"
    pq.write_table(captions_table(1, count=1), source)
    monkeypatch.setattr(stages, "default_workers", lambda: 4)
    monkeypatch.setattr(stages, "_in_workers", lambda *a: pytest.fail("a pool was started"))
    summary = stages.negatives_stage(source, tmp_path / "b.parquet", NegativesConfig())
    assert summary["rows"] == len(SPECS) * 2
